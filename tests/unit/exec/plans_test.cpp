// Every registered algorithm's real plans (algorithms/registry.h) run by one
// executor per rank over fake links (eager whole messages, eager 12-byte pieces,
// rendezvous 8-byte pieces) at 1-8 ranks, in place and out of place, two calls in a row on the same executors (the second
// call's tags carry the next sequence number). Results are checked against
// closed forms of the inputs, written out below per collective.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "harness.h"

namespace weft::testing {
namespace {

using sched::Coll;
using Ints = std::vector<int32_t>;

// Inputs, call c (1 or 2), rank r, element j of the Send buffer:
//   all-to-all:  c * (1000 r + j)
//   otherwise:   c * (r + 1) * (j + 1)
int32_t input(Coll coll, int c, int r, uint64_t j) {
  const auto jj = static_cast<int32_t>(j);
  return coll == Coll::AllToAll ? c * (1000 * r + jj) : c * (r + 1) * (jj + 1);
}

// What rank r's Recv buffer must hold at element j after call c, with n ranks,
// `count` as in BuildArgs and root = n - 1. T(n) = n(n + 1)/2 = sum of (r + 1).
//   all-reduce:     c (j + 1) T(n)
//   reduce (root):  c (j + 1) T(n)
//   broadcast:      the root's input, c n (j + 1)
//   all-gather:     block s = j / count holds rank s's input: c (s + 1)(j % count + 1)
//   reduce-scatter: rank r's block of the sum: c (r count + j + 1) T(n)
//   all-to-all:     block s holds rank s's block r: c (1000 s + r count + j % count)
int32_t expected(Coll coll, int c, int r, int n, uint64_t count, uint64_t j) {
  const int32_t T = n * (n + 1) / 2;
  const auto jj = static_cast<int32_t>(j), cc = static_cast<int32_t>(count);
  switch (coll) {
    case Coll::AllReduce:
    case Coll::Reduce: return c * (jj + 1) * T;
    case Coll::Broadcast: return c * n * (jj + 1);
    case Coll::AllGather: return c * (jj / cc + 1) * (jj % cc + 1);
    case Coll::ReduceScatter: return c * (r * cc + jj + 1) * T;
    case Coll::AllToAll: return c * (1000 * (jj / cc) + r * cc + jj % cc);
  }
  return 0;
}

struct Config {
  int n;
  uint64_t count;
  FakeOptions link;
  bool in_place;
  uint32_t pipeline = 0;  // hierarchical's overlapped rounds
};

std::string describe(const algo::Algorithm& a, const Config& k) {
  return std::string(sched::coll_name(a.coll)) + ":" + a.name + " n=" + std::to_string(k.n) +
         " count=" + std::to_string(k.count) + (k.link.rendezvous ? " rendezvous" : " eager") +
         " piece=" + std::to_string(k.link.piece) + (k.in_place ? " in-place" : " out-of-place") +
         (k.pipeline > 1 ? " pipeline=" + std::to_string(k.pipeline) : "");
}

// Ranks per node for hierarchical: the largest divisor d of n with d * d <= n.
int node_size(int n) {
  int d = 1;
  for (int i = 1; i * i <= n; ++i)
    if (n % i == 0) d = i;
  return d;
}

// Runs two calls of `a` under `k`; failures are reported with describe().
void run_config(const algo::Algorithm& a, const Config& k) {
  SCOPED_TRACE(describe(a, k));
  const int n = k.n, root = n - 1;
  sched::BuildArgs args;
  args.coll = a.coll;
  args.nranks = n;
  args.count = k.count;
  args.root = root;
  args.slice_elems = a.sliced ? 5 : 0;  // several slices of an odd size
  args.local_size = node_size(n);
  args.pipeline = k.pipeline;
  ASSERT_TRUE(algo::supports(a, args));
  const uint64_t S = sched::send_count(args), R = sched::recv_count(args);
  std::vector<sched::RankPlan> plans;
  for (int r = 0; r < n; ++r) plans.push_back(a.build(args, r));

  FakeNet net(n, k.link);
  // outputs[r][c - 1]: rank r's Recv buffer after call c; inputs_after: its Send
  // buffer after the call (out of place: must be unchanged).
  std::vector<std::vector<Ints>> outputs(static_cast<size_t>(n)), inputs_after(static_cast<size_t>(n));
  std::vector<Status> st = run_ranks(n, [&](int r) {
    exec::Executor ex(r, net.links_of(r), nullptr);
    const auto ur = static_cast<uint64_t>(r);
    for (int c = 1; c <= 2; ++c) {
      // Out of place: separate buffers. In place, as the C API aliases them:
      // all-gather send = recv + r count, reduce-scatter recv = send + r count,
      // otherwise the same memory.
      Ints send(S), recv(R, -1), user;
      for (uint64_t j = 0; j < S; ++j) send[j] = input(a.coll, c, r, j);
      // A broadcast reads only the root's input: the others hold garbage.
      if (a.coll == Coll::Broadcast && r != root) send.assign(S, -7);
      void* recv_p = recv.data();
      const void* send_p = send.data();
      if (k.in_place) {
        if (a.coll == Coll::AllGather) {
          user.assign(R, -1);
          std::copy(send.begin(), send.end(), user.begin() + static_cast<long>(ur * k.count));
          recv_p = user.data();
          send_p = user.data() + ur * k.count;
        } else if (a.coll == Coll::ReduceScatter) {
          user = send;
          send_p = user.data();
          recv_p = user.data() + ur * k.count;
        } else {
          user = send;
          send_p = recv_p = user.data();
        }
      }
      exec::Call call = int_sum_call(plans[ur], send_p, recv_p, static_cast<uint64_t>(c), 5000);
      Status s = ex.run(call);
      if (!s.ok()) return s.prefix("call " + std::to_string(c) + ": ");
      const auto* out = static_cast<const int32_t*>(recv_p);
      outputs[ur].emplace_back(out, out + R);
      inputs_after[ur].push_back(send);
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    ASSERT_TRUE(st[ur].ok()) << "rank " << r << ": " << st[ur].message();
    ASSERT_EQ(outputs[ur].size(), 2u);
    if (a.coll == Coll::Reduce && r != root) continue;  // only the root's Recv is defined
    for (int c = 1; c <= 2; ++c) {
      Ints want(R);
      for (uint64_t j = 0; j < R; ++j) want[j] = expected(a.coll, c, r, n, k.count, j);
      EXPECT_EQ(outputs[ur][static_cast<size_t>(c - 1)], want) << "rank " << r << " call " << c;
      if (!k.in_place) {
        Ints in(S);
        for (uint64_t j = 0; j < S; ++j) in[j] = input(a.coll, c, r, j);
        if (a.coll == Coll::Broadcast && r != root) in.assign(S, -7);
        EXPECT_EQ(inputs_after[ur][static_cast<size_t>(c - 1)], in) << "rank " << r << " call " << c
                                                                     << ": the Send buffer changed";
      }
    }
  }
}

class RealPlans : public ::testing::TestWithParam<const algo::Algorithm*> {};

TEST_P(RealPlans, ResultsMatchClosedForms) {
  const algo::Algorithm& a = *GetParam();
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8})
    for (uint64_t count : {1u, 7u, 37u})
      for (FakeOptions link : {FakeOptions{false, 0}, FakeOptions{false, 12}, FakeOptions{true, 8}})
        for (bool in_place : {false, true}) {
          run_config(a, {n, count, link, in_place});
          // The first failing configuration says enough (and a deadlock costs
          // the 5 s deadline per configuration).
          if (HasFailure()) return;
        }
}

// Hierarchical with its levels overlapped in rounds: each rank interleaves
// the rounds' phases step by step, which only the real executor (staging a
// receive whose destination a send still reads, pieces of messages) fully tests.
TEST(RealPlansPipelined, HierarchicalRounds) {
  const algo::Algorithm& a = *algo::find_algorithm(Coll::AllReduce, "hierarchical");
  for (int n : {2, 4, 6, 8})
    for (uint32_t rounds : {2u, 3u, 8u})
      for (uint64_t count : {5u, 37u, 101u})
        for (FakeOptions link : {FakeOptions{false, 0}, FakeOptions{false, 12}, FakeOptions{true, 8}})
          for (bool in_place : {false, true}) {
            run_config(a, {n, count, link, in_place, rounds});
            if (HasFailure()) return;
          }
}

std::vector<const algo::Algorithm*> every_algorithm() {
  std::vector<const algo::Algorithm*> out;
  for (const algo::Algorithm& a : algo::all_algorithms()) out.push_back(&a);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Exec, RealPlans, ::testing::ValuesIn(every_algorithm()),
                         [](const ::testing::TestParamInfo<const algo::Algorithm*>& i) {
                           return std::string(sched::coll_name(i.param->coll)) + "_" + i.param->name;
                         });

}  // namespace
}  // namespace weft::testing
