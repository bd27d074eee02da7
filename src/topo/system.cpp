// The joined system: link classes, NIC choice, JSON, CPU lists.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/json.h"
#include "topo/topology.h"

namespace weft::topo {

const char* link_class_name(LinkClass c) {
  switch (c) {
    case LinkClass::Self: return "X";
    case LinkClass::ShmNuma: return "NUMA";
    case LinkClass::ShmCrossNuma: return "SYS";
    case LinkClass::Network: return "NET";
    case LinkClass::GpuSame: return "GPU";
    case LinkClass::GpuNvlink: return "NVL";
    case LinkClass::GpuP2P: return "P2P";
    case LinkClass::GpuStaged: return "STG";
  }
  return "?";
}

LinkClass System::link(int a, int b) const {
  if (a == b) return LinkClass::Self;
  const Rank &ra = ranks.at(size_t(a)), &rb = ranks.at(size_t(b));
  if (ra.host != rb.host) return LinkClass::Network;
  // Within one NUMA node only when both are confined to the same single node.
  if (ra.numa.size() == 1 && ra.numa == rb.numa) return LinkClass::ShmNuma;
  return hosts.at(size_t(ra.host)).numa.size() <= 1 ? LinkClass::ShmNuma : LinkClass::ShmCrossNuma;
}

LinkClass System::gpu_link(int a, int b) const {
  const LinkClass cpu = link(a, b);
  const Rank &ra = ranks.at(size_t(a)), &rb = ranks.at(size_t(b));
  if (cpu == LinkClass::Self || cpu == LinkClass::Network || ra.gpu.empty() || rb.gpu.empty()) return cpu;
  if (ra.gpu == rb.gpu) return LinkClass::GpuSame;
  auto holds = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), rb.gpu) != v.end(); };
  if (!holds(ra.gpu_peers)) return LinkClass::GpuStaged;
  return holds(ra.gpu_nvlink) ? LinkClass::GpuNvlink : LinkClass::GpuP2P;
}

namespace {
// The best of `items` (better(best so far, candidate)) on one of the rank's NUMA
// nodes, else the best of all; null where better() takes none.
template <class T, class Better>
const T* nearest(const std::vector<T>& items, const std::vector<int>& numa, Better better) {
  const T* best = nullptr;
  for (const T& x : items)
    if (std::find(numa.begin(), numa.end(), x.numa) != numa.end() && better(best, x)) best = &x;
  if (best) return best;
  for (const T& x : items)
    if (better(best, x)) best = &x;
  return best;
}
}  // namespace

const Nic* System::nic_of(int rank) const {
  const Rank& r = ranks.at(size_t(rank));
  return nearest(hosts.at(size_t(r.host)).nics, r.numa,
                 [](const Nic* a, const Nic& b) { return !a || b.speed_mbps > a->speed_mbps; });
}

std::string System::machine_of(int rank) const {
  const int h = ranks.at(size_t(rank)).host;
  const std::string& m = hosts.at(size_t(h)).machine;
  return m.empty() ? "host " + std::to_string(h) : m;
}

const RdmaPort* System::rdma_of(int rank) const {
  const Rank& r = ranks.at(size_t(rank));
  return nearest(hosts.at(size_t(r.host)).rdma, r.numa,
                 [](const RdmaPort* a, const RdmaPort& b) { return b.active && (!a || b.rate_gbps > a->rate_gbps); });
}

System join(const std::vector<System>& parts) {
  System out;
  for (const System& p : parts) {
    if (p.ranks.size() != 1 || p.hosts.size() != 1)
      throw std::invalid_argument("topology: each rank contributes one host and one rank");
    Rank r = p.ranks[0];
    const Host& h = p.hosts[0];
    auto it = std::find_if(out.hosts.begin(), out.hosts.end(), [&](const Host& o) { return o.identity == h.identity; });
    r.host = int(it - out.hosts.begin());
    if (it == out.hosts.end()) out.hosts.push_back(h);
    out.ranks.push_back(r);
  }
  return out;
}

std::vector<int> parse_cpu_list(const std::string& list) {
  // Linux numbers CPUs below NR_CPUS (8192 at most in distribution kernels); a
  // bound keeps "0-2000000000" from a topology file from taking gigabytes.
  constexpr long kMaxCpus = 1 << 16;
  std::vector<bool> in(kMaxCpus, false);
  auto bad = [&] { return std::runtime_error("bad CPU list '" + list + "'"); };
  auto number = [&](const char*& p) {
    if (*p < '0' || *p > '9') throw bad();
    long v = 0;
    for (; *p >= '0' && *p <= '9'; ++p)
      if ((v = v * 10 + (*p - '0')) >= kMaxCpus)
        throw std::runtime_error("CPU list '" + list + "': CPU numbers stop below " + std::to_string(kMaxCpus));
    return v;
  };
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const char* p = item.c_str();
    const long a = number(p);
    long b = a;
    if (*p == '-') b = number(++p);
    if (*p != '\0' || b < a) throw bad();
    for (long c = a; c <= b; c++) in[static_cast<size_t>(c)] = true;
  }
  std::vector<int> cpus;
  for (long c = 0; c < kMaxCpus; c++)
    if (in[static_cast<size_t>(c)]) cpus.push_back(static_cast<int>(c));
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) j++;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

// ---- JSON -------------------------------------------------------------------

std::string to_json(const System& s) {
  std::ostringstream o;
  auto q = [](const std::string& t) { return json::quote(t); };
  o << "{\n  \"hosts\": [";
  for (size_t h = 0; h < s.hosts.size(); h++) {
    const Host& x = s.hosts[h];
    o << (h ? "," : "") << "\n    {\"identity\": " << q(x.identity) << ", \"machine\": " << q(x.machine)
      << ", \"name\": " << q(x.name)
      << ", \"packages\": " << x.packages << ", \"cores\": " << x.cores << ", \"pus\": " << x.pus << ",\n     \"numa\": [";
    for (size_t i = 0; i < x.numa.size(); i++)
      o << (i ? ", " : "") << "{\"os_index\": " << x.numa[i].os_index << ", \"cpus\": " << q(x.numa[i].cpus)
        << ", \"memory_bytes\": " << x.numa[i].memory_bytes << "}";
    o << "],\n     \"caches\": [";
    for (size_t i = 0; i < x.caches.size(); i++)
      o << (i ? ", " : "") << "{\"level\": " << x.caches[i].level << ", \"bytes\": " << x.caches[i].bytes
        << ", \"count\": " << x.caches[i].count << "}";
    o << "],\n     \"nics\": [";
    for (size_t i = 0; i < x.nics.size(); i++)
      o << (i ? ", " : "") << "{\"name\": " << q(x.nics[i].name) << ", \"speed_mbps\": " << x.nics[i].speed_mbps
        << ", \"numa\": " << x.nics[i].numa << "}";
    o << "],\n     \"gpus\": [";
    for (size_t i = 0; i < x.gpus.size(); i++)
      o << (i ? ", " : "") << "{\"pci\": " << q(x.gpus[i].pci) << ", \"device_id\": " << q(x.gpus[i].device_id)
        << ", \"numa\": " << x.gpus[i].numa << "}";
    o << "],\n     \"rdma\": [";
    for (size_t i = 0; i < x.rdma.size(); i++) {
      const RdmaPort& p = x.rdma[i];
      o << (i ? ", " : "") << "{\"device\": " << q(p.device) << ", \"port\": " << p.port
        << ", \"active\": " << (p.active ? "true" : "false") << ", \"rate_gbps\": " << p.rate_gbps
        << ", \"link_layer\": " << q(p.link_layer) << ", \"netdev\": " << q(p.netdev) << ", \"numa\": " << p.numa
        << "}";
    }
    o << "]}";
  }
  o << "\n  ],\n  \"ranks\": [";
  for (size_t r = 0; r < s.ranks.size(); r++) {
    const Rank& x = s.ranks[r];
    o << (r ? "," : "") << "\n    {\"host\": " << x.host << ", \"pid\": " << x.pid << ", \"cpus\": " << q(x.cpus)
      << ", \"numa\": [";
    for (size_t i = 0; i < x.numa.size(); i++) o << (i ? ", " : "") << x.numa[i];
    o << "]";
    if (!x.gpu.empty()) {
      o << ", \"gpu\": " << q(x.gpu);
      for (const auto& [name, list] : {std::pair{"gpu_peers", &x.gpu_peers}, std::pair{"gpu_nvlink", &x.gpu_nvlink}}) {
        o << ", \"" << name << "\": [";
        for (size_t i = 0; i < list->size(); i++) o << (i ? ", " : "") << q((*list)[i]);
        o << "]";
      }
    }
    o << "}";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

namespace {

const json::Value& field(const json::Value& v, const char* key, json::Value::Kind kind, const std::string& where) {
  const json::Value* f = v.kind == json::Value::Object ? v.find(key) : nullptr;
  if (!f || f->kind != kind) throw std::runtime_error("topology file: " + where + " needs \"" + key + "\"");
  return *f;
}

constexpr int64_t kMaxInt = 2147483647;
constexpr int64_t kMaxBytes = int64_t{1} << 53;  // every whole number up to here is a double

// A whole number in [lo, hi] (the fields are counts, sizes, indices; -1 is
// "unknown" where lo allows it): anything else (a fraction, 1e66, -49152 bytes)
// has no value of the field's type to stand for.
int64_t whole(double x, int64_t lo, int64_t hi, const std::string& where, const char* key) {
  if (!(x >= double(lo) && x <= double(hi)) || x != std::floor(x))
    throw std::runtime_error("topology file: " + where + ": \"" + key + "\" is not a whole number in [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return int64_t(x);
}

int64_t integer(const json::Value& v, const char* key, const std::string& where, int64_t lo, int64_t hi) {
  return whole(field(v, key, json::Value::Number, where).num, lo, hi, where, key);
}

std::string text(const json::Value& v, const char* key, const std::string& where) {
  return field(v, key, json::Value::String, where).str;
}

}  // namespace

System from_json(const std::string& input) {
  const json::Value root = json::parse(input);
  System s;
  const auto& hosts = field(root, "hosts", json::Value::Array, "the top level").arr;
  for (size_t h = 0; h < hosts.size(); h++) {
    const std::string where = "host " + std::to_string(h);
    const json::Value& v = hosts[h];
    Host x;
    x.identity = text(v, "identity", where);
    if (v.find("machine")) x.machine = text(v, "machine", where);  // absent from older files
    x.name = text(v, "name", where);
    x.packages = int(integer(v, "packages", where, 0, kMaxInt));
    x.cores = int(integer(v, "cores", where, 0, kMaxInt));
    x.pus = int(integer(v, "pus", where, 0, kMaxInt));
    for (const json::Value& n : field(v, "numa", json::Value::Array, where).arr)
      x.numa.push_back({int(integer(n, "os_index", where, 0, kMaxInt)), text(n, "cpus", where),
                        uint64_t(integer(n, "memory_bytes", where, 0, kMaxBytes))});
    for (const json::Value& c : field(v, "caches", json::Value::Array, where).arr)
      x.caches.push_back({int(integer(c, "level", where, 0, kMaxInt)), uint64_t(integer(c, "bytes", where, 0, kMaxBytes)),
                          int(integer(c, "count", where, 0, kMaxInt))});
    for (const json::Value& n : field(v, "nics", json::Value::Array, where).arr)
      x.nics.push_back({text(n, "name", where), int(integer(n, "speed_mbps", where, -1, kMaxInt)), int(integer(n, "numa", where, -1, kMaxInt))});
    // GPUs and RDMA ports: absent from files written before they were discovered.
    if (v.find("gpus"))
      for (const json::Value& g : field(v, "gpus", json::Value::Array, where).arr)
        x.gpus.push_back({text(g, "pci", where), text(g, "device_id", where), int(integer(g, "numa", where, -1, kMaxInt))});
    if (v.find("rdma"))
      for (const json::Value& p : field(v, "rdma", json::Value::Array, where).arr) {
        const json::Value& active = field(p, "active", json::Value::Bool, where);
        x.rdma.push_back({text(p, "device", where), int(integer(p, "port", where, 0, kMaxInt)), active.b,
                          int(integer(p, "rate_gbps", where, -1, kMaxInt)), text(p, "link_layer", where),
                          text(p, "netdev", where), int(integer(p, "numa", where, -1, kMaxInt))});
      }
    s.hosts.push_back(x);
  }
  const auto& ranks = field(root, "ranks", json::Value::Array, "the top level").arr;
  for (size_t r = 0; r < ranks.size(); r++) {
    const std::string where = "rank " + std::to_string(r);
    const json::Value& v = ranks[r];
    Rank x;
    x.host = int(integer(v, "host", where, 0, kMaxInt));
    if (x.host < 0 || size_t(x.host) >= s.hosts.size())
      throw std::runtime_error("topology file: " + where + " names host " + std::to_string(x.host) + " of " +
                               std::to_string(s.hosts.size()));
    x.pid = int(integer(v, "pid", where, 0, kMaxInt));
    x.cpus = text(v, "cpus", where);
    parse_cpu_list(x.cpus);  // checks it
    for (const json::Value& n : field(v, "numa", json::Value::Array, where).arr) {
      if (n.kind != json::Value::Number) throw std::runtime_error("topology file: " + where + ": numa holds numbers");
      x.numa.push_back(int(whole(n.num, 0, kMaxInt, where, "numa")));
    }
    if (v.find("gpu")) {  // ranks that drive a GPU
      x.gpu = text(v, "gpu", where);
      auto strings = [&](const char* name, std::vector<std::string>* out) {
        for (const json::Value& g : field(v, name, json::Value::Array, where).arr) {
          if (g.kind != json::Value::String)
            throw std::runtime_error("topology file: " + where + ": " + name + " holds strings");
          out->push_back(g.str);
        }
      };
      strings("gpu_peers", &x.gpu_peers);
      if (v.find("gpu_nvlink")) strings("gpu_nvlink", &x.gpu_nvlink);  // optional: older files lack it
      for (const std::string& g : x.gpu_nvlink)
        if (std::find(x.gpu_peers.begin(), x.gpu_peers.end(), g) == x.gpu_peers.end())
          throw std::runtime_error("topology file: " + where + ": gpu_nvlink names " + g + ", which is not in gpu_peers");
    }
    s.ranks.push_back(x);
  }
  return s;
}

System load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read it");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return from_json(text.str());
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace weft::topo
