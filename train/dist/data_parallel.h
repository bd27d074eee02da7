// Data parallelism over weft's public API: DDP (gradient buckets all-reduced while
// backward runs) and ZeRO stage 1 (optimizer state sharded: buckets reduce-scattered,
// each rank steps its shard, parameters all-gathered).
//
// Every rank draws the same global batch; the trainer scales each micro-batch's
// backward by 1/(ranks x micro-batches per rank) and the buckets are summed, so the
// reduced gradient is the global batch's mean gradient, as one rank with
// --grad-accum ranks x K would compute it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/dist/buckets.h"
#include "train/gpt2.h"
#include "train/optim.h"
#include "weft/weft.h"

namespace weft::train {

struct DataParallelOptions {
  int zero = 0;                    // ZeRO stage: 0 (DDP) or 1
  double bucketMb = 25;            // PyTorch DDP's bucket_cap_mb
  double firstBucketMb = 1;        // PyTorch's first bucket
  std::optional<DType> commDtype;  // gradients travel and are summed in this type; empty: the model's
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
  size_t commBuffers = 0; // staging for conversion, reduce-scatter and all-gather
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
  AdamW& optimizer() { return adam_; }
  const AdamW& optimizer() const { return adam_; }

  // The next backward pass (the last micro-batch's) reduces: each bucket's
  // collective is posted as soon as backward has written its last gradient.
  void syncNextBackward();
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
  // Takes this rank's part of a full state (model parameters set by the caller).
  void loadState(const std::vector<float>& master, const std::vector<float>& m, const std::vector<float>& v);

  CommVolume volume() const { return volume_; }
  MemoryReport memory() const;

  // When each bucket's collective was posted and seen complete in the last step,
  // in seconds on the steady clock; for traces and the overlap test.
  struct BucketTiming {
    double posted = 0, done = 0;
  };
  const std::vector<BucketTiming>& lastTimings() const { return timings_; }

  // Runs on the owned, reduced fp32 gradients before they are unscaled; tests use it
  // to inject an overflow on one rank.
  std::function<void(float* grads, size_t n)> beforeUpdate;

 private:
  void onGradsReady(size_t offset);
  void post(size_t b);
  void pollDone();
  void allGatherParams();
  void gatherFull(const std::vector<float>& owned, std::vector<float>* full) const;
  size_t shardSize(size_t b) const;  // padded per-rank length of bucket b under ZeRO
  static double now();

  weftComm_t comm_;
  Model& model_;
  DataParallelOptions opt_;
  int rank_ = 0, size_ = 1;
  DType commDtype_;
  std::vector<Bucket> buckets_;
  AdamW adam_;
  std::vector<float> grads_;                      // owned gradient elements, fp32
  std::vector<std::vector<char>> send_, recv_;    // per bucket, when a bucket needs staging
  std::vector<std::vector<char>> gather_;         // ZeRO: padded bucket of parameters
  std::vector<weftRequest_t> requests_;
  std::vector<BucketTiming> timings_;
  size_t nextBucket_ = 0;
  bool syncing_ = false;
  CommVolume volume_;
};

// The stage's owned segments of the flat buffer: everything without ZeRO, else the
// rank's 1/N (padded) part of each bucket.
std::vector<Segment> ownedSegments(const std::vector<Bucket>& buckets, size_t numParams, int zero, int rank,
                                   int size);

}  // namespace weft::train
