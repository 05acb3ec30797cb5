#include "cli/job_secret.h"

#include <doctest/doctest.h>

#include <set>

using namespace nano;

TEST_CASE("a job's secret: 64 hex digits from the kernel, new every time") {
  std::set<std::string> seen;
  for (int i = 0; i < 16; ++i) {
    const std::string secret = make_job_secret();
    CHECK(secret.size() == 64);
    CHECK(secret.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(secret);
    CHECK(make_challenge().size() == 16);
  }
  CHECK(seen.size() == 16);
}

TEST_CASE("answers: HMAC-SHA256 over the purpose and the challenge") {
  // The digest of key "Jefe" over "what do ya want\0for nothing?" (RFC 4231's test case 2 with a
  // NUL between purpose and challenge), as Python's hmac module makes it.
  CHECK(hex_of(answer_challenge("Jefe", "what do ya want", "for nothing?")) ==
        "adf13648edae17564744ff0aef28b138a329fa4a8104ff63388d270cef395d2b");
  const std::string challenge(16, '\x07');
  const std::string answer = answer_challenge("secret", "store-client", challenge);
  CHECK(answer.size() == 32);
  CHECK(is_right_answer(answer, "secret", "store-client", challenge));
  CHECK_FALSE(is_right_answer(answer, "secret", "store-server", challenge));  // the other side's
  CHECK_FALSE(is_right_answer(answer, "Secret", "store-client", challenge));
  CHECK_FALSE(is_right_answer(answer, "secret", "store-client", std::string(16, '\x08')));
  CHECK_FALSE(is_right_answer(answer.substr(1), "secret", "store-client", challenge));
  CHECK_FALSE(is_right_answer("", "secret", "store-client", challenge));
}

TEST_CASE("hex, both ways") {
  CHECK(hex_of(std::string("\x00\x7f\x80\xff", 4)) == "007f80ff");
  CHECK(bytes_of_hex("007F80ff") == std::string("\x00\x7f\x80\xff", 4));
  CHECK(bytes_of_hex("").value() == "");
  CHECK_FALSE(bytes_of_hex("abc"));
  CHECK_FALSE(bytes_of_hex("zz"));
}
