#include "bootstrap/diagnosis.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <utility>

namespace weft::boot {
namespace {

// The fields come from other processes: never trust a terminator.
std::string field(const char* s, size_t n) { return std::string(s, strnlen(s, n)); }
std::string op_of(const StatusRow& r) { return field(r.op, sizeof r.op); }
std::string call_of(const StatusRow& r) {
  std::string op = op_of(r);
  if (op == "point-to-point") return op;
  return (op.empty() ? std::string("collective") : op) + " #" + std::to_string(r.seq);
}
RowState state_of(const StatusRow& r) {
  return r.state >= 0 && r.state <= static_cast<int32_t>(RowState::Lost) ? static_cast<RowState>(r.state)
                                                                            : RowState::NoAnswer;
}

std::string list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

std::string named(const std::vector<RankStatus>& rows, int r) {
  return "rank " + std::to_string(r) + " (" + rows[static_cast<size_t>(r)].who + ")";
}

std::string table_of(const std::vector<RankStatus>& rows) {
  std::string t;
  char line[256];
  std::snprintf(line, sizeof line, "  %4s  %-24s %-10s %-22s %-9s %-8s %-22s %s\n", "rank", "where", "state",
                "call", "step", "waits on", "for", "bytes");
  t += line;
  for (size_t i = 0; i < rows.size(); ++i) {
    const StatusRow& r = rows[i].row;
    const char* state = "no answer";
    switch (state_of(r)) {
      case RowState::Idle: state = "idle"; break;
      case RowState::InCall: state = r.timed_out != 0 ? "timed out" : "in call"; break;
      case RowState::Gone: state = "left"; break;
      case RowState::Lost: state = "lost"; break;
      case RowState::NoAnswer: break;
    }
    std::string call, step, peer, wait, bytes;
    if (state_of(r) == RowState::Idle) {
      call = "after #" + std::to_string(r.seq);
      if (r.age_ms > 0) wait = "outside weft " + std::to_string(r.age_ms) + " ms";
    } else if (state_of(r) == RowState::InCall) {
      call = call_of(r);
      if (r.nsteps > 0) step = std::to_string(r.step) + "/" + std::to_string(r.nsteps);
      if (r.peer >= 0) peer = "rank " + std::to_string(r.peer);
      wait = field(r.waiting, sizeof r.waiting);
      if (r.bytes > 0) bytes = std::to_string(r.bytes_done) + "/" + std::to_string(r.bytes);
    }
    std::snprintf(line, sizeof line, "  %4zu  %-24.24s %-10s %-22.22s %-9s %-8s %-22.22s %s\n", i, rows[i].who.c_str(),
                  state, call.c_str(), step.c_str(), peer.c_str(), wait.c_str(), bytes.c_str());
    t += line;
  }
  return t;
}

}  // namespace

std::string diagnose(const std::vector<RankStatus>& rows, int64_t waited_ms, std::string* table) {
  *table = table_of(rows);
  const int n = static_cast<int>(rows.size());
  std::vector<std::string> found;

  // 1. Ranks that cannot speak for themselves.
  std::vector<int> silent, lost, gone;
  for (int i = 0; i < n; ++i) {
    switch (state_of(rows[static_cast<size_t>(i)].row)) {
      case RowState::NoAnswer: silent.push_back(i); break;
      case RowState::Lost: lost.push_back(i); break;
      case RowState::Gone: gone.push_back(i); break;
      default: break;
    }
  }
  auto describe_all = [&](const std::vector<int>& ranks) {
    std::string s;
    for (size_t i = 0; i < ranks.size(); ++i) s += (i > 0 ? ", " : "") + named(rows, ranks[i]);
    return s;
  };
  if (!silent.empty())
    found.push_back(describe_all(silent) + " did not answer within " +
                    std::to_string(waited_ms) + " ms: stopped, hung or cut off");
  if (!lost.empty()) found.push_back(describe_all(lost) + " disconnected (died)");
  if (!gone.empty()) found.push_back(describe_all(gone) + " destroyed " + (gone.size() == 1 ? "its" : "their") +
                                     " communicator");

  // 2. The call the group is stuck in: that of the ranks that timed out (the
  // latest of them), else the latest any rank is in.
  int anchor = -1;
  for (int pass = 0; pass < 2 && anchor < 0; ++pass)
    for (int i = 0; i < n; ++i) {
      const StatusRow& r = rows[static_cast<size_t>(i)].row;
      if (state_of(r) != RowState::InCall || (pass == 0 && r.timed_out == 0)) continue;
      if (anchor < 0 || r.seq > rows[static_cast<size_t>(anchor)].row.seq) anchor = i;
    }
  if (anchor >= 0) {
    const StatusRow& a = rows[static_cast<size_t>(anchor)].row;
    const std::string target = call_of(a);
    std::vector<int> behind, ahead;
    std::map<std::string, std::vector<int>> elsewhere;  // other calls, by call
    std::vector<int> with;                               // in the target call
    for (int i = 0; i < n; ++i) {
      const StatusRow& r = rows[static_cast<size_t>(i)].row;
      if (state_of(r) == RowState::Idle) (r.seq < a.seq || op_of(a) == "point-to-point" ? behind : ahead).push_back(i);
      else if (state_of(r) == RowState::InCall && call_of(r) != target) elsewhere[call_of(r)].push_back(i);
      else if (state_of(r) == RowState::InCall) with.push_back(i);
    }
    for (int i : behind) {
      const StatusRow& r = rows[static_cast<size_t>(i)].row;
      found.push_back(named(rows, i) + " has not entered " + target + " (it is outside weft after #" +
                      std::to_string(r.seq) + (r.age_ms > 0 ? ", for " + std::to_string(r.age_ms) + " ms" : "") +
                      ": slow, or it skipped the call)");
    }
    for (int i : ahead)
      found.push_back(named(rows, i) + " finished " + target + " and is idle while the others wait in it");
    if (!elsewhere.empty()) {
      std::string s = list(with) + (with.size() == 1 ? " is" : " are") + " in " + target;
      for (const auto& [call, ranks] : elsewhere) s += ", " + list(ranks) + " in " + call;
      found.push_back("the ranks are in different calls: " + s);
    }
    // 3. Everyone in the same call: who waits on whom.
    if (found.empty()) {
      std::vector<int> chain{anchor};
      std::set<int> seen{anchor};
      for (;;) {
        const StatusRow& r = rows[static_cast<size_t>(chain.back())].row;
        int next = r.peer;
        if (next < 0 || next >= n || state_of(rows[static_cast<size_t>(next)].row) != RowState::InCall) break;
        chain.push_back(next);
        if (!seen.insert(next).second) break;
      }
      std::string path;
      for (size_t i = 0; i < chain.size(); ++i) path += (i > 0 ? " -> " : "") + std::to_string(chain[i]);
      const int last = chain.back();
      if (chain.size() > 1 && seen.size() < chain.size())
        found.push_back("ranks wait on each other in a cycle (" + path +
                        "): the ranks' schedules disagree or a message was lost");
      else if (chain.size() > 1)
        found.push_back("rank " + std::to_string(chain.front()) + " waits on rank " + std::to_string(chain[1]) +
                        (chain.size() > 2 ? " (" + path + ")" : "") + ", and " + named(rows, last) +
                        " waits on nothing in " + target + ": rank " + std::to_string(last) +
                        " is slow (computing, or its data engine is busy)");
      else
        found.push_back(named(rows, last) + " waits on nothing in " + target + ": it is slow");
    }
  }
  if (found.empty()) return "no rank is stuck: every rank is idle";
  std::string out;
  for (size_t i = 0; i < found.size(); ++i) out += (i > 0 ? "; " : "") + found[i];
  return out;
}

}  // namespace weft::boot
