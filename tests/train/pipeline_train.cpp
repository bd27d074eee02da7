// Pipeline-parallel training over weft against one process: every rank of a
// weft-run job (one stage each) trains a 4-block test model with each schedule
// and, beside it, the single-process reference (1 rank with --grad-accum M, no
// communication), and compares losses every step and every parameter after the
// run. Also: activation memory of GPipe grows with M and 1F1B's does not;
// checkpoints written by a pipeline resume on one process and back.
//
//   weft-run -n P pipeline_train
//
// Prints one line per case with the largest differences seen; exits 1 on any
// failure.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"
#include "weft/weft.h"

namespace fs = std::filesystem;
using namespace weft::train;

namespace {

int rank = 0, world = 1, failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
  failures++;
}

TrainOptions options(DType dt) {
  TrainOptions o = testing::tinyOptions(dt);
  o.model.numLayers = 4;
  o.dropout = 0.1;  // masks follow the micro-batch index
  return o;
}

// Every parameter, widened; a pipeline's stages share theirs first (collective).
std::vector<float> params(Trainer& t) {
  t.materialize();
  std::vector<float> p(t.model().numParams());
  t.model().getParams(p.data());
  return testing::comparable(t.model(), p);
}

struct Case {
  const char* schedule;
  int microbatches;
  int chunks;
  DType dtype;
  double tolerance;  // on the relative difference of parameters and losses
  bool checkpointActivations = false;
  int replicas = 1;  // --dp: the pipeline has world / replicas stages
};

void equivalence(weftComm_t comm, const Case& c, const std::vector<uint16_t>& data, int steps) {
  TrainOptions o = options(c.dtype), ref = options(c.dtype);
  ref.gradAccum = c.microbatches * c.replicas;
  o.comm = comm;
  o.pp = {world / c.replicas, c.replicas, c.schedule, c.microbatches, c.chunks, ""};
  Trainer pipe(o, &data, &data), single(ref, &data, &data);
  pipe.model().setActivationCheckpointing(c.checkpointActivations);
  double lossDiff = 0, bubble = 0, simulated = 0;
  for (int s = 0; s < steps; s++) {
    const StepStats a = pipe.trainStep(), b = single.trainStep();
    lossDiff = std::max(lossDiff, std::fabs(a.loss - b.loss) / std::fabs(b.loss));
    if (std::fabs(a.gradNorm - b.gradNorm) > c.tolerance * b.gradNorm)
      fail(std::string(c.schedule) + ": step " + std::to_string(s) + " gradient norm " + std::to_string(a.gradNorm) +
           " vs " + std::to_string(b.gradNorm));
    bubble += a.bubble / steps;
    simulated += a.simulatedBubble / steps;
    if (s == steps / 2) {  // evaluation between steps: the stages share their parameters for it
      const double ea = pipe.evalLoss(), eb = single.evalLoss();
      lossDiff = std::max(lossDiff, std::fabs(ea - eb) / std::fabs(eb));
    }
  }
  const double d = testing::relDiff(params(pipe), params(single));
  if (rank == 0)
    std::printf("%-11s P=%d D=%d M=%-2d v=%d %s%s: parameters max rel diff %.3g, loss max rel diff %.3g (tolerance "
                "%.0e); bubble measured %.3f, simulated %.3f, formula %.3f\n",
                c.schedule, world / c.replicas, c.replicas, c.microbatches, c.chunks, dtypeName(c.dtype),
                c.checkpointActivations ? " checkpoint-acts" : "", d, lossDiff, c.tolerance, bubble, simulated,
                pipe.pipeline()->formulaBubble());
  if (!(d <= c.tolerance) || !(lossDiff <= c.tolerance))
    fail(std::string(c.schedule) + " M=" + std::to_string(c.microbatches) + ": differs from one process by " +
         std::to_string(d) + " (parameters), " + std::to_string(lossDiff) + " (loss)");
}

// Peak activation bytes of this stage over two steps.
size_t peakActivations(weftComm_t comm, const char* schedule, int M, const std::vector<uint16_t>& data) {
  TrainOptions o = options(DType::f32);
  o.comm = comm;
  o.pp = {world, 1, schedule, M, 1, ""};
  Trainer t(o, &data, &data);
  size_t peak = 0;
  for (int s = 0; s < 2; s++) peak = std::max(peak, t.trainStep().peakActivationBytes);
  return peak;
}

// GPipe keeps every micro-batch's activations until the backwards start; 1F1B at
// most P - stage micro-batches, whatever M: exactly (P - stage) / M of GPipe's.
void memory(weftComm_t comm, const std::vector<uint16_t>& data) {
  const size_t g4 = peakActivations(comm, "gpipe", 4, data), g16 = peakActivations(comm, "gpipe", 16, data);
  const size_t o4 = peakActivations(comm, "1f1b", 4, data), o16 = peakActivations(comm, "1f1b", 16, data);
  std::printf("rank %d: peak activations: gpipe M=4 %zu, M=16 %zu; 1f1b M=4 %zu, M=16 %zu bytes\n", rank, g4, g16, o4,
              o16);
  if (o16 != o4) fail("1f1b's peak activations grow with the micro-batches");
  if (g16 < 3 * g4) fail("gpipe's peak activations do not grow with the micro-batches");
  if (o16 * 16 != g16 * size_t(world - rank)) fail("1f1b's peak activations are not (P - stage) / M of gpipe's");
}

// A pipeline checkpoint resumes on one process and a one-process checkpoint in
// the pipeline, continuing the uninterrupted run.
void checkpoints(weftComm_t comm, const std::vector<uint16_t>& data) {
  const int M = 4, half = 4;
  const fs::path dir = fs::temp_directory_path() / ("weft-pp-ckpt-" + std::to_string(getppid()));
  TrainOptions o = options(DType::f32), ref = options(DType::f32);
  ref.gradAccum = M;
  o.comm = comm;
  o.pp = {world, 1, "1f1b", M, 1, ""};
  Trainer straight(ref, &data, &data);
  for (int s = 0; s < 3 * half; s++) straight.trainStep();
  // pipeline -> one process -> pipeline
  Trainer a(o, &data, &data);
  for (int s = 0; s < half; s++) a.trainStep();
  a.save((dir / "a").string());
  weftBarrier(comm);  // rank 0 wrote it
  Trainer b(ref, &data, &data);
  b.load((dir / "a").string());
  for (int s = 0; s < half; s++) b.trainStep();
  if (rank == 0) b.save((dir / "b").string());
  weftBarrier(comm);
  Trainer c(o, &data, &data);
  c.load((dir / "b").string());
  for (int s = 0; s < half; s++) c.trainStep();
  const double d = testing::relDiff(params(c), params(straight));
  if (rank == 0) std::printf("checkpoints pipeline -> one process -> pipeline: parameters max rel diff %.3g\n", d);
  if (!(d <= 1e-6)) fail("resumed runs differ from the uninterrupted one by " + std::to_string(d));
  weftBarrier(comm);
  if (rank == 0) fs::remove_all(dir);
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  weftComm_t comm = testing::joinJob(&rank, &world);
  if (!comm) return 1;
  const std::vector<uint16_t> data = testing::syntheticCorpus();
  try {
    const int steps = 10;
    for (int M : {4, 8}) {
      equivalence(comm, {"gpipe", M, 1, DType::f32, 1e-6}, data, steps);
      equivalence(comm, {"1f1b", M, 1, DType::f32, 1e-6}, data, steps);
      equivalence(comm, {"interleaved", M, 2, DType::f32, 1e-6}, data, steps);
      equivalence(comm, {"zb", M, 1, DType::f32, 1e-6}, data, steps);
    }
    // 16-bit: the same operations in the same order as one process, so the same
    // roundings, except the tied embedding's two gradient halves, summed once here
    // and per micro-batch there.
    equivalence(comm, {"1f1b", 4, 1, DType::bf16, 1e-2}, data, steps);
    equivalence(comm, {"zb", 4, 1, DType::bf16, 1e-2}, data, steps);
    equivalence(comm, {"gpipe", 4, 1, DType::f32, 1e-6, true}, data, steps);
    equivalence(comm, {"1f1b", 4, 1, DType::f32, 1e-6, true}, data, steps);
    equivalence(comm, {"zb", 4, 1, DType::f32, 1e-6, true}, data, steps);
    equivalence(comm, {"interleaved", 4, 2, DType::f32, 1e-6, true}, data, steps);
    if (world == 4) {  // two pipelines of 2 stages, each stage's gradients all-reduced over both
      equivalence(comm, {"1f1b", 4, 1, DType::f32, 1e-6, false, 2}, data, steps);
      equivalence(comm, {"zb", 4, 1, DType::f32, 1e-6, false, 2}, data, steps);
      equivalence(comm, {"interleaved", 4, 2, DType::f32, 1e-6, false, 2}, data, steps);
    }
    memory(comm, data);
    checkpoints(comm, data);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  weftCommDestroy(comm);
  return failures ? 1 : 0;
}
