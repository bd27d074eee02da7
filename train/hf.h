// HuggingFace interop: config.json + model.safetensors for GPT2LMHeadModel, written
// and read by our own code (safetensors: u64 LE header length, JSON header, raw
// little-endian tensor data).
#pragma once

#include <string>
#include <vector>

#include "train/gpt2.h"

namespace weft::train {

// Writes dir/config.json and dir/model.safetensors (F32, HF state-dict names; the
// tied lm_head.weight is omitted as save_pretrained does).
void exportHF(const std::string& dir, const Model& model);

struct HFModel {
  GPT2Config config;
  std::vector<float> params;  // in gpt2ParamLayout(config) order
};
// Reads F32/F16/BF16/F64 tensors; ignores lm_head.weight and attention mask buffers.
HFModel importHF(const std::string& dir);

}  // namespace weft::train
