// Hierarchical all-reduce for nodes of BuildArgs::local_size consecutive ranks,
// each node optionally cut into NUMA domains (or GPU islands) of
// BuildArgs::domain_size consecutive ranks: reduce-scatter inside each domain,
// then across the node's domains, all-reduce each rank's share across nodes,
// all-gather back up. Only 1/local_size of the vector crosses the inter-node
// links per rank, and 1/domain_size the links between domains. Each level runs
// the algorithm BuildArgs::levels names; the tuner picks the combination for the
// call among its variants (Tuner::tailored).
#pragma once

#include "algorithms/registry.h"

namespace weft::algo::hierarchical {

sched::RankPlan allreduce(const sched::BuildArgs& args, int rank);

// local_size > 0 and divides nranks; domain_size, when set, divides local_size;
// every level's algorithm can run its group (levels_fit).
bool supports(const sched::BuildArgs& args);
// rabenseifner and recdoubling need a power-of-two group; recdoubling only on the
// outermost level whose group has more than one rank.
bool levels_fit(const sched::BuildArgs& args);

// The sum of each level's flat formula (ring::cost, butterfly::rabenseifner_cost,
// butterfly::recdoubling_cost on that level's group and share of the vector), one
// LinkCost for every level; the tuner simulates the schedule with a cost per level
// where the communicator spans domains or nodes.
double cost(const sched::BuildArgs& args, size_t elem_size, const LinkCost& c);

// args with every combination of level algorithms that can run it (fits), ring
// first; `forced` levels fixed (as given, even where they cannot run: supports()
// then refuses the call). Each combination also with its levels overlapped in
// rounds where the vector holds more than one, or only so or never as forced.
std::vector<sched::BuildArgs> variants(const sched::BuildArgs& args, const Forced& forced);

// "ring / - / recdoubling": each level's algorithm, "-" where its group is one rank.
std::string describe_levels(const sched::BuildArgs& args);

}  // namespace weft::algo::hierarchical
