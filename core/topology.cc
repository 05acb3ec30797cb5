#include "core/topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <nano/error.h>
#include "core/cpulist.h"

namespace nano {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

std::vector<int> bitmap_to_vector(hwloc_const_bitmap_t bitmap) {
  std::vector<int> out;
  if (bitmap == nullptr) return out;
  int index = -1;
  while ((index = hwloc_bitmap_next(bitmap, index)) != -1) out.push_back(index);
  return out;
}

enum class Kind { kMachine, kXml, kSynthetic };

// The kind (cpukinds index) of efficiency cores, or -1 when the CPU is not hybrid.
// hwloc ranks kinds by efficiency, lowest first, and lower means "less performance, more
// energy-efficient"; when it could not rank them (-1), the Intel CoreType info decides.
int efficiency_kind(hwloc_topology_t t) {
  const int kinds = hwloc_cpukinds_get_nr(t, 0);
  if (kinds <= 1) return -1;
  int best = -1;
  int best_efficiency = 0;
  bool all_ranked = true;
  for (int k = 0; k < kinds; ++k) {
    int efficiency = -1;
    unsigned nr_infos = 0;
    hwloc_info_s* infos = nullptr;
    if (hwloc_cpukinds_get_info(t, k, nullptr, &efficiency, &nr_infos, &infos, 0) != 0) continue;
    if (efficiency < 0) all_ranked = false;
    if (efficiency >= 0 && (best == -1 || efficiency < best_efficiency)) {
      best = k;
      best_efficiency = efficiency;
    }
  }
  if (all_ranked && best != -1) return best;
  for (int k = 0; k < kinds; ++k) {
    int efficiency = -1;
    unsigned nr_infos = 0;
    hwloc_info_s* infos = nullptr;
    if (hwloc_cpukinds_get_info(t, k, nullptr, &efficiency, &nr_infos, &infos, 0) != 0) continue;
    for (unsigned i = 0; i < nr_infos; ++i) {
      if (std::strcmp(infos[i].name, "CoreType") == 0 && std::strcmp(infos[i].value, "IntelAtom") == 0) return k;
    }
  }
  return 0;  // unranked and unnamed: hwloc's first kind is the conventional guess
}

Topology read(hwloc_topology_t t, const std::string& source, const std::string& allowed_text, const std::string& what,
              bool this_process = false) {
  Topology topo;
  topo.source = source;

  // With HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED the tree keeps every PU and the allowed
  // cpuset says which ones cgroups/taskset let this process use.
  topo.present_pus = bitmap_to_vector(hwloc_topology_get_topology_cpuset(t));
  BitmapPtr allowed(hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(t)));
  if (this_process) {
    // hwloc's allowed set reflects cgroup cpusets (docker --cpuset-cpus) but not taskset or
    // sched_setaffinity; this thread's binding (inherited from the process) covers those.
    BitmapPtr bound(hwloc_bitmap_alloc());
    if (hwloc_get_cpubind(t, bound.get(), HWLOC_CPUBIND_THREAD) == 0 && !hwloc_bitmap_iszero(bound.get()))
      hwloc_bitmap_and(allowed.get(), allowed.get(), bound.get());
  }
  if (!allowed_text.empty()) {
    std::vector<int> wanted;
    try {
      wanted = parse_cpu_list(allowed_text);
    } catch (const UsageError& e) {
      throw UsageError("allowed CPUs: " + std::string(e.what()));
    }
    BitmapPtr narrow(hwloc_bitmap_alloc());
    for (int cpu : wanted) {
      if (!std::binary_search(topo.present_pus.begin(), topo.present_pus.end(), cpu))
        throw UsageError("allowed CPUs \"" + allowed_text + "\": CPU " + std::to_string(cpu) + " does not exist on " +
                         what);
      hwloc_bitmap_set(narrow.get(), cpu);
    }
    hwloc_bitmap_and(allowed.get(), allowed.get(), narrow.get());
  }
  topo.allowed_pus = bitmap_to_vector(allowed.get());
  if (topo.allowed_pus.empty()) throw UsageError("no usable CPU on " + what);

  const int e_kind = efficiency_kind(t);
  topo.hybrid = e_kind != -1;
  BitmapPtr e_cpus(hwloc_bitmap_alloc());
  if (topo.hybrid) hwloc_cpukinds_get_info(t, e_kind, e_cpus.get(), nullptr, nullptr, nullptr, 0);

  const int numa_count = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  std::set<int> packages, numas, l3s;
  // Walk PUs in machine order and group them by core; a PU without a core object (some
  // synthetic or virtual machines) is its own core.
  std::map<hwloc_obj_t, std::size_t> core_slot;
  const int pu_count = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  for (int i = 0; i < pu_count; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, i);
    if (!hwloc_bitmap_isset(allowed.get(), pu->os_index)) continue;
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu);
    hwloc_obj_t key = core != nullptr ? core : pu;
    auto found = core_slot.find(key);
    if (found != core_slot.end()) {
      topo.cores[found->second].pus.push_back(static_cast<int>(pu->os_index));
      continue;
    }
    Core c;
    c.os_index = static_cast<int>(key->os_index);
    c.logical_index = static_cast<int>(topo.cores.size());
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu);
    c.package = package != nullptr ? static_cast<int>(package->logical_index) : 0;
    c.numa_node = 0;
    for (int n = 0; n < numa_count; ++n) {
      hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, n);
      if (hwloc_bitmap_isincluded(key->cpuset, node->cpuset)) {
        c.numa_node = static_cast<int>(node->os_index);
        break;
      }
    }
    hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_L3CACHE, pu);
    c.l3 = l3 != nullptr ? static_cast<int>(l3->logical_index) : c.package;
    c.efficiency = topo.hybrid && hwloc_bitmap_isset(e_cpus.get(), pu->os_index);
    c.pus.push_back(static_cast<int>(pu->os_index));
    packages.insert(c.package);
    numas.insert(c.numa_node);
    l3s.insert(c.l3);
    core_slot.emplace(key, topo.cores.size());
    topo.cores.push_back(std::move(c));
  }
  for (Core& c : topo.cores) std::sort(c.pus.begin(), c.pus.end());
  topo.packages = static_cast<int>(packages.size());
  topo.numa_nodes.assign(numas.begin(), numas.end());
  topo.l3_domains = static_cast<int>(l3s.size());
  // A hybrid machine whose allowed set holds only one kind plans like a plain one.
  if (topo.hybrid) {
    const bool any_e = std::any_of(topo.cores.begin(), topo.cores.end(), [](const Core& c) { return c.efficiency; });
    const bool any_p = std::any_of(topo.cores.begin(), topo.cores.end(), [](const Core& c) { return !c.efficiency; });
    topo.hybrid = any_e && any_p;
  }
  return topo;
}

// nano never looks at I/O devices, yet hwloc dlopens its plugins (OpenCL, GL, PCI) when a
// topology is initialised; with an OpenCL loader installed that alone costs ~60 ms, paid by
// nano-run and again by every MPI rank shim. hwloc reads the blacklist only while it loads its
// plugins, so it is set around hwloc_topology_init and taken out again: ranks never inherit
// it, and a user who chose plugins themselves (either variable set) keeps their choice.
class IoPluginsOff {
  static constexpr const char* kIoPlugins =
      "hwloc_opencl,hwloc_gl,hwloc_pci,hwloc_cuda,hwloc_nvml,hwloc_rsmi,hwloc_levelzero";

 public:
  IoPluginsOff()
      : active_(std::getenv("HWLOC_PLUGINS_BLACKLIST") == nullptr && std::getenv("HWLOC_COMPONENTS") == nullptr) {
    if (active_) setenv("HWLOC_PLUGINS_BLACKLIST", kIoPlugins, 1);
  }
  ~IoPluginsOff() {
    if (active_) unsetenv("HWLOC_PLUGINS_BLACKLIST");
  }
  IoPluginsOff(const IoPluginsOff&) = delete;
  IoPluginsOff& operator=(const IoPluginsOff&) = delete;

 private:
  bool active_;
};

TopologyPtr start(Kind kind, const std::string& input) {
  hwloc_topology_t raw = nullptr;
  {
    IoPluginsOff io_plugins_off;
    if (hwloc_topology_init(&raw) != 0) throw Error("hwloc: cannot initialise a topology");
  }
  TopologyPtr t(raw);
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  if (kind == Kind::kXml) {
    if (hwloc_topology_set_xml(raw, input.c_str()) != 0)
      throw UsageError("cannot read hwloc XML topology \"" + input + "\"");
  } else if (kind == Kind::kSynthetic) {
    if (hwloc_topology_set_synthetic(raw, input.c_str()) != 0)
      throw UsageError("invalid hwloc synthetic topology \"" + input + "\"");
  }
  if (hwloc_topology_load(raw) != 0) {
    if (kind == Kind::kXml) throw UsageError("cannot read hwloc XML topology \"" + input + "\"");
    if (kind == Kind::kSynthetic) throw UsageError("invalid hwloc synthetic topology \"" + input + "\"");
    throw Error("hwloc: cannot read this machine's topology");
  }
  return t;
}

}  // namespace

int Topology::smt() const {
  std::size_t most = 0;
  for (const Core& c : cores) most = std::max(most, c.pus.size());
  return static_cast<int>(most);
}

Topology load_machine_topology() {
  TopologyPtr t = start(Kind::kMachine, "");
  return read(t.get(), "this machine", "", "this machine", true);
}

Topology load_xml_topology(const std::string& path, const std::string& allowed) {
  TopologyPtr t = start(Kind::kXml, path);
  return read(t.get(), "xml: " + path, allowed, "the machine in \"" + path + "\"");
}

Topology load_synthetic_topology(const std::string& description, const std::string& allowed) {
  TopologyPtr t = start(Kind::kSynthetic, description);
  return read(t.get(), "synthetic: " + description, allowed, "the synthetic machine \"" + description + "\"");
}

std::string describe_topology(const Topology& topo) {
  std::ostringstream out;
  std::size_t allowed_in_cores = 0;
  for (const Core& c : topo.cores) allowed_in_cores += c.pus.size();
  std::size_t e_cores = 0;
  for (const Core& c : topo.cores) e_cores += c.efficiency ? 1 : 0;
  out << "machine:      " << topo.source << '\n';
  out << "packages:     " << topo.packages << '\n';
  out << "NUMA nodes:   " << topo.numa_nodes.size() << " (" << format_cpu_list(topo.numa_nodes) << ")\n";
  out << "L3 domains:   " << topo.l3_domains << '\n';
  out << "cores:        " << topo.cores.size() << " usable physical cores\n";
  out << "SMT:          "
      << (topo.smt() > 1 ? std::to_string(topo.smt()) + " threads per core" : std::string("off (1 thread per core)"))
      << '\n';
  out << "present CPUs: " << format_cpu_list(topo.present_pus) << " (" << topo.present_pus.size() << ")\n";
  out << "allowed CPUs: " << format_cpu_list(topo.allowed_pus) << " (" << topo.allowed_pus.size() << ")\n";
  if (topo.hybrid)
    out << "core kinds:   hybrid: " << topo.cores.size() - e_cores << " performance, " << e_cores << " efficiency\n";
  else
    out << "core kinds:   1 (not hybrid)\n";
  // Per NUMA node: which cores and PUs, so a plan can be checked by eye.
  for (int node : topo.numa_nodes) {
    std::vector<int> pus;
    std::set<int> pkgs;
    std::size_t count = 0;
    for (const Core& c : topo.cores) {
      if (c.numa_node != node) continue;
      ++count;
      pkgs.insert(c.package);
      pus.insert(pus.end(), c.pus.begin(), c.pus.end());
    }
    out << "  NUMA node " << node << ": package " << format_cpu_list(std::vector<int>(pkgs.begin(), pkgs.end())) << ", "
        << count << " cores, CPUs " << format_cpu_list(pus) << '\n';
  }
  return out.str();
}

}  // namespace nano
