// Discovery of this process's host and binding: hwloc where weft is built with it,
// sysfs and sched_getaffinity otherwise; NICs from sysfs either way.
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "bootstrap/bootstrap.h"
#include "topo/topology.h"
#include "weft_config.h"

#if WEFT_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace weft::topo {

namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

int read_int(const std::string& path, int fallback) {
  const std::string s = read_line(path);
  try {
    return s.empty() ? fallback : std::stoi(s);
  } catch (...) {
    return fallback;
  }
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The NUMA nodes (os indexes) whose CPUs the binding touches.
std::vector<int> numa_of(const std::vector<NumaNode>& nodes, const std::vector<int>& cpus) {
  std::vector<int> out;
  for (const NumaNode& n : nodes) {
    const std::vector<int> mine = parse_cpu_list(n.cpus);
    for (int c : cpus)
      if (std::binary_search(mine.begin(), mine.end(), c)) {
        out.push_back(n.os_index);
        break;
      }
  }
  return out;
}

#if WEFT_HAVE_HWLOC

std::string bitmap_list(hwloc_const_bitmap_t set) {
  char* s = nullptr;
  hwloc_bitmap_list_asprintf(&s, set);
  std::string out = s ? s : "";
  std::free(s);
  return out;
}

void describe_host(Host* h) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) return;
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return;
  }
  h->packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  h->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  h->pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  for (int i = 0, n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE); i < n; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, unsigned(i));
    h->numa.push_back({int(o->os_index), bitmap_list(o->cpuset), o->attr->numanode.local_memory});
  }
  const hwloc_obj_type_t levels[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE};
  for (int level = 1; level <= 3; level++) {
    std::map<uint64_t, int> sizes;  // size -> instances
    for (int i = 0, n = hwloc_get_nbobjs_by_type(t, levels[level - 1]); i < n; i++) {
      hwloc_obj_t o = hwloc_get_obj_by_type(t, levels[level - 1], unsigned(i));
      if (o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
      sizes[o->attr->cache.size]++;
    }
    for (auto [bytes, count] : sizes) h->caches.push_back({level, bytes, count});
  }
  hwloc_topology_destroy(t);
}

#else

// sysfs: NUMA nodes and their CPUs and memory, CPU0's data/unified caches; cores
// and packages from the CPUs' topology files.
void describe_host(Host* h) {
  for (const std::string& name : list_dir("/sys/devices/system/node")) {
    if (name.rfind("node", 0) != 0) continue;
    NumaNode n;
    n.os_index = std::atoi(name.c_str() + 4);
    n.cpus = read_line("/sys/devices/system/node/" + name + "/cpulist");
    std::ifstream mem("/sys/devices/system/node/" + name + "/meminfo");
    std::string word;
    while (mem >> word)
      if (word == "MemTotal:") {
        mem >> n.memory_bytes;
        n.memory_bytes *= 1024;
        break;
      }
    h->numa.push_back(n);
  }
  std::map<std::pair<int, int>, int> cores;  // (package, core)
  std::map<int, int> packages;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < online; c++) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    const int p = read_int(dir + "physical_package_id", 0);
    packages[p] = 1;
    cores[{p, read_int(dir + "core_id", int(c))}] = 1;
  }
  h->pus = int(online);
  h->cores = int(cores.size());
  h->packages = int(packages.size());
}

#endif

// The CPUs of each core (a core's hardware threads), for cores with at least one
// CPU in `allowed`, only those CPUs, in core order.
std::vector<std::vector<int>> cores_of(const std::vector<int>& allowed) {
  std::map<std::pair<int, int>, std::vector<int>> cores;  // (package, core id) -> CPUs
  for (int c : allowed) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    cores[{read_int(dir + "physical_package_id", 0), read_int(dir + "core_id", c)}].push_back(c);
  }
  std::vector<std::vector<int>> out;
  for (auto& [key, cpus] : cores) out.push_back(cpus);
  std::sort(out.begin(), out.end());
  return out;
}

// "100 Gb/sec (4X EDR)" -> 100; -1 if it does not start with a number.
int rate_gbps(const std::string& rate) {
  try {
    return rate.empty() ? -1 : static_cast<int>(std::stod(rate));
  } catch (...) {
    return -1;
  }
}

}  // namespace

std::vector<int> bound_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

void discover_devices(const std::string& sysfs, Host* h) {
  // Network interfaces but loopback: speed (absent or -1 for virtual ones), the
  // NUMA node of the PCI device behind it.
  for (const std::string& name : list_dir(sysfs + "/class/net")) {
    if (name == "lo") continue;
    const std::string dir = sysfs + "/class/net/" + name;
    h->nics.push_back({name, std::max(-1, read_int(dir + "/speed", -1)), read_int(dir + "/device/numa_node", -1)});
  }
  // NVIDIA display (0x0300) and 3D (0x0302) controllers; a server's VGA chip is
  // another vendor's.
  for (const std::string& pci : list_dir(sysfs + "/bus/pci/devices")) {
    const std::string dir = sysfs + "/bus/pci/devices/" + pci;
    const std::string cls = read_line(dir + "/class");
    if (read_line(dir + "/vendor") != "0x10de" || (cls.rfind("0x0300", 0) != 0 && cls.rfind("0x0302", 0) != 0))
      continue;
    const std::string device = read_line(dir + "/device");
    h->gpus.push_back({pci, "10de:" + (device.size() > 2 ? device.substr(2) : device), read_int(dir + "/numa_node", -1)});
  }
  // RDMA ports; a port's interface is the device's network interface whose
  // dev_port is the port's index (the only one on single-port devices).
  for (const std::string& dev : list_dir(sysfs + "/class/infiniband")) {
    const std::string dir = sysfs + "/class/infiniband/" + dev;
    const std::vector<std::string> netdevs = list_dir(dir + "/device/net");
    for (const std::string& p : list_dir(dir + "/ports")) {
      RdmaPort port;
      port.device = dev;
      port.port = std::atoi(p.c_str());
      const std::string state = read_line(dir + "/ports/" + p + "/state");  // "4: ACTIVE"
      port.active = state.find("ACTIVE") != std::string::npos;
      port.rate_gbps = rate_gbps(read_line(dir + "/ports/" + p + "/rate"));
      port.link_layer = read_line(dir + "/ports/" + p + "/link_layer");
      port.numa = read_int(dir + "/device/numa_node", -1);
      for (const std::string& nd : netdevs)
        if (netdevs.size() == 1 || read_int(dir + "/device/net/" + nd + "/dev_port", 0) == port.port - 1) {
          port.netdev = nd;
          break;
        }
      h->rdma.push_back(port);
    }
  }
}

std::vector<int> numa_share(const std::vector<NumaNode>& numa, const std::vector<int>& allowed, int local_rank,
                            int local_size, int near_numa) {
  std::vector<std::vector<int>> nodes;  // the allowed CPUs of each node that has some
  std::vector<int> near;
  for (const NumaNode& n : numa) {
    std::vector<int> mine;
    for (int c : parse_cpu_list(n.cpus))
      if (std::binary_search(allowed.begin(), allowed.end(), c)) mine.push_back(c);
    if (mine.empty()) continue;
    if (n.os_index == near_numa) near = mine;
    nodes.push_back(mine);
  }
  if (!near.empty() || nodes.empty()) return near;
  return nodes[size_t(local_rank) * nodes.size() / size_t(std::max(local_size, 1)) % nodes.size()];
}

int pci_numa_node(const std::string& sysfs, const std::string& pci) {
  return pci.empty() ? -1 : read_int(sysfs + "/bus/pci/devices/" + pci + "/numa_node", -1);
}

bool bind_local_rank(const std::string& mode, int local_rank, int local_size, std::string* cpus,
                     std::string* error, int near_numa) {
  if (mode.empty() || mode == "none") return true;
  if (mode != "core" && mode != "numa") {
    *error = "WEFT_BIND=" + mode + ": expected none, core or numa";
    return false;
  }
  const std::vector<int> allowed = bound_cpus();
  std::vector<int> chosen;
  if (mode == "core") {
    const std::vector<std::vector<int>> cores = cores_of(allowed);
    if (!cores.empty()) chosen = cores[size_t(local_rank) % cores.size()];
  } else {
    Host h;
    describe_host(&h);
    chosen = numa_share(h.numa, allowed, local_rank, local_size, near_numa);
  }
  if (chosen.empty()) chosen = allowed;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : chosen) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    *error = "WEFT_BIND=" + mode + ": sched_setaffinity(" + format_cpu_list(chosen) + ") failed";
    return false;
  }
  *cpus = format_cpu_list(chosen);
  return true;
}

int numa_node_of_binding() {
  const std::vector<int> cpus = bound_cpus();
  if (cpus.empty()) return -1;
  for (const std::string& name : list_dir("/sys/devices/system/node")) {
    if (name.rfind("node", 0) != 0) continue;
    const std::vector<int> mine = parse_cpu_list(read_line("/sys/devices/system/node/" + name + "/cpulist"));
    if (!std::binary_search(mine.begin(), mine.end(), cpus[0])) continue;
    for (int c : cpus)
      if (!std::binary_search(mine.begin(), mine.end(), c)) return -1;
    return std::atoi(name.c_str() + 4);
  }
  return -1;
}

System discover_local() {
  System s;
  Host h;
  h.identity = boot::host_identity();
  h.machine = boot::machine_identity();
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  h.name = name;
  describe_host(&h);
  if (h.numa.empty()) h.numa.push_back({0, format_cpu_list(bound_cpus()), 0});
  discover_devices("/sys", &h);
  Rank r;
  r.pid = int(getpid());
  const std::vector<int> cpus = bound_cpus();
  r.cpus = format_cpu_list(cpus);
  r.numa = numa_of(h.numa, cpus);
  s.hosts.push_back(h);
  s.ranks.push_back(r);
  return s;
}

}  // namespace weft::topo
