#include "algorithms/butterfly.h"

#include <cmath>

#include "algorithms/butterfly_phases.h"

namespace weft::algo::butterfly {

using namespace weft::sched;

namespace {

// Folding of a non-power-of-two rank count onto p = 2^floor(lg n) butterfly ranks:
// among the first 2*rem ranks, each even rank hands its data to the odd rank above
// it and sits out; everyone else renumbers down.
struct Fold {
  int p = 1, rem = 0;
  int newrank = 0;  // -1: this rank sits out (even, below 2*rem)
  bool folds_in = false;  // odd rank below 2*rem: absorbs rank-1's data
};

Fold fold(int n, int r) {
  Fold f;
  while (f.p * 2 <= n) f.p *= 2;
  f.rem = n - f.p;
  if (r < 2 * f.rem) {
    f.newrank = r % 2 ? r / 2 : -1;
    f.folds_in = r % 2 == 1;
  } else {
    f.newrank = r - f.rem;
  }
  return f;
}

int real_of(int newrank, int rem) { return newrank < rem ? 2 * newrank + 1 : newrank + rem; }

// The real ranks of butterfly ranks 0..p-1, in butterfly order.
std::vector<int> butterfly_group(const Fold& f) {
  std::vector<int> g;
  for (int j = 0; j < f.p; ++j) g.push_back(real_of(j, f.rem));
  return g;
}

double fold_cost(int n, double N, const LinkCost& c) {
  const Fold f = fold(n, 0);
  return f.rem ? 2 * (c.alpha_s + N * c.beta_s_per_byte) + N * c.gamma_s_per_byte : 0;
}

}  // namespace

bool uses_rabenseifner(const BuildArgs& a) {
  return a.count >= kRabenseifnerMinElems && a.count >= static_cast<uint64_t>(fold(a.nranks, 0).p);
}

// Recursive doubling: in round d every butterfly rank swaps its whole running sum
// with newrank ^ d and adds the partner's. Cheapest in latency for small vectors.
// Sliced: each slice runs the whole butterfly on its own.
//   T = lg(p) (alpha + N beta + N gamma) + [rem > 0] (2 (alpha + N beta) + N gamma)
RankPlan allreduce_recdoubling(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  if (n == 1) {
    b.copy(recv_buf(0, a.count), send_buf(0, a.count));
    return b.take();
  }
  const Fold f = fold(n, r);
  const std::vector<int> group = butterfly_group(f);
  const uint64_t k = num_slices(a.count, a.slice_elems);
  for (uint64_t j = 0; j < k; ++j) {
    const Part s = slice_of({0, a.count}, a.slice_elems, j);
    const Range in = send_buf(s.offset, s.count), acc = recv_buf(s.offset, s.count);
    if (f.newrank < 0) {  // sit out: hand over the input, get the result back
      b.send(r + 1, in);
      b.recv(r + 1, acc);
      continue;
    }
    if (f.folds_in) b.recv_reduce(r - 1, acc, in);
    doubling_all_reduce(b, group, f.newrank, s, f.folds_in ? Buf::Recv : Buf::Send);
    if (f.folds_in) b.send(r - 1, acc);
  }
  return b.take();
}

// Rabenseifner: recursive halving reduce-scatter, then recursive doubling
// all-gather retracing its rounds (butterfly_phases.h).
//   T = 2 lg(p) alpha + 2 (p-1)/p N beta + (p-1)/p N gamma
//       + [rem > 0] (2 (alpha + N beta) + N gamma)
RankPlan allreduce_rabenseifner(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t c = a.count;
  if (n == 1) {
    b.copy(recv_buf(0, c), send_buf(0, c));
    return b.take();
  }
  const Fold f = fold(n, r);
  if (f.newrank < 0) {
    b.send(r + 1, send_buf(0, c));
    b.recv(r + 1, recv_buf(0, c));
    return b.take();
  }
  if (f.folds_in) b.recv_reduce(r - 1, recv_buf(0, c), send_buf(0, c));
  const std::vector<int> group = butterfly_group(f);
  halving_reduce_scatter(b, group, f.newrank, {0, c}, f.folds_in ? Buf::Recv : Buf::Send);
  doubling_all_gather(b, group, f.newrank, {0, c});
  if (f.folds_in) b.send(r - 1, recv_buf(0, c));
  return b.take();
}

RankPlan allreduce(const BuildArgs& a, int r) {
  return uses_rabenseifner(a) ? allreduce_rabenseifner(a, r) : allreduce_recdoubling(a, r);
}

// Reduce-scatter by recursive halving. Butterfly rank i owns the blocks of the
// real ranks folded onto it (2i and 2i+1 below rem, else i+rem), a contiguous run,
// so halving windows are contiguous too. Partial sums live in an n*count scratch
// laid out like the input; the owner of a folded pair passes the even rank its
// block at the end.
//   T = lg(p) alpha + (p-1)/p nN (beta + gamma)
//       + [rem > 0] (alpha + nN (beta + gamma) + alpha + N beta)
RankPlan reducescatter(const BuildArgs& a, int r) {
  PlanBuilder b;
  const int n = a.nranks;
  const uint64_t c = a.count, total = c * static_cast<uint64_t>(n);
  if (n == 1) {
    b.copy(recv_buf(0, c), send_buf(0, c));
    return b.take();
  }
  const Fold f = fold(n, r);
  if (f.newrank < 0) {
    b.send(r + 1, send_buf(0, total));
    b.recv(r + 1, recv_buf(0, c));
    return b.take();
  }
  b.need_scratch(total);
  // Elements of butterfly groups [lo, hi): from the first block of group lo to the
  // end of the last block of group hi-1.
  auto first_block = [&](int g) { return static_cast<uint64_t>(g < f.rem ? 2 * g : g + f.rem); };
  auto span = [&](int lo, int hi) {
    const uint64_t begin = first_block(lo) * c, end = (hi >= f.p ? static_cast<uint64_t>(n) : first_block(hi)) * c;
    return Part{begin, end - begin};
  };
  bool have_acc = false;
  if (f.folds_in) {
    b.recv_reduce(r - 1, scratch_buf(0, total), send_buf(0, total));
    have_acc = true;
  }
  int lo = 0, hi = f.p;
  for (int d = f.p / 2; d >= 1; d /= 2) {
    const int partner = real_of(f.newrank ^ d, f.rem), mid = lo + (hi - lo) / 2;
    const bool upper = f.newrank & d;
    const Part give = upper ? span(lo, mid) : span(mid, hi);
    const Part keep = upper ? span(mid, hi) : span(lo, mid);
    const Buf src = have_acc ? Buf::Scratch : Buf::Send;
    b.send(partner, {src, give.offset, give.count});
    b.recv_reduce(partner, scratch_buf(keep.offset, keep.count), {src, keep.offset, keep.count});
    have_acc = true;
    (upper ? lo : hi) = mid;
  }
  const uint64_t ur = static_cast<uint64_t>(r);
  if (f.folds_in) b.send(r - 1, scratch_buf((ur - 1) * c, c));
  b.copy(recv_buf(0, c), scratch_buf(ur * c, c));
  return b.take();
}

double recdoubling_cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1) return 0;
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const double L = lg_exact(fold(a.nranks, 0).p);
  return L * (c.alpha_s + N * c.beta_s_per_byte + N * c.gamma_s_per_byte) + fold_cost(a.nranks, N, c);
}

double rabenseifner_cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1) return 0;
  const double N = static_cast<double>(a.count) * static_cast<double>(elem_size);
  const int p = fold(a.nranks, 0).p;
  const double L = lg_exact(p), frac = (p - 1.0) / p;
  return 2 * L * c.alpha_s + 2 * frac * N * c.beta_s_per_byte + frac * N * c.gamma_s_per_byte +
         fold_cost(a.nranks, N, c);
}

double cost(const BuildArgs& a, size_t elem_size, const LinkCost& c) {
  if (a.nranks <= 1) return 0;
  switch (a.coll) {
    case Coll::AllReduce:
      return uses_rabenseifner(a) ? rabenseifner_cost(a, elem_size, c) : recdoubling_cost(a, elem_size, c);
    case Coll::ReduceScatter: {
      const double N = static_cast<double>(a.count) * static_cast<double>(elem_size), nN = N * a.nranks;
      const Fold f = fold(a.nranks, 0);
      const double frac = (f.p - 1.0) / f.p, bg = c.beta_s_per_byte + c.gamma_s_per_byte;
      const double folding = f.rem ? 2 * c.alpha_s + nN * bg + N * c.beta_s_per_byte : 0;
      return lg_exact(f.p) * c.alpha_s + frac * nN * bg + folding;
    }
    default: return 0;
  }
}

}  // namespace weft::algo::butterfly
