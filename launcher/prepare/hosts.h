#pragma once
// The machines of a multi-host (mpi backend) run: `--hosts a:4,b:4` or an Open MPI hostfile.
#include <string>
#include <vector>

namespace nano {

/// One machine and how many ranks it runs.
struct HostSlots {
  std::string host;
  int slots = 1;
};

/// Parses `--hosts` text "host:slots,host:slots" ("host" alone means 1 slot). A host's name is
/// letters, digits, '-', '.' and '_'; a host listed twice has its slots added; at most 999999
/// slots in all. Throws SettingError naming the bad entry.
std::vector<HostSlots> parse_hosts(const std::string& text);

/// Parses the contents of an Open MPI hostfile ("node1 slots=4 max_slots=8", '#' comments,
/// blank lines). `name` is the file's path, used in error messages. Host names, repeated hosts
/// and the bound on slots as in parse_hosts. Throws UsageError naming the file, the line number
/// and the line.
std::vector<HostSlots> parse_hostfile(const std::string& contents, const std::string& name);

/// Reads and parses the hostfile at `path`. Throws UsageError when unreadable or malformed.
std::vector<HostSlots> read_hostfile(const std::string& path);

/// Pure: `hosts` in the order Open MPI fills them: the launching host (`this_host`) first when
/// it is listed (mpirun places its own node first, whatever the list's order), then the rest
/// as listed. nano's rank numbering, groups and MASTER_ADDR (rank 0's host) follow this order.
std::vector<HostSlots> in_open_mpi_order(std::vector<HostSlots> hosts, const std::string& this_host);

/// "host:slots,host:slots" (parse_hosts' syntax, and Open MPI's --host).
std::string format_hosts(const std::vector<HostSlots>& hosts);

/// Sum of slots over all hosts.
int total_slots(const std::vector<HostSlots>& hosts);

/// The first global rank on each host when ranks fill hosts in order ("--map-by slot"):
/// {0, slots0, slots0+slots1, ...} limited to hosts that get at least one of `num_processes`.
std::vector<int> group_starts(const std::vector<HostSlots>& hosts, int num_processes);

/// The group (host index) of `rank` given `group_starts`.
int group_of_rank(const std::vector<int>& starts, int rank);

/// The IPv4 addresses `host` resolves to here (dotted, in the resolver's order, each once);
/// empty when it does not resolve.
std::vector<std::string> ipv4_addresses_of(const std::string& host);

/// This host's IPv4 addresses on interfaces that are up, loopback ones left out.
std::vector<std::string> local_ipv4_addresses();

/// Pure: the sources the listeners of a job over several hosts admit (launcher/listen_guard/listen_guard.c):
/// 127.0.0.1 (this host's own connections to a loopback address come from it), the launching
/// host's own addresses, then every host's addresses, each once, in that order.
std::vector<std::string> admitted_sources(const std::vector<std::string>& local,
                                          const std::vector<std::vector<std::string>>& per_host);

}  // namespace nano
