// The timeline's readers (launcher/timeline/timeline_merge.h) on any text: the ranks' records files as
// finish_timeline merges them (parse, report, its lines, the trace), the report back from its
// JSON as nano-report reads a trace, and a shipped records file (launcher/timeline/timeline_shipping.h).
//
// Input: a byte, then text: records files separated by form feeds ('\f'), rank i's of attempt
// i % 2 (0 for all when the byte's bit 0 is set); with its bit 1 set, a file nano-report reads
// and a kTimeline payload instead.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include <nano/error.h>
#include "launcher/process/guardian.h"
#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/timeline_shipping.h"
#include "tests/fuzz/fuzz_target.h"

namespace nano {

// launcher/process/guardian.h's, which start_timeline and finish_timeline clear the records folder with.
// Defined here rather than linking guardian.cc, which brings the process-group machinery along;
// the fuzzer calls only the pure stages.
bool remove_tree(const char*) { return true; }

}  // namespace nano

using namespace nano;

namespace {

bool utf8(const std::vector<std::string>& lines) {
  try {
    (void)nlohmann::json(lines).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 2) {
    // A trace or report file someone hands nano-report; a kTimeline payload.
    try {
      report_lines(report_from_json(text), "t.json");
    } catch (const UsageError&) {
    }
    if (const auto shipped = parse_shipped_records(text))
      NANO_FUZZ_CHECK(shipped_records_payload(shipped->first, shipped->second) == text);
    return 0;
  }
  std::vector<RankRecords> ranks;
  size_t start = 0;
  for (int i = 0; start <= text.size() && i < 16; ++i) {
    const size_t end = std::min(text.find('\f', start), text.size());
    RankRecords r = parse_records(text.substr(start, end - start), (data[0] & 1) ? 0 : i % 2);
    if (r.rank < 0) r.rank = i;  // finish_timeline: the file's name tells
    ranks.push_back(std::move(r));
    start = end + 1;
  }
  const TimelineReport report = report_of(ranks);
  const std::vector<std::string> lines = report_lines(report, "t.json");
  NANO_FUZZ_CHECK(!lines.empty());
  for (const std::string& line : lines) NANO_FUZZ_CHECK(line.rfind("nano-run: timeline: ", 0) == 0);
  // The trace is JSON that carries the report; nano-report tells the same lines from it.
  // (Bytes that are no UTF-8 come back as U+FFFD: then only the second trip must change nothing.)
  const nlohmann::json trace = nlohmann::json::parse(trace_json(ranks, report));
  NANO_FUZZ_CHECK(trace.contains("traceEvents") && trace.contains("nanoReport"));
  const TimelineReport back = report_from_json(report_json(report));
  if (utf8(lines))
    NANO_FUZZ_CHECK(report_lines(back, "t.json") == lines);
  else
    NANO_FUZZ_CHECK(report_lines(report_from_json(report_json(back)), "t.json") == report_lines(back, "t.json"));
  return 0;
}

std::vector<std::string> nano_fuzz_seeds() {
  // Records as runtime/timeline/recorder.cc writes them: two ranks on one host, a restart, an interval.
  const std::string rank0 =
      "R 0 hostA 0-3 0 4\n"
      "P data 1700000000000000000 1700000000001000000\n"
      "P compute 1700000000001000000 1700000000009000000\n"
      "C 1700000000008000000 1700000000009000000 4096 all_reduce(float32[1024], SUM)\n"
      "S 0 1700000000000000000 1700000000010000000 1000000 8000000 1000000 0\n"
      "S 1 1700000000010000000 1700000000020000000 1000000 7000000 2000000 0\n"
      "T 4 0-3 0\n"
      "A 2000 100 1700000000020000000 1700000001020000000 100000000 700000000 200000000 0 300\n";
  const std::string rank1 =
      "R 1 hostA 2-5 0 8\n"
      "S 0 1700000000000000000 1700000000015000000 1000000 13000000 1000000 0\n"
      "S 1 1700000000015000000 1700000000030000000 1000000 13000000 1000000 0\n"
      "T 1 2 2\n"
      "S 2 1700000000030";  // a rank killed while writing
  const std::string restarted = "R 0 hostB - - -\nC 5 9 16 broadcast(int64[2])\n";
  RankRecords a = parse_records(rank0, 0), b = parse_records(rank1, 0);
  const std::string report = report_json(report_of({a, b}));
  return {
      std::string(1, '\x00') + rank0 + "\f" + rank1 + "\f" + restarted,
      std::string(1, '\x01') + rank1 + "\f" + rank0,
      std::string(1, '\x02') + report,
      std::string(1, '\x02') + trace_json({a, b}, report_of({a, b})),
      std::string(1, '\x02') + shipped_records_payload("rank-3.attempt-2", rank0),
  };
}
