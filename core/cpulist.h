#pragma once
// CPU lists in the Linux text form ("0-3,8,10-11"), as used by taskset, cgroups and NANO_CPUS.
#include <string>
#include <vector>

namespace nano {

/// Parses "0-3,8" into sorted, unique OS indexes. Throws UsageError naming `text` when it is
/// empty, malformed ("3-1", "a", "1,,2") or negative.
std::vector<int> parse_cpu_list(const std::string& text);

/// Formats sorted or unsorted OS indexes in the shortest range form ("0-3,8"); "" for none.
std::string format_cpu_list(std::vector<int> cpus);

/// Parses one CPU list per rank, separated by ';' ("0-3;4-7"), as nano-run's and nano-init's
/// --cpu-for-each-process take them. A trailing ';' ("0-3;4-7;") is a common shell slip, not a
/// request for an empty rank, and is forgiven. Throws UsageError for an empty rank's list
/// ("the CPU list of rank 1 is empty") or a malformed one (parse_cpu_list's text).
std::vector<std::vector<int>> parse_cpu_lists(const std::string& text);

/// The inverse: "0-3;4-7".
std::string format_cpu_lists(const std::vector<std::vector<int>>& lists);

/// The CPUs this process may run on (sched_getaffinity), sorted; empty when they cannot be read.
std::vector<int> allowed_cpus_of_this_process();

}  // namespace nano
