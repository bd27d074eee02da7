// WEFT_ALGO: which algorithms the tuner may pick, in NCCL_ALGO's spirit.
//
//   ring                       every collective that has "ring" uses it; the others
//                              are chosen by cost
//   ring,tree                  cheapest of ring and tree wherever one of them exists
//   ^naive,oneshot             never naive or oneshot
//   allreduce:tree             all-reduce uses tree; other collectives by cost
//   allreduce:tree,broadcast:ring   per collective; a bare name after "coll:" extends
//   allreduce:tree,ring;broadcast:^naive   that collective's list; ';' also separates
//
// A name no collective has, a collective that does not exist, or a name the named
// collective does not have is an error when the spec is parsed. Whether the chosen
// algorithm can run a given call (supports()) is known only per call (Tuner::choose).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/status.h"
#include "sched/schedule.h"

namespace weft::tune {

constexpr int kNumColls = 6;  // sched::Coll values

struct CollFilter {
  bool active = false;   // false: every registered algorithm is a candidate
  bool exclude = false;  // true: `names` are excluded, else only `names` are allowed
  std::vector<std::string> names;

  bool allows(const char* algo) const;
};

struct AlgoSpec {
  std::string text;                  // as given, for error messages
  std::string source = "WEFT_ALGO";  // where it came from: WEFT_ALGO or weftConfig_t.algo
  std::array<CollFilter, kNumColls> per_coll;

  std::string describe() const { return source + "=" + text; }
  const CollFilter& filter(sched::Coll c) const { return per_coll[static_cast<size_t>(c)]; }
};

Status parse_algo_spec(const std::string& text, AlgoSpec* out, const char* source = "WEFT_ALGO");

}  // namespace weft::tune
