#include "launcher/timeline/timeline_merge.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/file_beside.h"
#include "core/parse.h"
#include "core/setting.h"
#include "launcher/process/guardian.h"
#include "launcher/timeline/timeline_shipping.h"

namespace nano {
namespace {

using nlohmann::json;

constexpr double kMs = 1e6;  // nanoseconds per millisecond
// The records' text (host names, collectives' descriptions) is whatever a rank wrote: bytes that
// are no UTF-8 become U+FFFD in the JSON, where json's default would throw at the end of the job.
constexpr auto kReplaceBadUtf8 = json::error_handler_t::replace;

// A value that stands for `count` equal ones (an interval's steps, each its mean).
struct Counted {
  double value = 0;
  int64_t count = 1;
};

// The q-quantile of `values`, each counted as often as it says: the same number as the quantile
// of the values written out that often, without writing them out (an A record's steps may be
// billions).
double quantile(std::vector<Counted> values, double q) {
  int64_t n = 0;
  for (const Counted& v : values) n += v.count;
  if (n == 0) return 0;
  std::sort(values.begin(), values.end(), [](const Counted& a, const Counted& b) { return a.value < b.value; });
  // The value at `index` of the written-out, sorted list.
  const auto at_index = [&values](int64_t index) {
    for (const Counted& v : values) {
      if (index < v.count) return v.value;
      index -= v.count;
    }
    return values.back().value;
  };
  const double at = q * static_cast<double>(n - 1);
  const auto lo = static_cast<int64_t>(std::floor(at));
  const auto hi = static_cast<int64_t>(std::ceil(at));
  return at_index(lo) + (at_index(hi) - at_index(lo)) * (at - static_cast<double>(lo));
}

std::string percent(double share) { return std::to_string(static_cast<int>(std::lround(share * 100))) + "%"; }

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

// "rank 3 (hostB, CPUs 12-15, NUMA 1)"
std::string who(const RankSummary& r) {
  std::string s = "rank " + std::to_string(r.rank) + " (" + r.host + ", CPUs " + r.cpus;
  if (r.numa != "-") s += ", NUMA " + r.numa;
  return s + ")";
}

RankSummary summarise(const RankRecords& r) {
  RankSummary s;
  s.rank = r.rank;
  s.host = r.host;
  s.cpus = r.cpus;
  s.numa = r.numa;
  s.collectives = static_cast<int>(r.collectives.size());
  std::vector<Counted> times, work;
  double total = 0, data = 0, compute = 0, exchange = 0, checkpoint = 0;
  for (const TimelineStep& st : r.steps) {
    const double span = static_cast<double>(st.end - st.start);
    s.steps += st.steps;
    total += span;
    data += static_cast<double>(st.data);
    compute += static_cast<double>(st.compute);
    exchange += static_cast<double>(st.exchange);
    checkpoint += static_cast<double>(st.checkpoint);
    // An interval stands for its steps' mean, once per step.
    const double n = static_cast<double>(st.steps);
    times.push_back({span / n / kMs, st.steps});
    work.push_back({(span - static_cast<double>(st.exchange)) / n / kMs, st.steps});
  }
  s.median_ms = quantile(times, 0.5);
  s.p10_ms = quantile(times, 0.1);
  s.p90_ms = quantile(times, 0.9);
  s.work_ms = quantile(work, 0.5);
  if (total > 0) {
    s.data = data / total;
    s.compute = compute / total;
    s.exchange = exchange / total;
    s.checkpoint = checkpoint / total;
    s.other = std::max(0.0, 1 - s.data - s.compute - s.exchange - s.checkpoint);
  }
  return s;
}

// What a rank's records may hold (runtime/timeline/recorder.h writes far less), so that no difference or
// sum the report and the trace take of them overflows: times and durations within 2^62 ns either
// way (the year 2116 of CLOCK_REALTIME), an interval of at most 2^32 steps, ranks below 2^20. A
// line with a number beyond them is skipped, as a torn one is.
constexpr int64_t kMaxRecordedNs = int64_t{1} << 62;
constexpr int64_t kMaxIntervalSteps = int64_t{1} << 32;
constexpr int64_t kMaxRecordedRank = 1 << 20;

bool recorded(std::initializer_list<int64_t> numbers) {
  return std::all_of(numbers.begin(), numbers.end(),
                     [](int64_t n) { return n > -kMaxRecordedNs && n < kMaxRecordedNs; });
}

std::string cpu_count(size_t n) { return std::to_string(n) + (n == 1 ? " CPU" : " CPUs"); }

// Linux's most CPUs (NR_CPUS at its largest): a records file's list naming more (its ranges
// added up, repeats counted) is no rank's and is not read, so "0-2000000000" cannot make the
// report take gigabytes.
constexpr long long kMaxListedCpus = 8192;

// How many CPUs `list` names, its ranges added up, at most kMaxListedCpus + 1 (-1: not a list).
long long cpus_named(const std::string& list) {
  long long count = 0;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',') && count <= kMaxListedCpus;) {
    const size_t dash = item.find('-');
    const auto low = parse_integer(item.substr(0, dash), 0, INT_MAX);
    const auto high = dash == std::string::npos ? low : parse_integer(item.substr(dash + 1), 0, INT_MAX);
    if (!low || !high || *high < *low) return -1;
    count += *high - *low + 1;
  }
  return count;
}

std::vector<int> cpus_of(const std::string& list) {
  const long long count = cpus_named(list);
  if (list == "-" || count < 0 || count > kMaxListedCpus) return {};
  try {
    return parse_cpu_list(list);
  } catch (const std::exception&) {
    return {};
  }
}

// The placement check of the ranks of one attempt.
std::vector<std::string> placement_warnings(const std::vector<const RankRecords*>& ranks) {
  std::vector<std::string> warnings;
  std::vector<std::vector<int>> cpus_by_rank;  // each list read once, not once per pair
  for (const RankRecords* r : ranks) {
    cpus_by_rank.push_back(cpus_of(r->cpus));
    const std::vector<int>& cpus = cpus_by_rank.back();
    const std::string name = "rank " + std::to_string(r->rank) + " (" + r->host + ", CPUs " + r->cpus + ")";
    char* end = nullptr;
    const long omp = std::strtol(r->omp.c_str(), &end, 10);
    if (end && *end == '\0' && !cpus.empty() && omp > static_cast<long>(cpus.size()))
      warnings.push_back(name + ": OMP_NUM_THREADS=" + r->omp + " is more threads than its " + cpu_count(cpus.size()) +
                         ": they take turns (oversubscribed)");
    if (!r->placement_seen) continue;
    if (r->threads_outside > 0)
      warnings.push_back(name + ": " + std::to_string(r->threads_outside) +
                         " of its computing threads ran outside its CPUs (on " + r->cpus_used + ")");
    if (r->computing_threads == 1 && cpus.size() > 1)
      warnings.push_back(name + ": one thread computes on its " + cpu_count(cpus.size()) +
                         " (OMP_NUM_THREADS=" + r->omp + ", or the program sets torch's threads)");
  }
  for (size_t i = 0; i < ranks.size(); ++i)
    for (size_t j = i + 1; j < ranks.size(); ++j) {
      if (ranks[i]->host != ranks[j]->host) continue;
      const std::vector<int>& a = cpus_by_rank[i];
      const std::vector<int>& b = cpus_by_rank[j];
      std::vector<int> both;
      std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
      if (!both.empty())
        warnings.push_back("ranks " + std::to_string(ranks[i]->rank) + " and " + std::to_string(ranks[j]->rank) +
                           " on " + ranks[i]->host + " share CPUs " + format_cpu_list(both));
    }
  return warnings;
}

std::string advice_of(const std::vector<RankSummary>& ranks) {
  double exchange = 0, data = 0, checkpoint = 0;
  int n = 0;
  for (const RankSummary& r : ranks) {
    if (r.steps == 0) continue;
    exchange += r.exchange;
    data += r.data;
    checkpoint += r.checkpoint;
    ++n;
  }
  if (n == 0) return "";
  exchange /= n;
  data /= n;
  checkpoint /= n;
  const double top = std::max({exchange, data, checkpoint});
  if (top <= kAdviceShare) return "";
  if (top == exchange)
    return "the gradient exchange takes " + percent(exchange) +
           " of the step: try the bf16 gradient exchange, fewer ranks, or a larger batch";
  if (top == data)
    return "data loading takes " + percent(data) +
           " of the step: prepare the data once (a tensor dataset), or use loader workers";
  return "checkpoints take " + percent(checkpoint) + " of the step: checkpoint less often";
}

// A rank's records file, whole when it holds at most `limit` bytes; else up to its last line
// that ends within them, and `over` is set.
std::string read_records(const std::string& path, size_t limit, bool& over) {
  std::ifstream in(path, std::ios::binary);
  std::string text;
  char chunk[65536];
  while (in && text.size() <= limit) {
    in.read(chunk, static_cast<std::streamsize>(std::min(sizeof chunk, limit + 1 - text.size())));
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  over = text.size() > limit;
  if (over) {
    const size_t last_line_end = limit == 0 ? std::string::npos : text.rfind('\n', limit - 1);
    text.resize(last_line_end == std::string::npos ? 0 : last_line_end + 1);
  }
  return text;
}

}  // namespace

RankRecords parse_records(const std::string& text, int attempt) {
  RankRecords r;
  r.attempt = attempt;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "R") {
      int64_t rank = -1;
      if (in >> rank && rank >= 0 && rank < kMaxRecordedRank) {
        r.rank = static_cast<int>(rank);
        in >> r.host >> r.cpus >> r.numa >> r.omp;
      }
    } else if (kind == "P") {
      TimelineSpan p;
      if (in >> p.name >> p.start >> p.end && recorded({p.start, p.end})) r.phases.push_back(p);
    } else if (kind == "C") {
      TimelineSpan c;
      if (in >> c.start >> c.end >> c.bytes && recorded({c.start, c.end, c.bytes}) && c.bytes >= 0) {
        std::getline(in >> std::ws, c.name);
        r.collectives.push_back(c);
      }
    } else if (kind == "S") {
      TimelineStep s;
      if (in >> s.first >> s.start >> s.end >> s.data >> s.compute >> s.exchange >> s.checkpoint &&
          recorded({s.first, s.start, s.end, s.data, s.compute, s.exchange, s.checkpoint}))
        r.steps.push_back(s);
    } else if (kind == "A") {
      TimelineStep s;
      int64_t collectives = 0;
      if (in >> s.first >> s.steps >> s.start >> s.end >> s.data >> s.compute >> s.exchange >> s.checkpoint >>
              collectives &&
          recorded({s.first, s.start, s.end, s.data, s.compute, s.exchange, s.checkpoint}) && s.steps >= 1 &&
          s.steps <= kMaxIntervalSteps)
        r.steps.push_back(s);
    } else if (kind == "T") {
      int threads = 0, outside = 0;
      std::string used;
      if (in >> threads >> used >> outside && threads >= 0 && outside >= 0) {
        r.computing_threads = threads;
        r.cpus_used = used;
        r.threads_outside = outside;
        r.placement_seen = true;
      }
    }
  }
  return r;
}

std::string trace_json(const std::vector<RankRecords>& ranks, const TimelineReport& report) {
  int64_t t0 = INT64_MAX;
  for (const RankRecords& r : ranks) {
    for (const TimelineStep& s : r.steps) t0 = std::min(t0, s.start);
    for (const TimelineSpan& p : r.phases) t0 = std::min(t0, p.start);
    for (const TimelineSpan& c : r.collectives) t0 = std::min(t0, c.start);
  }
  json events = json::array();
  // A track's name and place (thread_name and thread_sort_index), and one span on it.
  auto track = [&events](int pid, int tid, const std::string& name) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    events.push_back(
        {{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
  };
  auto span = [&events, t0](const char* cat, const std::string& name, int pid, int tid, int64_t start, int64_t end,
                            json args) {
    json e = {{"ph", "X"},
              {"cat", cat},
              {"name", name},
              {"pid", pid},
              {"tid", tid},
              {"ts", (start - t0) / 1000.0},
              {"dur", (end - start) / 1000.0}};
    if (!args.is_null()) e["args"] = std::move(args);
    events.push_back(std::move(e));
  };
  std::map<int, bool> attempts;
  const auto world = [&](int attempt) {
    return attempt < static_cast<int>(report.worlds.size()) ? report.worlds[static_cast<size_t>(attempt)] : "";
  };
  const auto hosts_of = [&](int attempt) { return world(attempt).substr(0, world(attempt).find(" after ")); };
  for (const RankRecords& r : ranks) {
    const int pid = r.attempt + 1;
    if (!attempts[r.attempt]) {
      attempts[r.attempt] = true;
      const std::string on = world(r.attempt);
      events.push_back({{"ph", "M"},
                        {"name", "process_name"},
                        {"pid", pid},
                        {"args", {{"name", "attempt " + std::to_string(r.attempt) + (on.empty() ? "" : ": " + on)}}}});
      if (r.attempt > 0 && !on.empty() && hosts_of(r.attempt) != hosts_of(r.attempt - 1) && !r.steps.empty())
        events.push_back({{"ph", "i"},
                          {"s", "g"},
                          {"name", "world changed: " + on},
                          {"pid", pid},
                          {"tid", 0},
                          {"ts", (r.steps.front().start - t0) / 1000.0}});
      events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
    }
    const int steps_tid = 2 * r.rank, collectives_tid = 2 * r.rank + 1;
    track(pid, steps_tid, "rank " + std::to_string(r.rank) + " (" + r.host + ", CPUs " + r.cpus + ")");
    if (!r.collectives.empty()) track(pid, collectives_tid, "rank " + std::to_string(r.rank) + " collectives");
    for (const TimelineStep& s : r.steps) {
      const std::string name =
          s.steps == 1 ? "step " + std::to_string(s.first)
                       : "steps " + std::to_string(s.first) + "-" + std::to_string(s.first + s.steps - 1) + " (totals)";
      span("step", name, pid, steps_tid, s.start, s.end,
           {{"data_ms", s.data / kMs},
            {"compute_ms", s.compute / kMs},
            {"exchange_ms", s.exchange / kMs},
            {"checkpoint_ms", s.checkpoint / kMs}});
    }
    for (const TimelineSpan& p : r.phases) span("phase", p.name, pid, steps_tid, p.start, p.end, nullptr);
    for (const TimelineSpan& c : r.collectives)
      span("collective", c.name, pid, collectives_tid, c.start, c.end, {{"bytes", c.bytes}});
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"nanoReport", json::parse(report_json(report))}}
      .dump(-1, ' ', false, kReplaceBadUtf8);
}

TimelineReport report_of(const std::vector<RankRecords>& ranks) {
  TimelineReport report;
  int last = 0, last_with_steps = -1;
  for (const RankRecords& r : ranks) {
    last = std::max(last, r.attempt);
    if (!r.steps.empty()) last_with_steps = std::max(last_with_steps, r.attempt);
  }
  report.attempt = last_with_steps >= 0 ? last_with_steps : last;
  std::vector<const RankRecords*> mine;
  for (const RankRecords& r : ranks)
    if (r.attempt == report.attempt) mine.push_back(&r);
  std::sort(mine.begin(), mine.end(), [](const RankRecords* a, const RankRecords* b) { return a->rank < b->rank; });
  for (const RankRecords* r : mine) report.ranks.push_back(summarise(*r));
  report.warnings = placement_warnings(mine);
  report.advice = advice_of(report.ranks);

  std::vector<const RankSummary*> stepped;
  for (const RankSummary& r : report.ranks)
    if (r.steps > 0) stepped.push_back(&r);
  if (stepped.size() < 2) return report;
  std::vector<Counted> work;
  for (const RankSummary* r : stepped) work.push_back({r->work_ms, 1});
  const double median = quantile(work, 0.5);
  const RankSummary* slowest =
      *std::max_element(stepped.begin(), stepped.end(), [](auto* a, auto* b) { return a->work_ms < b->work_ms; });
  if (median <= 0 || slowest->work_ms < kStragglerRatio * median) return report;
  report.straggler = slowest->rank;
  report.straggler_ratio = slowest->work_ms / median;
  double wait = 0;
  for (const RankSummary* r : stepped)
    if (r != slowest) wait += r->exchange;
  report.others_wait = wait / static_cast<double>(stepped.size() - 1);
  return report;
}

std::vector<std::string> report_lines(const TimelineReport& report, const std::string& trace) {
  std::vector<std::string> lines;
  const std::string head = "nano-run: timeline: ";
  int64_t steps = 0;
  for (const RankSummary& r : report.ranks) steps = std::max(steps, r.steps);
  const size_t n = report.ranks.size();
  lines.push_back(head + trace + " (" + std::to_string(n) + (n == 1 ? " rank, " : " ranks, ") + std::to_string(steps) +
                  " steps" + (report.attempt > 0 ? ", attempt " + std::to_string(report.attempt) : "") +
                  "; open it in Perfetto or chrome://tracing)");
  for (const RankSummary& r : report.ranks) {
    if (r.steps == 0) {
      lines.push_back(head + who(r) + ": no steps seen; " + std::to_string(r.collectives) + " collectives recorded");
      continue;
    }
    lines.push_back(head + who(r) + ": step " + fixed(r.median_ms, 1) + " ms median (" + fixed(r.p10_ms, 1) + "-" +
                    fixed(r.p90_ms, 1) + " from the 10th to the 90th percentile): data " + percent(r.data) +
                    ", compute " + percent(r.compute) + ", exchange wait " + percent(r.exchange) + ", checkpoint " +
                    percent(r.checkpoint) + ", optimizer and other " + percent(r.other));
  }
  if (report.straggler) {
    const auto r = std::find_if(report.ranks.begin(), report.ranks.end(),
                                [&](const RankSummary& s) { return s.rank == *report.straggler; });
    lines.push_back(head + "straggler: " + who(*r) + " takes " + fixed(report.straggler_ratio, 2) +
                    "x the median rank's time per step outside the exchange; the other ranks wait " +
                    percent(report.others_wait) + " of each step on it");
  } else if (std::count_if(report.ranks.begin(), report.ranks.end(), [](const RankSummary& r) { return r.steps > 0; }) >
             1) {
    lines.push_back(head + "no straggler: every rank's time per step is within " + percent(kStragglerRatio - 1) +
                    " of the median rank's");
  }
  const auto hosts_of = [](const std::string& w) { return w.substr(0, w.find(" after ")); };
  const bool changed = std::any_of(report.worlds.begin(), report.worlds.end(),
                                   [&](const std::string& w) { return hosts_of(w) != hosts_of(report.worlds[0]); });
  if (changed && report.attempt < static_cast<int>(report.worlds.size()))
    lines.push_back(head + "the world changed between attempts; attempt " + std::to_string(report.attempt) +
                    " ran on " + report.worlds[static_cast<size_t>(report.attempt)]);
  for (const std::string& w : report.warnings) lines.push_back(head + "placement: " + w);
  if (!report.advice.empty()) lines.push_back(head + "advice: " + report.advice);
  return lines;
}

std::string report_json(const TimelineReport& report) {
  json ranks = json::array();
  for (const RankSummary& r : report.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"cpus", r.cpus},
                     {"numa", r.numa},
                     {"steps", r.steps},
                     {"median_step_ms", r.median_ms},
                     {"p10_step_ms", r.p10_ms},
                     {"p90_step_ms", r.p90_ms},
                     {"work_ms", r.work_ms},
                     {"shares",
                      {{"data", r.data},
                       {"compute", r.compute},
                       {"exchange", r.exchange},
                       {"checkpoint", r.checkpoint},
                       {"other", r.other}}},
                     {"collectives", r.collectives}});
  json j = {{"attempt", report.attempt}, {"ranks", ranks}, {"warnings", report.warnings}, {"advice", report.advice}};
  if (!report.worlds.empty()) j["worlds"] = report.worlds;
  if (report.straggler)
    j["straggler"] = {
        {"rank", *report.straggler}, {"ratio", report.straggler_ratio}, {"others_wait", report.others_wait}};
  else
    j["straggler"] = nullptr;
  return j.dump(2, ' ', false, kReplaceBadUtf8);
}

namespace {

// `j`'s `key` as a whole number of type T. json's get<T>() would cast a fraction or a number
// beyond T (1e300) as it is, which is undefined: such a file is no report of nano's.
template <typename T>
T whole_number(const json& j, const char* key) {
  const json& value = j.at(key);
  if (value.is_number_unsigned() && value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max()))
    return static_cast<T>(value.get<uint64_t>());
  if (value.is_number_integer() && !value.is_number_unsigned() &&
      value.get<int64_t>() >= std::numeric_limits<T>::min() && value.get<int64_t>() <= std::numeric_limits<T>::max())
    return static_cast<T>(value.get<int64_t>());
  throw UsageError(std::string("not a timeline report of nano's (its ") + key + " " + value.dump() +
                   " is no whole number of its range)");
}

}  // namespace

TimelineReport report_from_json(const std::string& text) {
  TimelineReport report;
  try {
    const json whole = json::parse(text);
    const json& j = whole.contains("nanoReport") ? whole.at("nanoReport") : whole;
    report.attempt = whole_number<int>(j, "attempt");
    for (const json& r : j.at("ranks")) {
      RankSummary s;
      s.rank = whole_number<int>(r, "rank");
      s.host = r.at("host").get<std::string>();
      s.cpus = r.at("cpus").get<std::string>();
      s.numa = r.at("numa").get<std::string>();
      s.steps = whole_number<int64_t>(r, "steps");
      s.median_ms = r.at("median_step_ms").get<double>();
      s.p10_ms = r.at("p10_step_ms").get<double>();
      s.p90_ms = r.at("p90_step_ms").get<double>();
      s.work_ms = r.at("work_ms").get<double>();
      const json& shares = r.at("shares");
      s.data = shares.at("data").get<double>();
      s.compute = shares.at("compute").get<double>();
      s.exchange = shares.at("exchange").get<double>();
      s.checkpoint = shares.at("checkpoint").get<double>();
      s.other = shares.at("other").get<double>();
      s.collectives = whole_number<int>(r, "collectives");
      report.ranks.push_back(s);
    }
    report.warnings = j.at("warnings").get<std::vector<std::string>>();
    report.advice = j.at("advice").get<std::string>();
    if (j.contains("worlds")) report.worlds = j.at("worlds").get<std::vector<std::string>>();
    if (!j.at("straggler").is_null()) {
      report.straggler = whole_number<int>(j.at("straggler"), "rank");
      report.straggler_ratio = j.at("straggler").at("ratio").get<double>();
      report.others_wait = j.at("straggler").at("others_wait").get<double>();
      // report_lines names the straggler from the ranks.
      if (std::none_of(report.ranks.begin(), report.ranks.end(),
                       [&](const RankSummary& r) { return r.rank == *report.straggler; }))
        throw UsageError("not a timeline report of nano's (its straggler, rank " + std::to_string(*report.straggler) +
                         ", is none of its ranks)");
    }
  } catch (const json::exception& e) {
    throw UsageError(std::string("not a timeline report of nano's (") + e.what() + ")");
  }
  return report;
}

std::string timeline_records_folder(const std::string& file) {
  return std::filesystem::absolute(file).lexically_normal().string() + ".records";
}

void start_timeline(const std::string& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    throw SettingError(Setting::kTimeline, file, "cannot write {timeline} " + file + ": " + std::strerror(errno));
  ::close(fd);
  const std::string folder = timeline_records_folder(file);
  remove_tree(folder.c_str());
  // The job's own: ranks write their records there, nano-run reads them back.
  if (::mkdir(folder.c_str(), 0700) != 0)
    throw SettingError(Setting::kTimeline, file,
                       "cannot make {timeline}'s records folder " + folder + ": " + std::strerror(errno));
}

std::vector<std::string> finish_timeline(const std::string& file, size_t max_file_bytes,
                                         const std::vector<std::string>& worlds) {
  const std::string folder = timeline_records_folder(file);
  std::vector<RankRecords> ranks;
  std::vector<std::string> notes;
  if (DIR* dir = opendir(folder.c_str())) {
    while (dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (!is_records_file_name(name)) continue;
      // "rank-R.attempt-A", each number fewer than ten digits (is_records_file_name).
      const int rank = std::stoi(name.substr(5)), attempt = std::stoi(name.substr(name.find(".attempt-") + 9));
      if (rank >= kMaxRecordedRank) continue;
      bool over = false;
      RankRecords r = parse_records(read_records(folder + "/" + name, max_file_bytes, over), attempt);
      if (over)
        notes.push_back("nano-run: timeline: " + folder + "/" + name + " holds more than " +
                        std::to_string(max_file_bytes) + " bytes of records; the rest are dropped");
      if (r.rank < 0) r.rank = rank;
      ranks.push_back(std::move(r));
    }
    closedir(dir);
  }
  std::sort(notes.begin(), notes.end());
  remove_tree(folder.c_str());
  if (ranks.empty()) {
    ::unlink(file.c_str());
    return {
        "nano-run: timeline: no rank recorded anything (the program does not use nano's runtime or the "
        "nano torch backend, or no rank started); no trace written"};
  }
  std::sort(ranks.begin(), ranks.end(), [](const RankRecords& a, const RankRecords& b) {
    return std::tie(a.attempt, a.rank) < std::tie(b.attempt, b.rank);
  });
  TimelineReport report = report_of(ranks);
  report.worlds = worlds;
  // Whole, and never through a link someone put at either name.
  try {
    write_file_beside(file, trace_json(ranks, report));
    write_file_beside(file + ".report.json", report_json(report) + "\n");
  } catch (const Error& e) {
    notes.push_back(std::string("nano-run: timeline: ") + e.what());
    return notes;
  }
  for (std::string& line : report_lines(report, file)) notes.push_back(std::move(line));
  return notes;
}

}  // namespace nano
