#include "core/cpulist.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <climits>

#include <nano/error.h>

namespace nano {
namespace {

[[noreturn]] void malformed(const std::string& text) { throw UsageError("malformed CPU list \"" + text + "\""); }

// Reads a non-negative decimal number from item[pos..]; digits only, so "-1" and "+1" fail.
int read_number(const std::string& text, const std::string& item, std::size_t& pos) {
  if (pos >= item.size() || !std::isdigit(static_cast<unsigned char>(item[pos]))) malformed(text);
  long value = 0;
  while (pos < item.size() && std::isdigit(static_cast<unsigned char>(item[pos]))) {
    value = value * 10 + (item[pos] - '0');
    if (value > INT_MAX / 2) malformed(text);  // no machine has that many CPUs
    ++pos;
  }
  return static_cast<int>(value);
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  // Whitespace around the whole list is forgiven (shell quoting leaves it); inside it is not.
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) throw UsageError("empty CPU list \"" + text + "\"");
  const auto last = text.find_last_not_of(" \t\n");
  const std::string body = text.substr(first, last - first + 1);

  std::vector<int> cpus;
  std::size_t start = 0;
  while (true) {
    const auto comma = body.find(',', start);
    const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::size_t pos = 0;
    const int low = read_number(text, item, pos);
    int high = low;
    if (pos < item.size()) {
      if (item[pos] != '-') malformed(text);
      ++pos;
      high = read_number(text, item, pos);
      if (pos != item.size() || high < low) malformed(text);
    }
    for (int cpu = low; cpu <= high; ++cpu) cpus.push_back(cpu);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<std::vector<int>> parse_cpu_lists(const std::string& text) {
  std::vector<std::string> texts;
  std::size_t start = 0;
  while (true) {
    const auto semi = text.find(';', start);
    texts.push_back(text.substr(start, semi == std::string::npos ? std::string::npos : semi - start));
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
  if (texts.size() > 1 && texts.back().find_first_not_of(" \t") == std::string::npos) texts.pop_back();
  std::vector<std::vector<int>> lists;
  for (std::size_t rank = 0; rank < texts.size(); ++rank) {
    if (texts[rank].find_first_not_of(" \t") == std::string::npos)
      throw UsageError("the CPU list of rank " + std::to_string(rank) + " is empty");
    lists.push_back(parse_cpu_list(texts[rank]));
  }
  return lists;
}

std::string format_cpu_lists(const std::vector<std::vector<int>>& lists) {
  std::string out;
  for (std::size_t r = 0; r < lists.size(); ++r) out += (r ? ";" : "") + format_cpu_list(lists[r]);
  return out;
}

std::vector<int> allowed_cpus_of_this_process() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

}  // namespace nano
