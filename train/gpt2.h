// GPT-2 (HuggingFace GPT2LMHeadModel semantics) with a hand-written forward and
// backward pass. Parameters live in one contiguous buffer of the storage type, in
// HF state-dict order and shapes (Conv1D weights are [in, out]); the LM head is
// tied to transformer.wte.weight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "train/dtype.h"

namespace weft::train {

struct GPT2Config {
  int vocabSize = 256;   // HF vocab_size
  int maxSeq = 64;       // n_positions
  int numLayers = 4;     // n_layer
  int numHeads = 4;      // n_head
  int channels = 128;    // n_embd
};

struct ParamTensor {
  std::string name;             // HF state-dict key
  std::vector<int64_t> shape;
  size_t offset = 0;            // elements into the parameter buffer
  size_t numel = 0;
  bool decay = false;           // 2-D weights get weight decay
};

// All parameter tensors in HF order: wte, wpe, h.0.{ln_1.weight, ln_1.bias,
// attn.c_attn.weight, attn.c_attn.bias, attn.c_proj.weight, attn.c_proj.bias,
// ln_2.weight, ln_2.bias, mlp.c_fc.weight, mlp.c_fc.bias, mlp.c_proj.weight,
// mlp.c_proj.bias}, h.1..., ln_f.weight, ln_f.bias.
std::vector<ParamTensor> gpt2ParamLayout(const GPT2Config& cfg);

// HF initialization (N(0, 0.02); c_proj weights N(0, 0.02/sqrt(2 n_layer));
// LayerNorm weight 1, biases 0), drawn in fp32 from a seeded generator.
std::vector<float> gpt2InitParams(const GPT2Config& cfg, uint64_t seed);

// A pipeline stage's share of the model (one model chunk): blocks [firstBlock,
// endBlock), with the embeddings when `embed`, and the final LayerNorm, the tied
// head and the loss when `head`. The whole model is {0, numLayers, true, true}.
struct ModelPart {
  int firstBlock = 0, endBlock = 0;
  bool embed = false, head = false;
};

// What a backward computes: everything, or (zero-bubble schedules) first the
// gradient of the part's input alone, and later the weights' gradients.
enum class BackwardPiece { all, input, weight };

class Model {
 public:
  virtual ~Model() = default;

  const GPT2Config& config() const { return cfg_; }
  DType dtype() const { return dtype_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  size_t numParams() const { return numParams_; }

  // Forward over tokens [B,T] (T <= maxSeq). With targets, returns the mean
  // cross-entropy (computed in fp32/fp64); without, only logits are computed, 0.
  virtual double forward(const int* tokens, const int* targets, int B, int T) = 0;
  // Accumulates d(scale * mean loss)/d(params) into the gradient buffer; needs a
  // preceding forward with targets.
  virtual void backward(double scale) = 0;
  virtual void zeroGrad() = 0;

  // Pipeline parallelism: the forward of one part for micro-batch `slot`. Each
  // slot keeps its activations until its backward is done (or releaseSlot), so
  // any number of micro-batches can be in flight. in: the previous part's output
  // [B,T,C] in the storage type (ignored with part.embed, which reads tokens);
  // out: this part's output (unless part.head). With part.head and targets,
  // returns the mean cross-entropy.
  virtual double forwardPart(const ModelPart& part, int slot, const int* tokens, const int* targets,
                             const void* in, void* out, int B, int T) = 0;
  // Accumulates the part's gradients of d(scale * mean loss) for `slot`. dOut: the
  // gradient of the part's output (unless part.head); dIn: receives the gradient
  // of its input (unless part.embed), written by the all and input pieces. The
  // input piece keeps what the weight piece needs; the last piece frees the slot.
  // With activation checkpointing the input piece also computes the weights'
  // gradients (they would need a second recompute) and the weight piece does nothing.
  virtual void backwardPart(const ModelPart& part, int slot, BackwardPiece piece, double scale,
                            const void* dOut, void* dIn) = 0;
  virtual void releaseSlot(int slot) = 0;
  // The slot of forward() and backward() (evaluation and sampling keep their
  // activations there until the next call).
  static constexpr int kWholeModelSlot = -1;

  // Dropout (HF embd_pdrop, attn_pdrop and resid_pdrop, one probability for all three),
  // applied only in training mode. Masks are a pure function of (seed, site, index):
  // set a new seed per micro-batch for fresh masks.
  void setDropout(double p) { dropoutP_ = p; }
  double dropout() const { return dropoutP_; }
  void setTraining(bool on) { training_ = on; }
  bool training() const { return training_; }
  void setDropoutSeed(uint64_t s) { dropoutSeed_ = s; }

  // Called during backward whenever every gradient element at or after `offset` is
  // final for this backward pass: the offsets only decrease and the last call is 0.
  // Data parallelism starts a bucket's reduction from here while backward goes on.
  // An empty function (the default) turns it off.
  void setGradReadyHook(std::function<void(size_t offset)> hook) { gradReady_ = std::move(hook); }

  // Raw storage (numParams() elements of dtype()): the flat buffers in parameter
  // order, null while released.
  virtual void* paramData() = 0;
  virtual void* gradData() = 0;
  const void* paramData() const { return const_cast<Model*>(this)->paramData(); }
  const void* gradData() const { return const_cast<Model*>(this)->gradData(); }

  // Where each tensor's parameters and gradients live: views into the flat buffers
  // by default. ZeRO-2/3 point tensors at buffers of their own (also during a pass,
  // from the hooks) and release the flat buffers: a released buffer's tensors must
  // be pointed elsewhere before a pass touches them. Allocating again zeroes the
  // buffer and points every tensor back into it.
  void* tensorParams(int t) const { return paramPtr_[size_t(t)]; }
  void* tensorGrads(int t) const { return gradPtr_[size_t(t)]; }
  void setTensorParams(int t, void* p) { paramPtr_[size_t(t)] = p; }
  void setTensorGrads(int t, void* p) { gradPtr_[size_t(t)] = p; }
  virtual void setFlatParams(bool allocated) = 0;
  virtual void setFlatGrads(bool allocated) = 0;

  // Units of parameters a pass reads together: 0 = wte and wpe (the embeddings and
  // the tied head); block l's halves, attentionUnit(l) = 2l+1 (ln_1 and attn) and
  // mlpUnit(l) = 2l+2 (ln_2 and mlp); numUnits()-1 = ln_f. Half blocks, not blocks:
  // ZeRO-3 holds a unit and the prefetched next one gathered, and a whole GPT-2
  // block is several times the model state's 5% margin. Tensors [first, end) of u.
  int numUnits() const { return 2 * cfg_.numLayers + 2; }
  static int attentionUnit(int block) { return 2 * block + 1; }
  static int mlpUnit(int block) { return 2 * block + 2; }
  // The block a unit belongs to; -1 for the embeddings and ln_f.
  int unitBlock(int u) const { return u >= 1 && u <= 2 * cfg_.numLayers ? (u - 1) / 2 : -1; }
  void unitTensors(int u, int* first, int* end) const;
  enum class Pass { forward, backward };
  // Called before a pass reads a unit's parameters. Forward: 0, then each block's
  // attention and MLP units, ln_f, 0 (head). Backward: 0 (head), ln_f, then per
  // block from the last: MLP, attention; with activation checkpointing attention,
  // MLP (the recompute, announced even when the block's activations are still
  // there), attention.
  void setUnitHook(std::function<void(Pass, int unit)> hook) { unitHook_ = std::move(hook); }

  void getParams(float* out) const;         // widened copy
  void setParams(const float* in);          // rounded to dtype()
  void getGrads(float* out) const;

  // Logits row of (b, t) from the last forward, widened to float.
  virtual void logitsRow(int b, int t, float* out) const = 0;
  // Activation checkpointing per block: keep only each block's output and recompute
  // the block's internals in backward (one block's worth of activation memory).
  virtual void setActivationCheckpointing(bool on) = 0;
  virtual bool activationCheckpointing() const = 0;
  // Bytes held by activations of every slot in flight and the backward's work buffers.
  virtual size_t activationBytes() const = 0;
  // Only what the slots in flight hold for their backward (without the work
  // buffers every backward shares and checkpointing's recompute buffer).
  virtual size_t savedActivationBytes() const = 0;

 protected:
  Model(const GPT2Config& cfg, DType dt);
  GPT2Config cfg_;
  DType dtype_;
  std::vector<ParamTensor> tensors_;
  size_t numParams_ = 0;
  double dropoutP_ = 0;
  bool training_ = true;
  uint64_t dropoutSeed_ = 0;
  void gradsReady(size_t offset) const {
    if (gradReady_) gradReady_(offset);
  }
  void unitUsed(Pass p, int unit) const {
    if (unitHook_) unitHook_(p, unit);
  }
  std::vector<void*> paramPtr_, gradPtr_;  // per tensor

 private:
  std::function<void(size_t)> gradReady_;
  std::function<void(Pass, int)> unitHook_;
};

std::unique_ptr<Model> makeGPT2(const GPT2Config& cfg, DType dtype);

// Converters between a raw buffer of `dt` and float/double.
void convertToFloat(DType dt, const void* src, float* dst, size_t n);
void convertFromFloat(DType dt, const float* src, void* dst, size_t n);

}  // namespace weft::train
