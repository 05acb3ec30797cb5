#include "cli/frames.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include <nano/error.h>

using namespace nano;

TEST_CASE("frames survive arbitrary chunking") {
  std::string stream = encode_frame(FrameType::kHello, hello_payload("tok", 3, "node1")) +
                       encode_frame(FrameType::kOut, "line one\nline") +
                       encode_frame(FrameType::kErr, std::string(70000, 'x')) +
                       encode_frame(FrameType::kErrorFile, "{\"message\": \"E: x\"}") +
                       encode_frame(FrameType::kExit, exit_payload(0, 11));
  FrameDecoder d;
  std::vector<std::pair<FrameType, std::string>> got;
  for (size_t i = 0; i < stream.size(); i += 7) {
    d.feed(stream.data() + i, std::min<size_t>(7, stream.size() - i));
    FrameType t;
    std::string p;
    while (d.next(t, p)) got.push_back({t, p});
  }
  REQUIRE(got.size() == 5);
  std::string token, host;
  int rank = -1, code = -1, sig = -1;
  CHECK(parse_hello(got[0].second, token, rank, host));
  CHECK(token == "tok");
  CHECK(rank == 3);
  CHECK(host == "node1");
  CHECK(got[1].second == "line one\nline");
  CHECK(got[2].second.size() == 70000);
  CHECK(got[3].first == FrameType::kErrorFile);
  CHECK(got[3].second == "{\"message\": \"E: x\"}");
  CHECK(got[4].first == FrameType::kExit);
  CHECK(parse_exit(got[4].second, code, sig));
  CHECK(code == 0);
  CHECK(sig == 11);
}

TEST_CASE("a stray client is rejected") {
  FrameDecoder d;
  d.feed("GET / HTTP/1.1\r\n", 16);
  FrameType t;
  std::string p;
  CHECK_THROWS_AS(d.next(t, p), Error);
}
