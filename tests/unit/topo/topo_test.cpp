// src/topo: what discovery finds against the kernel's own view in sysfs, WEFT_BIND's
// pinning, topology files round trip and bad ones are refused, link classes and NIC
// choice of hand-built systems.
#include <gtest/gtest.h>
#include <dlfcn.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include "topo/nvml.h"
#include "topo/topology.h"
#include "weft_config.h"

namespace weft::topo {
namespace {

std::string line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

TEST(TopoDiscovery, BindingAndNumaAsTheKernelSees) {
  const System s = discover_local();
  ASSERT_EQ(s.hosts.size(), 1u);
  ASSERT_EQ(s.ranks.size(), 1u);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> mine;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) mine.push_back(c);
  EXPECT_EQ(parse_cpu_list(s.ranks[0].cpus), mine);
  EXPECT_EQ(s.ranks[0].pid, int(getpid()));
  // NUMA nodes: sysfs lists them (a kernel without NUMA has none: one node then).
  int nodes = 0;
  for (int i = 0; i < 1024; i++)
    if (!line("/sys/devices/system/node/node" + std::to_string(i) + "/cpulist").empty()) {
      nodes++;
      auto it = std::find_if(s.hosts[0].numa.begin(), s.hosts[0].numa.end(),
                             [&](const NumaNode& n) { return n.os_index == i; });
      ASSERT_NE(it, s.hosts[0].numa.end()) << "NUMA node " << i;
      EXPECT_EQ(parse_cpu_list(it->cpus), parse_cpu_list(line("/sys/devices/system/node/node" + std::to_string(i) +
                                                              "/cpulist")));
    }
  EXPECT_EQ(int(s.hosts[0].numa.size()), std::max(nodes, 1));
  EXPECT_GE(s.hosts[0].pus, int(mine.size()));
  EXPECT_GE(s.hosts[0].cores, 1);
  EXPECT_GE(s.hosts[0].packages, 1);
  EXPECT_FALSE(s.hosts[0].identity.empty());
}

TEST(TopoDiscovery, CachesOfCpu0AsSysfsReportsThem) {
#if !WEFT_HAVE_HWLOC
  GTEST_SKIP() << "built without hwloc: caches are not discovered";
#endif
  const System s = discover_local();
  int checked = 0;
  for (int i = 0; i < 8; i++) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string type = line(dir + "type"), size = line(dir + "size");
    if (type.empty() || type == "Instruction" || size.empty()) continue;
    const int level = std::stoi(line(dir + "level"));
    const uint64_t bytes = std::stoull(size) * (size.back() == 'K' ? 1024 : size.back() == 'M' ? 1 << 20 : 1);
    bool found = false;
    for (const Cache& c : s.hosts[0].caches) found |= c.level == level && c.bytes == bytes && c.count >= 1;
    EXPECT_TRUE(found) << "L" << level << " of " << size << " from sysfs not discovered";
    checked++;
  }
  if (checked == 0) GTEST_SKIP() << "sysfs lists no caches here";
}

// The CPUs this process may use, grouped by core as sysfs numbers them.
std::vector<std::vector<int>> allowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  std::map<std::pair<int, int>, std::vector<int>> cores;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) {
      const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
      cores[{std::stoi(line(dir + "physical_package_id")), std::stoi(line(dir + "core_id"))}].push_back(c);
    }
  std::vector<std::vector<int>> out;
  for (auto& kv : cores) out.push_back(kv.second);
  std::sort(out.begin(), out.end());
  return out;
}

// Runs bind_local_rank in a child (the test process keeps its affinity) and
// returns the child's affinity afterwards, or "error: ..." .
std::string boundInChild(const std::string& mode, int local_rank, int local_size) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    std::string cpus, error, out;
    if (!bind_local_rank(mode, local_rank, local_size, &cpus, &error)) {
      out = "error: " + error;
    } else {
      out = discover_local().ranks[0].cpus;
      if (cpus != out && mode != "none") out += " (reported " + cpus + ")";
    }
    (void)!write(fds[1], out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

TEST(TopoBind, CoreNumaAndNone) {
  const std::vector<std::vector<int>> cores = allowedCores();
  ASSERT_FALSE(cores.empty());
  for (int i = 0; i < 3; i++)
    EXPECT_EQ(boundInChild("core", i, 3), format_cpu_list(cores[size_t(i) % cores.size()])) << "local rank " << i;
  // One NUMA node here or several: local rank 0 gets the first node's allowed CPUs.
  const System s = discover_local();
  std::vector<int> all;
  for (const auto& c : cores) all.insert(all.end(), c.begin(), c.end());
  std::sort(all.begin(), all.end());
  std::vector<int> first;
  for (int c : parse_cpu_list(s.hosts[0].numa[0].cpus))
    if (std::binary_search(all.begin(), all.end(), c)) first.push_back(c);
  if (!first.empty()) {
    EXPECT_EQ(boundInChild("numa", 0, 2), format_cpu_list(first));
  }
  EXPECT_EQ(boundInChild("none", 1, 2), format_cpu_list(all));
  EXPECT_EQ(boundInChild("sockets", 0, 1), "error: WEFT_BIND=sockets: expected none, core or numa");
}

// The machine is the kernel's: its boot id, read here on its own.
TEST(TopoDiscovery, MachineIsTheKernelsBootId) {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(f, boot_id);
  ASSERT_FALSE(boot_id.empty());
  EXPECT_EQ(discover_local().hosts[0].machine, boot_id);
}

TEST(TopoFile, RoundTrips) {
  const System s = discover_local();
  const std::string text = to_json(s);
  EXPECT_EQ(to_json(from_json(text)), text);
}

// One host with two NUMA nodes of 4 CPUs, NICs on each, ranks bound per node.
System twoNuma() {
  System s;
  Host h;
  h.identity = "a";
  h.name = "a";
  h.packages = 2, h.cores = 8, h.pus = 8;
  h.numa = {{0, "0-3", 1 << 30}, {1, "4-7", 1 << 30}};
  h.caches = {{3, 32 << 20, 2}};
  h.nics = {{"eth0", 10000, 0}, {"eth1", 25000, 1}, {"eth2", 100000, 1}};
  s.hosts.push_back(h);
  s.ranks = {{0, 10, "0-1", {0}, "", {}, {}}, {0, 11, "2-3", {0}, "", {}, {}}, {0, 12, "4-5", {1}, "", {}, {}},
             {0, 13, "0-7", {0, 1}, "", {}, {}}};
  return s;
}

TEST(TopoLinks, ClassesWithinAHost) {
  const System s = twoNuma();
  EXPECT_EQ(s.link(0, 0), LinkClass::Self);
  EXPECT_EQ(s.link(0, 1), LinkClass::ShmNuma);
  EXPECT_EQ(s.link(0, 2), LinkClass::ShmCrossNuma);
  EXPECT_EQ(s.link(3, 0), LinkClass::ShmCrossNuma);  // unbound rank
  EXPECT_STREQ(link_class_name(s.link(1, 2)), "SYS");
  // The fastest NIC on the rank's node; the host's fastest for a rank on both.
  EXPECT_EQ(s.nic_of(0)->name, "eth0");
  EXPECT_EQ(s.nic_of(2)->name, "eth2");
  EXPECT_EQ(s.nic_of(3)->name, "eth2");
}

TEST(TopoLinks, JoinMergesHostsByIdentity) {
  std::vector<System> parts;
  for (const char* id : {"a", "a", "b", "b"}) {
    System p;
    Host h;
    h.identity = id;
    h.name = id;
    h.numa = {{0, "0-1", 0}};
    p.hosts.push_back(h);
    p.ranks.push_back({0, 1, "0", {0}, "", {}, {}});
    parts.push_back(p);
  }
  const System s = join(parts);
  ASSERT_EQ(s.hosts.size(), 2u);
  EXPECT_EQ(s.ranks[1].host, 0);
  EXPECT_EQ(s.ranks[2].host, 1);
  EXPECT_EQ(s.link(0, 1), LinkClass::ShmNuma);
  EXPECT_EQ(s.link(1, 2), LinkClass::Network);
  EXPECT_EQ(s.link(2, 3), LinkClass::ShmNuma);
  EXPECT_EQ(s.nic_of(0), nullptr);
  const System back = from_json(to_json(s));
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) EXPECT_EQ(back.link(a, b), s.link(a, b));
}

// A sysfs tree of a GPU server, written here: two NICs (one on each NUMA node) and
// loopback; an NVIDIA 3D controller on node 1, an NVIDIA VGA controller on node 0,
// an ASPEED VGA chip and an NVIDIA audio function (neither a GPU); a dual-port
// InfiniBand card on node 1 (port 1 active at 200 Gb/s as ib0, port 2 down as
// ib1) and a RoCE port on node 0 whose rate file is missing.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    put("class/net/lo/speed", "-1");
    put("class/net/eth0/speed", "25000");
    put("class/net/eth0/device/numa_node", "0");
    put("class/net/eth1/speed", "100000");
    put("class/net/eth1/device/numa_node", "1");
    pci("0000:17:00.0", "0x10de", "0x2330", "0x030200", "1");
    pci("0000:18:00.0", "0x10de", "0x1eb8", "0x030000", "0");
    pci("0000:02:00.0", "0x1a03", "0x2000", "0x030000", "0");
    pci("0000:17:00.1", "0x10de", "0x22e8", "0x040300", "1");
    put("class/infiniband/mlx5_0/device/numa_node", "1");
    put("class/infiniband/mlx5_0/device/net/ib0/dev_port", "0");
    put("class/infiniband/mlx5_0/device/net/ib1/dev_port", "1");
    put("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
    put("class/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)");
    put("class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand");
    put("class/infiniband/mlx5_0/ports/2/state", "1: DOWN");
    put("class/infiniband/mlx5_0/ports/2/rate", "10 Gb/sec (4X SDR)");
    put("class/infiniband/mlx5_0/ports/2/link_layer", "InfiniBand");
    put("class/infiniband/rocep1s0/device/numa_node", "0");
    put("class/infiniband/rocep1s0/device/net/eth0/dev_port", "0");
    put("class/infiniband/rocep1s0/ports/1/state", "4: ACTIVE");
    put("class/infiniband/rocep1s0/ports/1/link_layer", "Ethernet");
  }
  void TearDown() override {
    if (!root_.empty()) std::system(("rm -rf '" + root_ + "'").c_str());
  }
  void put(const std::string& rel, const std::string& text) {
    const std::string path = root_ + "/" + rel;
    std::system(("mkdir -p '" + path.substr(0, path.rfind('/')) + "'").c_str());
    std::ofstream(path) << text << "\n";
  }
  void pci(const std::string& addr, const char* vendor, const char* device, const char* cls, const char* numa) {
    put("bus/pci/devices/" + addr + "/vendor", vendor);
    put("bus/pci/devices/" + addr + "/device", device);
    put("bus/pci/devices/" + addr + "/class", cls);
    put("bus/pci/devices/" + addr + "/numa_node", numa);
  }
  std::string root_;
};

TEST_F(FakeSysfs, DevicesAsSysfsListsThem) {
  Host h;
  discover_devices(root_, &h);
  ASSERT_EQ(h.nics.size(), 2u);
  EXPECT_EQ(h.nics[0].name, "eth0");
  EXPECT_EQ(h.nics[0].speed_mbps, 25000);
  EXPECT_EQ(h.nics[1].numa, 1);
  ASSERT_EQ(h.gpus.size(), 2u);  // sorted by PCI address
  EXPECT_EQ(h.gpus[0].pci, "0000:17:00.0");
  EXPECT_EQ(h.gpus[0].device_id, "10de:2330");
  EXPECT_EQ(h.gpus[0].numa, 1);
  EXPECT_EQ(h.gpus[1].pci, "0000:18:00.0");
  EXPECT_EQ(h.gpus[1].numa, 0);
  ASSERT_EQ(h.rdma.size(), 3u);
  const RdmaPort &ib1 = h.rdma[0], &ib2 = h.rdma[1], &roce = h.rdma[2];
  EXPECT_EQ(ib1.device, "mlx5_0");
  EXPECT_EQ(ib1.port, 1);
  EXPECT_TRUE(ib1.active);
  EXPECT_EQ(ib1.rate_gbps, 200);
  EXPECT_EQ(ib1.link_layer, "InfiniBand");
  EXPECT_EQ(ib1.netdev, "ib0");
  EXPECT_EQ(ib1.numa, 1);
  EXPECT_EQ(ib2.port, 2);
  EXPECT_FALSE(ib2.active);
  EXPECT_EQ(ib2.rate_gbps, 10);
  EXPECT_EQ(ib2.netdev, "ib1");
  EXPECT_EQ(roce.device, "rocep1s0");
  EXPECT_TRUE(roce.active);
  EXPECT_EQ(roce.rate_gbps, -1);
  EXPECT_EQ(roce.link_layer, "Ethernet");
  EXPECT_EQ(roce.netdev, "eth0");
  EXPECT_EQ(roce.numa, 0);

  // Which port each rank would use: the active one on its node, else the host's
  // fastest active one (the down port never).
  System s;
  s.hosts.push_back(h);
  s.hosts[0].numa = {{0, "0-3", 0}, {1, "4-7", 0}};
  s.ranks = {{0, 1, "0-1", {0}, "", {}, {}}, {0, 2, "4-5", {1}, "", {}, {}}, {0, 3, "0-7", {0, 1}, "", {}, {}}};
  EXPECT_EQ(s.rdma_of(0), &s.hosts[0].rdma[2]);
  EXPECT_EQ(s.rdma_of(1), &s.hosts[0].rdma[0]);
  EXPECT_EQ(s.rdma_of(2), &s.hosts[0].rdma[0]);  // both nodes: 200 Gb/s beats unknown
  s.hosts[0].rdma[0].active = false;
  EXPECT_EQ(s.rdma_of(1), &s.hosts[0].rdma[2]);

  // Devices round-trip through the topology file.
  const std::string text = to_json(s);
  EXPECT_NE(text.find("\"device\": \"mlx5_0\""), std::string::npos) << text;
  EXPECT_EQ(to_json(from_json(text)), text);
}

// Four ranks on one host driving GPUs: ranks 0 and 1 share GPU A, whose peers
// are B; rank 2 drives B; rank 3 drives C, which reaches no other; a fifth rank on
// another host drives its own GPU, and a sixth rank drives none.
TEST(TopoLinks, GpuClassesBetweenRanksThatDriveGpus) {
  System s = twoNuma();
  Host other;
  other.identity = other.name = "b";
  other.numa = {{0, "0-7", 0}};
  s.hosts.push_back(other);
  const std::string A = "0000:17:00.0", B = "0000:18:00.0", C = "0000:65:00.0";
  s.ranks[0].gpu = A, s.ranks[0].gpu_peers = {B};
  s.ranks[1].gpu = A, s.ranks[1].gpu_peers = {B};
  s.ranks[2].gpu = B, s.ranks[2].gpu_peers = {A};
  s.ranks[3].gpu = C;
  s.ranks.push_back({1, 20, "0-1", {0}, "0000:17:00.0", {}, {}});
  s.ranks.push_back({0, 21, "4-5", {1}, "", {}, {}});
  EXPECT_EQ(s.gpu_link(0, 0), LinkClass::Self);
  EXPECT_EQ(s.gpu_link(0, 1), LinkClass::GpuSame);
  EXPECT_EQ(s.gpu_link(0, 2), LinkClass::GpuP2P);
  EXPECT_EQ(s.gpu_link(2, 1), LinkClass::GpuP2P);
  EXPECT_EQ(s.gpu_link(0, 3), LinkClass::GpuStaged);
  EXPECT_EQ(s.gpu_link(3, 2), LinkClass::GpuStaged);
  // Another host: the network, whatever the bus addresses say.
  EXPECT_EQ(s.gpu_link(0, 4), LinkClass::Network);
  // A rank without a GPU: the CPU classes.
  EXPECT_EQ(s.gpu_link(5, 2), s.link(5, 2));
  EXPECT_EQ(s.gpu_link(5, 2), LinkClass::ShmNuma);
  EXPECT_STREQ(link_class_name(LinkClass::GpuStaged), "STG");
  const std::string text = to_json(s);
  EXPECT_EQ(to_json(from_json(text)), text);
  EXPECT_EQ(from_json(text).gpu_link(0, 2), LinkClass::GpuP2P);
}

// NVLink as NVML reports it, from a stand-in NVML (fake_nvml.cpp: 17:00.0 and
// 65:00.0 joined, ca:00.0 and e3:00.0 joined, the pairs across over PCIe).
TEST(TopoNvml, NvlinkPeersAsNvmlReportsThem) {
  const char* lib = std::getenv("WEFT_TEST_FAKE_NVML");
  ASSERT_NE(lib, nullptr) << "meson sets WEFT_TEST_FAKE_NVML to the stand-in NVML";
  // Held open here, so that its count of open NVML handles outlives each query's dlclose.
  void* handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto open_handles = reinterpret_cast<int (*)()>(dlsym(handle, "fake_nvml_open_handles"));
  ASSERT_NE(open_handles, nullptr);
  const std::vector<std::string> all = {"0000:17:00.0", "0000:65:00.0", "0000:ca:00.0", "0000:e3:00.0"};
  std::string why;
  EXPECT_EQ(nvlink_peers(all[0], all, &why, lib), std::vector<std::string>{all[1]});
  EXPECT_EQ(why, "");
  EXPECT_EQ(nvlink_peers(all[3], all, &why, lib), std::vector<std::string>{all[2]});
  EXPECT_EQ(nvlink_peers("0000:CA:00.0", {all[0], all[3]}, &why, lib), std::vector<std::string>{all[3]});
  EXPECT_TRUE(nvlink_peers(all[0], {all[2], all[3]}, &why, lib).empty());
  EXPECT_EQ(open_handles(), 0) << "NVML left initialized after a query";
  dlclose(handle);
  // A GPU NVML does not know, and no NVML at all: nothing, and why.
  EXPECT_TRUE(nvlink_peers("0000:99:00.0", all, &why, lib).empty());
  EXPECT_NE(why.find("does not know GPU 0000:99:00.0"), std::string::npos) << why;
  EXPECT_TRUE(nvlink_peers(all[0], all, &why, "libweft-no-such-nvml.so.1").empty());
  EXPECT_NE(why.find("no NVML"), std::string::npos) << why;
}

// NVLink between two GPUs that reach each other, recorded by the rank, is its own
// class; the list round-trips in a topology file, which refuses an NVLink peer
// that is not a peer.
TEST(TopoLinks, NvlinkIsToldFromPcie) {
  System s = twoNuma();
  const std::string A = "0000:17:00.0", B = "0000:65:00.0", C = "0000:ca:00.0";
  s.ranks[0].gpu = A, s.ranks[0].gpu_peers = {B, C}, s.ranks[0].gpu_nvlink = {B};
  s.ranks[1].gpu = B, s.ranks[1].gpu_peers = {A, C}, s.ranks[1].gpu_nvlink = {A};
  s.ranks[2].gpu = C, s.ranks[2].gpu_peers = {A, B};
  EXPECT_EQ(s.gpu_link(0, 1), LinkClass::GpuNvlink);
  EXPECT_EQ(s.gpu_link(1, 0), LinkClass::GpuNvlink);
  EXPECT_EQ(s.gpu_link(0, 2), LinkClass::GpuP2P);
  EXPECT_EQ(s.gpu_link(2, 1), LinkClass::GpuP2P);
  EXPECT_STREQ(link_class_name(LinkClass::GpuNvlink), "NVL");
  const std::string text = to_json(s);
  EXPECT_NE(text.find("\"gpu_nvlink\": [\"0000:65:00.0\"]"), std::string::npos) << text;
  EXPECT_EQ(to_json(from_json(text)), text);
  EXPECT_EQ(from_json(text).gpu_link(0, 1), LinkClass::GpuNvlink);
  std::string bad = text;
  const std::string good_list = "\"gpu_nvlink\": [\"0000:65:00.0\"]";
  bad.replace(bad.find(good_list), good_list.size(), "\"gpu_nvlink\": [\"0000:99:00.0\"]");
  try {
    from_json(bad);
    ADD_FAILURE() << "an NVLink peer that is not a peer was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu_nvlink names 0000:99:00.0"), std::string::npos) << e.what();
  }
}

// WEFT_BIND=numa's choice on a host of two nodes of 4 CPUs: a rank whose GPU is on
// node 1 takes node 1's CPUs whatever its local rank; without a GPU (or a GPU on a
// node it may not use) local ranks go to the nodes in blocks.
TEST(TopoBind, NumaShareNearTheGpu) {
  const std::vector<NumaNode> numa = {{0, "0-3", 0}, {1, "4-7", 0}};
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(numa_share(numa, all, 0, 4, 1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(numa_share(numa, all, 3, 4, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(numa_share(numa, all, 0, 4, -1), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(numa_share(numa, all, 2, 4, -1), (std::vector<int>{4, 5, 6, 7}));
  // The process may use CPUs 0-5 only: node 1's share is 4-5.
  const std::vector<int> some = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(numa_share(numa, some, 0, 2, 1), (std::vector<int>{4, 5}));
  // A GPU on a node with none of the allowed CPUs: the blocks.
  EXPECT_EQ(numa_share(numa, {0, 1}, 1, 2, 1), (std::vector<int>{0, 1}));
  EXPECT_TRUE(numa_share(numa, {}, 0, 1, 0).empty());
}

TEST_F(FakeSysfs, PciNumaNode) {
  EXPECT_EQ(pci_numa_node(root_, "0000:17:00.0"), 1);
  EXPECT_EQ(pci_numa_node(root_, "0000:99:00.0"), -1);
  EXPECT_EQ(pci_numa_node(root_, ""), -1);
}

// Files written before GPUs and RDMA ports were listed still load, with none.
TEST(TopoFile, FilesWithoutDevicesLoad) {
  std::string text = to_json(twoNuma());
  const size_t gpus = text.find(",\n     \"gpus\": []");
  ASSERT_NE(gpus, std::string::npos) << text;
  text.erase(gpus, text.find("]}", text.find("\"rdma\"")) + 1 - gpus);
  ASSERT_EQ(text.find("gpus"), std::string::npos) << text;
  const System s = from_json(text);
  EXPECT_TRUE(s.hosts[0].gpus.empty());
  EXPECT_TRUE(s.hosts[0].rdma.empty());
  EXPECT_EQ(s.hosts[0].nics.size(), 3u);
}

TEST(TopoFile, BadFilesNameTheProblem) {
  auto error = [](const std::string& text) {
    try {
      from_json(text);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("{\"ranks\": []}").find("\"hosts\""), std::string::npos);
  std::string text = to_json(twoNuma());
  std::string bad = text;
  bad.replace(bad.find("\"host\": 0"), 9, "\"host\": 7");
  EXPECT_NE(error(bad).find("names host 7 of 1"), std::string::npos) << error(bad);
  // Numbers the fields cannot hold (found by fuzz_topology_file: converting 1e66 was
  // undefined, and -1 bytes loaded as 2^64 - 1, which did not load again once printed).
  for (const char* n : {"1e66", "2.5", "-1e300", "-1", "2147483648"}) {
    bad = text;
    bad.replace(bad.find("\"host\": 0"), 9, std::string("\"host\": ") + n);
    EXPECT_NE(error(bad).find("\"host\" is not a whole number in [0, 2147483647]"), std::string::npos)
        << n << ": " << error(bad);
  }
  bad = text;
  bad.replace(bad.find("\"bytes\": "), 9, "\"bytes\": -");
  EXPECT_NE(error(bad).find("\"bytes\" is not a whole number"), std::string::npos) << error(bad);
  bad = text;
  bad.replace(bad.find("\"cpus\": \"0-1\""), 13, "\"cpus\": \"3-1\"");
  EXPECT_NE(error(bad).find("bad CPU list"), std::string::npos) << error(bad);
  EXPECT_NE(error(text.substr(0, text.size() / 2)).find("JSON"), std::string::npos);
  // Found by fuzz_topology_file: 10,000 nested arrays overflowed the parser's stack.
  EXPECT_NE(error(std::string(10000, '[')).find("JSON: nesting deeper than 256 levels"), std::string::npos);
}

TEST(TopoCpuList, ParsesAndFormats) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list(parse_cpu_list("5,1,2,3")), "1-3,5");
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_THROW(parse_cpu_list("2-1"), std::runtime_error);
  EXPECT_THROW(parse_cpu_list("x"), std::runtime_error);
  EXPECT_THROW(parse_cpu_list("1-"), std::runtime_error);
  EXPECT_THROW(parse_cpu_list("-1"), std::runtime_error);
  EXPECT_THROW(parse_cpu_list("3 "), std::runtime_error);
  // Found by fuzz_topology_file: a range like this took 8 GB; numbers past int were undefined.
  for (const char* huge : {"0-2000000000", "99999999999999999999", "65536"}) {
    try {
      parse_cpu_list(huge);
      ADD_FAILURE() << huge << " parsed";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("CPU numbers stop below 65536"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_cpu_list("65535,0-1,1"), (std::vector<int>{0, 1, 65535}));
}

}  // namespace
}  // namespace weft::topo
