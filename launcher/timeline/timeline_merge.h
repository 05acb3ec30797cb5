#pragma once
// `nano-run --timeline FILE`, the launcher's half: the ranks' records (runtime/timeline/recorder.h, which
// gives their format) merged into one Chrome trace-event file that Perfetto and chrome://tracing
// open, one track per rank named by host, rank and CPUs, and the report told at the end: each
// rank's step time and its shares, the straggler, the placement check and one line of advice.
// Pure stages (parse, trace, report) with table tests, and one effectful shell that reads the
// records folder and writes the files.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nano {

/// A step (an S record), or after the detailed ones an interval of `steps` steps (an A record):
/// nanoseconds of the timeline's clock.
struct TimelineStep {
  int64_t first = 0;  ///< the step's index (an interval's first)
  int64_t steps = 1;
  int64_t start = 0, end = 0;
  int64_t data = 0, compute = 0, exchange = 0, checkpoint = 0;
};

/// A phase (P) or a collective (C) of a detailed step.
struct TimelineSpan {
  std::string name;  ///< "data", "compute", ...; a collective's description
  int64_t start = 0, end = 0;
  int64_t bytes = -1;  ///< a collective's; -1 for a phase
};

/// One rank's records of one attempt.
struct RankRecords {
  int rank = -1;
  int attempt = 0;
  std::string host = "-", cpus = "-", numa = "-", omp = "-";
  std::vector<TimelineStep> steps;
  std::vector<TimelineSpan> phases;
  std::vector<TimelineSpan> collectives;
  bool placement_seen = false;  ///< a T record came
  int computing_threads = 0;
  std::string cpus_used = "-";
  int threads_outside = 0;
};

/// Pure: the records of one file (`attempt` from its name). A line it cannot read (the last one
/// of a rank that died while writing) is skipped.
RankRecords parse_records(const std::string& text, int attempt);

struct TimelineReport;

/// Pure: the trace-event JSON of every rank and attempt: per attempt a process (named with its
/// world from report.worlds, and a global instant event "world changed: ..." where an attempt's
/// world differs from the one before), per rank a track of its steps with their phases nested
/// inside, and a track of its collectives; times in microseconds from the earliest record. `report` rides along under
/// the top-level key "nanoReport" (trace viewers ignore it; nano-report reads it).
std::string trace_json(const std::vector<RankRecords>& ranks, const TimelineReport& report);

/// One rank's summary, over the steps of the last attempt that has any.
struct RankSummary {
  int rank = -1;
  std::string host, cpus, numa;
  int64_t steps = 0;
  double median_ms = 0, p10_ms = 0, p90_ms = 0;                           ///< step time
  double work_ms = 0;                                                     ///< median step time less its exchange wait
  double data = 0, compute = 0, exchange = 0, checkpoint = 0, other = 0;  ///< shares of the step time
  int collectives = 0;                                                    ///< recorded in detail
};

struct TimelineReport {
  int attempt = 0;
  std::vector<RankSummary> ranks;
  /// The rank the others wait on: its work per step is this much the median rank's, and the
  /// others spend `others_wait` of their step time in the exchange. None when every rank is
  /// within kStragglerRatio of the median, or there is one rank.
  std::optional<int> straggler;
  double straggler_ratio = 0, others_wait = 0;
  std::vector<std::string> warnings;  ///< the placement check's
  std::string advice;                 ///< "" = no phase dominates
  /// An elastic launch's world of each attempt, by attempt ("hostA,hostB (2 ranks)", with " after
  /// hostC lost (...)" where it changed); empty for a launch that is not elastic.
  std::vector<std::string> worlds;
};

/// A rank whose work per step is at least this much the median rank's is named the straggler.
inline constexpr double kStragglerRatio = 1.10;
/// A phase that takes more than this share of the step gets a line of advice.
inline constexpr double kAdviceShare = 0.20;

/// Pure: the report of the last attempt with steps (with none: of the last attempt).
TimelineReport report_of(const std::vector<RankRecords>& ranks);

/// Pure: the lines nano-run tells, "nano-run: timeline: ..."; `trace`: the file's path.
std::vector<std::string> report_lines(const TimelineReport& report, const std::string& trace);

/// Pure: the report as JSON (FILE.report.json).
std::string report_json(const TimelineReport& report);

/// Pure: the report back from report_json's text, or from a trace that carries it under
/// "nanoReport". Throws UsageError when it is neither.
TimelineReport report_from_json(const std::string& text);

/// Where the ranks write their records for the trace `file`: FILE.records, absolute.
std::string timeline_records_folder(const std::string& file);

/// Before anything starts: `file` can be written and its records folder made (empty). Throws
/// SettingError naming the timeline and the reason.
void start_timeline(const std::string& file);

/// The most bytes of one rank's records file that finish_timeline reads: a day-long run writes a
/// few MB (runtime/timeline/recorder.h); a file beyond it is read up to its last whole line within it.
inline constexpr std::size_t kMaxRecordsFileBytes = 16u << 20;

/// When the launch ended, however it ended: merges the records folder into `file` and
/// FILE.report.json, removes the folder, and returns the report's lines (or one line saying
/// why there is no trace), after a line for each records file over `max_file_bytes` (its
/// records beyond them are dropped).
/// `worlds`: TimelineReport::worlds, for an elastic launch.
std::vector<std::string> finish_timeline(const std::string& file, std::size_t max_file_bytes = kMaxRecordsFileBytes,
                                         const std::vector<std::string>& worlds = {});

}  // namespace nano
