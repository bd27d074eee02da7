#include "tune/algo_spec.h"

#include <algorithm>
#include <cctype>

#include "algorithms/registry.h"
#include "tune/table.h"

namespace weft::tune {

bool CollFilter::allows(const char* algo) const {
  if (!active) return true;
  bool listed = std::find(names.begin(), names.end(), algo) != names.end();
  return exclude ? !listed : listed;
}

namespace {

std::string trim_lower(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  std::string out = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) return out;
    start = pos + 1;
  }
}

std::string names_of(sched::Coll c) {
  std::string s;
  for (const algo::Algorithm* a : algo::algorithms_for(c)) s += (s.empty() ? "" : ", ") + std::string(a->name);
  return s;
}

std::string all_names() {
  std::vector<std::string> seen;
  for (const algo::Algorithm& a : algo::all_algorithms())
    if (std::find(seen.begin(), seen.end(), a.name) == seen.end()) seen.emplace_back(a.name);
  std::string s;
  for (const std::string& n : seen) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// A list being collected for one target (all collectives, or one).
struct Pending {
  bool given = false;
  bool exclude = false;
  std::vector<std::string> names;
};

Status add_name(const std::string& what, std::string name, bool first, Pending* p) {
  bool neg = !name.empty() && name[0] == '^';
  if (neg) name = trim_lower(name.substr(1));
  if (name.empty()) return Error(weftInvalidArgument, "%s: empty algorithm name", what.c_str());
  if (first) p->exclude = neg;
  else if (neg)
    return Error(weftInvalidArgument,
                 "%s: '^' excludes the whole list and must come first ('^a,b'), not before '%s'",
                 what.c_str(), name.c_str());
  p->given = true;
  p->names.push_back(name);
  return Status::Ok();
}

}  // namespace

Status parse_algo_spec(const std::string& text, AlgoSpec* out, const char* source) {
  *out = AlgoSpec{};
  out->text = text;
  out->source = source;
  const std::string what = out->describe();
  Pending global;
  std::array<Pending, kNumColls> colls;
  for (const std::string& group : split(text, ';')) {
    Pending* target = &global;
    bool first = !global.given;
    for (const std::string& raw : split(group, ',')) {
      std::string tok = trim_lower(raw);
      if (tok.empty()) continue;
      size_t colon = tok.find(':');
      if (colon != std::string::npos) {
        std::string cname = trim_lower(tok.substr(0, colon));
        sched::Coll c;
        if (!parse_coll(cname, &c))
          return Error(weftInvalidArgument,
                       "%s: unknown collective '%s' (known: allreduce, broadcast, reduce, "
                       "allgather, reducescatter, alltoall)",
                       what.c_str(), cname.c_str());
        target = &colls[static_cast<size_t>(c)];
        if (target->given)
          return Error(weftInvalidArgument, "%s: '%s' is given twice", what.c_str(), cname.c_str());
        first = true;
        tok = trim_lower(tok.substr(colon + 1));
      }
      WEFT_TRY(add_name(what, tok, first, target));
      first = false;
    }
  }

  // Names must exist where they are meant to apply.
  for (size_t i = 0; i < kNumColls; ++i) {
    const auto c = static_cast<sched::Coll>(i);
    for (const std::string& n : colls[i].names)
      if (algo::find_algorithm(c, n) == nullptr)
        return Error(weftInvalidArgument, "%s: %s has no algorithm '%s' (available: %s)",
                     what.c_str(), sched::coll_name(c), n.c_str(), names_of(c).c_str());
  }
  for (const std::string& n : global.names) {
    bool known = false;
    for (const algo::Algorithm& a : algo::all_algorithms()) known = known || n == a.name;
    if (!known)
      return Error(weftInvalidArgument, "%s: unknown algorithm '%s' (available: %s)",
                   what.c_str(), n.c_str(), all_names().c_str());
  }

  for (size_t i = 0; i < kNumColls; ++i) {
    const auto c = static_cast<sched::Coll>(i);
    CollFilter& f = out->per_coll[i];
    const Pending& p = colls[i].given ? colls[i] : global;
    if (!p.given) continue;
    f.exclude = p.exclude;
    for (const std::string& n : p.names)
      if (algo::find_algorithm(c, n) != nullptr) f.names.push_back(n);
    // A global list of names this collective lacks leaves it to the cost model
    // ("ring" must not break all-to-all, which has no ring).
    f.active = f.exclude || !f.names.empty();
    bool any_left = false;
    for (const algo::Algorithm* a : algo::algorithms_for(c)) any_left = any_left || f.allows(a->name);
    if (f.active && !any_left)
      return Error(weftInvalidArgument, "%s excludes every %s algorithm (available: %s)",
                   what.c_str(), sched::coll_name(c), names_of(c).c_str());
  }
  return Status::Ok();
}

}  // namespace weft::tune
