// Pipeline parallelism over weft's public API. The blocks are cut into P x v
// contiguous virtual stages (v model chunks per rank with interleaving; chunk c of
// rank s is virtual stage c * P + s); the embeddings go with the first, the final
// LayerNorm, the tied head and the loss with the last. Every step each rank runs
// its list of actions from a schedule builder (pipeline_schedule.h): forwards and
// backwards (or input and weight gradients apart) of micro-batches on the model's
// parts, activations and their gradients sent to the neighbouring virtual stages
// with non-blocking point-to-point calls (every receive of the step posted at its
// start, in list order, so a transfer never waits for its consumer to ask).
//
// The head's copy of the token embedding is tied to the first stage's: their
// gradients are summed every step, as Megatron does, and both copies take the same
// update. Each rank holds the parameters, gradients and optimizer state of its
// stage's tensors only (the model's flat buffers are released; its tensors point
// into the stage's compact buffers); materialize() brings the whole model back
// for evaluation, sampling and checkpoints.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "train/dist/data_parallel.h"
#include "train/dist/pipeline_schedule.h"
#include "train/gpt2.h"
#include "train/optim.h"
#include "weft/weft.h"

namespace weft::train {

struct PipelineOptions {
  int stages = 1;                 // P
  int replicas = 1;               // D data-parallel copies of the pipeline: P x D ranks
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved | zb
  int microbatches = 0;           // M per step; 0: P
  int chunks = 1;                 // v model chunks per rank (interleaved only)
  std::string split;              // "0-1,2-5": blocks of each virtual stage; empty: balanced
};

// Blocks [first, end) of each of `parts` virtual stages, contiguous and in order,
// minimizing the largest estimated compute (a block's GEMM and attention FLOPs;
// the embeddings, the final LayerNorm and the head with the first and last).
std::vector<std::pair<int, int>> balanceStages(const GPT2Config& cfg, int seq, int parts);
// "0-1,2-5" (inclusive block ranges, one per virtual stage); throws naming what is wrong.
std::vector<std::pair<int, int>> parseStages(const std::string& spec, int layers, int parts);
// The schedule an options object names, for P stages.
pp::Schedule buildSchedule(const PipelineOptions& opt);

class Pipeline {
 public:
  // world: P x D ranks, the caller's communicator. Rank r is stage r mod P of
  // replica r / P; the pipelines and the data-parallel groups (one stage of every
  // replica) are communicators split from it.
  Pipeline(weftComm_t world, Model& model, const AdamWConfig& adam, const PipelineOptions& opt, int batch,
           int seq);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  int stage() const { return rank_; }
  int stages() const { return P_; }
  int replica() const { return replica_; }
  int replicas() const { return D_; }
  const pp::Schedule& schedule() const { return sched_; }
  // Blocks of every virtual stage.
  const std::vector<std::pair<int, int>>& split() const { return split_; }
  AdamW& optimizer() { return adam_; }
  const AdamW& optimizer() const { return adam_; }

  struct StepResult {
    OptimStepResult optim;
    double lossSum = 0;            // over the step's micro-batches (from the last stage, on every rank)
    double busySeconds = 0;        // this rank: forwards and backwards
    double idleSeconds = 0;        // this rank: waiting for a receive
    double pipelineSeconds = 0;    // first action on any rank to the last action on any rank
    double bubble = 0;             // 1 - busy of all ranks / (P x pipelineSeconds)
    double optimizerSeconds = 0;
    size_t peakActivationBytes = 0;  // this rank: activations saved by the micro-batches in flight, at their peak
    size_t workBufferBytes = 0;      // this rank: the backward's work buffers, shared by every micro-batch
  };
  // One step on this replica's M micro-batches: micro-batch i reads tokens and
  // targets at i * batch * seq; its dropout masks come from dropoutSeed(i). Each
  // stage's gradients are summed over the replicas; lossSum covers all of them.
  // Collective.
  StepResult step(const int* tokens, const int* targets, const std::function<uint64_t(int)>& dropoutSeed,
                  double lr, double gradScale);

  // The simulated bubble of the schedule with the per-action costs measured in the
  // last step (mean over ranks), and the closed form.
  double simulatedBubble() const { return simulated_; }
  double formulaBubble() const { return pp::bubble_formula(P_, sched_.microbatches, sched_.chunks); }

  // Full fp32 optimizer state, the same on every rank (collective: each part from its owner).
  void fullState(std::vector<float>* master, std::vector<float>* m, std::vector<float>* v) const;
  void loadState(const std::vector<float>& master, const std::vector<float>& m, const std::vector<float>& v);
  // Every rank's model gets every stage's current parameters in its flat buffer
  // (collective): for evaluation, sampling, export and checkpoints. release()
  // frees it again (before the next step, which does it itself otherwise).
  void materialize();
  void release();
  bool materialized() const { return materialized_; }
  // Sets every parameter (raw, the model's storage type), the same on every rank.
  void setParams(const void* raw);
  MemoryReport memory() const;

  // Every action of the last step with its time span (steady clock), for --trace
  // and the schedule chart: name "F3", "B3", "I3", "W3" (chunk c > 0: "F3.c1"),
  // track 0, and "wait" spans on track 1.
  const std::vector<TraceEvent>& lastActions() const { return actions_; }

 private:
  struct Buffers;
  int ownerOfUnit(int unit) const;
  // Points the stage's tensors into its compact buffers and the others nowhere.
  void pointTensors();
  // Broadcast each unit's elements of a full array (n per element of `es` bytes) from its owner.
  void shareUnits(void* full, size_t es, weftDataType_t type) const;

  weftComm_t world_;
  int D_, replica_;
  weftComm_t pipe_, dp_;  // this replica's stages; this stage in every replica (null with D = 1)
  weftComm_t acts_ = nullptr, grads_ = nullptr, tied_ = nullptr;
  Model& model_;
  int rank_ = 0, P_ = 1, batch_, seq_;
  pp::Schedule sched_;
  std::vector<std::pair<int, int>> split_;  // per virtual stage
  std::vector<ModelPart> parts_;            // this rank's chunks
  AdamW adam_;
  size_t wteCount_ = 0;                     // elements of the tied embedding
  bool countsWte_ = true;                   // this rank's norm includes the tied embedding
  std::vector<char> stageParams_, stageGrads_;  // the stage's tensors, compact, in the owned segments' order
  std::vector<size_t> compactAt_;     // per tensor: element offset in params_/grads_, or SIZE_MAX
  bool materialized_ = false;
  std::vector<float> grad32_;
  std::vector<char> wteSum_;
  double simulated_ = 0;
  std::vector<TraceEvent> actions_;
};

}  // namespace weft::train
