#include "sched/schedule.h"

#include <cstdio>

namespace weft::sched {

bool relabelable(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Broadcast || coll == Coll::Reduce;
}

void relabel(RankPlan* plan, const std::vector<int>& order) {
  for (Step& s : plan->steps)
    if (s.peer >= 0) s.peer = order[static_cast<size_t>(s.peer)];
}

const char* coll_name(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return "allreduce";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllGather: return "allgather";
    case Coll::ReduceScatter: return "reducescatter";
    case Coll::AllToAll: return "alltoall";
  }
  return "unknown";
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Send: return "Send";
    case Kind::Recv: return "Recv";
    case Kind::RecvReduce: return "RecvReduce";
    case Kind::Copy: return "Copy";
    case Kind::Reduce: return "Reduce";
  }
  return "Unknown";
}

const char* level_algo_name(LevelAlgo algo) {
  switch (algo) {
    case LevelAlgo::Ring: return "ring";
    case LevelAlgo::Rabenseifner: return "rabenseifner";
    case LevelAlgo::RecDoubling: return "recdoubling";
  }
  return "unknown";
}

bool parse_level_algo(std::string_view name, LevelAlgo* out) {
  for (LevelAlgo a : {LevelAlgo::Ring, LevelAlgo::Rabenseifner, LevelAlgo::RecDoubling})
    if (name == level_algo_name(a)) {
      *out = a;
      return true;
    }
  return false;
}

const char* buf_name(Buf buf) {
  switch (buf) {
    case Buf::Send: return "Send";
    case Buf::Recv: return "Recv";
    case Buf::Scratch: return "Scratch";
  }
  return "Unknown";
}

// NCCL's argument conventions: `count` is what the C API call passes, i.e. the
// per-rank input for allgather, the per-rank output for reducescatter and the
// per-peer block for alltoall.
uint64_t send_count(const BuildArgs& args) {
  const uint64_t n = static_cast<uint64_t>(args.nranks);
  switch (args.coll) {
    case Coll::ReduceScatter:
    case Coll::AllToAll: return args.count * n;
    default: return args.count;
  }
}

uint64_t recv_count(const BuildArgs& args) {
  const uint64_t n = static_cast<uint64_t>(args.nranks);
  switch (args.coll) {
    case Coll::AllGather:
    case Coll::AllToAll: return args.count * n;
    default: return args.count;
  }
}

namespace {
std::string range_str(const Range& r) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s[%llu,+%llu)", buf_name(r.buf),
                static_cast<unsigned long long>(r.offset), static_cast<unsigned long long>(r.count));
  return buf;
}
}  // namespace

std::string to_string(const Step& step) {
  std::string out = kind_name(step.kind);
  switch (step.kind) {
    case Kind::Send:
      out += " to " + std::to_string(step.peer) + " src=" + range_str(step.src);
      break;
    case Kind::Recv:
      out += " from " + std::to_string(step.peer) + " dst=" + range_str(step.dst);
      break;
    case Kind::RecvReduce:
      out += " from " + std::to_string(step.peer) + " dst=" + range_str(step.dst) +
             " src=" + range_str(step.src);
      break;
    case Kind::Copy:
    case Kind::Reduce:
      out += " dst=" + range_str(step.dst) + " src=" + range_str(step.src);
      break;
  }
  return out;
}

Schedule build_all(const BuildArgs& args, const char* algo, BuildFn build) {
  Schedule s;
  s.args = args;
  s.algo = algo ? algo : "";
  s.ranks.reserve(static_cast<size_t>(args.nranks > 0 ? args.nranks : 0));
  for (int r = 0; r < args.nranks; ++r) s.ranks.push_back(build(args, r));
  return s;
}

}  // namespace weft::sched
