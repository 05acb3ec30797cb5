// Writes hybrid.xml: a hybrid CPU like an Alder Lake i7-12700 (8 performance cores with SMT,
// PUs 0-15; 4 efficiency cores without SMT, PUs 16,18,20,22) with hwloc cpukinds attached.
// Run once; its output is committed. Build: g++ make_hybrid_xml.cc -lhwloc
#include <hwloc.h>

#include <cstdio>

int main(int argc, char** argv) {
  const char* out = argc > 1 ? argv[1] : "hybrid.xml";
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_set_synthetic(t, "pack:1 l3:1 core:12 pu:2");
  if (hwloc_topology_load(t) != 0) return 1;
  // The efficiency cores have a single hardware thread: drop the second PU of cores 8-11.
  hwloc_bitmap_t keep = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(keep, 0, 23);
  for (int pu = 17; pu <= 23; pu += 2) hwloc_bitmap_clr(keep, pu);
  if (hwloc_topology_restrict(t, keep, 0) != 0) return 1;

  hwloc_bitmap_t p = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(p, 0, 15);
  hwloc_bitmap_t e = hwloc_bitmap_alloc();
  for (int pu = 16; pu <= 22; pu += 2) hwloc_bitmap_set(e, pu);
  char core_type[] = "CoreType", intel_core[] = "IntelCore", intel_atom[] = "IntelAtom";
  hwloc_info_s p_info{core_type, intel_core};
  hwloc_info_s e_info{core_type, intel_atom};
  if (hwloc_cpukinds_register(t, e, 0, 1, &e_info, 0) != 0) return 1;
  if (hwloc_cpukinds_register(t, p, 1, 1, &p_info, 0) != 0) return 1;
  if (hwloc_topology_export_xml(t, out, 0) != 0) return 1;
  std::printf("wrote %s\n", out);
  hwloc_bitmap_free(keep);
  hwloc_bitmap_free(p);
  hwloc_bitmap_free(e);
  hwloc_topology_destroy(t);
  return 0;
}
