// Data parallelism over weft's public API: DDP (gradient buckets all-reduced while
// backward runs) and the ZeRO stages: 1 shards the optimizer state (buckets
// reduce-scattered, each rank steps its part, parameters all-gathered), 2 also the
// gradients (every micro-batch's buckets reduce-scattered from pooled buffers as
// backward fills them, only the rank's part kept), 3 also the parameters (each
// block all-gathered before its forward and again before its backward, the next
// one prefetched, released after).
//
// Every rank draws the same global batch; the trainer scales each micro-batch's
// backward by 1/(ranks x micro-batches per rank) and the buckets are summed, so the
// reduced gradient is the global batch's mean gradient, as one rank with
// --grad-accum ranks x K would compute it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/dist/buckets.h"
#include "train/dist/powersgd.h"
#include "train/gpt2.h"
#include "train/optim.h"
#include "weft/weft.h"

namespace weft::train {

// The bucket cap when none is given: PyTorch DDP's bucket_cap_mb (25 MiB), except
// under ZeRO-2, where the pooled buffers that hold buckets while backward fills
// them are all the gradient memory a rank has: there the cap is the largest (up to
// 25) at which kGradPoolBuffers buckets, each up to the cap plus its last tensor,
// fit in the formula's 2 Psi / N bytes of gradient partition.
constexpr int kGradPoolBuffers = 4;
double defaultBucketMb(const Model& model, int zero, int size);

// weft's datatype for a storage type.
weftDataType_t weftType(DType d);
// This rank and the size of comm (nullptr: one process, rank 0 of 1); weft errors throw.
int commRank(weftComm_t c);
int commSize(weftComm_t c);

struct DataParallelOptions {
  int zero = 0;                    // ZeRO stage: 0 (DDP), 1, 2 or 3
  double bucketMb = 0;             // bucket cap; 0: defaultBucketMb()
  double firstBucketMb = 1;        // PyTorch's first bucket
  std::optional<DType> commDtype;  // gradients travel and are summed in this type; empty: the model's
  int powerSgdRank = 0;            // DDP only: PowerSGD of this rank after powerSgdStart steps; 0 off
  int powerSgdStart = 10;          // plain all-reduce steps first (PyTorch's start_powerSGD_iter)
  bool powerSgdErrorFeedback = true;  // PyTorch's use_error_feedback
};

// What one step communicated: the payload handed to weft's collectives.
struct CommVolume {
  size_t gradientBytes = 0;  // all-reduce / reduce-scatter input
  size_t paramBytes = 0;     // all-gather output (ZeRO)
  size_t statsBytes = 0;     // loss, norm and the inf/nan flag
};

// Bytes this rank holds for model state (the trainer's own allocations).
struct MemoryReport {
  size_t params = 0;      // model parameters (storage type)
  size_t grads = 0;       // model gradients (storage type)
  size_t optimizer = 0;   // fp32 master weights and Adam moments (owned elements)
  size_t fp32Grads = 0;   // the owned gradient widened to fp32 for the optimizer
  size_t commBuffers = 0; // staging for conversion, reduce-scatter and all-gather
};

// One span of a step's timeline (seconds on the steady clock, which every process
// on a host shares).
struct TraceEvent {
  std::string name;
  int track = 0;  // 0 compute thread, 1 gradient buckets, 2 parameter gathers
  double begin = 0, end = 0;
};

class DataParallel {
 public:
  // comm == nullptr: one process; nothing is communicated. The communicator stays
  // the caller's.
  DataParallel(weftComm_t comm, Model& model, const AdamWConfig& adam, const DataParallelOptions& opt);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  double bucketCapMb() const { return bucketCapMb_; }
  AdamW& optimizer() { return adam_; }
  const AdamW& optimizer() const { return adam_; }

  // Called before each micro-batch's backward. The last micro-batch's (every one's
  // under ZeRO-2/3) reduces: each bucket's collective is posted as soon as backward
  // has written its last gradient.
  void beforeBackward(bool lastMicroBatch);
  // Posts the buckets not posted yet and waits for all of them.
  void finishGradients();

  struct StepResult {
    OptimStepResult optim;
    double lossSum = 0;        // sum of every rank's localLossSum
    double waitSeconds = 0;    // exposed communication: waiting for buckets, stats, all-gather
    double optimizerSeconds = 0;
  };
  // Unscale by 1/gradScale, global norm, clip, update the owned elements and bring
  // every rank's parameters up to date. Inf/NaN on any rank skips the step on all.
  StepResult step(double lr, double gradScale, double localLossSum);

  // Full fp32 optimizer state, the same on every rank (collective under ZeRO).
  void fullState(std::vector<float>* master, std::vector<float>* m, std::vector<float>* v) const;
  // Takes this rank's part of a full state.
  void loadState(const std::vector<float>& master, const std::vector<float>& m, const std::vector<float>& v);
  // The model's parameters in its storage type, all of them (collective under ZeRO-3).
  void fullParams(std::vector<char>* out) const;
  // Sets every parameter (raw, the model's storage type), the same on every rank.
  void setParams(const void* raw);
  // ZeRO-3: gathers every parameter into the model's flat buffer so that it runs
  // alone (evaluation, sampling, export); release() shards them again. Collective.
  // Without ZeRO-3 both do nothing.
  void materialize();
  void release();
  bool materialized() const { return zero_ != 3 || materialized_; }

  // What the last step communicated.
  CommVolume volume() const { return lastVolume_; }
  MemoryReport memory() const;

  // When each bucket's collective was posted and seen complete in the last step,
  // in seconds on the steady clock; for traces and the overlap test.
  struct BucketTiming {
    double posted = 0, done = 0;
  };
  std::vector<BucketTiming> lastTimings() const;

  // Timeline of one step for --trace: each unit's forward and backward, each
  // bucket's collective from posting to completion (as seen by the polls), ZeRO-3's
  // gathers, waits and the optimizer. On from traceOn() until traceOff().
  void traceOn();
  void traceOff();
  void traceSpan(int track, const std::string& name, double begin, double end);
  // Ends the span of the unit a pass is in (the trainer, when forward or backward returns).
  void tracePassEnd();
  const std::vector<TraceEvent>& traceEvents() const { return trace_; }

  // Runs on the owned, reduced fp32 gradients before they are unscaled; tests use it
  // to inject an overflow on one rank.
  std::function<void(float* grads, size_t n)> beforeUpdate;

 private:
  struct GradBuffer {
    std::vector<char> grad, wire;  // the bucket in the model's type; converted for the wire
    std::vector<char> recv;        // ZeRO: this rank's reduced part (comm type)
  };
  struct BucketState {
    weftRequest_t req = nullptr;
    BucketTiming timing;
    size_t shard = 0;              // padded per-rank length
    size_t ownedAt = 0, owned = 0; // this rank's part: where in the owned arrays, how long
    std::vector<char> wire;        // DDP with conversion: the bucket in the comm type
    GradBuffer* buf = nullptr;     // ZeRO: pooled send, receive (and, ZeRO-2/3, gradient) buffer
  };
  struct UnitState {               // ZeRO-3: one unit's gathered parameters
    weftRequest_t req = nullptr;
    std::vector<char>* buf = nullptr;
    double posted = 0;
  };

  void onGradsReady(size_t offset);
  void onUnit(Model::Pass pass, int unit);
  void post(size_t b);
  void complete(size_t b);         // a ZeRO bucket's reduce-scatter has finished
  void pollDone();
  void assignGradBuffer(size_t b);
  GradBuffer* takeGradBuffer();
  void gatherUnit(int unit);       // ZeRO-3: posts the all-gather of a block
  void waitUnit(int unit);
  void dropUnit(int unit);
  void allGatherParams();
  void gatherFull(const std::vector<float>& owned, std::vector<float>* full) const;
  void gatherOwned(const void* owned, DType dt, void* full) const;
  size_t bucketOfUnit(int unit) const;
  bool layerUnit(int unit) const { return model_.unitBlock(unit) >= 0; }
  std::vector<int> unitSequence(Model::Pass pass) const;
  std::vector<int> keptUnits() const { return {0, model_.numUnits() - 1}; }  // the embeddings, ln_f
  void traceBucket(size_t b);
  std::string unitName(Model::Pass pass, size_t pos) const;
  static double now();

  weftComm_t comm_;
  Model& model_;
  DataParallelOptions opt_;
  int rank_ = 0, size_ = 1;
  int zero_ = 0;                   // opt_.zero, 0 for one rank
  DType commDtype_;
  double bucketCapMb_;
  std::vector<Bucket> buckets_;
  AdamW adam_;
  std::vector<float> grads_;       // owned gradient elements, fp32 (ZeRO: accumulated)
  std::vector<BucketState> b_;
  std::vector<std::unique_ptr<GradBuffer>> gradPool_;
  std::vector<GradBuffer*> freeGrads_;
  std::deque<size_t> inFlight_;    // ZeRO buckets posted and not completed, oldest first
  std::vector<char> gatherBuf_;    // ZeRO-1/2: one bucket's parameters while all-gathered
  std::vector<float> scratch_;     // conversions through fp32
  // ZeRO-3
  std::vector<char> ownedParams_;  // this rank's parameters (model type), owned order
  std::vector<UnitState> units_;
  std::vector<std::unique_ptr<std::vector<char>>> unitPool_;
  std::vector<std::vector<char>*> freeUnits_;
  std::vector<int> sequence_[2];   // the units each pass visits, in order (set as the pass starts)
  size_t seqPos_[2] = {0, 0};
  bool materialized_ = false;
  size_t nextBucket_ = 0;
  bool syncing_ = false;
  CommVolume volume_, lastVolume_;
  std::unique_ptr<PowerSgd> powerSgd_;
  bool powerSgdStep_ = false;      // the last micro-batch's gradients await PowerSGD
  bool tracing_ = false;
  std::vector<TraceEvent> trace_;
  TraceEvent openUnit_;            // the unit span in progress (end 0: none)
};

// ZeRO-3's buckets: one per unit (Model::numUnits), in backward order.
std::vector<Bucket> unitBuckets(const Model& model);

// The stage's owned segments of the flat buffer: everything without ZeRO, else the
// rank's 1/N (padded) part of each bucket.
std::vector<Segment> ownedSegments(const std::vector<Bucket>& buckets, size_t numParams, int zero, int rank,
                                   int size);

}  // namespace weft::train
