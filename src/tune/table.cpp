#include "tune/table.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

namespace weft::tune {

const char* link_class_name(LinkClass c) {
  switch (c) {
    case LinkClass::Shm: return "shm";
    case LinkClass::Numa: return "numa";
    case LinkClass::Gpu: return "gpu";
    case LinkClass::Nvl: return "nvl";
    case LinkClass::Pcie: return "p2p";
    case LinkClass::Stg: return "stg";
    case LinkClass::Net: break;
  }
  return "net";
}

bool parse_coll(const std::string& name, sched::Coll* out) {
  static constexpr sched::Coll kAll[] = {sched::Coll::AllReduce, sched::Coll::Broadcast,
                                         sched::Coll::Reduce, sched::Coll::AllGather,
                                         sched::Coll::ReduceScatter, sched::Coll::AllToAll};
  for (sched::Coll c : kAll)
    if (name == sched::coll_name(c)) {
      *out = c;
      return true;
    }
  return false;
}

namespace {

bool same_key(const Entry& a, const Entry& b) {
  return a.cls == b.cls && a.coll == b.coll && a.algo == b.algo && a.nranks == b.nranks &&
         a.from_bytes == b.from_bytes;
}

}  // namespace

algo::LinkCost Table::lookup(LinkClass cls, sched::Coll coll, const char* algo, int nranks,
                             uint64_t bytes) const {
  const Entry* best = nullptr;
  // Specificity rank: exact algorithm beats "*", then exact nranks beats 0, then
  // the closest from_bytes below the size.
  auto score = [](const Entry& e) {
    return std::make_tuple(e.algo != "*", e.nranks != 0, e.from_bytes);
  };
  for (const Entry& e : entries) {
    if (e.cls != cls || e.coll != coll || e.from_bytes > bytes) continue;
    if (e.algo != "*" && e.algo != algo) continue;
    if (e.nranks != 0 && e.nranks != nranks) continue;
    if (best == nullptr || score(e) > score(*best)) best = &e;
  }
  if (best != nullptr) return best->cost;
  return base.of(cls);
}

void Table::set(const Entry& e) {
  for (Entry& x : entries)
    if (same_key(x, e)) {
      x = e;
      return;
    }
  entries.push_back(e);
}

std::string format_entry(const Entry& e) {
  char line[256];
  std::snprintf(line, sizeof(line), "%s %s %s %d %" PRIu64 " %.4g %.4g %.4g", link_class_name(e.cls),
                sched::coll_name(e.coll), e.algo.c_str(), e.nranks, e.from_bytes, e.cost.alpha_s,
                e.cost.beta_s_per_byte, e.cost.gamma_s_per_byte);
  return line;
}

std::string format_table(const Table& t) {
  std::string s =
      "# class coll algo nranks from_bytes alpha_s beta_s_per_byte gamma_s_per_byte\n";
  char line[256];
  for (LinkClass c : kLinkClasses) {
    const algo::LinkCost& b = t.base.of(c);
    std::snprintf(line, sizeof(line), "%s * * 0 0 %.4g %.4g %.4g\n", link_class_name(c), b.alpha_s,
                  b.beta_s_per_byte, b.gamma_s_per_byte);
    s += line;
  }
  for (const Entry& e : t.entries) s += format_entry(e) + "\n";
  if (t.net_burst.bytes > 0) {
    std::snprintf(line, sizeof(line), "burst net %.6g %.4g\n", t.net_burst.bytes, t.net_burst.line_s_per_byte);
    s += line;
  }
  if (t.cores.cpu_share >= 0) {
    std::snprintf(line, sizeof(line), "cores %.4g %.4g\n", t.cores.cpu_share, t.cores.net_rx_s_per_byte);
    s += line;
  }
  if (t.net_wire_s > 0) {
    std::snprintf(line, sizeof(line), "wire net %.6g\n", t.net_wire_s);
    s += line;
  }
  return s;
}

Status parse_tuning_text(const std::string& text, const std::string& origin, Table* table) {
  std::istringstream in(text);
  std::string raw;
  int lineno = 0;
  while (std::getline(in, raw)) {
    ++lineno;
    std::string line = raw.substr(0, raw.find('#'));
    std::istringstream f(line);
    std::string cls, coll, algo, extra;
    Entry e;
    if (!(f >> cls)) continue;  // blank or comment
    if (cls == "burst") {
      Burst b;
      if (!(f >> cls >> b.bytes >> b.line_s_per_byte) || (f >> extra) || cls != "net" || !(b.bytes >= 0) ||
          !(b.line_s_per_byte > 0))
        return Error(weftInvalidArgument,
                     "%s:%d: expected 'burst net <bytes> <line_s_per_byte>' (the network ports' token bucket), "
                     "got '%s'",
                     origin.c_str(), lineno, raw.c_str());
      table->net_burst = b;
      continue;
    }
    if (cls == "cores") {
      Cores c;
      if (!(f >> c.cpu_share >> c.net_rx_s_per_byte) || (f >> extra) || !(c.cpu_share >= 0 && c.cpu_share <= 1) ||
          !(c.net_rx_s_per_byte >= 0 && c.net_rx_s_per_byte < 1e-6))
        return Error(weftInvalidArgument,
                     "%s:%d: expected 'cores <cpu_share 0..1> <net_rx_s_per_byte below 1e-6>' (a message's CPU "
                     "where ranks outnumber cores), got '%s'",
                     origin.c_str(), lineno, raw.c_str());
      table->cores = c;
      continue;
    }
    if (cls == "wire") {
      double wire = -1;
      if (!(f >> cls >> wire) || (f >> extra) || cls != "net" || !(wire >= 0 && wire < 10))
        return Error(weftInvalidArgument,
                     "%s:%d: expected 'wire net <seconds, below 10>' (a network message's time on the wire), got '%s'",
                     origin.c_str(), lineno, raw.c_str());
      table->net_wire_s = wire;
      continue;
    }
    if (!(f >> coll >> algo >> e.nranks >> e.from_bytes >> e.cost.alpha_s >> e.cost.beta_s_per_byte >>
          e.cost.gamma_s_per_byte) ||
        (f >> extra))
      return Error(weftInvalidArgument,
                   "%s:%d: expected '<shm|numa|net|gpu|nvl|p2p|stg> <collective|*> <algorithm|*> <nranks> <from_bytes> "
                   "<alpha_s> <beta_s_per_byte> <gamma_s_per_byte>', got '%s'",
                   origin.c_str(), lineno, raw.c_str());
    bool known = false;
    for (LinkClass c : kLinkClasses)
      if (cls == link_class_name(c)) {
        e.cls = c;
        known = true;
      }
    if (!known)
      return Error(weftInvalidArgument, "%s:%d: unknown link class '%s' (known: shm, numa, net, gpu, nvl, p2p, stg)",
                   origin.c_str(), lineno, cls.c_str());
    if (e.cost.alpha_s < 0 || e.cost.beta_s_per_byte < 0 || e.cost.gamma_s_per_byte < 0 ||
        e.nranks < 0)
      return Error(weftInvalidArgument, "%s:%d: negative value in '%s'", origin.c_str(), lineno,
                   raw.c_str());
    if (coll == "*") {
      if (algo != "*" || e.nranks != 0 || e.from_bytes != 0)
        return Error(weftInvalidArgument,
                     "%s:%d: a '*' collective sets the class's generic constants: algorithm must "
                     "be '*', nranks 0 and from_bytes 0",
                     origin.c_str(), lineno);
      table->base.of(e.cls) = e.cost;
      continue;
    }
    if (!parse_coll(coll, &e.coll))
      return Error(weftInvalidArgument, "%s:%d: unknown collective '%s'", origin.c_str(), lineno,
                   coll.c_str());
    if (algo != "*" && algo::find_algorithm(e.coll, algo) == nullptr)
      return Error(weftInvalidArgument, "%s:%d: no algorithm '%s' for %s", origin.c_str(), lineno,
                   algo.c_str(), coll.c_str());
    e.algo = algo;
    table->set(e);
  }
  return Status::Ok();
}

Status load_tuning_file(const std::string& path, Table* table) {
  std::ifstream f(path);
  if (!f) return SysError(errno, "WEFT_TUNING_FILE=%s: cannot open", path.c_str());
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_tuning_text(ss.str(), path, table);
}

}  // namespace weft::tune
