// A pipeline schedule (train/dist/pipeline_schedule.h) executed across processes
// over weft: each rank is a stage and runs its action list, with activations on
// one communicator and gradients on another (both split from the world, so they
// share its channels), sends posted without waiting and receives in list order.
// Compute is a sleep (a free core, as under a GPU) of the action's cost.
//
//   weft-run -n P pipeline_run gpipe|1f1b|interleaved|zb M [CHUNKS] [MS_PER_UNIT]
//
// Checks, on every rank: the schedule runs to its end (no deadlock), every
// received message is the one the schedule names (its payload encodes the
// micro-batch and the virtual stage that sent it), and nothing fails. Prints the
// measured bubble beside the simulated one (not asserted: timing is not a test).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "train/dist/pipeline_schedule.h"
#include "weft/weft.h"

using weft::train::pp::Action;
using weft::train::pp::Op;

namespace {

constexpr size_t kFloats = 4096;  // 16 KiB per message

// What the sender of (micro-batch, virtual stage, gradient or not) puts at element i.
float payload(int mb, int vs, bool grad, size_t i) {
  return static_cast<float>(mb * 1000 + vs * 10 + (grad ? 5 : 0)) + static_cast<float>(i % 7);
}

bool check(weftResult_t rc, weftComm_t comm, const char* what, int rank) {
  if (rc == weftSuccess) return true;
  std::fprintf(stderr, "rank %d: FAIL %s: %s: %s\n", rank, what, weftGetErrorString(rc), weftGetLastError(comm));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s gpipe|1f1b|interleaved|zb M [CHUNKS] [MS_PER_UNIT]\n", argv[0]);
    return 2;
  }
  const std::string kind = argv[1];
  const int M = std::atoi(argv[2]), V = argc > 3 ? std::atoi(argv[3]) : 1;
  const double ms_per_unit = argc > 4 ? std::atof(argv[4]) : 1.0;
  weftComm_t world = nullptr, acts = nullptr, grads = nullptr;
  if (weftCommInitFromEnv(&world, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int rank = 0, P = 0;
  weftCommUserRank(world, &rank);
  weftCommCount(world, &P);
  if (!check(weftCommSplit(world, 0, rank, &acts, nullptr), world, "split", rank) ||
      !check(weftCommSplit(world, 0, rank, &grads, nullptr), world, "split", rank))
    return 1;

  weft::train::pp::Schedule s = kind == "gpipe"         ? weft::train::pp::gpipe(P, M)
                                : kind == "1f1b"        ? weft::train::pp::one_f_one_b(P, M)
                                : kind == "interleaved" ? weft::train::pp::interleaved(P, M, V)
                                                        : weft::train::pp::zero_bubble_h1(P, M);
  weft::train::pp::Costs costs;  // F 1, B 2, I 1, W 1 units
  weft::train::pp::Execution sim = weft::train::pp::run(s, costs);
  if (!sim.error.empty()) {
    std::fprintf(stderr, "rank %d: FAIL the schedule is invalid: %s\n", rank, sim.error.c_str());
    return 1;
  }

  int failures = 0;
  std::vector<std::vector<float>> sent;  // kept until their sends complete
  std::vector<weftRequest_t> requests;
  std::vector<float> in(kFloats);
  double busy_ms = 0;
  auto compute = [&](double units) {
    const double ms = units * ms_per_unit / s.chunks;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    busy_ms += ms;
  };
  weftBarrier(world);
  const auto t0 = std::chrono::steady_clock::now();
  for (const Action& a : s.actions[static_cast<size_t>(rank)]) {
    const int vs = a.chunk * P + rank;
    switch (a.op) {
      case Op::Forward: compute(costs.forward); break;
      case Op::Backward: compute(costs.backward); break;
      case Op::InputGrad: compute(costs.input_grad); break;
      case Op::WeightGrad: compute(costs.weight_grad); break;
      case Op::SendAct:
      case Op::SendGrad: {
        const bool grad = a.op == Op::SendGrad;
        const int peer = ((grad ? vs - 1 : vs + 1) % P + P) % P;
        sent.emplace_back(kFloats);
        for (size_t i = 0; i < kFloats; ++i) sent.back()[i] = payload(a.mb, vs, grad, i);
        requests.emplace_back();
        failures += !check(weftSendAsync(sent.back().data(), kFloats, weftFloat32, peer, grad ? grads : acts,
                                         &requests.back()),
                           grad ? grads : acts, "send", rank);
        break;
      }
      case Op::RecvAct:
      case Op::RecvGrad: {
        const bool grad = a.op == Op::RecvGrad;
        const int from_vs = grad ? vs + 1 : vs - 1;
        if (!check(weftRecv(in.data(), kFloats, weftFloat32, from_vs % P, grad ? grads : acts, nullptr),
                   grad ? grads : acts, "recv", rank))
          return 1;
        for (size_t i = 0; i < kFloats; ++i)
          if (in[i] != payload(a.mb, from_vs, grad, i)) {
            std::fprintf(stderr, "rank %d: FAIL %s of micro-batch %d from virtual stage %d holds another message\n",
                         rank, grad ? "gradient" : "activation", a.mb, from_vs);
            ++failures;
            break;
          }
        break;
      }
    }
  }
  for (weftRequest_t& r : requests) failures += !check(weftWait(&r), world, "send completion", rank);
  double mine = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  double step = 0, total_busy = 0;
  check(weftAllReduce(&mine, &step, 1, weftFloat64, weftMax, world, nullptr), world, "step time", rank);
  check(weftAllReduce(&busy_ms, &total_busy, 1, weftFloat64, weftSum, world, nullptr), world, "busy time", rank);
  if (rank == 0)
    std::printf("pipeline %s P=%d M=%d chunks=%d: step %.1f ms, measured bubble %.3f, simulated %.3f, formula %.3f\n",
                s.name.c_str(), P, M, s.chunks, step, 1 - total_busy / (P * step), sim.bubble(),
                weft::train::pp::bubble_formula(P, M, s.chunks));
  weftCommDestroy(grads);
  weftCommDestroy(acts);
  weftCommDestroy(world);
  return failures == 0 ? 0 : 1;
}
