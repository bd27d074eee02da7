// The tuning constants: alpha/beta/gamma per link class, refined per (collective,
// algorithm, rank count, size range) where measurement showed the generic constants
// mispredict. One table holds every default (printed at INFO, like NCCL's tuning
// table); a tuning file written by scripts/calibrate (WEFT_TUNING_FILE) adds or
// replaces entries.
//
// Why per-algorithm entries: the formulas above the builders count messages and
// bytes, but on shared memory the executor's real costs differ by algorithm (eager
// FIFO below WEFT_SHM_EAGER_MAX, in-place reads above it, oversubscribed cores at
// 4 ranks on 2 cores), so one (alpha, beta, gamma) cannot rank them all correctly.
// Each entry keeps the builder's formula and only changes its constants.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "base/status.h"
#include "sched/schedule.h"

namespace weft::tune {

// shm: shared memory within a NUMA domain (or where NUMA is unknown); numa: shared
// memory between a host's NUMA domains; net: between hosts. Device memory over
// cuda_p2p (comm/device_p2p.h): gpu: ranks sharing one GPU; nvl: GPUs joined by
// NVLink; p2p: GPUs with peer access over PCIe; stg: GPUs of one host without peer
// access, through buffers in pinned host memory (alpha: one barrier of the ranks'
// streams, beta: a byte read from a peer's buffer, gamma: a byte reduced). The
// device classes go from the fastest to the slowest link.
enum class LinkClass : uint8_t { Shm, Net, Numa, Gpu, Nvl, Pcie, Stg };
constexpr LinkClass kLinkClasses[] = {LinkClass::Shm, LinkClass::Numa, LinkClass::Net,  LinkClass::Gpu,
                                      LinkClass::Nvl, LinkClass::Pcie, LinkClass::Stg};
const char* link_class_name(LinkClass c);

// The generic constants per link class; used where no entry below matches.
struct LinkClassCosts {
  // The values before defaults.cpp's table replaces them (it does, in
  // default_table()). shm: fitted on the 2-core development VM over every all-reduce
  // algorithm at 4 ranks (fp32 sum, machine idle): ~2 us per message, ~0.09 ns/B
  // moved (~11 GB/s, cache-resident pieces included), ~0.1 ns/B reduced (AVX2).
  algo::LinkCost shm{2.0e-6, 9.3e-11, 1.0e-10};
  // net: TCP over a ~10 Gb/s NIC: ~25 us per message, ~1 ns/B on the wire.
  algo::LinkCost net{25.0e-6, 1.0e-9, 1.0e-10};
  // numa: shm's with a cross-socket hop (guessed, as defaults.cpp says).
  algo::LinkCost numa{2.5e-6, 2.0e-10, 1.0e-10};
  // gpu, nvl, p2p, stg: as defaults.cpp says.
  algo::LinkCost gpu{1.7e-4, 4.8e-13, 4.8e-13};
  algo::LinkCost nvl{1.0e-5, 3.3e-12, 4.8e-13};
  algo::LinkCost pcie{1.0e-5, 5.0e-11, 4.8e-13};
  algo::LinkCost stg{1.0e-5, 5.0e-11, 5.0e-11};
  algo::LinkCost& of(LinkClass c) {
    switch (c) {
      case LinkClass::Shm: return shm;
      case LinkClass::Numa: return numa;
      case LinkClass::Gpu: return gpu;
      case LinkClass::Nvl: return nvl;
      case LinkClass::Pcie: return pcie;
      case LinkClass::Stg: return stg;
      case LinkClass::Net: break;
    }
    return net;
  }
  const algo::LinkCost& of(LinkClass c) const { return const_cast<LinkClassCosts*>(this)->of(c); }
};

// One refinement. Wildcards: algo "*" (every algorithm of coll), nranks 0 (any).
// Among matching entries the most specific wins: exact algorithm, then exact rank
// count, then the largest from_bytes not above the message size.
struct Entry {
  LinkClass cls = LinkClass::Shm;
  sched::Coll coll = sched::Coll::AllReduce;
  std::string algo = "*";
  int nranks = 0;
  uint64_t from_bytes = 0;  // applies to messages of at least this many bytes
  algo::LinkCost cost;
};

// The network ports' token bucket (a traffic shaper such as tc's tbf, a cloud
// NIC's burst allowance): up to `bytes` saved up while a port is idle pass at
// 1 / line_s_per_byte; net's beta is the sustained rate. Simulated layouts only
// (sim::Port); bytes 0: none.
struct Burst {
  double bytes = 0;
  double line_s_per_byte = 0;
};

// The CPU a message takes where a machine's ranks outnumber its cores (sim::Fabric's
// cpu_share and net_rx_s_per_byte). Simulated layouts only; < 0: the simulator's
// defaults, fitted on one VM (a slower kernel spends more per message).
struct Cores {
  double cpu_share = -1;
  double net_rx_s_per_byte = -1;
};

struct Table {
  LinkClassCosts base;
  std::vector<Entry> entries;
  Burst net_burst;
  Cores cores;
  // A network message's time on the wire after its ports have carried it
  // (sim::Fabric::net_wire_s): a delay that holds no port. 0: none.
  double net_wire_s = 0;

  // The constants for one call; `bytes` = count * element size.
  algo::LinkCost lookup(LinkClass cls, sched::Coll coll, const char* algo, int nranks,
                        uint64_t bytes) const;
  // Adds `e`, replacing an entry with the same key.
  void set(const Entry& e);
};

// The built-in defaults (measured on this project's development machine).
Table default_table();

// Tuning file: '#' comments; one entry per line:
//   <shm|numa|net|gpu|nvl|p2p|stg> <collective|*> <algorithm|*> <nranks|0> <from_bytes> <alpha_s> <beta_s_per_byte> <gamma_s_per_byte>
// A line with collective "*" (and algorithm "*", nranks 0, from_bytes 0) replaces the
// class's generic constants. Entries replace same-key defaults; others stay.
//   burst net <bytes> <line_s_per_byte>
// sets the network ports' token bucket (Burst).
//   cores <cpu_share> <net_rx_s_per_byte>
// sets what a message costs a core where ranks outnumber cores (Cores).
//   wire net <seconds>
// sets a network message's time on the wire (Table::net_wire_s).
Status load_tuning_file(const std::string& path, Table* table);
Status parse_tuning_text(const std::string& text, const std::string& origin, Table* table);
// The table in tuning-file syntax (what INFO prints and calibration writes).
std::string format_table(const Table& table);
std::string format_entry(const Entry& e);

// "allreduce" -> Coll::AllReduce; false for unknown names.
bool parse_coll(const std::string& name, sched::Coll* out);

}  // namespace weft::tune
