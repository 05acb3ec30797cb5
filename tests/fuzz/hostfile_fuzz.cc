// The machines of a multi-host run (launcher/prepare/hosts.h) from any text: `--hosts` lists and Open MPI
// hostfiles. What parses is checked as the launch uses it: hosts named once each with at least
// one slot, a list that nano-run hands to mpirun (format_hosts) and that parses back the same,
// and the rank groups over it.
//
// Input: a byte that picks the parser (even: parse_hosts, odd: parse_hostfile), then the text.
#include <set>

#include <nano/error.h>
#include "launcher/prepare/hosts.h"
#include "tests/fuzz/fuzz_target.h"

using namespace nano;

namespace {

bool same(const std::vector<HostSlots>& a, const std::vector<HostSlots>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].host != b[i].host || a[i].slots != b[i].slots) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<HostSlots> hosts;
  try {
    hosts = data[0] & 1 ? parse_hostfile(text, "fuzz.hosts") : parse_hosts(text);
  } catch (const Error& e) {
    NANO_FUZZ_CHECK(std::string(e.what()).size() > 0);
    return 0;
  }
  NANO_FUZZ_CHECK(!hosts.empty());
  std::set<std::string> names;
  long long total = 0;
  for (const HostSlots& h : hosts) {
    NANO_FUZZ_CHECK(!h.host.empty() && h.slots >= 1);
    NANO_FUZZ_CHECK(names.insert(h.host).second);
    total += h.slots;
  }
  NANO_FUZZ_CHECK(total == total_slots(hosts));
  // mpirun gets format_hosts' list: it must say the same hosts and slots.
  NANO_FUZZ_CHECK(same(parse_hosts(format_hosts(hosts)), hosts));
  const std::vector<HostSlots> ordered = in_open_mpi_order(hosts, hosts.back().host);
  NANO_FUZZ_CHECK(ordered.size() == hosts.size() && ordered.front().host == hosts.back().host);
  const int ranks = static_cast<int>(total);
  const std::vector<int> starts = group_starts(hosts, ranks);
  NANO_FUZZ_CHECK(starts.size() == hosts.size() && starts.front() == 0);
  NANO_FUZZ_CHECK(group_of_rank(starts, ranks - 1) == static_cast<int>(hosts.size()) - 1);
  return 0;
}

std::vector<std::string> nano_fuzz_seeds() {
  return {
      std::string(1, '\x00') + "node1:4,node2:4",
      std::string(1, '\x00') + "a,b:2,a:3,10.0.0.7:1",
      std::string(1, '\x01') + "# cluster\nnode1 slots=4 max_slots=8\n\n  node2 slots=2 # two\nnode3\nnode1 cpu=2\n",
      std::string(1, '\x01') + "host-a.example count=16\r\nhost_b max-slots=4 slots=2\n",
  };
}
