#include "launcher/supervise/root_cause.h"

#include <algorithm>
#include <regex>

#include "launcher/process/signals.h"

namespace nano {

std::string describe_end(int exit_code, int signal) {
  if (signal != 0) return "was killed by " + signal_name(signal);
  return "exited with code " + std::to_string(exit_code);
}

std::string describe_lost(int rank, const std::vector<std::string>& hosts, const std::vector<std::string>& lost,
                          const std::string& this_host) {
  const std::string& host = hosts[static_cast<size_t>(rank)];
  if (host == this_host) {
    return "rank " + std::to_string(rank) + "'s shim on " + host + " ended without the rank's status (" +
           lost[static_cast<size_t>(rank)] + ")";
  }
  std::string there;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (hosts[r] == host) there += (there.empty() ? "" : ",") + std::to_string(r);
  }
  return "host " + host + " lost (rank" + (there.find(',') == std::string::npos ? " " : "s ") + there +
         " there; rank " + std::to_string(rank) + ": " + lost[static_cast<size_t>(rank)] + ")";
}

std::string describe_raised(const RaisedError& raised) {
  constexpr size_t kLongest = 200;
  std::string text = raised.message.substr(0, raised.message.find('\n'));
  bool cut = text.size() < raised.message.size();
  if (text.size() > kLongest) {
    text.resize(kLongest);
    cut = true;
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.pop_back();
  if (cut) text += " [...]";
  if (!raised.where.empty()) text += " (at " + raised.where + ")";
  return text;
}

std::string describe_leaver(int waiter, const std::vector<std::string>& stderr_tail,
                            const std::vector<std::string>& ends, int rank_offset) {
  // The runtime's words (runtime/collectives/shm_collectives.cc), the last such line of the tail.
  static const std::regex left(
      R"(nano: rank (\d+) \(pid \d+\) (?:exited|left the world \(its communicator was destroyed\)) )"
      R"((after its collective #\d+|before its first collective) while this rank waited in (.+ #\d+))");
  std::smatch m;
  for (auto line = stderr_tail.rbegin(); line != stderr_tail.rend(); ++line) {
    if (!std::regex_search(*line, m, left)) continue;
    const int leaver = std::stoi(m[1].str());
    const std::size_t local = static_cast<std::size_t>(leaver - rank_offset);
    const std::string how = leaver >= rank_offset && local < ends.size() && !ends[local].empty() ? ends[local] : "left";
    const std::string who = "rank " + std::to_string(leaver), other = "rank " + std::to_string(waiter);
    return who + " " + how + " " + m[2].str() + " while " + other + " waited in " + m[3].str() + ": " + who +
           " left early, or " + other + " called one collective more";
  }
  return "";
}

std::vector<LostHost> hosts_lost(const EndFacts& facts) {
  std::vector<LostHost> lost;
  if (!facts.root_cause) return lost;
  const auto add = [&](const std::string& host, const std::string& why) {
    if (host == facts.this_host) return;  // nano-run's own host is not lost while nano-run runs
    for (const LostHost& l : lost)
      if (l.host == host) return;
    lost.push_back({host, why});
  };
  const int root = facts.root_cause->rank;
  const bool root_lost = root >= 0 && !facts.lost[static_cast<size_t>(root)].empty();
  if (root_lost) add(facts.hosts[static_cast<size_t>(root)], facts.lost[static_cast<size_t>(root)]);
  if (root >= 0 && !root_lost) return lost;  // a rank failed on its own: its host is there
  // No shim started anywhere: mpirun failed as a whole, which names no host (the launch agent's
  // probe after the attempt tells which hosts do not answer).
  if (std::find(facts.started.begin(), facts.started.end(), true) == facts.started.end()) return lost;
  for (size_t r = 0; r < facts.started.size(); ++r) {
    bool any_started = false;
    for (size_t other = 0; other < facts.started.size(); ++other)
      any_started = any_started || (facts.hosts[other] == facts.hosts[r] && facts.started[other]);
    if (!any_started) add(facts.hosts[r], "its shims did not start");
  }
  return lost;
}

EndReport report_end(const EndFacts& facts) {
  EndReport report;
  // Only the attempt that ends nano-run says what nano-run exits with.
  const std::string ending = !facts.restart_follows ? "; nano-run exits with " + std::to_string(facts.exit_code)
                             : facts.elastic        ? "; a restart follows if enough hosts answer"
                                                    : "; a restart follows";
  if (const auto& rc = facts.root_cause) {
    RankFailure f;
    f.rank = rc->rank >= 0 ? rc->rank + facts.rank_offset : rc->rank;
    f.exit_code = rc->exit_code;
    f.signal = rc->signal;
    f.host = rc->rank >= 0 ? facts.hosts[static_cast<size_t>(rc->rank)] : facts.this_host;
    std::string tail;
    for (const auto& line : facts.stderr_tail) tail += line + "\n";
    f.stderr_tail = tail;
    std::string who = rc->rank >= 0 ? "rank " + std::to_string(rc->rank + facts.rank_offset) : std::string("mpirun");
    if (rc->rank >= 0 && !facts.lost[static_cast<size_t>(rc->rank)].empty()) {
      f.lost = facts.lost[static_cast<size_t>(rc->rank)];
      report.lines.push_back(
          "nano-run: root cause: " + describe_lost(rc->rank, facts.hosts, facts.lost, facts.this_host) + ending);
    } else {
      report.lines.push_back("nano-run: root cause: " + who + " on " + f.host + " " +
                             describe_end(rc->exit_code, rc->signal) + ending);
    }
    if (rc->rank >= 0) {
      const std::string leaver =
          describe_leaver(rc->rank + facts.rank_offset, facts.stderr_tail, facts.ends, facts.rank_offset);
      if (!leaver.empty()) report.lines.push_back("nano-run: " + leaver);
    }
    if (rc->rank >= 0 && !facts.error_file.empty()) {
      if (auto raised = parse_error_file(facts.error_file)) {
        f.raised = describe_raised(*raised);
        report.lines.push_back("nano-run: " + who + " raised " + f.raised);
      }
    }
    if (!tail.empty()) {
      report.lines.push_back("nano-run: last stderr lines of " + who + ":");
      for (const auto& line : facts.stderr_tail) report.lines.push_back("  | " + line);
    }
    report.failure = f;
  } else if (facts.interrupted_by != 0) {
    report.lines.push_back("nano-run: stopped by " + signal_name(facts.interrupted_by) + "; exit " +
                           std::to_string(facts.exit_code));
  }
  return report;
}

}  // namespace nano
