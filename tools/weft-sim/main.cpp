// weft-sim: predicts every algorithm of a collective on a machine weft is not
// running on, by building the real schedules (the executor's builders) and
// simulating them step by step (src/sim): alpha-beta-gamma per link level, shared
// NICs, pipeline slices. Prints predicted time and bus bandwidth per algorithm and
// size, the fastest, the tuner's pick (the tuner fed the same simulations), and
// where the fastest changes; --csv writes every row (tools/weft-sim/plot.py draws it).
//
//   weft-sim --nodes 16 --per-node 8 --intra nvlink:300GB/s:1us --inter ib:4x50GB/s:5us
//   weft-sim --topo topo.json            a WEFT_TOPO_DUMP_FILE / weft-topo --json file
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "sched/verify.h"
#include "sim/fabric.h"
#include "sim/simulate.h"
#include "topo/topology.h"
#include "tune/table.h"
#include "tune/tuner.h"

using namespace weft;

namespace {

const char* kUsage =
    "usage: weft-sim TOPOLOGY [options]\n"
    "topology, generated:\n"
    "  --nodes N --per-node G    N hosts of G ranks\n"
    "  --domains D               NUMA domains (or GPU islands) per host, consecutive ranks (1)\n"
    "  --intra NAME:BW[:LAT]     link within a domain, e.g. nvlink:300GB/s:1us (shm: 10.75GB/s:2us)\n"
    "  --cross NAME:BW[:LAT]     link across domains of a host (as --intra)\n"
    "  --inter NAME:[Kx]BW[:LAT] network: K ports per host of BW each, ranks spread over them in\n"
    "                            blocks, each rank sending at BW, e.g. ib:4x50GB/s:5us (net: 1GB/s:25us)\n"
    "  --cross-link BW           one link per host that its cross-domain messages share (none)\n"
    "  --burst BYTES:LINE        each host's network port is a token bucket (tc tbf, a cloud NIC's burst):\n"
    "                            --inter's BW sustained, up to BYTES saved up while idle at LINE, e.g.\n"
    "                            128K:2GB/s, for what the host sends (it receives at LINE); calls are\n"
    "                            then simulated back to back (none)\n"
    "  --wire LAT                a network message's time on the wire after its ports carried it (a long\n"
    "                            link, a delay line): it holds no port, so messages sent back to back pay\n"
    "                            it once, e.g. 1ms (0)\n"
    "  --shared-cores C          the hosts are network namespaces of one machine with C cores: where\n"
    "                            ranks outnumber them, messages and reductions queue for the cores\n"
    "topology, loaded:\n"
    "  --topo FILE               a topology file (WEFT_TOPO_DUMP_FILE, weft-topo --json); links as above\n"
    "options:\n"
    "  --coll NAME               allreduce (default), broadcast, reduce, allgather, reducescatter, alltoall\n"
    "  --algo LIST               which algorithms, WEFT_ALGO syntax (default: every one the tuner weighs)\n"
    "  --hier-levels LIST        hierarchical's algorithm per level, WEFT_HIER_LEVELS syntax (default: chosen\n"
    "                            per level by its size)\n"
    "  --hier-rounds N           hierarchical's overlapped rounds, WEFT_HIER_ROUNDS (default -1: chosen by\n"
    "                            the prediction)\n"
    "  -b MIN -e MAX -f FACTOR   sizes in bytes, K/M/G suffixes (8 .. 4G, x2); as nccl-tests, the size\n"
    "                            of the whole vector (all-gather: the output)\n"
    "  --elem-size B             bytes per element (4)\n"
    "  --gamma NS                nanoseconds per byte reduced (0.1)\n"
    "  --cpu-share F             on a machine with fewer cores than ranks: the share of each message's\n"
    "                            alpha its sender and its receiver each spend on a core, 0 to 1 (0.45;\n"
    "                            above 0.5 the link's part of alpha is 0: the message is CPU time)\n"
    "  --net-rx-cpu NS           there too: nanoseconds of a core per byte received over the network\n"
    "                            (the kernel's receive; 0.8)\n"
    "  --eager BYTES|all         a network message sends this much at once and the rest when its\n"
    "                            receiver reads (4M, TCP's send buffer; all: every byte at once)\n"
    "  --slice BYTES             pipeline slice (1M, WEFT_CHUNK_BYTES's default)\n"
    "  --max-messages M          skip an algorithm whose schedule would need more messages (5e7)\n"
    "  --verify                  run the symbolic verifier on every schedule (64 ranks at most)\n"
    "  --csv FILE                write coll,ranks,bytes,algorithm,seconds,busbw_GBps,fastest,pick rows\n";

bool parse_size(const std::string& s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return false;
  const std::string unit(end);
  if (unit == "K") v *= 1024;
  else if (unit == "M") v *= 1024.0 * 1024;
  else if (unit == "G") v *= 1024.0 * 1024 * 1024;
  else if (!unit.empty()) return false;
  *out = v;
  return true;
}

bool parse_latency(const std::string& s, double* seconds) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return false;
  const std::string unit(end);
  if (unit == "us") *seconds = v * 1e-6;
  else if (unit == "ns") *seconds = v * 1e-9;
  else if (unit == "ms") *seconds = v * 1e-3;
  else return false;
  return true;
}

// NAME:[Kx]BW[:LAT] -> label, ports, cost (beta from BW; alpha from LAT or `dflt`).
bool parse_link(const std::string& text, const algo::LinkCost& dflt, std::string* label, int* ports,
                algo::LinkCost* cost) {
  std::vector<std::string> f;
  std::stringstream ss(text);
  for (std::string x; std::getline(ss, x, ':');) f.push_back(x);
  if (f.size() < 2 || f.size() > 3 || f[0].empty()) return false;
  *label = f[0];
  std::string bw = f[1];
  *ports = 1;
  if (const size_t x = bw.find('x'); x != std::string::npos) {
    *ports = std::atoi(bw.substr(0, x).c_str());
    bw = bw.substr(x + 1);
    if (*ports < 1) return false;
  }
  double bytes_per_s = 0;
  if (!sim::parse_bandwidth(bw, &bytes_per_s)) return false;
  *cost = dflt;
  cost->beta_s_per_byte = 1 / bytes_per_s;
  return f.size() < 3 || parse_latency(f[2], &cost->alpha_s);
}

double bus_factor(sched::Coll c, int n) {
  switch (c) {
    case sched::Coll::AllReduce: return 2.0 * (n - 1) / n;
    case sched::Coll::AllGather:
    case sched::Coll::ReduceScatter:
    case sched::Coll::AllToAll: return double(n - 1) / n;
    default: return 1.0;
  }
}

std::string human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char b[32];
  std::snprintf(b, sizeof b, "%g %s", bytes, units[u]);
  return b;
}

struct Row {
  double bytes = 0;
  std::vector<double> seconds;  // per algorithm; < 0: not run (unsupported, skipped)
  int fastest = -1;
  std::string pick;
  std::string choices;  // the choices of the algorithms that have some (hierarchical's levels)
};

int fail(const std::string& msg) {
  std::fprintf(stderr, "weft-sim: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sim::Generator gen;
  const tune::LinkClassCosts base;
  gen.intra = gen.cross = base.shm;
  gen.inter = base.net;
  gen.label = {"shm", "shm", "net"};
  gen.nics = 1;
  gen.nic_bytes_per_s = 1 / base.net.beta_s_per_byte;
  bool cross_given = false, generated = false, verify = false;
  std::string topo_file, coll_name = "allreduce", algo, hier_levels, csv;
  int hier_rounds = -1;
  double min_b = 8, max_b = 4.0 * 1024 * 1024 * 1024, factor = 2, gamma_ns = 0.1, slice = 1 << 20, max_msgs = 5e7;
  double cross_link = 0, wire_s = 0, cpu_share = sim::Fabric::kCpuShare, net_rx_ns = sim::Fabric::kNetRxSPerByte * 1e9;
  uint64_t eager = sim::Fabric::kEagerBytes;
  sim::Port burst;  // its burst_bytes and line_bytes_per_s, for every network port
  int elem = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc && a != "--verify") return fail(a + ": missing value or unknown option\n" + kUsage);
    const std::string v = a == "--verify" ? "" : argv[i + 1];
    int ports = 1;
    bool ok = true;
    if (a == "--nodes") gen.nodes = std::atoi(v.c_str()), generated = true;
    else if (a == "--per-node") gen.per_node = std::atoi(v.c_str()), generated = true;
    else if (a == "--domains") gen.domains = std::atoi(v.c_str());
    else if (a == "--intra") ok = parse_link(v, gen.intra, &gen.label[0], &ports, &gen.intra);
    else if (a == "--cross") ok = parse_link(v, gen.cross, &gen.label[1], &ports, &gen.cross), cross_given = true;
    else if (a == "--inter") {
      ok = parse_link(v, gen.inter, &gen.label[2], &ports, &gen.inter);
      gen.nics = ports;
      gen.nic_bytes_per_s = 1 / gen.inter.beta_s_per_byte;
    } else if (a == "--cross-link") ok = sim::parse_bandwidth(v, &cross_link);
    else if (a == "--burst") {
      const size_t colon = v.find(':');
      ok = colon != std::string::npos && parse_size(v.substr(0, colon), &burst.burst_bytes) &&
           burst.burst_bytes > 0 && sim::parse_bandwidth(v.substr(colon + 1), &burst.line_bytes_per_s);
    }
    else if (a == "--wire") ok = parse_latency(v, &wire_s);
    else if (a == "--shared-cores") gen.shared_cores = std::atoi(v.c_str()), ok = gen.shared_cores > 0;
    else if (a == "--cpu-share") cpu_share = std::atof(v.c_str()), ok = cpu_share >= 0 && cpu_share <= 1;
    else if (a == "--net-rx-cpu") net_rx_ns = std::atof(v.c_str()), ok = net_rx_ns >= 0 && net_rx_ns < 1000;
    else if (a == "--eager") {
      double b = 0;
      ok = v == "all" || (parse_size(v, &b) && b >= 0 && b < 1e18);
      eager = v == "all" ? UINT64_MAX : static_cast<uint64_t>(b);
    }
    else if (a == "--topo") topo_file = v;
    else if (a == "--coll") coll_name = v;
    else if (a == "--algo") algo = v;
    else if (a == "--hier-levels") hier_levels = v;
    else if (a == "--hier-rounds") hier_rounds = std::atoi(v.c_str()), ok = hier_rounds >= -1;
    else if (a == "-b") ok = parse_size(v, &min_b);
    else if (a == "-e") ok = parse_size(v, &max_b);
    else if (a == "-f") factor = std::atof(v.c_str()), ok = factor > 1;
    else if (a == "--elem-size") elem = std::atoi(v.c_str()), ok = elem > 0;
    else if (a == "--gamma") gamma_ns = std::atof(v.c_str()), ok = gamma_ns >= 0;
    else if (a == "--slice") ok = parse_size(v, &slice);
    else if (a == "--max-messages") max_msgs = std::atof(v.c_str());
    else if (a == "--csv") csv = v;
    else if (a == "--verify") verify = true, --i;
    else return fail("unknown option " + a + "\n" + kUsage);
    ++i;
    if (!ok) return fail("bad value for " + a + ": " + v);
  }
  if (!cross_given) gen.cross = gen.intra, gen.label[1] = gen.label[0];
  gen.cross_domain_bytes_per_s = cross_link;
  for (algo::LinkCost* c : {&gen.intra, &gen.cross, &gen.inter}) c->gamma_s_per_byte = gamma_ns * 1e-9;
  sched::Coll coll;
  if (!tune::parse_coll(coll_name, &coll)) return fail("unknown collective " + coll_name);
  if (generated == !topo_file.empty()) return fail("give either --nodes/--per-node or --topo\n" + std::string(kUsage));
  if (generated && (gen.nodes < 1 || gen.per_node < 1 || gen.domains < 1 || gen.domains > gen.per_node))
    return fail("--nodes, --per-node and --domains must be positive, domains at most per-node");

  sim::Fabric fabric;
  int local_size = 0;
  std::string where;
  char buf[512];
  if (generated) {
    fabric = sim::generate(gen);
    std::snprintf(buf, sizeof buf, "%d hosts x %d ranks (%d domain%s each); %s %.4g GB/s %.3g us; ", gen.nodes,
                  gen.per_node, gen.domains, gen.domains == 1 ? "" : "s", gen.label[0].c_str(),
                  1e-9 / gen.intra.beta_s_per_byte, gen.intra.alpha_s * 1e6);
    where = buf;
    if (gen.domains > 1) {
      std::snprintf(buf, sizeof buf, "across domains %s %.4g GB/s %.3g us; ", gen.label[1].c_str(),
                    1e-9 / gen.cross.beta_s_per_byte, gen.cross.alpha_s * 1e6);
      where += buf;
    }
    if (gen.nodes > 1) {
      std::snprintf(buf, sizeof buf, "%s %dx%.4g GB/s %.3g us per host; ", gen.label[2].c_str(), gen.nics,
                    1e-9 / gen.inter.beta_s_per_byte, gen.inter.alpha_s * 1e6);
      where += buf;
    }
  } else {
    try {
      const topo::System s = topo::load_file(topo_file);
      fabric = sim::from_system(s, gen.intra, gen.cross, gen.inter);
      std::snprintf(buf, sizeof buf, "%s: %d ranks on %zu host%s; ", topo_file.c_str(), fabric.nranks, s.hosts.size(),
                    s.hosts.size() == 1 ? "" : "s");
      where = buf;
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }
  fabric.cpu_share = cpu_share;
  fabric.net_rx_s_per_byte = net_rx_ns * 1e-9;
  fabric.eager_bytes = eager;
  fabric.net_wire_s = wire_s;
  if (wire_s > 0) {
    std::snprintf(buf, sizeof buf, "%.4g us on the network's wire; ", wire_s * 1e6);
    where += buf;
  }
  if (burst.burst_bytes > 0) {
    for (sim::Port& p : fabric.nics) p.burst_bytes = burst.burst_bytes, p.line_bytes_per_s = burst.line_bytes_per_s;
    std::snprintf(buf, sizeof buf, "network ports burst %s at %.4g GB/s, calls back to back; ",
                  human(burst.burst_bytes).c_str(), burst.line_bytes_per_s * 1e-9);
    where += buf;
  }
  if (generated && gen.shared_cores > 0) {
    std::snprintf(buf, sizeof buf,
                  "one machine of %d cores (%.2g of alpha on a core at each end, %.2g ns a byte received over the "
                  "network); ",
                  gen.shared_cores, cpu_share, net_rx_ns);
    where += buf;
  }
  // As a communicator runs them: relabelable collectives in host-grouped order;
  // hierarchical builders need equal hosts (and domains) of consecutive ranks.
  if (sched::relabelable(coll)) fabric = sim::reordered(fabric, sim::grouped_order(fabric));
  local_size = sim::block_size(fabric);
  const int domain_size = sim::domain_block_size(fabric);
  const int n = fabric.nranks;
  std::snprintf(buf, sizeof buf, "gamma %.3g ns/B, slices of %s", gamma_ns, human(slice).c_str());
  where += buf;

  tune::Options to;
  to.algo = algo;
  to.hier_levels = hier_levels;
  to.hier_rounds = hier_rounds;
  to.log_table = false;
  to.online.enabled = false;
  to.layout = fabric;
  to.layout_costs = true;
  std::unique_ptr<tune::Tuner> tuner;
  if (Status st = tune::Tuner::create(n, local_size > 0 ? local_size : 1, to, &tuner); !st.ok())
    return fail(st.message());

  // The algorithms shown: the tuner's candidates at some size (WEFT_ALGO applied).
  std::vector<const algo::Algorithm*> algos;
  for (const algo::Algorithm* a : algo::algorithms_for(coll))
    if (tuner->spec().filter(coll).allows(a->name)) algos.push_back(a);
  if (algos.empty()) return fail("--algo " + algo + " leaves no " + coll_name + " algorithm");

  const bool per_rank = coll == sched::Coll::AllGather || coll == sched::Coll::ReduceScatter ||
                        coll == sched::Coll::AllToAll;
  std::vector<Row> rows;
  const auto t0 = std::chrono::steady_clock::now();
  for (double bytes = min_b; bytes <= max_b * (1 + 1e-9); bytes *= factor) {
    sched::BuildArgs args;
    args.coll = coll;
    args.nranks = n;
    args.count = static_cast<uint64_t>(bytes / elem / (per_rank ? n : 1));
    args.slice_elems = static_cast<uint64_t>(slice / elem);
    args.local_size = local_size;
    args.domain_size = domain_size;
    if (args.count == 0) continue;
    Row row;
    row.bytes = double(args.count) * elem * (per_rank ? n : 1);
    for (const algo::Algorithm* a : algos) {
      double t = -1;
      const sched::BuildArgs call = tuner->tailored(*a, args, size_t(elem));
      if (a->describe != nullptr && algo::supports(*a, call))
        row.choices += std::string(row.choices.empty() ? "" : "; ") + a->name + " " + a->describe(call);
      // Messages on the critical path x ranks bounds what building it would take.
      const double msgs = a->cost ? a->cost(call, size_t(elem), {1, 0, 0}) * n : (n <= 64 ? 0 : 1e300);
      if (algo::supports(*a, call) && msgs <= max_msgs) {
        const sched::Schedule s = sched::build_all(call, a->name, a->build);
        if (verify && n <= 64) {
          if (Status st = sched::verify_both(s); !st.ok()) return fail(std::string(a->name) + ": " + st.message());
        }
        sim::Result r;
        if (Status st = sim::simulate(s, fabric, size_t(elem), &r); !st.ok()) return fail(st.message());
        t = r.seconds;
      }
      row.seconds.push_back(t);
      if (t >= 0 && (row.fastest < 0 || t < row.seconds[size_t(row.fastest)])) row.fastest = int(row.seconds.size() - 1);
    }
    const algo::Algorithm* pick = nullptr;
    row.pick = tuner->choose(coll, args, size_t(elem), &pick).ok() ? pick->name : "-";
    rows.push_back(row);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("# weft-sim %s, %d ranks: %s\n", coll_name.c_str(), n, where.c_str());
  std::printf("# predicted time (us) per algorithm; busbw of the fastest and of the pick (GB/s)\n");
  std::printf("%12s", "size");
  for (const algo::Algorithm* a : algos) std::printf(" %13s", a->name);
  std::printf(" %13s %8s %13s %8s\n", "fastest", "busbw", "pick", "busbw");
  const double bf = bus_factor(coll, n);
  for (const Row& row : rows) {
    std::printf("%12s", human(row.bytes).c_str());
    for (double t : row.seconds) {
      if (t < 0) std::printf(" %13s", "-");
      else std::printf(" %13.2f", t * 1e6);
    }
    const double best = row.fastest >= 0 ? row.seconds[size_t(row.fastest)] : 0;
    double picked = -1;
    for (size_t i = 0; i < algos.size(); ++i)
      if (row.pick == algos[i]->name) picked = row.seconds[i];
    auto busbw = [&](double t) { return t > 0 ? row.bytes / t * bf / 1e9 : 0.0; };
    std::printf(" %13s %8.2f %13s %8.2f\n", row.fastest >= 0 ? algos[size_t(row.fastest)]->name : "-", busbw(best),
                row.pick.c_str(), busbw(picked));
  }
  std::printf("\n# where the fastest changes\n");
  std::string last;
  for (const Row& row : rows) {
    const std::string f = row.fastest >= 0 ? algos[size_t(row.fastest)]->name : "-";
    if (f != last) std::printf("from %12s: %s\n", human(row.bytes).c_str(), f.c_str());
    last = f;
  }
  last.clear();
  for (const Row& row : rows) {
    if (row.choices.empty() || row.choices == last) continue;
    if (last.empty()) std::printf("\n# the tuner's choices inside algorithms (levels: domain / across domains / across hosts)\n");
    std::printf("from %12s: %s\n", human(row.bytes).c_str(), row.choices.c_str());
    last = row.choices;
  }
  std::printf("# %zu sizes x %zu algorithms simulated in %.2f s\n", rows.size(), algos.size(), wall);

  if (!csv.empty()) {
    std::ofstream out(csv, std::ios::trunc);
    out << "coll,ranks,bytes,algorithm,seconds,busbw_GBps,fastest,pick\n";
    for (const Row& row : rows)
      for (size_t i = 0; i < algos.size(); ++i) {
        if (row.seconds[i] < 0) continue;
        out << coll_name << ',' << n << ',' << static_cast<uint64_t>(row.bytes) << ',' << algos[i]->name << ','
            << row.seconds[i] << ',' << row.bytes / row.seconds[i] * bf / 1e9 << ','
            << (int(i) == row.fastest ? 1 : 0) << ',' << (row.pick == algos[i]->name ? 1 : 0) << '\n';
      }
    if (!out) return fail("cannot write " + csv);
  }
  return 0;
}
