#pragma once
// An elastic launch's judgement of its hosts between attempts (LaunchOptions::min_hosts): after
// a failed attempt, which hosts are lost, which leave the world for good, which come back
// (LaunchOptions::rejoin), and whether enough are left to go on. Pure, so every rule is a row of
// a table test (tests/launcher/launch/elastic_test.cc); launch() feeds it what the attempt
// (LaunchResult::lost_hosts) and the probe after it (launcher/launch/host_probe.h) told, and
// plans the next world on the hosts it returns (prepare_on_hosts).
#include <set>
#include <string>
#include <vector>

#include "launcher/prepare/hosts.h"
#include "launcher/prepare/launch_types.h"

namespace nano {

/// One host of an elastic launch, as the launcher keeps it between attempts.
struct HostStanding {
  HostSlots host;
  int lost_in_a_row = 0;     ///< attempts in a row it was lost in (or did not answer after)
  bool left = false;         ///< judged gone: out of the world (until it rejoins, with rejoin)
  bool launch_host = false;  ///< nano-run runs there: never lost while nano-run runs
};

/// The settings the judgement follows (from LaunchOptions).
struct ElasticPolicy {
  int min_hosts = 0;
  int lost_after = 2;
  bool rejoin = false;
};

/// What a failed attempt and the probe after it told.
struct AttemptVerdict {
  std::vector<LostHost> lost;    ///< the attempt's lost hosts (LaunchResult::lost_hosts)
  std::set<std::string> silent;  ///< hosts that did not answer the probe after it
};

/// The judgement: the next attempt's hosts, or too few to go on.
struct NextWorld {
  bool enough = true;              ///< false: fewer than min_hosts would be left; the launch ends
  bool changed = false;            ///< the hosts differ from the attempt's
  std::vector<HostSlots> hosts;    ///< the next attempt's, in the launch's order
  std::string why;                 ///< what changed ("hostC lost (...)"); WorldChange::why
  std::vector<std::string> lines;  ///< what nano-run says about it, one line per host judged
};

/// Pure: the standing of `hosts` (the launch's, in order) before the first attempt.
std::vector<HostStanding> elastic_standing(const std::vector<HostSlots>& hosts, const std::string& this_host);

/// Pure: judges every host after a failed attempt that ran on `world` (host names) and updates
/// `standing`. A host of the world, or one out for not answering, is lost in this attempt when
/// the verdict names it lost or silent, and leaves the world once lost in policy.lost_after
/// attempts in a row (a host that answers resets its count); a silent host that has not left yet
/// sits out the next attempt (its ranks could not start), and is back in the one after it answers
/// again. With policy.rejoin, a host that left and answers (is in `asked` and not silent) comes
/// back too. The next world is every host that has
/// not left and answers, in the launch's order; `enough` is false when that is fewer than
/// policy.min_hosts hosts, and then `why` names every host out and why.
NextWorld judge_hosts(std::vector<HostStanding>& standing, const std::vector<std::string>& world,
                      const ElasticPolicy& policy, const AttemptVerdict& verdict, const std::set<std::string>& asked);

/// Pure: the hosts to probe after an attempt: every host that has not left, but the launching
/// host, and with `rejoin` those that left too.
std::vector<std::string> hosts_to_ask(const std::vector<HostStanding>& standing, bool rejoin);

/// Pure: "hostA,hostB (2 ranks)" for the final report's account of the worlds.
std::string describe_world(const WorldChange& world);

}  // namespace nano
