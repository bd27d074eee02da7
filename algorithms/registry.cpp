#include "algorithms/registry.h"

#include "algorithms/ring.h"

namespace weft::algo {

using sched::Coll;

namespace {
// Order matters only for listing; the tuner chooses by cost, not position.
const Algorithm kAlgorithms[] = {
    {"ring", Coll::AllReduce, ring::allreduce, nullptr, ring::cost},
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

}  // namespace weft::algo
