// What the simulator and the topology-aware tuner know of a machine: which host and
// which NUMA domain (or GPU island) each rank is on, the network port each rank's
// traffic leaves by, and alpha-beta-gamma costs per link level. Built by generators
// (weft-sim's --nodes ...), from a topology (topo::System), or by hand in tests.
//
// Levels, from the closest: Domain (two ranks in one NUMA node or NVLink island),
// Host (one host, across domains), Network (across hosts). A level's LinkCost is what
// one rank's port pays per message (alpha) and per byte (beta) on that level, and per
// byte reduced (gamma). Shared links are ports with their own bandwidth that several
// ranks' messages cross: each host's NICs for Network messages, and optionally one
// link per host between its domains for Host messages. A shared port of B bytes/s
// whose ranks each send at b bytes/s has max(1, floor(B/b)) lanes of B/lanes bytes/s:
// lanes carry messages side by side, more messages than lanes wait for a free lane.
//
// Cores: where a machine's ranks outnumber the cores they may run on (network
// namespaces or containers of one kernel, an oversubscribed job), its cores are a
// shared port too. There a message costs its sender and its receiver each
// cpu_share x alpha of a core (system calls, copies, waking up), the rest of alpha
// staying on the link (none where the two ends' share is more than alpha: a slow
// kernel's messages are all CPU time), and reductions and copies take a core for
// their time. With
// a core per rank nothing changes: the model is the plain alpha-beta-gamma one.
// There a network message also takes its receiver net_rx_s_per_byte of a core per
// byte: the kernel's side of it (the virtual link's and the shaper's softirqs, the
// TCP receive, the copy out), which on one machine comes out of the same cores.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "topo/topology.h"

namespace weft::sim {

enum class Level : uint8_t { Domain, Host, Network };
constexpr int kLevels = 3;
const char* level_name(Level l);  // "domain", "host", "network"

struct Port {
  double bytes_per_s = 0;  // 0: unlimited (never the bottleneck); < 0: as fast as one
                           // rank's own port on its level (one lane: its ranks take turns)
  // A token bucket (a traffic shaper: tc's tbf, a cloud NIC's burst allowance):
  // bytes_per_s (or the level's beta) is the sustained rate, and up to burst_bytes
  // saved up while the port is idle pass at line_bytes_per_s. burst_bytes 0: none.
  double burst_bytes = 0;
  double line_bytes_per_s = 0;
};

struct Fabric {
  int nranks = 0;
  std::vector<int> host;    // per rank
  std::vector<int> domain;  // per rank; a global index (domains of different hosts differ)
  std::vector<int> nic;     // per rank: index into nics for its Network messages; -1: none shared
  std::vector<Port> nics;
  std::vector<Port> cross_domain;  // per host: the link its Host-level messages share; empty: none
  std::array<algo::LinkCost, kLevels> cost;
  std::array<std::string, kLevels> label{"domain", "host", "network"};  // e.g. "nvlink", "ib"
  double copy_s_per_byte = 0;  // local copies; 0 as in the algorithms' formulas
  std::vector<int> machine;        // per rank; empty: every rank has a core of its own
  std::vector<int> machine_cores;  // per machine: the cores its ranks share
  double cpu_share = kCpuShare;
  double net_rx_s_per_byte = kNetRxSPerByte;
  // A network message's time on the wire once its ports have carried it (a long
  // link's propagation, a delay line): it holds no port, so messages sent back to
  // back pay it once between them, and each step that waits for one pays it whole.
  double net_wire_s = 0;
  // A network message goes this much when sent and the rest once its receiver
  // reads (simulate.h): Linux's largest TCP send buffer by default (tcp_wmem).
  uint64_t eager_bytes = kEagerBytes;

  // bench/topology's netns hosts (8 ranks on 2 cores, TCP): the share that
  // predicted the small sizes of three runs best (0.45: 245 of 264 within 2x, 228
  // without the cores) on one VM; another VM's kernel needed 0.73-1, so
  // bench/topology fits it per run (fit_share.py) and tune::Table::cores carries it.
  static constexpr double kCpuShare = 0.45;
  // The same namespaces: fitted to two runs of bench/topology (170 of 176 points
  // >= 1 MiB within 20%, against 164 without; 0.4 and 1.0 ns: 167 and 163), then
  // checked on two later runs: 185 of 192 (180 without). Measured on this VM, the
  // kernel spent 0.45 ns of a core per byte one iperf3 stream moved (sending,
  // forwarding and receiving) and 1.3-1.7 ns per byte 8 ranks of weft moved (their
  // waits' system calls included; bench-results/2026-11-28e-kernel-cpu.md).
  static constexpr double kNetRxSPerByte = 0.8e-9;
  static constexpr uint64_t kEagerBytes = 4 << 20;

  Level level(int a, int b) const;
  // How many distinct levels occur between two ranks (1: flat, one link class).
  int levels_used() const;
  // Whether some pair of ranks is that level apart.
  bool uses(Level l) const;
  // Every rank on a host of its own with one port of the given costs.
  static Fabric flat(int nranks, const algo::LinkCost& cost);
  // Hosts of per_host consecutive ranks, one domain each, each host's ranks taking
  // turns on one network port (as the communicator lays out what it knows).
  static Fabric host_blocks(int nranks, int per_host);
  // Whether rank r's machine has fewer cores than ranks (its cores are a port).
  bool oversubscribed(int r) const;
  // Whether some network port has a token bucket: then what a call costs depends on
  // the calls before it, and the simulator runs calls back to back (simulate.h).
  bool bursty() const;
  // consistency of the per-rank vectors; empty string if fine.
  std::string check() const;
};

// The order that puts each host's ranks next to each other (and each domain's
// within a host), otherwise keeping rank order: rings and trees built in it cross
// hosts as few times as they can. order[pos] = the rank at position pos.
std::vector<int> grouped_order(const Fabric& f);
// f with its ranks in that order: rank i of the result is rank order[i] of f.
Fabric reordered(const Fabric& f, const std::vector<int>& order);
// Ranks per host where every host holds that many consecutive ranks, else 0.
int block_size(const Fabric& f);
// Ranks per domain where every domain holds that many consecutive ranks and every
// host (of block_size ranks) the same number of domains, else 0.
int domain_block_size(const Fabric& f);

// weft-sim's generator: `nodes` hosts of `per_node` ranks in `domains` NUMA domains
// (or GPU islands) each, consecutive ranks per domain; `nics` network ports per host
// of nic_bytes_per_s each, ranks spread over them in blocks; intra, cross and inter
// the per-level costs. nics 0: no shared port (each rank's own beta limits it).
struct Generator {
  int nodes = 1, per_node = 1, domains = 1, nics = 1;
  int shared_cores = 0;  // > 0: the nodes are namespaces of one machine with this many cores
  double nic_bytes_per_s = 0;
  double cross_domain_bytes_per_s = 0;  // 0: not a shared bottleneck
  algo::LinkCost intra, cross, inter;
  std::array<std::string, kLevels> label{"domain", "host", "network"};
};
Fabric generate(const Generator& g);

// "300GB/s", "25Gb/s", "12.5GB/s", "800MB/s" -> bytes per second; false if malformed.
// A discovered or loaded topology: hosts and NUMA nodes from the system (a rank bound
// to no single NUMA node counts as its host's first), each host's ranks on the
// fastest NIC near them (topo::System::nic_of) at its speed, or as one rank's port
// where the speed is unknown (virtual interfaces).
Fabric from_system(const topo::System& s, const algo::LinkCost& intra, const algo::LinkCost& cross,
                   const algo::LinkCost& inter);

// f's machines: machine[r] (0, 1, ...) and the CPUs each rank may run on (empty:
// unknown). A machine's cores are the union of its ranks' CPUs; one with a rank of
// unknown CPUs is taken to have a core per rank.
void set_machines(const std::vector<int>& machine, const std::vector<std::vector<int>>& cpus, Fabric* f);

bool parse_bandwidth(const std::string& text, double* bytes_per_s);

}  // namespace weft::sim
