// The timeline's pure stages: records parsed, the trace, and the report's straggler, placement
// check and advice, from hand-made records.
#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/timeline_shipping.h"

#include <doctest/doctest.h>
#include <nano/error.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace nano;

namespace {

constexpr int64_t kMs = 1000000;

// `steps` steps of `step_ms`, each with `exchange_ms` of exchange wait and `data_ms` of data.
RankRecords rank_of(int rank, int steps, int64_t step_ms, int64_t exchange_ms, int64_t data_ms = 0,
                    const std::string& cpus = "0", int attempt = 0) {
  RankRecords r;
  r.rank = rank;
  r.attempt = attempt;
  r.host = "hostA";
  r.cpus = cpus;
  r.numa = "0";
  for (int i = 0; i < steps; ++i) {
    TimelineStep s;
    s.first = i;
    s.start = 1000 * kMs + i * step_ms * kMs;
    s.end = s.start + step_ms * kMs;
    s.exchange = exchange_ms * kMs;
    s.data = data_ms * kMs;
    s.compute = (step_ms - exchange_ms - data_ms) * kMs;
    r.steps.push_back(s);
  }
  return r;
}

}  // namespace

TEST_CASE("records are parsed line by line; a torn last line is skipped") {
  const std::string text =
      "R 3 hostB 12-15 1 4\n"
      "P data 100 200\n"
      "P compute 200 900\n"
      "C 250 400 4096 all_reduce(float32[1024], SUM)\n"
      "S 0 50 1000 100 700 100 0\n"
      "A 2000 100 5000 9000 10 20 30 40 7\n"
      "T 4 12-15 0\n"
      "S 1 1000 20";  // a rank killed while writing
  const RankRecords r = parse_records(text, 2);
  CHECK(r.rank == 3);
  CHECK(r.attempt == 2);
  CHECK(r.host == "hostB");
  CHECK(r.cpus == "12-15");
  CHECK(r.numa == "1");
  CHECK(r.omp == "4");
  REQUIRE(r.phases.size() == 2);
  CHECK(r.phases[1].name == "compute");
  REQUIRE(r.collectives.size() == 1);
  CHECK(r.collectives[0].name == "all_reduce(float32[1024], SUM)");
  CHECK(r.collectives[0].bytes == 4096);
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[1].steps == 100);
  CHECK(r.steps[1].checkpoint == 40);
  CHECK(r.placement_seen);
  CHECK(r.computing_threads == 4);
}

TEST_CASE("the straggler is the rank the others wait on, named with its CPUs") {
  struct Row {
    const char* name;
    std::vector<RankRecords> ranks;
    int straggler;  // -1: none
    const char* line;
  };
  const std::vector<Row> table = {
      {"rank 1 slow: the others wait on it",
       {rank_of(0, 20, 100, 30), rank_of(1, 20, 100, 0, 0, "1"), rank_of(2, 20, 100, 30, 0, "2")},
       1,
       "nano-run: timeline: straggler: rank 1 (hostA, CPUs 1, NUMA 0) takes 1.43x the median rank's time per step "
       "outside the exchange; the other ranks wait 30% of each step on it"},
      {"even ranks",
       {rank_of(0, 20, 100, 5), rank_of(1, 20, 100, 2, 0, "1")},
       -1,
       "nano-run: timeline: no straggler: every rank's time per step is within 10% of the median rank's"},
      {"one rank", {rank_of(0, 20, 100, 0)}, -1, nullptr},
  };
  for (const Row& row : table) {
    CAPTURE(row.name);
    const TimelineReport report = report_of(row.ranks);
    CHECK(report.straggler.value_or(-1) == row.straggler);
    const std::vector<std::string> lines = report_lines(report, "t.json");
    if (row.line) CHECK(std::find(lines.begin(), lines.end(), row.line) != lines.end());
  }
}

TEST_CASE("each rank's shares add up to its step time") {
  const TimelineReport report = report_of({rank_of(0, 10, 100, 20, 10)});
  REQUIRE(report.ranks.size() == 1);
  const RankSummary& r = report.ranks[0];
  CHECK(r.steps == 10);
  CHECK(r.median_ms == doctest::Approx(100));
  CHECK(r.data == doctest::Approx(0.10));
  CHECK(r.exchange == doctest::Approx(0.20));
  CHECK(r.compute == doctest::Approx(0.70));
  CHECK(r.data + r.compute + r.exchange + r.checkpoint + r.other == doctest::Approx(1));
  CHECK(r.work_ms == doctest::Approx(80));
}

TEST_CASE("the placement check names the rank and the cause") {
  RankRecords over = rank_of(0, 5, 10, 0, 0, "0-1");
  over.omp = "8";
  RankRecords single = rank_of(1, 5, 10, 0, 0, "2-5");
  single.placement_seen = true;
  single.computing_threads = 1;
  single.cpus_used = "2";
  RankRecords strayed = rank_of(2, 5, 10, 0, 0, "5-6");  // shares CPU 5 with rank 1
  strayed.placement_seen = true;
  strayed.computing_threads = 2;
  strayed.cpus_used = "5,9";
  strayed.threads_outside = 1;
  const std::vector<std::string> warnings = report_of({over, single, strayed}).warnings;
  const std::vector<std::string> expected = {
      "rank 0 (hostA, CPUs 0-1): OMP_NUM_THREADS=8 is more threads than its 2 CPUs: they take turns (oversubscribed)",
      "rank 1 (hostA, CPUs 2-5): one thread computes on its 4 CPUs (OMP_NUM_THREADS=-, or the program sets torch's "
      "threads)",
      "rank 2 (hostA, CPUs 5-6): 1 of its computing threads ran outside its CPUs (on 5,9)",
      "ranks 1 and 2 on hostA share CPUs 5",
  };
  CHECK(warnings == expected);
}

TEST_CASE("one line of advice when a phase dominates") {
  CHECK(report_of({rank_of(0, 5, 100, 40), rank_of(1, 5, 100, 30, 0, "1")}).advice ==
        "the gradient exchange takes 35% of the step: try the bf16 gradient exchange, fewer ranks, or a larger batch");
  CHECK(report_of({rank_of(0, 5, 100, 5, 50)}).advice.rfind("data loading takes 50% of the step", 0) == 0);
  CHECK(report_of({rank_of(0, 5, 100, 10, 10)}).advice.empty());
}

TEST_CASE("the trace: one track per rank and attempt, steps with their phases, valid JSON") {
  RankRecords a = rank_of(0, 2, 10, 1, 0, "0", 0);
  a.phases.push_back({"compute", a.steps[0].start, a.steps[0].start + 9 * kMs, -1});
  a.collectives.push_back({"all_reduce(float32[4], SUM)", a.steps[0].start + 9 * kMs, a.steps[0].end, 16});
  RankRecords b = rank_of(1, 2, 10, 1, 0, "1", 0);
  RankRecords restarted = rank_of(0, 1, 10, 1, 0, "0", 1);
  const auto trace = nlohmann::json::parse(trace_json({a, b, restarted}, report_of({a, b, restarted})));
  std::vector<std::string> tracks, processes;
  int steps = 0, phases = 0, collectives = 0;
  double earliest = 1e18;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("name") == "thread_name") tracks.push_back(e.at("args").at("name"));
    if (e.at("name") == "process_name") processes.push_back(e.at("args").at("name"));
    if (e.at("ph") != "X") continue;
    earliest = std::min(earliest, e.at("ts").get<double>());
    steps += e.at("cat") == "step";
    phases += e.at("cat") == "phase";
    collectives += e.at("cat") == "collective";
  }
  CHECK(processes == std::vector<std::string>{"attempt 0", "attempt 1"});
  CHECK(tracks == std::vector<std::string>{"rank 0 (hostA, CPUs 0)", "rank 0 collectives", "rank 1 (hostA, CPUs 1)",
                                           "rank 0 (hostA, CPUs 0)"});
  CHECK(steps == 5);
  CHECK(phases == 1);
  CHECK(collectives == 1);
  CHECK(earliest == 0);
  // The report rides along, and is of the last attempt.
  CHECK(trace.at("nanoReport").at("attempt") == 1);
  CHECK(report_of({a, b, restarted}).attempt == 1);
  CHECK(report_of({a, b, restarted}).ranks.size() == 1);
}

TEST_CASE("an elastic launch's worlds: each attempt's process named by its world, a mark where it changed") {
  RankRecords a = rank_of(0, 2, 10, 1, 0, "0", 0);
  RankRecords b = rank_of(1, 2, 10, 1, 0, "1", 0);
  RankRecords smaller = rank_of(0, 1, 10, 1, 0, "0", 1);
  TimelineReport report = report_of({a, b, smaller});
  report.worlds = {"hostA,hostB (2 ranks)", "hostA (1 rank) after hostB lost (it does not answer)"};
  const auto trace = nlohmann::json::parse(trace_json({a, b, smaller}, report));
  std::vector<std::string> processes, marks;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("name") == "process_name") processes.push_back(e.at("args").at("name"));
    if (e.at("ph") == "i")
      marks.push_back(e.at("name").get<std::string>() + " @" + std::to_string(e.at("pid").get<int>()));
  }
  CHECK(processes == std::vector<std::string>{"attempt 0: hostA,hostB (2 ranks)",
                                              "attempt 1: hostA (1 rank) after hostB lost (it does not answer)"});
  CHECK(marks == std::vector<std::string>{"world changed: hostA (1 rank) after hostB lost (it does not answer) @2"});
  const std::vector<std::string> lines = report_lines(report, "t.json");
  CHECK(std::find(lines.begin(), lines.end(),
                  "nano-run: timeline: the world changed between attempts; attempt 1 ran on hostA (1 rank) after "
                  "hostB lost (it does not answer)") != lines.end());
  // nano-report reads them back from the report.
  CHECK(report_from_json(report_json(report)).worlds == report.worlds);
  CHECK(report_lines(report_from_json(trace.dump()), "t.json") == lines);
}

TEST_CASE("the report survives its JSON: nano-report tells the same lines") {
  RankRecords over = rank_of(1, 20, 100, 0, 0, "1");
  over.omp = "4";
  const TimelineReport report = report_of({rank_of(0, 20, 100, 30), over});
  REQUIRE(report.straggler);
  const TimelineReport back = report_from_json(report_json(report));
  CHECK(report_lines(back, "t.json") == report_lines(report, "t.json"));
  CHECK_THROWS_AS(report_from_json("{}"), UsageError);
  CHECK_THROWS_AS(report_from_json("not json"), UsageError);
}

TEST_CASE("shipped records name a rank's records file, and nothing else") {
  struct Row {
    std::string name;
    bool records;
  };
  const Row rows[] = {{"rank-0.attempt-0", true},
                      {"rank-12.attempt-3", true},
                      {"rank-1.attempt-0/../x", false},
                      {"../rank-1.attempt-0", false},
                      {"rank-+1.attempt-0", false},
                      {"rank-01.attempt-0", false},
                      {"rank-1.attempt-", false},
                      {"rank-1234567890.attempt-0", false},  // ten digits: no recorder's
                      {"rank-1.attempt-0.attempt-0", false},
                      {"rank-1", false},
                      {"", false}};
  for (const Row& row : rows) {
    CAPTURE(row.name);
    CHECK(is_records_file_name(row.name) == row.records);
    const auto back = parse_shipped_records(shipped_records_payload(row.name, "R 0 h 0 - -\nS 0 1 2\n"));
    CHECK(back.has_value() == row.records);
    if (back) CHECK(*back == std::make_pair(row.name, std::string("R 0 h 0 - -\nS 0 1 2\n")));
  }
  CHECK_FALSE(parse_shipped_records("rank-0.attempt-0"));  // no newline: no name
}

TEST_CASE("records a rank cannot have written are skipped, and nothing in them costs more than its line") {
  // tests/fuzz/timeline_fuzz.cc found that an interval of billions of steps was written out step
  // by step (gigabytes), a CPU list "4-530000000" was expanded, and bytes that are no UTF-8 made
  // the trace's JSON throw at the end of the job; numbers near int64's ends could overflow.
  struct Row {
    const char* name;
    std::string records;
    size_t steps, phases, collectives;
    int rank;
  };
  const std::string rank = "R 1 hostA 0-3 0 4\n";
  const Row rows[] = {
      {"an interval of 2^32 steps is taken", rank + "A 0 4294967296 0 4294967296000000 0 0 0 0 0\n", 1, 0, 0, 1},
      {"an interval of more steps is skipped", rank + "A 0 1700000001020000000 0 9 0 0 0 0 0\n", 0, 0, 0, 1},
      {"an interval of no steps is skipped", rank + "A 0 0 0 9 0 0 0 0 0\nA 0 -5 0 9 0 0 0 0 0\n", 0, 0, 0, 1},
      {"times beyond 2^62 ns are skipped",
       rank + "S 0 -9223372036854775807 9223372036854775807 0 0 0 0\nP data 0 4611686018427387904\n"
              "C 0 1 -1 x\n",
       0, 0, 0, 1},
      {"a rank beyond 2^20 is not taken", "R 1048576 hostA 0 0 4\nS 0 0 1 0 0 0 0\n", 1, 0, 0, -1},
      {"a rank that is no number is not taken", "R x hostA 0 0 4\n", 0, 0, 0, -1},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    const RankRecords r = parse_records(row.records, 0);
    CHECK(r.steps.size() == row.steps);
    CHECK(r.phases.size() == row.phases);
    CHECK(r.collectives.size() == row.collectives);
    CHECK(r.rank == row.rank);
  }
  // 2^32 steps of 1 ms each: the median without writing them out.
  const TimelineReport huge = report_of({parse_records(rows[0].records, 0)});
  REQUIRE(huge.ranks.size() == 1);
  CHECK(huge.ranks[0].steps == 4294967296);
  CHECK(huge.ranks[0].median_ms == doctest::Approx(1.0));

  RankRecords odd = rank_of(0, 3, 10, 1, 0, "4-530000000");
  odd.host = "host\xa3";
  odd.collectives.push_back({"all_reduce(\xff)", odd.steps[0].start, odd.steps[0].end, 4});
  RankRecords twin = rank_of(1, 3, 10, 1, 0, "4-530000000");
  twin.host = odd.host;
  const TimelineReport report = report_of({odd, twin});
  CHECK(report.warnings.empty());  // the CPU list is no machine's: no placement check of it
  const auto trace = nlohmann::json::parse(trace_json({odd, twin}, report));
  CHECK(trace.at("nanoReport").at("ranks").at(0).at("host") == "host\xef\xbf\xbd");  // U+FFFD
  CHECK(report_from_json(report_json(report)).ranks.size() == 2);
}

TEST_CASE("a records file over its bound: read up to its last whole line within it, and named") {
  char dir_template[] = "/tmp/nano-timeline-test-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string trace = dir + "/t.json";
  struct Row {
    const char* name;
    size_t bound;
    size_t steps;
    bool note;
  };
  const std::string records = "R 0 hostA 0 0 1\nS 0 0 1000000 0 1000000 0 0\nS 1 1000000 2000000 0 1000000 0 0\n";
  const Row rows[] = {
      {"within the bound: read whole, no note", records.size(), 2, false},
      {"one byte over: the last line is dropped", records.size() - 1, 1, true},
      {"a bound inside the first S line: no step", 20, 0, true},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    start_timeline(trace);
    const std::string file = timeline_records_folder(trace) + "/rank-0.attempt-0";
    std::ofstream(file) << records;
    const std::vector<std::string> lines = finish_timeline(trace, row.bound);
    const std::string note = "nano-run: timeline: " + file + " holds more than " + std::to_string(row.bound) +
                             " bytes of records; the rest are dropped";
    CHECK((std::find(lines.begin(), lines.end(), note) != lines.end()) == row.note);
    CHECK(lines.at(row.note ? 1 : 0)
              .rfind("nano-run: timeline: " + trace + " (1 rank, " + std::to_string(row.steps) + " steps", 0) == 0);
  }
  std::remove((trace + ".report.json").c_str());
  std::remove(trace.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("a timeline's file and records folder are the job's own") {
  // The ranks write their records there and nano-run reads them back: another user of the host
  // must neither read a job's timings nor plant records in its folder.
  char tmpl[] = "/tmp/nano-timeline-mode-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string trace = dir + "/t.json";
  start_timeline(trace);
  struct stat file {
  }, folder{};
  REQUIRE(::lstat(trace.c_str(), &file) == 0);
  REQUIRE(::lstat(timeline_records_folder(trace).c_str(), &folder) == 0);
  CHECK((file.st_mode & 0777) == 0600);
  CHECK(S_ISDIR(folder.st_mode));
  CHECK((folder.st_mode & 0777) == 0700);
  finish_timeline(trace, 1 << 20);
  std::remove((trace + ".report.json").c_str());
  std::remove(trace.c_str());
  // A link put at the report's name while the job ran (the trace's own is refused at the start):
  // the report replaces it, the file it pointed at stays as it was.
  const std::string theirs = dir + "/theirs";
  std::ofstream(theirs) << "theirs";
  start_timeline(trace);
  std::ofstream(timeline_records_folder(trace) + "/rank-0.attempt-0")
      << "R 0 hostA 0 0 1\nS 0 0 1000000 0 1000000 0 0\n";
  CHECK(symlink(theirs.c_str(), (trace + ".report.json").c_str()) == 0);
  finish_timeline(trace, 1 << 20);
  std::ifstream kept(theirs);
  CHECK(std::string(std::istreambuf_iterator<char>(kept), {}) == "theirs");
  struct stat report {};
  CHECK(lstat((trace + ".report.json").c_str(), &report) == 0);
  CHECK(S_ISREG(report.st_mode));
  CHECK((report.st_mode & 0777) == 0600);
  std::remove((trace + ".report.json").c_str());
  std::remove(trace.c_str());
  std::remove(theirs.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("nano-report takes only a report whose numbers and straggler are its own") {
  // tests/fuzz/timeline_fuzz.cc found that a straggler that is none of the report's ranks was
  // read past the end of them; a rank of 1e300 was cast to an int (undefined).
  nlohmann::json report =
      nlohmann::json::parse(report_json(report_of({rank_of(0, 20, 100, 30), rank_of(1, 20, 100, 0, 0, "1")})));
  REQUIRE(report.at("straggler").at("rank") == 1);
  struct Row {
    const char* name;
    std::function<void(nlohmann::json&)> change;
    const char* message;
  };
  const Row rows[] = {
      {"a straggler that is none of its ranks", [](nlohmann::json& j) { j["straggler"]["rank"] = 7; },
       "not a timeline report of nano's (its straggler, rank 7, is none of its ranks)"},
      {"a rank beyond an int", [](nlohmann::json& j) { j["ranks"][0]["rank"] = 1e300; },
       "not a timeline report of nano's (its rank 1e+300 is no whole number of its range)"},
      {"a fraction of a step", [](nlohmann::json& j) { j["ranks"][1]["steps"] = 1.5; },
       "not a timeline report of nano's (its steps 1.5 is no whole number of its range)"},
      {"an attempt beyond an int", [](nlohmann::json& j) { j["attempt"] = 4294967296; },
       "not a timeline report of nano's (its attempt 4294967296 is no whole number of its range)"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    nlohmann::json changed = report;
    row.change(changed);
    CHECK_THROWS_WITH_AS(report_from_json(changed.dump()), row.message, UsageError);
  }
  CHECK(report_from_json(report.dump()).straggler == 1);
}
