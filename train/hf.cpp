#include "train/hf.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "base/json.h"

namespace weft::train {

namespace fs = std::filesystem;

namespace {

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void writeAll(const fs::path& p, const std::string& data) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o.write(data.data(), std::streamsize(data.size()));
    if (!o) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, p);
}

int getInt(const json::Value& cfg, const char* key) {
  const json::Value* v = cfg.find(key);
  if (!v || v->kind != json::Value::Number) throw std::runtime_error(std::string("config.json: missing ") + key);
  return int(v->num);
}

}  // namespace

void exportHF(const std::string& dir, const Model& model) {
  const GPT2Config& c = model.config();
  fs::create_directories(dir);
  std::ostringstream cj;
  cj << "{\n"
     << "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
     << "  \"model_type\": \"gpt2\",\n"
     << "  \"vocab_size\": " << c.vocabSize << ",\n"
     << "  \"n_positions\": " << c.maxSeq << ",\n"
     << "  \"n_ctx\": " << c.maxSeq << ",\n"
     << "  \"n_embd\": " << c.channels << ",\n"
     << "  \"n_layer\": " << c.numLayers << ",\n"
     << "  \"n_head\": " << c.numHeads << ",\n"
     << "  \"n_inner\": null,\n"
     << "  \"activation_function\": \"gelu_new\",\n"
     << "  \"layer_norm_epsilon\": 1e-05,\n"
     << "  \"initializer_range\": 0.02,\n"
     << "  \"resid_pdrop\": " << model.dropout() << ",\n"
     << "  \"embd_pdrop\": " << model.dropout() << ",\n"
     << "  \"attn_pdrop\": " << model.dropout() << ",\n"
     << "  \"scale_attn_weights\": true,\n"
     << "  \"tie_word_embeddings\": true,\n"
     << "  \"bos_token_id\": 37,\n"
     << "  \"eos_token_id\": 37,\n"
     << "  \"torch_dtype\": \"float32\"\n"
     << "}\n";
  writeAll(fs::path(dir) / "config.json", cj.str());

  std::vector<float> p(model.numParams());
  model.getParams(p.data());
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  size_t off = 0;
  for (const auto& t : model.tensors()) {
    header += ',';
    header += json::quote(t.name);
    header += ":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); i++) {
      if (i) header += ',';
      header += std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[";
    header += std::to_string(off);
    header += ',';
    header += std::to_string(off + t.numel * 4);
    header += "]}";
    off += t.numel * 4;
  }
  header += "}";
  while (header.size() % 8) header.push_back(' ');
  std::string out;
  const uint64_t hlen = header.size();
  for (int i = 0; i < 8; i++) out.push_back(char(uint8_t(hlen >> (8 * i))));
  out += header;
  // Tensors are laid out in the same order as our buffer: one contiguous copy.
  out.append(reinterpret_cast<const char*>(p.data()), p.size() * 4);
  writeAll(fs::path(dir) / "model.safetensors", out);
}

HFModel importHF(const std::string& dir) {
  HFModel m;
  const json::Value cfg = json::parse(readAll(fs::path(dir) / "config.json"));
  m.config.vocabSize = getInt(cfg, "vocab_size");
  m.config.maxSeq = getInt(cfg, "n_positions");
  m.config.channels = getInt(cfg, "n_embd");
  m.config.numLayers = getInt(cfg, "n_layer");
  m.config.numHeads = getInt(cfg, "n_head");
  if (const auto* a = cfg.find("activation_function"); a && a->str != "gelu_new")
    throw std::runtime_error("config.json: activation_function " + a->str + " unsupported (gelu_new only)");
  if (const auto* e = cfg.find("layer_norm_epsilon"); e && std::fabs(e->num - 1e-5) > 1e-12)
    throw std::runtime_error("config.json: layer_norm_epsilon must be 1e-5");
  if (const auto* n = cfg.find("n_inner"); n && n->kind == json::Value::Number && int(n->num) != 4 * m.config.channels)
    throw std::runtime_error("config.json: n_inner must be 4*n_embd");

  const fs::path stPath = fs::path(dir) / "model.safetensors";
  const std::string buf = readAll(stPath);
  if (buf.size() < 8) throw std::runtime_error(stPath.string() + ": too short");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= uint64_t(uint8_t(buf[i])) << (8 * i);
  if (8 + hlen > buf.size()) throw std::runtime_error(stPath.string() + ": bad header length");
  const json::Value header = json::parse(std::string_view(buf).substr(8, hlen));
  const char* data = buf.data() + 8 + hlen;
  const size_t dataSize = buf.size() - 8 - hlen;

  auto layout = gpt2ParamLayout(m.config);
  m.params.assign(layout.back().offset + layout.back().numel, 0.0f);
  std::map<std::string, const ParamTensor*> byName;
  for (const auto& t : layout) byName[t.name] = &t;
  size_t found = 0;
  for (const auto& [name, info] : header.obj) {
    if (name == "__metadata__" || name == "lm_head.weight" || name.ends_with(".attn.bias") ||
        name.ends_with(".attn.masked_bias"))
      continue;
    std::string key = name.starts_with("transformer.") ? name : "transformer." + name;
    auto it = byName.find(key);
    if (it == byName.end()) throw std::runtime_error(stPath.string() + ": unexpected tensor " + name);
    const ParamTensor& t = *it->second;
    const json::Value* dt = info.find("dtype");
    const json::Value* shape = info.find("shape");
    const json::Value* offs = info.find("data_offsets");
    if (!dt || !shape || !offs || offs->arr.size() != 2) throw std::runtime_error(name + ": bad header entry");
    if (shape->arr.size() != t.shape.size()) throw std::runtime_error(name + ": rank mismatch");
    for (size_t i = 0; i < t.shape.size(); i++)
      if (int64_t(shape->arr[i].num) != t.shape[i]) throw std::runtime_error(name + ": shape mismatch");
    const size_t b = size_t(offs->arr[0].num), e = size_t(offs->arr[1].num);
    DType src;
    if (dt->str == "F32") src = DType::f32;
    else if (dt->str == "BF16") src = DType::bf16;
    else if (dt->str == "F16") src = DType::f16;
    else if (dt->str == "F64") src = DType::f64;
    else throw std::runtime_error(name + ": unsupported dtype " + dt->str);
    if (e > dataSize || e - b != t.numel * dtypeSize(src)) throw std::runtime_error(name + ": bad data offsets");
    std::vector<char> aligned(data + b, data + e);  // safetensors data need not be aligned
    convertToFloat(src, aligned.data(), m.params.data() + t.offset, t.numel);
    found++;
  }
  if (found != layout.size())
    throw std::runtime_error(stPath.string() + ": " + std::to_string(layout.size() - found) + " tensors missing");
  return m;
}

}  // namespace weft::train
