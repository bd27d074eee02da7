// Device collectives of a communicator spanning hosts (Communicator::
// split_device_levels): each goes over cuda_p2p within every host (the `local`
// level) and is staged only for what crosses hosts, among the ranks of one local
// rank (the `cross` level), all on the caller's stream. Ranks are host-major:
// rank = host * L + local rank, M hosts. Levels sum all the way; an average
// divides once, at the end, by every rank's count.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "comm/communicator.h"
#include "comm/device_kernels.h"
#include "comm/device_p2p.h"

namespace weft {
namespace {

using sched::Coll;

struct Levels {
  Communicator& local;
  Communicator& cross;
  transport::cuda_p2p::Group& p2p;  // local's
  int rank, nranks, L, M;
  void* stream;
  exec::cuda::Stream s() const { return static_cast<exec::cuda::Stream>(stream); }
};

weftRedOp_t summing(weftRedOp_t op) { return op == weftAvg ? weftSum : op; }

Status divide_if_avg(const Levels& v, const CollArgs& dev, void* at, size_t count) {
  return dev.op == weftAvg && count > 0 ? divide_on_stream(*exec::cuda::api(), at, count, dev.dtype, v.nranks, v.s())
                                        : Status::Ok();
}

// The elements [0, L * (count / L)): reduce-scatter within the host into this
// rank's slice of the receive buffer, all-reduce the slice across hosts,
// all-gather within the host. The rest is the caller's.
Status all_reduce(const Levels& v, const CollArgs& dev) {
  const size_t esize = reduce::dtype_size(dev.dtype), chunk = dev.count / static_cast<size_t>(v.L);
  if (chunk == 0) return Status::Ok();
  const weftRedOp_t op = summing(dev.op);
  unsigned char* mine = static_cast<unsigned char*>(dev.recv) + static_cast<size_t>(v.local.rank()) * chunk * esize;
  WEFT_TRY(v.local.enqueue(CollArgs{Coll::ReduceScatter, dev.send, mine, chunk, dev.dtype, op}, v.stream));
  WEFT_TRY(v.cross.enqueue(CollArgs{Coll::AllReduce, mine, mine, chunk, dev.dtype, op}, v.stream));
  WEFT_TRY(divide_if_avg(v, dev, mine, chunk));
  return v.local.enqueue(CollArgs{Coll::AllGather, mine, dev.recv, chunk, dev.dtype}, v.stream);
}

// To the root's local rank on every host across hosts, then within each host from it.
Status broadcast(const Levels& v, const CollArgs& dev) {
  const int root_host = dev.root / v.L, root_local = dev.root % v.L;
  if (v.local.rank() == root_local)
    WEFT_TRY(v.cross.enqueue(CollArgs{Coll::Broadcast, dev.send, dev.recv, dev.count, dev.dtype, weftSum, root_host},
                             v.stream));
  return v.local.enqueue(CollArgs{Coll::Broadcast, dev.recv, dev.recv, dev.count, dev.dtype, weftSum, root_local},
                         v.stream);
}

// Per round: onto the root's local rank within each host, then across hosts onto the root.
Status reduce_to_root(const Levels& v, const CollArgs& dev) {
  const size_t esize = reduce::dtype_size(dev.dtype), c = dev.count;
  const int root_host = dev.root / v.L, root_local = dev.root % v.L;
  const size_t per = p2p_round_elems(v.p2p, dev.dtype, 1);
  for (size_t first = 0; first < c; first += per) {
    const size_t m = std::min(per, c - first);
    void* sums = nullptr;
    WEFT_TRY(p2p_reduce_for_host(v.p2p, dev.send, dev.dtype, summing(dev.op), root_local, first, m, v.s(), &sums));
    if (v.local.rank() != root_local) continue;
    void* to = v.rank == dev.root ? static_cast<unsigned char*>(dev.recv) + first * esize : nullptr;
    WEFT_TRY(v.cross.enqueue(CollArgs{Coll::Reduce, sums, to, m, dev.dtype, summing(dev.op), root_host}, v.stream));
  }
  return v.rank == dev.root ? divide_if_avg(v, dev, dev.recv, c) : Status::Ok();
}

// Each rank's block crosses the network once per host: the ranks of one local
// rank gather theirs into M blocks of the receive buffer that do not hold this
// rank's own (the in-place input), then each host's ranks swap those into rank
// order.
Status all_gather(const Levels& v, const CollArgs& dev) {
  const size_t esize = reduce::dtype_size(dev.dtype);
  const int start = v.rank + 1 + v.M <= v.nranks ? v.rank + 1 : v.rank - v.M;
  auto* temp = static_cast<unsigned char*>(dev.recv) + static_cast<size_t>(start) * dev.count * esize;
  WEFT_TRY(v.cross.enqueue(CollArgs{Coll::AllGather, dev.send, temp, dev.count, dev.dtype}, v.stream));
  return p2p_gather_by_host(v.p2p, temp, dev.recv, dev.count, dev.dtype, v.M, v.s());
}

// Per round of each block's elements: the host's ranks reduce the blocks of the
// ranks of this rank's local rank, then those ranks reduce-scatter the results
// across hosts.
Status reduce_scatter(const Levels& v, const CollArgs& dev) {
  const size_t esize = reduce::dtype_size(dev.dtype), c = dev.count;
  const size_t per = p2p_round_elems(v.p2p, dev.dtype, v.nranks);
  for (size_t first = 0; first < c; first += per) {
    const size_t m = std::min(per, c - first);
    void* sums = nullptr;
    WEFT_TRY(p2p_reduce_by_host(v.p2p, dev.send, c, dev.dtype, summing(dev.op), v.M, first, m, v.s(), &sums));
    WEFT_TRY(v.cross.enqueue(CollArgs{Coll::ReduceScatter, sums, static_cast<unsigned char*>(dev.recv) + first * esize,
                                      m, dev.dtype, summing(dev.op)},
                             v.stream));
  }
  return divide_if_avg(v, dev, dev.recv, c);
}

// The input is host-major: the ranks of one local rank swap, across hosts, the L
// blocks each holds for every host into the receive buffer; then each host's
// ranks transpose those into their places.
Status all_to_all(const Levels& v, const CollArgs& dev) {
  WEFT_TRY(v.cross.enqueue(CollArgs{Coll::AllToAll, dev.send, dev.recv, dev.count * static_cast<size_t>(v.L), dev.dtype},
                           v.stream));
  return p2p_transpose_by_host(v.p2p, dev.recv, dev.count, dev.dtype, v.M, v.s());
}

}  // namespace

Status Communicator::split_device_levels(const exec::cuda::Api& d) {
  // Hosts of equal size holding consecutive ranks (local_size_), more than one
  // rank each. Every rank decides alike (local_size_ comes from every rank's
  // card); WEFT_P2P_DISABLE, which may differ, acts in the hosts' own choice below.
  const int L = local_size_;
  if (L <= 1 || L >= nranks_) return Status::Ok();
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::min<int64_t>(timeout_ms_, INT32_MAX));
  auto make = [&](int color, std::unique_ptr<Communicator>* out) -> Status {
    boot::UniqueId id;
    int n = 0, r = 0;
    Lineage lineage;
    std::unique_ptr<boot::Bootstrap> boot;
    WEFT_TRY(split(color, rank_, &id, &n, &r, &lineage, &boot));
    return create(id, n, r, &config, out, lineage, std::move(boot));
  };
  std::unique_ptr<Communicator> local, cross;
  WEFT_TRY(make(rank_ / L, &local));
  WEFT_TRY(make(rank_ % L, &cross));
  WEFT_TRY(local->choose_device_path(d));
  // Every host's ranks must reach each other; else every call stays staged.
  // Each rank's WEFT_DEVICE_LEVELS and its host's link class go along: rank 0's
  // setting and the slowest class hold, so that every rank plans each call alike.
  const int64_t mode = std::clamp<int64_t>(params::DEVICE_LEVELS(), -1, 1);
  const int64_t rounds = std::clamp<int64_t>(params::DEVICE_LEVEL_ROUNDS(), -1, 64);
  const uint8_t mine[4] = {static_cast<uint8_t>(local->p2p_.active() ? 1 : 0), static_cast<uint8_t>(mode + 1),
                           static_cast<uint8_t>(local->p2p_link_), static_cast<uint8_t>(rounds + 1)};
  std::vector<uint8_t> all(4 * static_cast<size_t>(nranks_));
  WEFT_TRY(run(CollArgs{Coll::AllGather, mine, all.data(), 4, weftUint8}));
  const int agreed = all[1] - 1;
  if (rounds != all[3] - 1)
    WEFT_WARN(TRANSPORT, "rank %d: WEFT_DEVICE_LEVEL_ROUNDS=%d here, rank 0's %d holds", rank_,
              static_cast<int>(rounds), all[3] - 1);
  if (mode != agreed)
    WEFT_WARN(TRANSPORT, "rank %d: WEFT_DEVICE_LEVELS=%d here, rank 0's %d holds", rank_, static_cast<int>(mode),
              agreed);
  uint8_t slowest = 0;  // the device classes are declared fastest first
  for (int r = 0; r < nranks_; ++r) {
    const uint8_t* theirs = &all[4 * static_cast<size_t>(r)];
    if (theirs[0] == 0) {
      WEFT_INFO(TRANSPORT, "rank %d: device calls staged across hosts: rank %d's host cannot use cuda_p2p", rank_, r);
      return Status::Ok();
    }
    slowest = std::max(slowest, theirs[2]);
  }
  if (agreed == 0) {
    WEFT_INFO(TRANSPORT, "rank %d: device calls staged across hosts: WEFT_DEVICE_LEVELS=0", rank_);
    return Status::Ok();
  }
  device_local_ = std::move(local);
  device_cross_ = std::move(cross);
  device_levels_mode_ = agreed;
  device_level_rounds_mode_ = all[3] - 1;
  device_levels_link_ = static_cast<tune::LinkClass>(slowest);
  device_levels_.store(true, std::memory_order_release);
  WEFT_INFO(TRANSPORT,
            "rank %d: device collectives across hosts: cuda_p2p within each host of %d ranks, staged across the %d "
            "hosts%s",
            rank_, L, nranks_ / L, agreed < 0 ? " where predicted faster than staged whole (per call)" : "");
  return Status::Ok();
}

bool Communicator::levels_serve(const CollArgs& dev) const {
  if (!device_levels_.load(std::memory_order_acquire)) return false;
  switch (dev.coll) {
    case Coll::AllReduce:  // a vector shorter than a slice per local rank is staged
      return dev.op < weftNumOps && dev.count >= static_cast<size_t>(local_size_);
    case Coll::ReduceScatter:
    case Coll::Reduce: return dev.op < weftNumOps;  // pre-multiplied sums are staged
    case Coll::Broadcast:
    case Coll::AllGather:
    case Coll::AllToAll: return true;
  }
  return false;
}

Status Communicator::host_prediction(const CollArgs& a, double* seconds, std::string* algo) {
  std::lock_guard<std::mutex> lock(queue_->drive_mu());
  std::vector<tune::Prediction> cands;
  const tune::Prediction* best = nullptr;
  WEFT_TRY(tuner_->model_pick(a.coll, build_args(a), reduce::dtype_size(a.dtype), &cands, &best));
  if (best->algo->cost == nullptr)  // forced alone without a model
    return Error(weftInvalidUsage, "%s (count %zu): %s has no cost model to plan by", sched::coll_name(a.coll), a.count,
                 best->algo->name);
  *seconds = best->seconds;
  *algo = best->algo->name;
  return Status::Ok();
}

Status Communicator::device_plan(const CollArgs& dev, bool* levels, int* rounds, tune::DevicePlanCost* cost) {
  const size_t esize = reduce::dtype_size(dev.dtype);
  const int L = local_size_, M = nranks_ / local_size_;
  const uint64_t slice = dev.count / static_cast<uint64_t>(L);
  // Overlapped rounds: an all-reduce of a slice of two elements or more.
  const int rounds_mode = dev.coll == Coll::AllReduce && slice >= 2 ? device_level_rounds_mode_ : 0;
  const int forced_rounds = rounds_mode >= 2 ? static_cast<int>(std::min<uint64_t>(rounds_mode, slice)) : 1;
  const auto key = std::make_tuple(static_cast<int>(dev.coll), static_cast<uint64_t>(dev.count), esize, dev.root);
  {
    std::lock_guard<std::mutex> lock(device_explain_mu_);
    auto it = device_plans_.find(key);
    if (it != device_plans_.end()) {
      const tune::DevicePlanCost& pc = it->second.second;
      *levels = it->second.first;
      *rounds = *levels && pc.in_rounds ? pc.rounds : 1;
      if (cost != nullptr) *cost = pc;
      return Status::Ok();
    }
  }
  if (device_levels_mode_ >= 0 && (rounds_mode != -1 || device_levels_mode_ == 0) && cost == nullptr &&
      !tuner_->explaining()) {
    *levels = device_levels_mode_ == 1;
    *rounds = forced_rounds;
    return Status::Ok();
  }
  const uint64_t bytes = dev.count * esize;
  Communicator& local = *device_local_;
  tune::DevicePlanCost pc;
  // The levels of an all-reduce of `count` elements: within hosts by the
  // formulas; the part across hosts (count / L elements) as staged.
  auto price_levels = [&](uint64_t count, tune::DeviceTerms* within, double* copies, double* across,
                          std::string* algo) -> Status {
    const uint64_t b = count * esize;
    const algo::LinkCost lc = tuner_->table().lookup(device_levels_link_, dev.coll, "*", L, b);
    *within = tune::levels_local_cost(dev.coll, L, M, b, local.p2p_.buffer_bytes(), device_levels_link_, lc);
    CollArgs a = dev;
    a.count = tune::levels_cross_count(dev.coll, L, count);
    a.root = dev.root / L;
    *copies = *across = 0;
    if (a.count > 0) {
      WEFT_TRY(device_cross_->host_prediction(a, across, algo));
      *copies = device_cross_->staging_copies(a);
    }
    return Status::Ok();
  };
  auto price = [&]() -> Status {
    WEFT_TRY(price_levels(dev.count, &pc.local, &pc.cross_copies, &pc.cross_host, &pc.cross_algo));
    // In R rounds, each priced as its largest (round 0).
    std::vector<int> tries;
    if (rounds_mode >= 2) tries.push_back(forced_rounds);
    if (rounds_mode == -1)
      for (int r : {2, 4, 8})
        if (static_cast<uint64_t>(r) <= slice) tries.push_back(r);
    for (int r : tries) {
      tune::DeviceTerms within;
      double copies = 0, across = 0;
      std::string algo;
      const uint64_t largest = (slice + static_cast<uint64_t>(r) - 1) / static_cast<uint64_t>(r);
      WEFT_TRY(price_levels(largest * static_cast<uint64_t>(L), &within, &copies, &across, &algo));
      const double t = tune::level_rounds_cost(within.total() + copies, across, r);
      if (pc.rounds == 0 || t < pc.overlapped())
        pc.rounds = r, pc.round_local = within.total(), pc.round_copies = copies, pc.round_cross = across;
    }
    pc.rounds_forced = rounds_mode >= 2;
    pc.in_rounds = pc.rounds >= 2 && (pc.rounds_forced || pc.overlapped() <= 0.9 * pc.levels());
    // Staged: the whole call as a host collective of every rank.
    WEFT_TRY(host_prediction(dev, &pc.host, &pc.host_algo));
    pc.copies = staging_copies(dev);
    return Status::Ok();
  };
  // A call the host tuner cannot price (WEFT_ALGO forcing an algorithm without
  // a model) goes by levels, as every rank finds alike.
  const Status priced = price();
  if (!priced.ok()) {
    *levels = device_levels_mode_ != 0;
    *rounds = forced_rounds;
    return cost != nullptr ? priced : Status::Ok();
  }
  const bool pick = device_levels_mode_ >= 0 ? device_levels_mode_ == 1 : pc.levels_plan() <= pc.staged();
  std::lock_guard<std::mutex> lock(device_explain_mu_);
  if (device_plans_.size() >= tune::Tuner::kMaxCachedShapes) device_plans_.clear();
  device_plans_[key] = {pick, pc};
  if (tuner_->explaining() &&
      device_plans_explained_.insert({static_cast<int>(dev.coll), tune::size_class(bytes)}).second)
    std::fputs(tune::explain_device_plan(dev.coll, bytes, L, M, device_levels_link_, pc, pick,
                                         device_levels_mode_ >= 0 ? device_levels_mode_ : -1)
                   .c_str(),
               stderr);
  *levels = pick;
  *rounds = pick && pc.in_rounds ? pc.rounds : 1;
  if (cost != nullptr) *cost = pc;
  return Status::Ok();
}

// Round i covers elements [L first(i), L (first(i) + part(i))) of the whole
// slices, part(i) elements a local rank (round 0 the largest). The stream takes
// round i's reduce-scatter within the host and its copy into pinned memory
// ahead of round i - 1's copy back and all-gather (enqueue_chunked's order), so
// the engine runs round i - 1 across hosts meanwhile.
Status Communicator::all_reduce_in_rounds(const CollArgs& dev, void* stream, int rounds) {
  Communicator& local = *device_local_;
  const size_t esize = reduce::dtype_size(dev.dtype), L = static_cast<size_t>(local_size_);
  const size_t slice = dev.count / L, R = std::min(static_cast<size_t>(rounds), slice);
  const weftRedOp_t op = summing(dev.op);
  const auto* send = static_cast<const unsigned char*>(dev.send);
  auto* recv = static_cast<unsigned char*>(dev.recv);
  auto first = [&](size_t i) { return i * (slice / R) + std::min(i, slice % R); };
  auto part = [&](size_t i) { return slice / R + (i < slice % R ? 1 : 0); };
  auto mine = [&](size_t i) { return recv + (L * first(i) + static_cast<size_t>(local.rank()) * part(i)) * esize; };
  if (!rounds_said_.exchange(true))
    WEFT_INFO(TRANSPORT, "rank %d: device all-reduce across hosts in %zu overlapped rounds (%zu elements)", rank_, R,
              dev.count);
  const ChunkHook before = [&](size_t i) {
    return local.enqueue(CollArgs{Coll::ReduceScatter, send + L * first(i) * esize, mine(i), part(i), dev.dtype, op},
                         stream);
  };
  const ChunkHook after = [&](size_t i) -> Status {
    if (dev.op == weftAvg)
      WEFT_TRY(divide_on_stream(*exec::cuda::api(), mine(i), part(i), dev.dtype, nranks_,
                                static_cast<exec::cuda::Stream>(stream)));
    return local.enqueue(CollArgs{Coll::AllGather, mine(i), recv + L * first(i) * esize, part(i), dev.dtype}, stream);
  };
  return device_cross_->enqueue_allreduce_rounds(
      stream, dev.dtype, op, R, [&](size_t i) { return std::make_pair(static_cast<void*>(mine(i)), part(i)); }, before,
      after);
}

Status Communicator::enqueue_across_hosts(const CollArgs& dev, void* stream, int rounds) {
  const Levels v{*device_local_, *device_cross_, device_local_->p2p_, rank_, nranks_, local_size_,
                 nranks_ / local_size_, stream};
  if (dev.count == 0) return Status::Ok();
  Status st;
  switch (dev.coll) {
    case Coll::AllReduce: {
      st = rounds >= 2 ? all_reduce_in_rounds(dev, stream, rounds) : all_reduce(v, dev);
      // The elements past the last whole slice, staged on this communicator.
      const size_t esize = reduce::dtype_size(dev.dtype);
      const size_t whole = dev.count / static_cast<size_t>(local_size_) * static_cast<size_t>(local_size_);
      if (st.ok() && whole < dev.count) {
        CollArgs tail = dev;
        tail.send = static_cast<const unsigned char*>(dev.send) + whole * esize;
        tail.recv = static_cast<unsigned char*>(dev.recv) + whole * esize;
        tail.count = dev.count - whole;
        st = enqueue_staged(tail, stream);
      }
      break;
    }
    case Coll::Broadcast: st = broadcast(v, dev); break;
    case Coll::Reduce: st = reduce_to_root(v, dev); break;
    case Coll::AllGather: st = all_gather(v, dev); break;
    case Coll::ReduceScatter: st = reduce_scatter(v, dev); break;
    case Coll::AllToAll: st = all_to_all(v, dev); break;
  }
  // Part of the call may be on the stream, out of step with the peers': the
  // communicator fails, and with it both levels.
  if (!st.ok()) fail(st);
  return st;
}

}  // namespace weft
