#include "sim/fabric.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

namespace weft::sim {

const char* level_name(Level l) {
  switch (l) {
    case Level::Domain: return "domain";
    case Level::Host: return "host";
    case Level::Network: return "network";
  }
  return "?";
}

Level Fabric::level(int a, int b) const {
  const size_t x = static_cast<size_t>(a), y = static_cast<size_t>(b);
  if (host[x] != host[y]) return Level::Network;
  return domain[x] == domain[y] ? Level::Domain : Level::Host;
}

bool Fabric::uses(Level l) const {
  // Comparing every rank with rank 0 and with its neighbour finds every level that
  // occurs in the generators' and topologies' layouts without an n^2 scan.
  for (int r = 1; r < nranks; ++r)
    if (level(0, r) == l || level(r - 1, r) == l) return true;
  return false;
}

int Fabric::levels_used() const {
  return int(uses(Level::Domain)) + int(uses(Level::Host)) + int(uses(Level::Network));
}

Fabric Fabric::flat(int nranks, const algo::LinkCost& cost) {
  Fabric f;
  f.nranks = nranks;
  for (int r = 0; r < nranks; ++r) {
    f.host.push_back(r);
    f.domain.push_back(r);
    f.nic.push_back(-1);
  }
  f.cost = {cost, cost, cost};
  return f;
}

Fabric Fabric::host_blocks(int nranks, int per_host) {
  Fabric f;
  f.nranks = nranks;
  for (int r = 0; r < nranks; ++r) {
    const int h = r / per_host;
    if (r % per_host == 0) f.nics.push_back({-1.0});
    f.host.push_back(h);
    f.domain.push_back(h);
    f.nic.push_back(h);
  }
  return f;
}

bool Fabric::oversubscribed(int r) const {
  if (machine.empty()) return false;
  const int m = machine[size_t(r)];
  return std::count(machine.begin(), machine.end(), m) > machine_cores[size_t(m)];
}

bool Fabric::bursty() const {
  return std::any_of(nics.begin(), nics.end(), [](const Port& p) { return p.burst_bytes > 0; });
}

std::string Fabric::check() const {
  const size_t n = static_cast<size_t>(nranks);
  if (nranks < 1) return "no ranks";
  if (host.size() != n || domain.size() != n || nic.size() != n) return "per-rank vectors are not nranks long";
  if (!machine.empty() && machine.size() != n) return "per-rank vectors are not nranks long";
  if (!(cpu_share >= 0 && cpu_share <= 1)) return "cpu_share is not in [0, 1]";
  if (!(net_rx_s_per_byte >= 0 && net_rx_s_per_byte < 1e-6)) return "net_rx_s_per_byte is not in [0, 1 us)";
  for (const Port& p : nics)
    if (p.burst_bytes < 0 || (p.burst_bytes > 0 && !(p.line_bytes_per_s > 0)))
      return "a network port's burst needs a positive size and line rate";
  for (size_t r = 0; r < n; ++r) {
    if (!machine.empty() && (machine[r] < 0 || size_t(machine[r]) >= machine_cores.size() ||
                             machine_cores[size_t(machine[r])] < 1))
      return "rank " + std::to_string(r) + " names a missing machine or one without cores";
    if (nic[r] >= static_cast<int>(nics.size())) return "rank " + std::to_string(r) + " names a missing NIC";
    if (!cross_domain.empty() && (host[r] < 0 || static_cast<size_t>(host[r]) >= cross_domain.size()))
      return "rank " + std::to_string(r) + "'s host has no cross-domain link";
  }
  return "";
}

std::vector<int> grouped_order(const Fabric& f) {
  std::vector<int> order(static_cast<size_t>(f.nranks));
  for (int r = 0; r < f.nranks; ++r) order[size_t(r)] = r;
  // Hosts and domains in order of their first rank.
  std::vector<int> host_first(size_t(f.nranks), -1);
  std::map<int, int> dom_first;
  for (int r = f.nranks - 1; r >= 0; --r) {
    host_first[size_t(f.host[size_t(r)])] = r;
    dom_first[f.domain[size_t(r)]] = r;
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return std::make_pair(host_first[size_t(f.host[size_t(a)])], dom_first[f.domain[size_t(a)]]) <
           std::make_pair(host_first[size_t(f.host[size_t(b)])], dom_first[f.domain[size_t(b)]]);
  });
  return order;
}

Fabric reordered(const Fabric& f, const std::vector<int>& order) {
  Fabric g = f;
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t r = static_cast<size_t>(order[i]);
    g.host[i] = f.host[r];
    g.domain[i] = f.domain[r];
    g.nic[i] = f.nic[r];
    if (!f.machine.empty()) g.machine[i] = f.machine[r];
  }
  return g;
}

namespace {
// The length of the runs when `label` is cut into runs of one length, each of its
// own label; else 0.
int run_length(const std::vector<int>& label) {
  const int n = static_cast<int>(label.size());
  int first = 0;
  while (first < n && label[size_t(first)] == label[0]) ++first;
  if (first == 0 || n % first != 0) return 0;
  std::set<int> seen;
  for (int b = 0; b < n; b += first) {
    if (!seen.insert(label[size_t(b)]).second) return 0;
    for (int r = b; r < b + first; ++r)
      if (label[size_t(r)] != label[size_t(b)]) return 0;
  }
  return first;
}
}  // namespace

int block_size(const Fabric& f) { return run_length(f.host); }

int domain_block_size(const Fabric& f) {
  const int per_host = block_size(f), per_domain = run_length(f.domain);
  return per_host > 0 && per_domain > 0 && per_host % per_domain == 0 ? per_domain : 0;
}

Fabric generate(const Generator& g) {
  Fabric f;
  f.nranks = g.nodes * g.per_node;
  const int per_domain = std::max(1, g.per_node / std::max(1, g.domains));
  const int per_nic = g.nics > 0 ? (g.per_node + g.nics - 1) / g.nics : 0;
  for (int h = 0; h < g.nodes; ++h) {
    for (int i = 0; i < g.nics; ++i) f.nics.push_back({g.nic_bytes_per_s});
    if (g.cross_domain_bytes_per_s > 0) f.cross_domain.push_back({g.cross_domain_bytes_per_s});
    for (int l = 0; l < g.per_node; ++l) {
      f.host.push_back(h);
      f.domain.push_back(h * g.domains + std::min(l / per_domain, g.domains - 1));
      f.nic.push_back(g.nics > 0 ? h * g.nics + l / per_nic : -1);
    }
  }
  f.cost = {g.intra, g.cross, g.inter};
  f.label = g.label;
  if (g.shared_cores > 0) {
    f.machine.assign(size_t(f.nranks), 0);
    f.machine_cores = {g.shared_cores};
  }
  return f;
}

Fabric from_system(const topo::System& s, const algo::LinkCost& intra, const algo::LinkCost& cross,
                   const algo::LinkCost& inter) {
  Fabric f;
  f.nranks = static_cast<int>(s.ranks.size());
  f.cost = {intra, cross, inter};
  f.label = {"NUMA", "SYS", "NET"};
  std::map<std::pair<int, std::string>, int> nic_index;  // (host, NIC name) -> index
  std::map<std::pair<int, int>, int> domain_index;       // (host, NUMA os index) -> global domain
  for (int r = 0; r < f.nranks; ++r) {
    const topo::Rank& rk = s.ranks[static_cast<size_t>(r)];
    const topo::Host& h = s.hosts[static_cast<size_t>(rk.host)];
    const int numa = rk.numa.size() == 1 ? rk.numa[0] : (h.numa.empty() ? 0 : h.numa[0].os_index);
    auto d = domain_index.emplace(std::make_pair(rk.host, numa), static_cast<int>(domain_index.size())).first;
    f.host.push_back(rk.host);
    f.domain.push_back(d->second);
    const topo::Nic* nic = s.nic_of(r);
    if (nic == nullptr) {
      f.nic.push_back(-1);
      continue;
    }
    auto [it, added] = nic_index.emplace(std::make_pair(rk.host, nic->name), static_cast<int>(f.nics.size()));
    if (added) {
      f.nics.push_back({nic->speed_mbps > 0 ? nic->speed_mbps * 1e6 / 8 : -1.0});
    }
    f.nic.push_back(it->second);
  }
  // Hosts of one kernel share its CPUs.
  std::map<std::string, int> machine_index;
  std::vector<int> machine;
  std::vector<std::vector<int>> cpus;
  for (int r = 0; r < f.nranks; ++r) {
    machine.push_back(machine_index.emplace(s.machine_of(r), static_cast<int>(machine_index.size())).first->second);
    cpus.push_back(topo::parse_cpu_list(s.ranks[size_t(r)].cpus));
  }
  set_machines(machine, cpus, &f);
  return f;
}

void set_machines(const std::vector<int>& machine, const std::vector<std::vector<int>>& cpus, Fabric* f) {
  const size_t machines = machine.empty() ? 0 : size_t(*std::max_element(machine.begin(), machine.end())) + 1;
  std::vector<std::set<int>> union_of(machines);
  std::vector<int> ranks_on(machines, 0);
  std::vector<bool> known(machines, true);
  for (size_t r = 0; r < machine.size(); ++r) {
    const size_t m = size_t(machine[r]);
    ++ranks_on[m];
    if (cpus[r].empty()) known[m] = false;
    union_of[m].insert(cpus[r].begin(), cpus[r].end());
  }
  f->machine = machine;
  f->machine_cores.clear();
  for (size_t m = 0; m < machines; ++m)
    f->machine_cores.push_back(known[m] ? static_cast<int>(union_of[m].size()) : ranks_on[m]);
}

bool parse_bandwidth(const std::string& text, double* bytes_per_s) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v > 0)) return false;
  const std::string unit(end);
  static const std::pair<const char*, double> units[] = {
      {"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}, {"KB/s", 1e3}, {"B/s", 1},
      {"Tb/s", 1e12 / 8}, {"Gb/s", 1e9 / 8}, {"Mb/s", 1e6 / 8}, {"Kb/s", 1e3 / 8}};
  for (const auto& [name, scale] : units)
    if (unit == name) {
      *bytes_per_s = v * scale;
      return true;
    }
  return false;
}

}  // namespace weft::sim
