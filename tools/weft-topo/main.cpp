// weft-topo: the machine as weft sees it, printed like `nvidia-smi topo -m`: a
// rank x rank matrix of link classes with each rank's CPU and NUMA affinity and
// NIC and RDMA port, then each host's packages, cores, caches, NUMA nodes, NICs,
// the hosts that run on its kernel (network namespaces, containers),
// RDMA ports and GPUs.
//
//   weft-topo [--json]                  this process alone
//   weft-run -n N weft-topo [--json]    every rank (also mpirun, srun, torchrun)
//   weft-topo --file F [--json]         a topology file (WEFT_TOPO_DUMP_FILE's)
//
// The file is also taken from WEFT_TOPO_FILE. Topology discovery is libweft's
// (src/topo), reached through libweft.so as weft-perf reaches the tuner.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/params.h"
#include "topo/topology.h"
#include "weft/weft.h"

using namespace weft;

namespace {

const char* kUsage =
    "usage: weft-topo [--json] [--file FILE]\n"
    "  alone: this process's host and binding; under weft-run (mpirun, srun, torchrun): every rank's,\n"
    "  joined and printed by rank 0; --file (or WEFT_TOPO_FILE): a topology file, e.g. one written by\n"
    "  WEFT_TOPO_DUMP_FILE\n";

bool launched() {
  for (const char* v : {"WEFT_NRANKS", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"})
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

bool check(weftResult_t rc, weftComm_t comm, const char* what) {
  if (rc == weftSuccess) return true;
  std::fprintf(stderr, "weft-topo: %s: %s\n", what, weftGetLastError(comm));
  return false;
}

// Every rank's topology through weft's own all-gather; rank 0 gets the joined system.
bool gather(topo::System* out, bool* lead) {
  weftComm_t comm = nullptr;
  if (!check(weftCommInitFromEnv(&comm, nullptr), nullptr, "init")) return false;
  int rank = 0, n = 1;
  weftCommUserRank(comm, &rank);
  weftCommCount(comm, &n);
  std::string mine = topo::to_json(topo::discover_local());
  uint64_t len = mine.size();
  std::vector<uint64_t> lens(size_t(n), 0);
  bool ok = check(weftAllGather(&len, lens.data(), 1, weftUint64, comm, nullptr), comm, "all-gather");
  uint64_t longest = 0;
  for (uint64_t l : lens) longest = std::max(longest, l);
  mine.resize(longest, ' ');
  std::vector<char> all(size_t(longest) * size_t(n));
  ok = ok && check(weftAllGather(mine.data(), all.data(), longest, weftUint8, comm, nullptr), comm, "all-gather");
  weftCommDestroy(comm);
  *lead = rank == 0;
  if (!ok || rank != 0) return ok;
  std::vector<topo::System> parts;
  for (size_t r = 0; r < size_t(n); r++) parts.push_back(topo::from_json(std::string(&all[r * longest], lens[r])));
  *out = topo::join(parts);
  return true;
}

std::string human(uint64_t bytes) {
  char b[32];
  if (bytes >= (uint64_t(1) << 30)) std::snprintf(b, sizeof b, "%.1f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= (uint64_t(1) << 20)) std::snprintf(b, sizeof b, "%.0f MiB", double(bytes) / double(1 << 20));
  else std::snprintf(b, sizeof b, "%.0f KiB", double(bytes) / 1024);
  return b;
}

std::string joined(const std::vector<int>& v) {
  std::string s;
  for (int x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s.empty() ? "-" : s;
}

void print(const topo::System& s) {
  const int n = int(s.ranks.size());
  std::printf("%-8s", "");
  for (int b = 0; b < n; b++) std::printf("%-7s", ("rank" + std::to_string(b)).c_str());
  // Ranks that drive GPUs: the classes between their GPUs, and a GPU column.
  const bool gpus = std::any_of(s.ranks.begin(), s.ranks.end(), [](const topo::Rank& r) { return !r.gpu.empty(); });
  std::printf("%-16s%-15s%-14s%-12s%s%s\n", "CPU Affinity", "NUMA Affinity", "NIC", "RDMA", gpus ? "GPU           " : "",
              "Host");
  for (int a = 0; a < n; a++) {
    std::printf("%-8s", ("rank" + std::to_string(a)).c_str());
    for (int b = 0; b < n; b++) std::printf("%-7s", topo::link_class_name(gpus ? s.gpu_link(a, b) : s.link(a, b)));
    const topo::Rank& r = s.ranks[size_t(a)];
    const topo::Nic* nic = s.nic_of(a);
    const topo::RdmaPort* port = s.rdma_of(a);
    const std::string rdma = port ? port->device + ":" + std::to_string(port->port) : "-";
    std::printf("%-16s%-15s%-14s%-12s", r.cpus.c_str(), joined(r.numa).c_str(), nic ? nic->name.c_str() : "-",
                rdma.c_str());
    if (gpus) std::printf("%-14s", r.gpu.empty() ? "-" : r.gpu.c_str());
    std::printf("%s\n", s.hosts[size_t(r.host)].name.c_str());
  }
  std::printf("\nLegend:\n"
              "  X    = self\n"
              "  NUMA = shared memory within one NUMA node\n"
              "  SYS  = shared memory across NUMA nodes (or a rank not bound to one of several)\n"
              "  NET  = network between hosts\n");
  if (gpus)
    std::printf("  GPU  = both ranks drive the same GPU\n"
                "  NVL  = their GPUs reach each other peer to peer over NVLink\n"
                "  P2P  = their GPUs reach each other peer to peer over PCIe (or NVLink where NVML was not found)\n"
                "  STG  = their GPUs do not: staged through host memory\n");
  for (size_t i = 0; i < s.hosts.size(); ++i) {
    const topo::Host& h = s.hosts[i];
    std::printf("\nhost %s: %d package%s, %d cores, %d PUs, %zu NUMA node%s\n", h.name.c_str(), h.packages,
                h.packages == 1 ? "" : "s", h.cores, h.pus, h.numa.size(), h.numa.size() == 1 ? "" : "s");
    // Network namespaces or containers of one kernel: their ranks share its cores.
    std::string same;
    for (size_t j = 0; j < s.hosts.size(); ++j)
      if (j != i && !h.machine.empty() && s.hosts[j].machine == h.machine)
        same += (same.empty() ? "" : ", ") + std::to_string(j);
    if (!same.empty()) std::printf("  one kernel with host %s (their ranks share its cores)\n", same.c_str());
    for (const topo::NumaNode& m : h.numa)
      std::printf("  NUMA %d: CPUs %s, %s\n", m.os_index, m.cpus.c_str(),
                  m.memory_bytes ? human(m.memory_bytes).c_str() : "memory unknown");
    for (const topo::Cache& c : h.caches)
      std::printf("  L%d%s: %s x %d\n", c.level, c.level == 1 ? "d" : "", human(c.bytes).c_str(), c.count);
    for (const topo::Nic& nic : h.nics) {
      std::string speed = nic.speed_mbps > 0 ? std::to_string(nic.speed_mbps) + " Mb/s" : "speed unknown";
      std::printf("  NIC %s: %s, NUMA %s\n", nic.name.c_str(), speed.c_str(),
                  nic.numa >= 0 ? std::to_string(nic.numa).c_str() : "unknown");
    }
    for (const topo::RdmaPort& p : h.rdma) {
      std::string rate = p.rate_gbps > 0 ? std::to_string(p.rate_gbps) + " Gb/s" : "rate unknown";
      std::printf("  RDMA %s port %d: %s, %s, %s, interface %s, NUMA %s\n", p.device.c_str(), p.port,
                  p.active ? "active" : "not active", rate.c_str(),
                  p.link_layer.empty() ? "link layer unknown" : p.link_layer.c_str(),
                  p.netdev.empty() ? "none" : p.netdev.c_str(), p.numa >= 0 ? std::to_string(p.numa).c_str() : "unknown");
    }
    for (const topo::Gpu& g : h.gpus)
      std::printf("  GPU %s (%s), NUMA %s\n", g.pci.c_str(), g.device_id.c_str(),
                  g.numa >= 0 ? std::to_string(g.numa).c_str() : "unknown");
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false;
  std::string file = params::TOPO_FILE();
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--json")) as_json = true;
    else if (!std::strcmp(argv[i], "--file") && i + 1 < argc) file = argv[++i];
    else {
      std::fputs(kUsage, std::strcmp(argv[i], "-h") && std::strcmp(argv[i], "--help") ? stderr : stdout);
      return std::strcmp(argv[i], "-h") && std::strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  try {
    topo::System s;
    bool lead = true;
    if (!file.empty()) {
      s = topo::load_file(file);
    } else if (launched()) {
      if (!gather(&s, &lead)) return 1;
    } else {
      s = topo::discover_local();
    }
    if (!lead) return 0;
    if (as_json) std::fputs(topo::to_json(s).c_str(), stdout);
    else print(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-topo: %s\n", e.what());
    return 1;
  }
  return 0;
}
