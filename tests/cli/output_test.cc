#include "cli/output.h"

#include <doctest/doctest.h>

#include <unistd.h>
#include "env-init/setting.h"

#include <fstream>
#include <sstream>

using namespace nano;

namespace {
struct Recorder : OutputSink {
  std::vector<std::string> out, err;
  void write(Stream s, const std::string& line) override { (s == Stream::kOut ? out : err).push_back(line); }
};
}  // namespace

TEST_CASE("whole lines, tagged, never mixed across ranks") {
  Recorder rec;
  OutputRouter r(2, {}, rec);
  r.feed(0, Stream::kOut, "hel", 3);
  r.feed(1, Stream::kOut, "wor", 3);
  CHECK(rec.out.empty());
  r.feed(1, Stream::kOut, "ld\nnext", 7);
  r.feed(0, Stream::kOut, "lo\n", 3);
  r.finish(1, Stream::kOut);
  CHECK(rec.out == std::vector<std::string>{"[rank 1] world\n", "[rank 0] hello\n", "[rank 1] next\n"});
}

TEST_CASE("--output-ranks filters the terminal, untagged output, mpirun lines") {
  Recorder rec;
  OutputConfig c;
  c.show_ranks = {1};
  c.tag = false;
  OutputRouter r(2, c, rec);
  r.feed(0, Stream::kOut, "zero\n", 5);
  r.feed(1, Stream::kErr, "one\n", 4);
  r.feed(kMpirunStream, Stream::kErr, "oops\n", 5);
  CHECK(rec.out.empty());
  CHECK(rec.err == std::vector<std::string>{"one\n", "[mpirun] oops\n"});
}

TEST_CASE("stderr tail keeps the last lines of each rank") {
  Recorder rec;
  OutputConfig c;
  c.tail_lines = 3;
  OutputRouter r(1, c, rec);
  std::string text;
  for (int i = 0; i < 10; ++i) text += "e" + std::to_string(i) + "\n";
  r.feed(0, Stream::kErr, text.data(), text.size());
  r.feed(0, Stream::kOut, "not stderr\n", 11);
  CHECK(r.stderr_tail(0) == std::vector<std::string>{"e7", "e8", "e9"});
  CHECK(r.stderr_tail(5).empty());
}

TEST_CASE("log files per rank and a summary") {
  std::string dir = "/tmp/nano_output_test_" + std::to_string(::getpid()) + "/logs";
  {
    Recorder rec;
    OutputConfig c;
    c.log_dir = dir;
    c.show_ranks = {0};
    OutputRouter r(2, c, rec);
    r.feed(1, Stream::kOut, "from one\n", 9);
    r.feed(1, Stream::kErr, "err one\n", 8);
    r.note("nano-run: done");
  }
  auto read = [](const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  CHECK(read(dir + "/rank-1.log") == "from one\nerr one\n");
  CHECK(read(dir + "/rank-0.log").empty());
  CHECK(read(dir + "/summary.log") == "nano-run: done\n");
  std::system(("rm -rf /tmp/nano_output_test_" + std::to_string(::getpid())).c_str());
}

TEST_CASE("an unwritable --log-dir is a usage error") {
  Recorder rec;
  OutputConfig c;
  c.log_dir = "/proc/nano-logs";
  CHECK_THROWS_WITH_AS(OutputRouter(1, c, rec), doctest::Contains("cannot create log_dir /proc/nano-logs"),
                       SettingError);
}
