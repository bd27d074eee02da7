// Pipeline schedules as data: every builder's lists pass the symbolic executor
// for P = 1..8, M = 1..32 (v = 1..4 interleaved); timed with uniform stages and
// free transfers, GPipe and 1F1B give the closed-form bubble (P - 1)/(M + P - 1);
// hand-broken schedules are rejected with the reason.
#include <gtest/gtest.h>

#include <string>

#include "train/dist/pipeline_schedule.h"

namespace weft::train::pp {
namespace {

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(PipelineSchedule, EveryBuilderIsValidForEveryShape) {
  for (int P = 1; P <= 8; ++P)
    for (int M = 1; M <= 32; ++M) {
      for (const Schedule& s : {gpipe(P, M), one_f_one_b(P, M), zero_bubble_h1(P, M)}) {
        Execution r = run(s);
        ASSERT_TRUE(r.error.empty()) << s.name << " P=" << P << " M=" << M << ": " << r.error;
      }
      if (M % P != 0) continue;
      for (int v = 1; v <= 4; ++v) {
        Execution r = run(interleaved(P, M, v));
        ASSERT_TRUE(r.error.empty()) << "interleaved P=" << P << " M=" << M << " v=" << v << ": " << r.error;
      }
    }
}

TEST(PipelineSchedule, GPipeAnd1F1BHaveTheClosedFormBubble) {
  // Uniform stages, F = 1, B = 2, free transfers: the step is (M + P - 1)(F + B).
  for (int P = 1; P <= 8; ++P)
    for (int M = 1; M <= 32; ++M)
      for (const Schedule& s : {gpipe(P, M), one_f_one_b(P, M)}) {
        Execution r = run(s);
        EXPECT_DOUBLE_EQ(r.step_time, 3.0 * (M + P - 1)) << s.name << " P=" << P << " M=" << M;
        EXPECT_NEAR(r.bubble(), static_cast<double>(P - 1) / (M + P - 1), 1e-12) << s.name << " P=" << P << " M=" << M;
        EXPECT_DOUBLE_EQ(bubble_formula(P, M), static_cast<double>(P - 1) / (M + P - 1));
      }
}

TEST(PipelineSchedule, InterleavingDividesTheBubbleAsItsFormulaSays) {
  // Megatron's claim: v chunks divide the warm-up and cool-down by v, so the
  // bubble is (P - 1)/(v M + P - 1) with uniform stages and free transfers.
  for (int P : {2, 4, 8})
    for (int M : {P, 2 * P, 4 * P})
      for (int v = 2; v <= 4; ++v) {
        double b = run(interleaved(P, M, v)).bubble(), b1 = run(one_f_one_b(P, M)).bubble();
        EXPECT_LT(b, b1) << "P=" << P << " M=" << M << " v=" << v;
        EXPECT_NEAR(b, static_cast<double>(P - 1) / (v * M + P - 1), 1e-12) << "P=" << P << " M=" << M << " v=" << v;
      }
}

TEST(PipelineSchedule, ZeroBubbleH1BeatsOneFOneB) {
  // B split into I and W of the same cost each.
  Costs c;
  c.backward = 2;
  c.input_grad = 1;
  c.weight_grad = 1;
  for (int P = 2; P <= 8; ++P)
    for (int M : {P, 2 * P, 32}) {
      Execution zb = run(zero_bubble_h1(P, M), c), f1b = run(one_f_one_b(P, M), c);
      EXPECT_LT(zb.bubble(), f1b.bubble()) << "P=" << P << " M=" << M;
    }
}

TEST(PipelineSchedule, ActivationMemoryOfGPipeGrowsWithMicroBatchesAnd1F1BsDoesNot) {
  // Stage s holds M activations under GPipe, min(P - s, M) under 1F1B.
  for (int P = 1; P <= 8; ++P)
    for (int M = 1; M <= 32; ++M) {
      Execution g = run(gpipe(P, M)), f = run(one_f_one_b(P, M));
      for (int s = 0; s < P; ++s) {
        EXPECT_EQ(g.peak_activations[static_cast<size_t>(s)], M) << "P=" << P << " M=" << M << " stage " << s;
        EXPECT_EQ(f.peak_activations[static_cast<size_t>(s)], std::min(P - s, M)) << "P=" << P << " M=" << M;
      }
    }
}

TEST(PipelineSchedule, TransfersLengthenTheStep) {
  Costs c;
  c.transfer = 0.5;
  // GPipe, P = 2, M = 1: F, send, F, B, send, B: 1 + 0.5 + 1 + 2 + 0.5 + 2.
  EXPECT_DOUBLE_EQ(run(gpipe(2, 1), c).step_time, 7.0);
}

// ---- broken schedules -------------------------------------------------------

Schedule without(Schedule s, int stage, Op op, int mb) {
  auto& a = s.actions[static_cast<size_t>(stage)];
  for (auto it = a.begin(); it != a.end(); ++it)
    if (it->op == op && it->mb == mb) {
      a.erase(it);
      break;
    }
  return s;
}

TEST(PipelineSchedule, AMissingSendIsADeadlockOrAMismatchNamingTheStage) {
  // The last activation never sent: stage 1 waits for it forever.
  Execution last = run(without(one_f_one_b(3, 4), 0, Op::SendAct, 3));
  EXPECT_TRUE(has(last.error, "deadlock")) << last.error;
  EXPECT_TRUE(has(last.error, "stage 1, action")) << last.error;
  EXPECT_TRUE(has(last.error, "recv-activation of micro-batch 3")) << last.error;
  // An earlier one: the next to arrive is the wrong micro-batch.
  Execution mid = run(without(one_f_one_b(3, 4), 0, Op::SendAct, 2));
  EXPECT_TRUE(has(mid.error, "stage 1")) << mid.error;
  EXPECT_TRUE(has(mid.error, "out of order: the next activation from stage 0 is micro-batch 3")) << mid.error;
}

TEST(PipelineSchedule, ABackwardBeforeItsForwardIsRejected) {
  Schedule s = gpipe(1, 2);
  std::swap(s.actions[0][0], s.actions[0][2]);  // B0 first
  Execution r = run(s);
  EXPECT_TRUE(has(r.error, "backward before its forward")) << r.error;
}

TEST(PipelineSchedule, ACycleIsADeadlock) {
  // Stage 0 waits for micro-batch 0's gradient before sending its activation.
  Schedule s = gpipe(2, 1);
  auto& a = s.actions[0];
  a.insert(a.begin(), Action{Op::RecvGrad, 0, 0});
  Execution r = run(s);
  EXPECT_TRUE(has(r.error, "deadlock")) << r.error;
  EXPECT_TRUE(has(r.error, "stage 0")) << r.error;
  EXPECT_TRUE(has(r.error, "stage 1")) << r.error;
}

TEST(PipelineSchedule, ReceivesOutOfOrderAreRejected) {
  // Stage 1 receives micro-batch 1's activation before micro-batch 0's.
  Schedule s = gpipe(2, 2);
  auto& a = s.actions[1];
  std::swap(a[0], a[2]);  // recv 0 <-> recv 1
  std::swap(a[1], a[3]);  // F 0 <-> F 1
  Execution r = run(s);
  EXPECT_TRUE(has(r.error, "out of order")) << r.error;
}

TEST(PipelineSchedule, AMissingOrDoubledComputationIsRejected) {
  Execution missing = run(without(gpipe(1, 3), 0, Op::Backward, 1));
  EXPECT_TRUE(has(missing.error, "never runs the backward of micro-batch 1")) << missing.error;
  Schedule twice = gpipe(1, 2);
  twice.actions[0].push_back(Action{Op::Forward, 0, 0});
  EXPECT_TRUE(has(run(twice).error, "a second forward")) << run(twice).error;
  Execution no_w = run(without(zero_bubble_h1(2, 2), 1, Op::WeightGrad, 0));
  EXPECT_TRUE(has(no_w.error, "never runs the weight gradient")) << no_w.error;
}

TEST(PipelineSchedule, AReceiveWithoutItsActionsInputIsRejected) {
  // Stage 1 computes micro-batch 1 without receiving its input.
  Execution r = run(without(gpipe(2, 2), 1, Op::RecvAct, 1));
  EXPECT_TRUE(has(r.error, "forward before its activation was received")) << r.error;
}

TEST(PipelineSchedule, ASendNobodyReceivesIsRejected) {
  Schedule s = gpipe(2, 2);
  s.actions[0].push_back(Action{Op::SendAct, 0, 0});
  Execution r = run(s);
  EXPECT_TRUE(has(r.error, "stage 0 sends an activation of micro-batch 0 that stage 1 never receives")) << r.error;
}

}  // namespace
}  // namespace weft::train::pp
