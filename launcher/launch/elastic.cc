#include "launcher/launch/elastic.h"

#include <algorithm>

#include "launcher/prepare/launch_setup.h"

namespace nano {
namespace {

std::string plural(int n, const std::string& one) { return std::to_string(n) + " " + one + (n == 1 ? "" : "s"); }

}  // namespace

std::vector<HostStanding> elastic_standing(const std::vector<HostSlots>& hosts, const std::string& this_host) {
  std::vector<HostStanding> standing;
  for (const HostSlots& h : hosts) standing.push_back({h, 0, false, is_launch_host(h.host, this_host)});
  return standing;
}

std::vector<std::string> hosts_to_ask(const std::vector<HostStanding>& standing, bool rejoin) {
  std::vector<std::string> ask;
  for (const HostStanding& s : standing)
    if (!s.launch_host && (!s.left || rejoin)) ask.push_back(s.host.host);
  return ask;
}

NextWorld judge_hosts(std::vector<HostStanding>& standing, const std::vector<std::string>& world,
                      const ElasticPolicy& policy, const AttemptVerdict& verdict, const std::set<std::string>& asked) {
  NextWorld next;
  std::vector<std::string> whys;    // of the hosts out of the next world
  std::vector<size_t> sitting_out;  // lines of silent hosts that have not left
  for (HostStanding& s : standing) {
    const std::string& name = s.host.host;
    const bool in_world = std::find(world.begin(), world.end(), name) != world.end();
    const bool silent = verdict.silent.count(name) > 0;
    std::string lost_why;
    for (const LostHost& l : verdict.lost)
      if (l.host == name) lost_why = l.why;
    if (s.left) {
      if (policy.rejoin && asked.count(name) && !silent) {
        s.left = false;
        s.lost_in_a_row = 0;
        next.lines.push_back("nano-run: " + name + " answers again: it rejoins the world");
        next.why += (next.why.empty() ? "" : "; ") + name + " answers again";
      }
    } else if (!s.launch_host) {
      std::string why = lost_why;
      if (silent) why += (why.empty() ? "" : "; ") + std::string("it does not answer");
      if (!why.empty() && (in_world || silent)) {
        ++s.lost_in_a_row;
        if (s.lost_in_a_row >= policy.lost_after) {
          s.left = true;
          whys.push_back(name + " lost (" + why + ")");
          next.lines.push_back("nano-run: " + name + " lost (" + why + "), in " + plural(s.lost_in_a_row, "attempt") +
                               " in a row: it leaves the world");
        } else if (silent) {
          whys.push_back(name + " lost (" + why + ")");
          sitting_out.push_back(next.lines.size());
          next.lines.push_back("nano-run: " + name + " lost (" + why + ")");
        } else {
          next.lines.push_back("nano-run: " + name + " lost (" + why + "), in " + plural(s.lost_in_a_row, "attempt") +
                               " in a row of " + std::to_string(policy.lost_after) +
                               ": the next attempt tries it again");
        }
      } else {
        s.lost_in_a_row = 0;
        if (!in_world && asked.count(name)) {  // it sat out an attempt for not answering; now it does
          next.lines.push_back("nano-run: " + name + " answers again: back in the world");
          next.why += (next.why.empty() ? "" : "; ") + name + " answers again";
        }
      }
    }
    if (!s.left && !silent) next.hosts.push_back(s.host);
  }
  for (const std::string& w : whys) next.why += (next.why.empty() ? "" : "; ") + w;
  std::vector<std::string> names;
  for (const HostSlots& h : next.hosts) names.push_back(h.host);
  next.changed = names != world;
  next.enough = static_cast<int>(next.hosts.size()) >= policy.min_hosts;
  if (next.enough)
    for (size_t line : sitting_out) next.lines[line] += ": the next attempt runs without it";
  if (next.changed && next.enough) {
    next.lines.push_back("nano-run: going on with " + plural(static_cast<int>(next.hosts.size()), "host") + ", " +
                         plural(total_slots(next.hosts), "rank") + " (" + format_hosts(next.hosts) + ")");
  }
  return next;
}

std::string describe_world(const WorldChange& world) {
  std::string hosts;
  for (const std::string& h : world.hosts) hosts += (hosts.empty() ? "" : ",") + h;
  return hosts + " (" + plural(world.ranks, "rank") + ")";
}

}  // namespace nano
