// hwloc path of discovery (built when the build defines HOCCL_HAVE_HWLOC):
// packages, cores, PUs and NUMA nodes from hwloc, and the NUMA locality of
// network and OpenFabrics devices that sysfs could not place (numa_node -1 is
// common in VMs; hwloc derives it from the PCI bridges' local CPUs).
#include <string>

#include "src/topo/topology.h"

#ifdef HOCCL_HAVE_HWLOC
#include <hwloc.h>

#include <cstdlib>
#endif

namespace hoccl {
namespace topo {
namespace detail {

bool probeHwloc(NodeInfo* n);

#ifdef HOCCL_HAVE_HWLOC

namespace {

// The one NUMA node an object is local to, or -1 if none or several.
int numaOf(hwloc_topology_t t, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, obj);
  if (!anc || !anc->nodeset || hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

std::string listOf(hwloc_const_bitmap_t set) {
  char* s = nullptr;
  if (!set || hwloc_bitmap_list_asprintf(&s, set) < 0 || !s) return "";
  std::string out = s;
  free(s);
  return out;
}

// The machine's topology, loaded once per process and kept: the machine does
// not change, loading takes milliseconds, and destroying the last topology
// unloads hwloc's PCI plugin, which leaks libpciaccess's state as it goes.
// A loaded topology may be read from several threads at once.
hwloc_topology_t machineTopology() {
  static hwloc_topology_t topology = [] {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0) return static_cast<hwloc_topology_t>(nullptr);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t) != 0) {
      hwloc_topology_destroy(t);
      return static_cast<hwloc_topology_t>(nullptr);
    }
    return t;
  }();
  return topology;
}

}  // namespace

bool probeHwloc(NodeInfo* n) {
  hwloc_topology_t t = machineTopology();
  if (!t) return false;
  int pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  if (pus <= 0) return false;
  n->pus = pus;
  n->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  n->packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  if (n->cores <= 0) n->cores = pus;
  if (n->packages <= 0) n->packages = 1;
  n->numa.clear();
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr); o;
       o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o)) {
    NumaInfo m;
    m.id = static_cast<int>(o->os_index);
    m.cpus = listOf(o->cpuset);
    m.memBytes = o->attr ? o->attr->numanode.local_memory : 0;
    n->numa.push_back(m);
  }
  for (hwloc_obj_t o = hwloc_get_next_osdev(t, nullptr); o; o = hwloc_get_next_osdev(t, o)) {
    if (!o->name || !o->attr) continue;
    hwloc_obj_osdev_type_t type = o->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    int numa = numaOf(t, o);
    for (NicInfo& nic : n->nics)
      if (nic.name == o->name && nic.numaNode < 0) nic.numaNode = numa;
  }
  return true;
}

#else

bool probeHwloc(NodeInfo*) { return false; }

#endif

}  // namespace detail
}  // namespace topo
}  // namespace hoccl
