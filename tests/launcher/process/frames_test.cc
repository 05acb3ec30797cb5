#include "launcher/process/frames.h"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <nano/error.h>

using namespace nano;

TEST_CASE("frames survive arbitrary chunking") {
  std::string stream = encode_frame(FrameType::kHello, hello_payload(3, "node1", "00ff")) +
                       encode_frame(FrameType::kOut, "line one\nline") +
                       encode_frame(FrameType::kErr, std::string(70000, 'x')) +
                       encode_frame(FrameType::kErrorFile, "{\"message\": \"E: x\"}") +
                       encode_frame(FrameType::kExit, exit_payload(0, 11)) +
                       encode_frame(FrameType::kTimeline, "rank-3.attempt-0\nS 0 1 2 0 1 0 0\n");
  FrameDecoder d;
  std::vector<std::pair<FrameType, std::string>> got;
  for (size_t i = 0; i < stream.size(); i += 7) {
    d.feed(stream.data() + i, std::min<size_t>(7, stream.size() - i));
    FrameType t;
    std::string p;
    while (d.next(t, p)) got.push_back({t, p});
  }
  REQUIRE(got.size() == 6);
  std::string host, answer;
  int rank = -1, code = -1, sig = -1;
  CHECK(parse_hello(got[0].second, rank, host, answer));
  CHECK(answer == "00ff");
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
  CHECK(got[5].first == FrameType::kTimeline);
}

TEST_CASE("a stray client is rejected") {
  FrameDecoder d;
  d.feed("GET / HTTP/1.1\r\n", 16);
  FrameType t;
  std::string p;
  CHECK_THROWS_AS(d.next(t, p), Error);
}

TEST_CASE("before its hello, a connection may send only a hello-sized frame") {
  FrameDecoder d;
  d.limit(FrameDecoder::kMaxHelloPayload);
  const std::string big = encode_frame(FrameType::kHello, std::string(FrameDecoder::kMaxHelloPayload + 1, 'x'));
  d.feed(big.data(), 5);  // the length alone is refused: nothing more is buffered for it
  FrameType t;
  std::string p;
  CHECK_THROWS_WITH_AS(d.next(t, p), "oversized frame (513 bytes) on a rank shim link", Error);
  FrameDecoder linked;
  linked.feed(big.data(), big.size());
  CHECK(linked.next(t, p));
  CHECK(p.size() == FrameDecoder::kMaxHelloPayload + 1);
}

TEST_CASE("a shim's answer: right for its challenge, rank and secret only") {
  const std::string secret = "5ec1e7";
  const std::string challenge(16, 'c');
  const std::string answer = shim_answer(secret, challenge, 2);
  CHECK(answer.size() == 64);  // HMAC-SHA256, in hex
  CHECK(is_right_shim_answer(answer, secret, challenge, 2));
  CHECK_FALSE(is_right_shim_answer(answer, secret, challenge, 3));                   // another rank's link
  CHECK_FALSE(is_right_shim_answer(answer, secret, std::string(16, 'd'), 2));        // another challenge: a replay
  CHECK_FALSE(is_right_shim_answer(answer, "another job", challenge, 2));            // another attempt's secret
  CHECK_FALSE(is_right_shim_answer(answer.substr(0, 62), secret, challenge, 2));     // cut short
  CHECK_FALSE(is_right_shim_answer("zz" + answer.substr(2), secret, challenge, 2));  // not hex
}

TEST_CASE("write_all: a frame goes whole, or the wait for room is bounded, and a gone peer is no SIGPIPE") {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  int small = 4096;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  const std::string frame = encode_frame(FrameType::kOut, std::string(1 << 20, 'x'));

  SUBCASE("a frame far larger than the socket buffer, read as it goes: short writes are resumed") {
    std::string got;
    std::thread reader([&] {
      char buf[8192];
      ssize_t n;
      while ((n = read(sv[1], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    });
    const bool whole = write_all(sv[0], frame, std::chrono::milliseconds(5000));
    shutdown(sv[0], SHUT_WR);
    reader.join();
    CHECK(whole);
    CHECK(got == frame);
  }
  SUBCASE("nobody reads: false once the wait is over, not before") {
    const auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(write_all(sv[0], frame, std::chrono::milliseconds(50)));
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took >= std::chrono::milliseconds(50));
    CHECK(took < std::chrono::seconds(5));
  }
  SUBCASE("the peer is gone: false, and the process lives on") {
    close(sv[1]);
    sv[1] = -1;
    CHECK_FALSE(write_all(sv[0], encode_frame(FrameType::kHeartbeat, "")));
    CHECK_FALSE(write_all(sv[0], encode_frame(FrameType::kHeartbeat, ""), std::chrono::milliseconds(10)));
  }
  SUBCASE("a pipe (the unlinked shim's output) is written too") {
    int p[2];
    REQUIRE(pipe(p) == 0);
    CHECK(write_all(p[1], "line\n"));
    char buf[16] = {};
    CHECK(read(p[0], buf, sizeof buf) == 5);
    CHECK(std::string(buf) == "line\n");
    close(p[0]);
    close(p[1]);
  }
  close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
}
