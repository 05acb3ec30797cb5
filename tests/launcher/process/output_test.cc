#include "launcher/process/output.h"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>
#include "core/setting.h"

#include <fstream>
#include <sstream>

using namespace nano;

namespace {
struct Recorder : OutputSink {
  std::vector<std::string> out, err;
  void write(Stream s, const std::string& line) override { (s == Stream::kOut ? out : err).push_back(line); }
};
void feed(OutputRouter& r, int rank, Stream stream, const std::string& bytes) {
  r.feed(rank, stream, bytes.data(), bytes.size());
}
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
  // A link someone put at a log's name (a --log-dir others can write) is never written through.
  const std::string theirs = dir + "/../theirs";
  std::ofstream(theirs) << "theirs";
  std::system(("rm " + dir + "/rank-0.log").c_str());
  REQUIRE(symlink(theirs.c_str(), (dir + "/rank-0.log").c_str()) == 0);
  {
    Recorder rec;
    OutputConfig c;
    c.log_dir = dir;
    CHECK_THROWS_WITH_AS(OutputRouter(2, c, rec), doctest::Contains("rank-0.log: Too many levels of symbolic links"),
                         SettingError);
  }
  CHECK(read(theirs) == "theirs");
  // A FIFO there: refused at once, never waited on.
  std::system(("rm " + dir + "/rank-0.log").c_str());
  REQUIRE(mkfifo((dir + "/rank-0.log").c_str(), 0666) == 0);
  {
    Recorder rec;
    OutputConfig c;
    c.log_dir = dir;
    CHECK_THROWS_WITH_AS(OutputRouter(2, c, rec), doctest::Contains("rank-0.log: "), SettingError);
  }
  struct stat st {};
  REQUIRE(stat((dir + "/rank-1.log").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::system(("rm -rf /tmp/nano_output_test_" + std::to_string(::getpid())).c_str());
}

TEST_CASE("an unwritable --log-dir is a usage error") {
  Recorder rec;
  OutputConfig c;
  c.log_dir = "/proc/nano-logs";
  CHECK_THROWS_WITH_AS(OutputRouter(1, c, rec), doctest::Contains("cannot create log_dir /proc/nano-logs"),
                       SettingError);
}

TEST_CASE("a line redrawn with carriage returns (a tqdm bar) moves live, in place; logs keep its end") {
  Recorder rec;
  OutputRouter r(2, {}, rec);
  feed(r, 0, Stream::kErr, "\r 10%|#");
  feed(r, 0, Stream::kErr, "\r 20%|##\r 30%|###");
  CHECK(rec.err == std::vector<std::string>{"\r[rank 0]  10%|#", "\r[rank 0]  30%|###"});
  // Another rank's line ends the drawn one first; the bar is drawn again on its next update.
  feed(r, 1, Stream::kOut, "loss 0.5\n");
  CHECK(rec.err.back() == "\n");
  CHECK(rec.out == std::vector<std::string>{"[rank 1] loss 0.5\n"});
  feed(r, 0, Stream::kErr, "\r 40%|####");
  feed(r, 0, Stream::kErr, "\r100%|##########|\n");
  CHECK(rec.err == std::vector<std::string>{"\r[rank 0]  10%|#", "\r[rank 0]  30%|###", "\n", "\r[rank 0]  40%|####",
                                            "\r[rank 0] 100%|##########|\n"});
  // The stderr tail (and a log) holds the bar's final state only.
  CHECK(r.stderr_tail(0) == std::vector<std::string>{"100%|##########|"});
}

TEST_CASE("carriage returns: CRLF line ends, a trailing '\\r', hidden ranks and nano-run's notes") {
  Recorder rec;
  OutputConfig c;
  c.show_ranks = {0};
  OutputRouter r(2, c, rec);
  feed(r, 0, Stream::kOut, "dos line\r\n");
  CHECK(rec.out == std::vector<std::string>{"[rank 0] dos line\n"});
  feed(r, 1, Stream::kErr, "\r 50%|#####");  // rank 1 is not shown
  CHECK(rec.err.empty());
  feed(r, 0, Stream::kOut, " 5/10\r");  // nothing after the '\r' yet: its state before it
  CHECK(rec.out.back() == "\r[rank 0]  5/10");
  r.note("nano-run: rank 1 exited with code 1; stopping the other ranks");
  CHECK(rec.out.back() == "\n");
  CHECK(rec.err == std::vector<std::string>{"nano-run: rank 1 exited with code 1; stopping the other ranks\n"});
  feed(r, 0, Stream::kOut, " 6/10\n");
  CHECK(rec.out.back() == "[rank 0]  6/10\n");
}
