// Stuck-collective diagnosis: from every rank's answer to a status request
// (where it is: which call and sequence number, which schedule step, which peer
// it waits on), one table and one line saying who holds the group up.
//
// The root runs it when a rank of a group reaches its deadline (or asks for a
// dump); the rules, in order of blame:
//   1. a rank that did not answer is stopped, hung or cut off; one whose
//      connection closed is dead; one whose communicator is gone left early;
//   2. a rank that has not entered the collective the others are stuck in
//      (it is outside weft: slow, or it skipped the call), or is in another one;
//   3. everyone in the same call: follow who waits on whom from a rank that
//      timed out; the rank at the end of the chain, waiting on nothing, is slow
//      (computing, or its data engine is busy); a chain that closes on itself
//      means the schedules disagree or a message was lost.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/wire.h"

namespace weft::boot {

struct RankStatus {
  StatusRow row{};
  std::string who;  // "host H, pid P"
};

// rows[i] is rank i of the group. waited_ms: how long the root waited for answers.
// Returns the diagnosis line; *table gets one line per rank.
std::string diagnose(const std::vector<RankStatus>& rows, int64_t waited_ms, std::string* table);

}  // namespace weft::boot
