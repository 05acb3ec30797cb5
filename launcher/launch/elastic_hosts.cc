#include "launcher/launch/elastic_hosts.h"

#include <algorithm>
#include <set>

#include <nano/error.h>
#include "launcher/prepare/port.h"
#include "launcher/process/timeouts.h"

namespace nano {
namespace {

std::vector<std::string> host_names(const std::vector<HostSlots>& hosts) {
  std::vector<std::string> names;
  for (const HostSlots& h : hosts) names.push_back(h.host);
  return names;
}

WorldChange world_of(const Setup& s, int attempt, const std::string& why) {
  return {attempt, host_names(s.hosts), s.world_size, why};
}

// "hostA,hostB (2 ranks)", and why the world became it when told.
std::string told(const WorldChange& w, bool with_why) {
  return describe_world(w) + (with_why && !w.why.empty() ? " after " + w.why : "");
}

}  // namespace

ElasticHosts::ElasticHosts(const Setup& s)
    : on_(s.options.min_hosts > 0),
      policy_{s.options.min_hosts, s.options.host_lost_after, s.options.rejoin},
      // Hosts nobody named come from a Slurm allocation: Slurm knows which of its nodes are down.
      way_(s.options.hosts.empty() && s.options.hostfile.empty() ? ProbeWay::kSlurm : ProbeWay::kLaunchAgent),
      standing_(on_ ? elastic_standing(s.hosts, host_name()) : std::vector<HostStanding>{}) {
  if (on_) worlds_.push_back(world_of(s, 0, ""));
}

ElasticHosts::~ElasticHosts() { unwatch(); }

void ElasticHosts::watch(Setup& s, int restarts) {
  const std::vector<std::string> world = host_names(s.hosts);
  std::vector<std::string> left;  // the hosts out of this world: left, or sitting out
  for (const HostStanding& h : standing_)
    if (!h.launch_host && std::find(world.begin(), world.end(), h.host.host) == world.end())
      left.push_back(h.host.host);
  if (!on_ || !policy_.rejoin || left.empty() || restarts >= s.options.max_restarts) return;
  answered_ = false;
  stop_ = false;
  watcher_ = std::thread([this, left] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, kRejoinAskEvery, [this] { return stop_; })) {
      lock.unlock();
      const std::set<std::string> silent = hosts_not_answering(way_, left, current_environment());
      lock.lock();
      if (silent.size() < left.size()) {
        answered_ = true;
        return;
      }
    }
  });
  s.options.stop_at_checkpoint_when = [this] { return answered_.load(); };
}

void ElasticHosts::unwatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

std::optional<Setup> ElasticHosts::judge(const Setup& s, int restarts, LaunchResult& result, OutputRouter& router,
                                         bool* ended) {
  *ended = false;
  const std::vector<std::string> ask = hosts_to_ask(standing_, policy_.rejoin);
  AttemptVerdict verdict{result.lost_hosts, hosts_not_answering(way_, ask, current_environment())};
  const NextWorld next = judge_hosts(standing_, host_names(s.hosts), policy_, verdict, {ask.begin(), ask.end()});
  for (const std::string& line : next.lines) router.note(line);
  if (!next.enough) {
    const std::string left = std::to_string(next.hosts.size()) + " host" + (next.hosts.size() == 1 ? "" : "s") +
                             " left, fewer than " + names_of(s.options.front_end)(Setting::kMinHosts) + " " +
                             std::to_string(policy_.min_hosts);
    *ended = true;
    if (result.failure && result.failure->rank >= 0 && result.failure->lost.empty() && result.lost_hosts.empty() &&
        !result.stopped_at_checkpoint) {
      // A rank failed on its own (not with its host, not mpirun): that stays the root cause and code.
      router.note("nano-run: no restart: " + next.why + ": " + left + "; nano-run exits with " +
                  std::to_string(result.exit_code));
      return std::nullopt;
    }
    router.note("nano-run: root cause: " + next.why + ": " + left + "; nano-run exits with " +
                std::to_string(kLostHostExitCode));
    result.exit_code = kLostHostExitCode;
    if (result.failure) result.failure->lost = next.why;
    return std::nullopt;
  }
  if (!next.changed) return std::nullopt;
  try {
    Setup planned = prepare_on_hosts(s, next.hosts, restarts + 1);
    worlds_.push_back(world_of(planned, restarts + 1, next.why));
    return planned;
  } catch (const UsageError& e) {
    // A setting that fits no smaller world (a master address on a lost host): said, and the end.
    router.note("nano-run: no restart: the world on " + format_hosts(next.hosts) +
                " cannot be planned: " + worded_text(e.what(), names_of(s.options.front_end)) +
                "; nano-run exits with " + std::to_string(result.exit_code));
    *ended = true;
    return std::nullopt;
  }
}

std::vector<std::string> ElasticHosts::by_attempt(int attempts) const {
  std::vector<std::string> by;
  for (int a = 0; on_ && a < attempts; ++a) {
    const WorldChange* w = &worlds_.front();
    for (const WorldChange& c : worlds_)
      if (c.attempt <= a) w = &c;
    by.push_back(told(*w, w->attempt == a));
  }
  return by;
}

std::string ElasticHosts::account() const {
  if (worlds_.size() < 2) return "";
  std::string text = "nano-run: worlds:";
  for (const WorldChange& w : worlds_)
    text +=
        std::string(w.attempt == 0 ? " " : "; ") + "attempt " + std::to_string(w.attempt + 1) + ": " + told(w, true);
  return text;
}

}  // namespace nano
