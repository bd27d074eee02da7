#include "algorithms/rings.h"

#include <algorithm>
#include <vector>

#include "sched/build_util.h"

namespace weft::algo::rings {

using namespace weft::sched;

namespace {

// Ring c: L ranks a node, its order within each node shifted by `shift`.
struct Ring {
  int L, shift;
  int at(int pos) const { return pos / L * L + (pos % L + shift) % L; }      // the rank at a position
  int pos(int rank) const { return rank / L * L + mod(rank % L - shift, L); }  // a rank's position
};

// Ring c's region of the vector.
Part region(const BuildArgs& a, int C, int c) {
  return even_part(a.count, static_cast<uint64_t>(C), static_cast<uint64_t>(c));
}

// Slice rounds of a ring's all-reduce: its region in n parts, cut into slices.
uint64_t rounds(const BuildArgs& a, Part region) {
  return num_slices(ceil_div(region.count, static_cast<uint64_t>(a.nranks)), a.slice_elems);
}

}  // namespace

bool supports(const BuildArgs& a) { return a.local_size > 0 && a.nranks % a.local_size == 0; }

int channels(const BuildArgs& a) { return supports(a) ? std::min(4, a.local_size) : 1; }

// Ring c all-reduces region c of the vector as ring.cpp's all-reduce does the
// whole (reduce-scatter over n parts, then all-gather), at position i of its
// order. The rings advance together, step by step.
//   T = 2(n-1) k C alpha + 2(n-1)/n N beta + (n-1)/n N gamma on one link (k: the
//   slice rounds of a region); across nodes each ring's crossings take their own
//   ports, which the simulator models.
RankPlan allreduce(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const int L = supports(a) ? a.local_size : n, C = channels(a);
  struct Channel {
    Part region;
    int i, next, prev;
    uint64_t rounds;
  };
  std::vector<Channel> ch;
  uint64_t k = 0;
  for (int c = 0; c < C; ++c) {
    const Ring ring{L, c * L / C};
    const int i = ring.pos(r);
    const Part reg = region(a, C, c);
    ch.push_back({reg, i, ring.at(mod(i + 1, n)), ring.at(mod(i - 1, n)), rounds(a, reg)});
    k = std::max(k, ch.back().rounds);
  }
  auto piece = [&](const Channel& c, int part, uint64_t j) {
    Part p = even_part(c.region.count, static_cast<uint64_t>(n), static_cast<uint64_t>(mod(part, n)));
    p.offset += c.region.offset;
    return slice_of(p, a.slice_elems, j);
  };
  // A step's sends on every ring go out before its receives are waited for, so
  // that the rings' crossings between nodes run side by side.
  for (uint64_t j = 0; j < k; ++j) {
    for (int s = 0; s < n - 1; ++s) {
      for (const Channel& c : ch) {
        if (j >= c.rounds) continue;
        const Part out = piece(c, c.i - s, j);
        b.send(c.next, s == 0 ? send_buf(out.offset, out.count) : recv_buf(out.offset, out.count));
      }
      for (const Channel& c : ch) {
        if (j >= c.rounds) continue;
        const Part in = piece(c, c.i - s - 1, j);
        b.recv_reduce(c.prev, recv_buf(in.offset, in.count), send_buf(in.offset, in.count));
      }
    }
    for (int s = 0; s < n - 1; ++s) {
      for (const Channel& c : ch) {
        if (j >= c.rounds) continue;
        const Part out = piece(c, c.i + 1 - s, j);
        b.send(c.next, recv_buf(out.offset, out.count));
      }
      for (const Channel& c : ch) {
        if (j >= c.rounds) continue;
        const Part in = piece(c, c.i - s, j);
        b.recv(c.prev, recv_buf(in.offset, in.count));
      }
    }
  }
  return b.take();
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1) return 0;
  const double n = a.nranks, N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const int C = channels(a);
  uint64_t k = 1;
  for (int ch = 0; ch < C; ++ch) k = std::max(k, rounds(a, region(a, C, ch)));
  return 2 * (n - 1) * static_cast<double>(k) * C * c.alpha_s + 2 * (n - 1) / n * N * c.beta_s_per_byte +
         (n - 1) / n * N * c.gamma_s_per_byte;
}

}  // namespace weft::algo::rings
