// The machine as weft sees it: every rank's host (packages, NUMA nodes, cores,
// caches, NICs) and the rank's CPU binding, joined over a communicator into one
// system, and the class of the link between any two ranks. Discovered with hwloc
// where weft is built with it (sysfs otherwise); written and read as JSON
// (WEFT_TOPO_DUMP_FILE, WEFT_TOPO_FILE) so that a machine can be planned for
// elsewhere. GPUs and RDMA ports are listed per host (from sysfs); the GPU a rank
// drives and the GPUs it can reach peer to peer are filled in by whoever knows
// its CUDA device (the communicator, through the CUDA driver).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::topo {

// How two ranks reach each other, from the closest to the farthest.
enum class LinkClass {
  Self,          // the same rank
  ShmNuma,       // shared memory within one NUMA node
  ShmCrossNuma,  // shared memory across NUMA nodes (or a rank not bound to one)
  Network,       // different hosts
  // Between two ranks that drive GPUs on one host (System::gpu_link):
  GpuSame,       // the same GPU
  GpuNvlink,     // peer access over NVLink (as NVML reports it)
  GpuP2P,        // peer access over PCIe (or NVLink where NVML was not found)
  GpuStaged,     // no peer access: through host memory
};
// Short names as in nvidia-smi topo -m: X, NUMA, SYS, NET; GPU, NVL, P2P, STG.
const char* link_class_name(LinkClass c);

struct NumaNode {
  int os_index = 0;
  std::string cpus;           // list form, "0-7,16-23"
  uint64_t memory_bytes = 0;
};

struct Cache {
  int level = 0;              // 1 (data), 2, 3
  uint64_t bytes = 0;         // one instance
  int count = 0;              // instances of this level and size on the host
};

struct Nic {
  std::string name;
  int speed_mbps = -1;        // -1: unknown (virtual interfaces)
  int numa = -1;              // the NUMA node of its PCI device; -1 unknown
};

// An NVIDIA GPU (a PCI display or 3D controller of vendor 0x10de).
struct Gpu {
  std::string pci;            // PCI address, "0000:17:00.0"
  std::string device_id;      // vendor:device, "10de:2330"
  int numa = -1;              // -1 unknown
};

// One port of an RDMA device (InfiniBand, or RoCE over Ethernet).
struct RdmaPort {
  std::string device;         // "mlx5_0"
  int port = 1;
  bool active = false;        // the port's state is ACTIVE
  int rate_gbps = -1;         // -1 unknown
  std::string link_layer;     // "InfiniBand", "Ethernet"
  std::string netdev;         // its network interface ("" if none)
  int numa = -1;
};

struct Host {
  std::string identity;       // host_identity(): equal strings, same kernel and network namespace
  std::string machine;        // machine_identity(): hosts with equal ones share their CPUs ("": its own)
  std::string name;           // hostname
  int packages = 0, cores = 0, pus = 0;
  std::vector<NumaNode> numa;
  std::vector<Cache> caches;
  std::vector<Nic> nics;
  std::vector<Gpu> gpus;
  std::vector<RdmaPort> rdma;
};

struct Rank {
  int host = 0;               // index into System::hosts
  int pid = 0;
  std::string cpus;           // the CPUs it may run on, list form
  std::vector<int> numa;      // os indexes of the NUMA nodes those CPUs belong to
  std::string gpu;            // PCI address of the GPU it drives ("" none)
  std::vector<std::string> gpu_peers;  // this host's GPUs its GPU can access peer to peer
  std::vector<std::string> gpu_nvlink;  // of those, the ones joined to it by NVLink (NVML)
};

struct System {
  std::vector<Host> hosts;
  std::vector<Rank> ranks;

  LinkClass link(int a, int b) const;
  // Between ranks that both drive a GPU on one host: GpuSame, GpuNvlink,
  // GpuP2P or GpuStaged; otherwise link().
  LinkClass gpu_link(int a, int b) const;
  // The NIC a rank would use: the fastest on its NUMA node, else the host's fastest; null without one.
  const Nic* nic_of(int rank) const;
  // The RDMA port a rank would use: the fastest active port on its NUMA node, else
  // the host's fastest active one; null without one.
  const RdmaPort* rdma_of(int rank) const;
  // The machine a rank's host runs on (Host::machine; the host itself where none is named).
  std::string machine_of(int rank) const;
};

// This process: a system of one host and one rank.
System discover_local();

// The host's NICs (but loopback), NVIDIA GPUs and RDMA ports as the sysfs tree at
// `sysfs` ("/sys"; tests pass a tree of their own) lists them.
void discover_devices(const std::string& sysfs, Host* h);

// Every rank's system (each of one rank, in rank order) as one: hosts with equal
// identities are merged.
System join(const std::vector<System>& ranks);

// JSON text and back; from_json throws std::runtime_error naming what is wrong.
std::string to_json(const System& s);
System from_json(const std::string& text);
// A topology file (WEFT_TOPO_FILE, weft-topo --file, weft-sim --topo); throws
// std::runtime_error naming the file and what is wrong.
System load_file(const std::string& path);

// The NUMA node (os index) holding every CPU this process may run on, or -1 where
// they span nodes (an unbound process on a multi-node host). Cheap: sysfs, no hwloc.
int numa_node_of_binding();
// The CPUs this thread may run on (its affinity), ascending.
std::vector<int> bound_cpus();

// WEFT_BIND: pins this process near its share of the host, as NCCL pins a rank
// near its GPU. "core": local rank i gets the i-th core (modulo the cores this
// process may use); "numa": the CPUs of NUMA node near_numa (the node of the GPU
// the rank drives) where it has some this process may use, else the local ranks
// are spread over the NUMA nodes in blocks (numa_share); "none" (or empty)
// changes nothing. Only CPUs the process may already use are chosen. Returns
// false with *error set for an unknown mode or a failed sched_setaffinity; *cpus
// is what was set.
bool bind_local_rank(const std::string& mode, int local_rank, int local_size, std::string* cpus,
                     std::string* error, int near_numa = -1);
// WEFT_BIND=numa's choice among `numa`'s nodes: the `allowed` CPUs of node
// near_numa if it has some, else those of local rank's block (local_size ranks
// spread evenly over the nodes with allowed CPUs); empty if no node has any.
std::vector<int> numa_share(const std::vector<NumaNode>& numa, const std::vector<int>& allowed, int local_rank,
                            int local_size, int near_numa);
// The NUMA node sysfs (root `sysfs`, "/sys") gives for PCI device `pci`
// ("0000:17:00.0"); -1 unknown.
int pci_numa_node(const std::string& sysfs, const std::string& pci);

// "0-3,8,10-11" <-> CPU indexes, for tests and the fallback without hwloc.
std::vector<int> parse_cpu_list(const std::string& list);
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace weft::topo
