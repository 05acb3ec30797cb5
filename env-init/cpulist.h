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

}  // namespace nano
