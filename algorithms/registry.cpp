#include "algorithms/registry.h"

#include "algorithms/bruck.h"
#include "algorithms/butterfly.h"
#include "algorithms/chain_tree.h"
#include "algorithms/direct.h"
#include "algorithms/double_tree.h"
#include "algorithms/hierarchical.h"
#include "algorithms/naive.h"
#include "algorithms/oneshot.h"
#include "algorithms/pairwise.h"
#include "algorithms/reducescatter_gather.h"
#include "algorithms/ring.h"
#include "algorithms/rings.h"
#include "algorithms/scatter_allgather.h"
#include "algorithms/tree.h"

namespace weft::algo {

using sched::Coll;

namespace {
constexpr bool kSliced = true, kWhole = false, kTwoLevel = true, kDomainLevel = true;

// Order matters only for listing; the tuner chooses by cost, not position.
const Algorithm kAlgorithms[] = {
    {"ring", Coll::AllReduce, ring::allreduce, nullptr, ring::cost, kSliced},
    {"tree", Coll::AllReduce, tree::allreduce, nullptr, tree::cost, kSliced},
    {"double_tree", Coll::AllReduce, double_tree::allreduce, nullptr, double_tree::cost, kSliced},
    {"butterfly", Coll::AllReduce, butterfly::allreduce, nullptr, butterfly::cost, kSliced},
    {"recdoubling", Coll::AllReduce, butterfly::allreduce_recdoubling, nullptr, butterfly::recdoubling_cost, kSliced},
    {"rabenseifner", Coll::AllReduce, butterfly::allreduce_rabenseifner, nullptr, butterfly::rabenseifner_cost, kWhole},
    {"direct", Coll::AllReduce, direct::allreduce, nullptr, direct::cost, kWhole},
    {"naive", Coll::AllReduce, naive::allreduce, nullptr, naive::cost, kWhole},
    {"oneshot", Coll::AllReduce, oneshot::allreduce, nullptr, oneshot::cost, kWhole},
    {"hierarchical", Coll::AllReduce, hierarchical::allreduce, hierarchical::supports, hierarchical::cost, kSliced,
     kTwoLevel, kDomainLevel, hierarchical::variants, hierarchical::describe_levels},
    {"chain_tree", Coll::AllReduce, chain_tree::allreduce, chain_tree::supports, chain_tree::cost, kSliced, kTwoLevel},
    {"rings", Coll::AllReduce, rings::allreduce, rings::supports, rings::cost, kSliced, kTwoLevel},

    {"ring", Coll::Broadcast, ring::broadcast, nullptr, ring::cost, kSliced},
    {"tree", Coll::Broadcast, tree::broadcast, nullptr, tree::cost, kSliced},
    {"naive", Coll::Broadcast, naive::broadcast, nullptr, naive::cost, kWhole},
    {"scatter_allgather", Coll::Broadcast, scatter_allgather::broadcast, nullptr, scatter_allgather::cost, kWhole},

    {"ring", Coll::Reduce, ring::reduce, nullptr, ring::cost, kSliced},
    {"tree", Coll::Reduce, tree::reduce, nullptr, tree::cost, kSliced},
    {"naive", Coll::Reduce, naive::reduce, nullptr, naive::cost, kWhole},
    {"reducescatter_gather", Coll::Reduce, reducescatter_gather::reduce, nullptr, reducescatter_gather::cost, kSliced},

    {"ring", Coll::AllGather, ring::allgather, nullptr, ring::cost, kSliced},
    {"bruck", Coll::AllGather, bruck::allgather, nullptr, bruck::cost, kWhole},
    {"naive", Coll::AllGather, naive::allgather, nullptr, naive::cost, kWhole},

    {"ring", Coll::ReduceScatter, ring::reducescatter, nullptr, ring::cost, kSliced},
    {"butterfly", Coll::ReduceScatter, butterfly::reducescatter, nullptr, butterfly::cost, kWhole},
    {"naive", Coll::ReduceScatter, naive::reducescatter, nullptr, naive::cost, kWhole},

    {"pairwise", Coll::AllToAll, pairwise::alltoall, nullptr, pairwise::cost, kWhole},
};
}  // namespace

std::span<const Algorithm> all_algorithms() { return kAlgorithms; }

const Algorithm* find_algorithm(Coll coll, std::string_view name) {
  for (const Algorithm& a : kAlgorithms)
    if (a.coll == coll && name == a.name) return &a;
  return nullptr;
}

std::vector<const Algorithm*> algorithms_for(Coll coll) {
  std::vector<const Algorithm*> out;
  for (const Algorithm& a : kAlgorithms)
    if (a.coll == coll) out.push_back(&a);
  return out;
}

bool supports(const Algorithm& a, const sched::BuildArgs& args) { return !a.supports || a.supports(args); }

const Algorithm* cheapest(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c) {
  const Algorithm* best = nullptr;
  double best_cost = 0;
  for (const Algorithm& a : kAlgorithms) {
    if (a.coll != args.coll || !supports(a, args) || !a.cost) continue;
    const double t = a.cost(args, elem_size, c);
    if (!best || t < best_cost) {
      best = &a;
      best_cost = t;
    }
  }
  return best;
}

}  // namespace weft::algo
