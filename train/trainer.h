// One training run: model + AdamW + loss scaler + data sampler, with checkpoint
// save/resume that continues bit-identically; data-parallel over a weft
// communicator when one is given.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/data.h"
#include "train/dist/data_parallel.h"
#include "train/dist/pipeline.h"
#include "train/gpt2.h"
#include "train/optim.h"
#include "weft/weft.h"

namespace weft::train {

struct TrainOptions {
  GPT2Config model;
  DType dtype = DType::f32;
  int batch = 12;
  int seq = 64;
  int gradAccum = 1;      // micro-batches per rank per step
  int steps = 300;
  double lr = 1e-3;
  double minLr = 1e-4;
  int warmup = 30;
  AdamWConfig adam;
  double dropout = 0;     // embeddings, attention probabilities, residual branches
  uint64_t seed = 1337;   // init, data sampling, dropout masks and generation derive from it
  int evalBatches = 8;
  // Data parallelism: every rank of `comm` runs a Trainer with the same options.
  // Micro-batch i of a step (of ranks x gradAccum) is trained by rank i mod ranks,
  // so N ranks x K equals 1 rank x N*K. nullptr: one process.
  weftComm_t comm = nullptr;
  DataParallelOptions dp;
  // Pipeline parallelism instead (pp.stages > 1; comm has pp.stages x pp.replicas
  // ranks): each replica's pp.microbatches micro-batches of a step flow through its
  // stages (micro-batch j of the step's replicas x microbatches on replica j mod
  // replicas); gradAccum must be 1.
  PipelineOptions pp;
};

struct StepStats {
  int step = 0;           // 1-based index of the step just taken
  double loss = 0;        // mean over micro-batches
  double lr = 0;
  double gradNorm = 0;
  double lossScale = 1;   // the scale used for this step
  bool skipped = false;
  // Where the step's time went (seconds): forward and backward, waiting for
  // communication that backward did not hide, the optimizer.
  double computeSeconds = 0, commSeconds = 0, optimizerSeconds = 0;
  // Pipeline parallelism: the step's measured bubble (all stages), the schedule's
  // simulated one with the measured action costs, this rank's peak of saved
  // activations and its backward's work buffers.
  double bubble = 0, simulatedBubble = 0;
  size_t peakActivationBytes = 0, workBufferBytes = 0;
};

class Trainer {
 public:
  Trainer(const TrainOptions& opt, const std::vector<uint16_t>* train,
          const std::vector<uint16_t>* val);

  StepStats trainStep();
  // Mean loss over opt.evalBatches fixed validation windows (same windows every call).
  // Under ZeRO-3 collective (the parameters are gathered for it), as is generate().
  double evalLoss();

  // dir/checkpoint.bin: model parameters, fp32 master weights, AdamW moments and
  // step, loss scaler, sampler RNG and position, the step counter. Collective under
  // data parallelism (the shards are gathered); rank 0 writes, atomically.
  void save(const std::string& dir) const;
  // Restores a checkpoint written by save() under any ranks and ZeRO stage (the
  // global batch, ranks x gradAccum, must match to continue the same data stream);
  // the model config and dtype must match.
  void load(const std::string& dir);

  std::string generate(const std::string& prompt, int numTokens, double temperature,
                       uint64_t seed);

  int step() const { return step_; }
  const TrainOptions& options() const { return opt_; }
  Model& model() { return *model_; }
  AdamW& optimizer() { return pp_ ? pp_->optimizer() : dp_->optimizer(); }
  // Exactly one of the two exists: the pipeline when options().pp.stages > 1.
  DataParallel& dataParallel() { return *dp_; }
  Pipeline* pipeline() { return pp_.get(); }
  // Every rank's model holds every current parameter (collective; see Pipeline::materialize,
  // DataParallel::materialize).
  void materialize();
  // Sets every parameter and the optimizer's fp32 state (the same on every rank).
  void setState(const void* rawParams, const std::vector<float>& master, const std::vector<float>& m,
                const std::vector<float>& v);
  LossScaler& scaler() { return scaler_; }
  LrSchedule schedule() const;

 private:
  StepStats pipelineStep();
  // The optimizer's outcome into s; the loss scaler and the step counter move on.
  StepStats finishStep(StepStats s, const OptimStepResult& o);
  TrainOptions opt_;
  const std::vector<uint16_t>* val_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<Pipeline> pp_;
  LossScaler scaler_;
  BatchSampler sampler_;
  int step_ = 0;
  std::vector<int> tokens_, targets_;
};

}  // namespace weft::train
