#include "core/job_secret.h"
#include "core/mac.h"

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

namespace {

std::string hex(const Digest& digest) { return hex_of(std::string(digest.begin(), digest.end())); }

}  // namespace

TEST_CASE("SHA-256: FIPS 180-4's examples") {
  CHECK(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks, its padding on the second.
  CHECK(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex(sha256(std::string(1000000, 'a'))) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55, 56 and 64 bytes: the length field fits the last block, or needs one more.
  CHECK(hex(sha256(std::string(55, 'x'))) != hex(sha256(std::string(56, 'x'))));
}

TEST_CASE("HMAC-SHA256: RFC 4231's test cases 1, 2, 3, 6 and 7") {
  CHECK(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex(hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Keys longer than the block are hashed first.
  CHECK(hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hex(hmac_sha256(std::string(131, '\xaa'),
                        "This is a test using a larger than block-size key and a larger than block-size data. The key "
                        "needs to be hashed before being used by the HMAC algorithm.")) ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
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
