#include "launcher/prepare/hosts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nano/error.h>
#include "core/setting.h"

namespace nano {
namespace {

bool parse_positive(const std::string& text, int& out) {
  if (text.empty() || text.size() > 6) return false;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value <= 0) return false;
  out = value;
  return true;
}

// No ':' either: nano-run hands the hosts to mpirun as "host:slots" (format_hosts), where a
// hostfile's "node1:4" (1 slot) would read as 4 slots of node1, and an IPv6 address as nothing.
bool valid_host_name(const std::string& host) {
  if (host.empty()) return false;
  for (char c : host) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// The most slots a list may give in all (an entry's own bound, six digits): so that no sum over
// the hosts overflows an int, however often a host is listed.
constexpr int kMaxTotalSlots = 999999;

// Adds `slots` of `host` (to its earlier slots when listed already) and counts them in `total`;
// false when the list's slots would exceed kMaxTotalSlots.
bool add_host(std::vector<HostSlots>& hosts, const std::string& host, int slots, int& total) {
  if (total > kMaxTotalSlots - slots) return false;
  total += slots;
  for (auto& h : hosts) {
    if (h.host == host) {
      h.slots += slots;
      return true;
    }
  }
  hosts.push_back({host, slots});
  return true;
}

std::string too_many_slots() { return ": more than " + std::to_string(kMaxTotalSlots) + " slots in all"; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::vector<HostSlots> parse_hosts(const std::string& text) {
  std::vector<HostSlots> hosts;
  int total = 0;
  if (trim(text).empty())
    throw SettingError(Setting::kHosts, text, "invalid value '' for {hosts}: expected host:slots,...");
  std::stringstream in(text);
  std::string entry;
  while (std::getline(in, entry, ',')) {
    auto colon = entry.rfind(':');
    std::string host = colon == std::string::npos ? entry : entry.substr(0, colon);
    int slots = 1;
    bool ok = valid_host_name(host);
    if (ok && colon != std::string::npos) ok = parse_positive(entry.substr(colon + 1), slots);
    if (!ok)
      throw SettingError(Setting::kHosts, text,
                         "invalid {hosts} entry '" + entry + "': expected host:slots with slots >= 1");
    if (!add_host(hosts, host, slots, total))
      throw SettingError(Setting::kHosts, text, "invalid {hosts} entry '" + entry + "'" + too_many_slots());
  }
  if (!text.empty() && text.back() == ',')
    throw SettingError(Setting::kHosts, text, "invalid {hosts} entry '': expected host:slots with slots >= 1");
  return hosts;
}

std::vector<HostSlots> parse_hostfile(const std::string& contents, const std::string& name) {
  std::vector<HostSlots> hosts;
  int total = 0;
  std::stringstream in(contents);
  std::string raw;
  int line_number = 0;
  while (std::getline(in, raw)) {
    ++line_number;
    std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    std::stringstream words(line);
    std::string host, word;
    words >> host;
    int slots = 1;
    bool ok = valid_host_name(host);
    while (ok && words >> word) {
      auto eq = word.find('=');
      std::string key = word.substr(0, eq);
      std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
      if (key == "slots" || key == "cpu" || key == "count") {
        ok = parse_positive(value, slots);
      } else if (key == "max_slots" || key == "max-slots") {
        int ignored = 0;
        ok = parse_positive(value, ignored);
      } else {
        ok = false;
      }
    }
    const std::string where = "hostfile " + name + " line " + std::to_string(line_number) + ": '" + trim(raw) + "'";
    if (!ok) throw UsageError("malformed " + where);
    if (!add_host(hosts, host, slots, total)) throw UsageError(where + too_many_slots());
  }
  if (hosts.empty()) throw UsageError("hostfile " + name + " lists no hosts");
  return hosts;
}

std::vector<HostSlots> read_hostfile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    int err = errno;
    throw UsageError("cannot read hostfile " + path + ": " + std::strerror(err));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  if (file.bad()) throw UsageError("cannot read hostfile " + path);
  return parse_hostfile(contents.str(), path);
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int total = 0;
  for (const auto& h : hosts) total += h.slots;
  return total;
}

std::vector<int> group_starts(const std::vector<HostSlots>& hosts, int num_processes) {
  std::vector<int> starts;
  int next = 0;
  for (const auto& h : hosts) {
    if (next >= num_processes) break;
    starts.push_back(next);
    next += h.slots;
  }
  if (starts.empty()) starts.push_back(0);
  return starts;
}

int group_of_rank(const std::vector<int>& starts, int rank) {
  int group = 0;
  for (size_t i = 0; i < starts.size(); ++i)
    if (starts[i] <= rank) group = static_cast<int>(i);
  return group;
}

std::vector<HostSlots> in_open_mpi_order(std::vector<HostSlots> hosts, const std::string& this_host) {
  auto mine = std::find_if(hosts.begin(), hosts.end(), [&](const HostSlots& h) { return h.host == this_host; });
  if (mine != hosts.end()) std::rotate(hosts.begin(), mine, mine + 1);
  return hosts;
}

std::string format_hosts(const std::vector<HostSlots>& hosts) {
  std::string list;
  for (const auto& h : hosts) list += (list.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
  return list;
}

std::vector<std::string> ipv4_addresses_of(const std::string& host) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof text);
    if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  freeaddrinfo(found);
  return out;
}

std::vector<std::string> local_ipv4_addresses() {
  std::vector<std::string> out;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return out;
  for (const ifaddrs* i = all; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
      continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  freeifaddrs(all);
  return out;
}

std::vector<std::string> admitted_sources(const std::vector<std::string>& local,
                                          const std::vector<std::vector<std::string>>& per_host) {
  std::vector<std::string> out{"127.0.0.1"};
  const auto add = [&](const std::vector<std::string>& addresses) {
    for (const auto& a : addresses)
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  };
  add(local);
  for (const auto& host : per_host) add(host);
  return out;
}

}  // namespace nano
