// AdamW with fp32 master weights, cosine learning-rate schedule with linear warmup,
// global-norm gradient clipping, and fp16 dynamic loss scaling (GradScaler semantics).
#pragma once

#include <cstdint>
#include <vector>

#include "train/gpt2.h"

namespace weft::train {

struct LrSchedule {
  double maxLr = 1e-3;
  double minLr = 1e-4;
  int warmupSteps = 0;
  int totalSteps = 1;
  // step is 0-based: warmup maxLr*(step+1)/warmup, then cosine down to minLr at totalSteps.
  double at(int step) const;
};

// PyTorch torch.cuda.amp.GradScaler defaults: init 2^16, x2 after 2000 consecutive
// finite steps, x0.5 and skip the step on Inf/NaN. Disabled: scale is 1, never skips.
struct LossScaler {
  bool enabled = false;
  double scale = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int growthInterval = 2000;
  int goodSteps = 0;

  double current() const { return enabled ? scale : 1.0; }
  void update(bool foundInf);
};

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weightDecay = 0.1;  // applied to 2-D weights only (ParamTensor::decay)
  double gradClip = 1.0;     // global L2 norm; <= 0 disables
};

struct OptimStepResult {
  double gradNorm = 0;  // of the unscaled gradient, before clipping
  bool skipped = false; // Inf/NaN found: no update
};

// A run of elements of the flat parameter buffer [offset, offset + count).
struct Segment {
  size_t offset = 0;
  size_t count = 0;
};

// AdamW over the parameter elements a rank owns: all of them without sharding, or a
// ZeRO shard (a list of segments). master, m and v hold the owned elements only,
// segment after segment.
class AdamW {
 public:
  AdamW(const Model& model, const AdamWConfig& cfg);  // owns every element
  AdamW(const Model& model, const AdamWConfig& cfg, std::vector<Segment> owned);

  // The step when every element is owned: unscales the model's gradients by 1/gradScale, checks
  // them for Inf/NaN, clips to cfg.gradClip, updates the fp32 master weights and
  // writes them back (rounded) to the model. Does not zero the gradients.
  OptimStepResult step(Model& model, double lr, double gradScale);

  // The same step in parts, for data parallelism (g: owned gradient elements, fp32):
  // multiply g by `inv` in place and return its sum of squares (over fixed chunks
  // summed in order, so it is bit-reproducible; non-finite if g has Inf/NaN).
  double unscaleSumSquares(float* g, float inv) const;
  // One update with g scaled by `clip`, from the global gradient norm.
  void update(const float* g, double lr, double clip);
  // The clip factor for a global gradient norm.
  double clipFactor(double gradNorm) const;
  // Rounds the owned master weights into the model's parameter buffer.
  void writeParams(Model& model) const;
  // Takes the owned elements of a full fp32 state (master weights and moments of
  // every parameter, as in a checkpoint); throws if its size is not the model's.
  void loadFull(const Model& model, const std::vector<float>& master, const std::vector<float>& m,
                const std::vector<float>& v);
  // Copies the owned elements of a full fp32 array into a compact one and back.
  void gatherOwned(const float* full, float* owned) const;
  void scatterOwned(const float* owned, float* full) const;

  const std::vector<Segment>& owned() const { return owned_; }
  size_t numOwned() const { return master.size(); }

  int64_t t = 0;                        // completed updates (bias correction)
  std::vector<float> master, m, v;      // fp32, owned elements
  const AdamWConfig& config() const { return cfg_; }

 private:
  AdamWConfig cfg_;
  std::vector<Segment> owned_;
  std::vector<uint8_t> decay_;          // per owned element
  std::vector<float> grad_;             // scratch for step()
};

}  // namespace weft::train
