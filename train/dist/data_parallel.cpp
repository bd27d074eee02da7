#include "train/dist/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "weft/weft.hpp"

namespace weft::train {

int commRank(weftComm_t c) { int r = 0; if (c) weft::check(weftCommUserRank(c, &r), c); return r; }
int commSize(weftComm_t c) { int n = 1; if (c) weft::check(weftCommCount(c, &n), c); return n; }

weftDataType_t weftType(DType d) {
  switch (d) {
    case DType::f32: return weftFloat32;
    case DType::bf16: return weftBfloat16;
    case DType::f16: return weftFloat16;
    case DType::f64: return weftFloat64;
  }
  throw std::invalid_argument("no weft datatype");
}

namespace {

// n elements of type `from` at src to type `to` at dst (rounded once, through fp32
// in *tmp, which is kept between calls: buckets are megabytes).
void convert(DType from, const void* src, DType to, void* dst, size_t n, std::vector<float>* tmp) {
  if (from == to) {
    std::memcpy(dst, src, n * dtypeSize(from));
    return;
  }
  if (tmp->size() < n) tmp->resize(n);
  convertToFloat(from, src, tmp->data(), n);
  convertFromFloat(to, tmp->data(), dst, n);
}


std::vector<Bucket> makeBuckets(const Model& model, const DataParallelOptions& opt, double capMb, int size) {
  if (opt.zero == 3 && size > 1) return unitBuckets(model);
  auto bytes = [](double mb) { return mb <= 0 ? size_t(1) : size_t(mb * 1024 * 1024); };
  return assignBuckets(model.tensors(), dtypeSize(model.dtype()), bytes(capMb), bytes(opt.firstBucketMb));
}

}  // namespace

double defaultBucketMb(const Model& model, int zero, int size) {
  constexpr double kPyTorchCapMb = 25, kLeastMb = 1;
  if (zero != 2 || size < 2) return kPyTorchCapMb;
  size_t largest = 0;
  for (const ParamTensor& t : model.tensors()) largest = std::max(largest, t.numel);
  const double es = double(dtypeSize(model.dtype()));
  const double partitionMb = double(model.numParams()) * es / size / (1 << 20);
  const double capMb = partitionMb / kGradPoolBuffers - double(largest) * es / (1 << 20);
  return std::clamp(capMb, kLeastMb, kPyTorchCapMb);
}

std::vector<Bucket> unitBuckets(const Model& model) {
  const auto& t = model.tensors();
  const int U = model.numUnits();
  std::vector<Bucket> out;
  // Backward order: ln_f, the blocks' halves from the last, the embeddings.
  for (int k = 0; k < U; k++) {
    const int unit = k == U - 1 ? 0 : U - 1 - k;
    int first = 0, end = 0;
    model.unitTensors(unit, &first, &end);
    out.push_back(Bucket{t[size_t(first)].offset, t[size_t(end - 1)].offset + t[size_t(end - 1)].numel, first,
                         end - first});
  }
  return out;
}

std::vector<Segment> ownedSegments(const std::vector<Bucket>& buckets, size_t numParams, int zero, int rank,
                                   int size) {
  if (zero == 0) return {Segment{0, numParams}};
  std::vector<Segment> out;
  for (const Bucket& b : buckets) {
    const size_t c = (b.numel() + size_t(size) - 1) / size_t(size);
    const size_t begin = std::min(b.numel(), c * size_t(rank));
    const size_t end = std::min(b.numel(), begin + c);
    if (end > begin) out.push_back(Segment{b.lo + begin, end - begin});
  }
  return out;
}

DataParallel::DataParallel(weftComm_t comm, Model& model, const AdamWConfig& adam, const DataParallelOptions& opt)
    : comm_(comm),
      model_(model),
      opt_(opt),
      rank_(commRank(comm)),
      size_(commSize(comm)),
      zero_(size_ > 1 ? opt.zero : 0),
      commDtype_(opt.commDtype.value_or(model.dtype())),
      bucketCapMb_(opt.bucketMb > 0 ? opt.bucketMb : defaultBucketMb(model, zero_, size_)),
      buckets_(makeBuckets(model, opt, bucketCapMb_, size_)),
      adam_(model, adam, ownedSegments(buckets_, model.numParams(), zero_, rank_, size_)) {
  if (opt.zero < 0 || opt.zero > 3) throw std::invalid_argument("--zero must be 0, 1, 2 or 3");
  if (opt.powerSgdRank > 0 && opt.zero != 0) throw std::invalid_argument("PowerSGD needs --zero 0 (DDP)");
  if (opt.powerSgdRank > 0 && size_ > 1) powerSgd_ = std::make_unique<PowerSgd>(model, opt.powerSgdRank, opt.powerSgdErrorFeedback, 0x9E3779B9);
  grads_.assign(adam_.numOwned(), 0.0f);
  const size_t ces = dtypeSize(commDtype_);
  b_.resize(buckets_.size());
  size_t at = 0;
  for (size_t b = 0; b < buckets_.size(); b++) {
    BucketState& st = b_[b];
    const size_t len = buckets_[b].numel();
    st.shard = (len + size_t(size_) - 1) / size_t(size_);
    const size_t begin = std::min(len, st.shard * size_t(rank_));
    st.owned = std::min(len - begin, st.shard);
    st.ownedAt = at;
    if (zero_ > 0) at += st.owned;
    if (size_ == 1) continue;
    if (zero_ == 0 && commDtype_ != model.dtype()) st.wire.resize(len * ces);
  }
  if (zero_ >= 2) model_.setFlatGrads(false);  // gradients live in pooled bucket buffers
  if (zero_ == 3) {
    ownedParams_.resize(adam_.numOwned() * dtypeSize(model.dtype()));
    convertFromFloat(model.dtype(), adam_.master.data(), ownedParams_.data(), adam_.numOwned());
    units_.resize(size_t(model.numUnits()));
    // The embeddings (with the tied head) and ln_f stay gathered: every pass reads
    // them at both ends. Blocks come and go.
    materialized_ = true;
    release();
  }
  for (Model::Pass p : {Model::Pass::forward, Model::Pass::backward}) sequence_[int(p)] = unitSequence(p);
  model_.setUnitHook([this](Model::Pass p, int u) { onUnit(p, u); });
}

DataParallel::~DataParallel() {
  for (auto& st : b_) weftWait(&st.req);  // never leave a collective on freed buffers
  for (auto& u : units_) weftWait(&u.req);
  model_.setGradReadyHook({});
  model_.setUnitHook({});
}

double DataParallel::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<DataParallel::BucketTiming> DataParallel::lastTimings() const {
  std::vector<BucketTiming> t;
  for (const auto& st : b_) t.push_back(st.timing);
  return t;
}

size_t DataParallel::bucketOfUnit(int unit) const {
  const int U = model_.numUnits();
  return size_t(unit == 0 ? U - 1 : U - 1 - unit);
}

// The order in which the model announces units (Model::setUnitHook).
std::vector<int> DataParallel::unitSequence(Model::Pass pass) const {
  const int L = model_.config().numLayers;
  std::vector<int> seq{0};
  if (pass == Model::Pass::forward) {
    for (int l = 0; l < L; l++) seq.insert(seq.end(), {Model::attentionUnit(l), Model::mlpUnit(l)});
    seq.insert(seq.end(), {model_.numUnits() - 1, 0});
    return seq;
  }
  seq.push_back(model_.numUnits() - 1);
  for (int l = L - 1; l >= 0; l--) {
    if (model_.activationCheckpointing())
      seq.insert(seq.end(), {Model::attentionUnit(l), Model::mlpUnit(l), Model::attentionUnit(l)});
    else
      seq.insert(seq.end(), {Model::mlpUnit(l), Model::attentionUnit(l)});
  }
  seq.push_back(0);
  return seq;
}

// ---- gradients ----------------------------------------------------------------

void DataParallel::beforeBackward(bool lastMicroBatch) {
  if (size_ == 1 || (!lastMicroBatch && zero_ < 2)) return;
  if (powerSgd_ && adam_.t >= opt_.powerSgdStart) {
    powerSgdStep_ = true;  // compressed after backward, in step()
    return;
  }
  nextBucket_ = 0;
  syncing_ = true;
  if (zero_ >= 2) {
    // Backward writes the head's embedding gradient first and the first buckets
    // next; later buckets get buffers as earlier ones are posted.
    assignGradBuffer(buckets_.size() - 1);
    for (size_t b = 0; b < std::min<size_t>(2, buckets_.size() - 1); b++) assignGradBuffer(b);
  }
  model_.setGradReadyHook([this](size_t offset) { onGradsReady(offset); });
}

DataParallel::GradBuffer* DataParallel::takeGradBuffer() {
  if (!freeGrads_.empty()) {
    GradBuffer* g = freeGrads_.back();
    freeGrads_.pop_back();
    return g;
  }
  // Reuse the oldest posted bucket's buffer once it is reduced, unless few exist.
  if (gradPool_.size() >= size_t(kGradPoolBuffers) && !inFlight_.empty()) {
    const size_t b = inFlight_.front();
    weft::check(weftWait(&b_[b].req), comm_);
    complete(b);
    return takeGradBuffer();
  }
  gradPool_.push_back(std::make_unique<GradBuffer>());
  return gradPool_.back().get();
}

void DataParallel::assignGradBuffer(size_t b) {
  BucketState& st = b_[b];
  if (st.buf && std::find(inFlight_.begin(), inFlight_.end(), b) != inFlight_.end()) {
    // Still reducing the previous micro-batch's gradients: finish that first.
    weft::check(weftWait(&st.req), comm_);
    complete(b);
  }
  if (st.buf) return;  // already has one for this backward
  st.buf = takeGradBuffer();
  const size_t es = dtypeSize(model_.dtype()), padded = st.shard * size_t(size_);
  if (st.buf->grad.size() < padded * es) st.buf->grad.resize(padded * es);
  std::memset(st.buf->grad.data(), 0, padded * es);  // backward accumulates; the tail pads
  if (zero_ < 2) return;
  const Bucket& bk = buckets_[b];
  for (int t = bk.firstTensor; t < bk.firstTensor + bk.numTensors; t++)
    model_.setTensorGrads(t, st.buf->grad.data() + (model_.tensors()[size_t(t)].offset - bk.lo) * es);
}

void DataParallel::onGradsReady(size_t offset) {
  while (nextBucket_ < buckets_.size() && buckets_[nextBucket_].lo >= offset) {
    post(nextBucket_);
    // An op writes at most two neighbouring tensors: the next two buckets need room.
    if (zero_ >= 2)
      for (size_t k = nextBucket_ + 1; k <= nextBucket_ + 2 && k < buckets_.size(); k++) assignGradBuffer(k);
    nextBucket_++;
  }
  pollDone();
}

void DataParallel::pollDone() {
  for (size_t b = 0; b < b_.size(); b++) {
    BucketState& st = b_[b];
    if (st.req == nullptr) continue;
    int done = 0;
    weftResult_t rc = weftTest(&st.req, &done);
    if (rc != weftInProgress) weft::check(rc, comm_);
    if (!done) continue;
    if (zero_ > 0) {
      complete(b);
    } else {
      st.timing.done = now();
      traceBucket(b);
    }
  }
}

void DataParallel::post(size_t b) {
  const Bucket& bk = buckets_[b];
  BucketState& st = b_[b];
  const DType mdt = model_.dtype();
  const size_t mes = dtypeSize(mdt), ces = dtypeSize(commDtype_);
  const weftDataType_t wt = weftType(commDtype_);
  st.timing = BucketTiming{now(), 0};
  if (zero_ == 0) {
    char* grads = static_cast<char*>(model_.gradData()) + bk.lo * mes;
    void* buf = grads;
    if (commDtype_ != mdt) {
      convert(mdt, grads, commDtype_, st.wire.data(), bk.numel(), &scratch_);
      buf = st.wire.data();
    }
    weft::check(weftAllReduceAsync(buf, buf, bk.numel(), wt, weftSum, comm_, &st.req), comm_);
    volume_.gradientBytes += bk.numel() * ces;
    return;
  }
  const size_t padded = st.shard * size_t(size_);
  if (zero_ == 1) {  // a padded copy of the bucket
    assignGradBuffer(b);
    std::memcpy(st.buf->grad.data(), static_cast<char*>(model_.gradData()) + bk.lo * mes, bk.numel() * mes);
  }
  void* send = st.buf->grad.data();
  if (commDtype_ != mdt) {
    if (st.buf->wire.size() < padded * ces) st.buf->wire.resize(padded * ces);
    convert(mdt, st.buf->grad.data(), commDtype_, st.buf->wire.data(), padded, &scratch_);
    send = st.buf->wire.data();
  }
  if (st.buf->recv.size() < st.shard * ces) st.buf->recv.resize(st.shard * ces);
  weft::check(weftReduceScatterAsync(send, st.buf->recv.data(), st.shard, wt, weftSum, comm_, &st.req), comm_);
  inFlight_.push_back(b);
  volume_.gradientBytes += padded * ces;
}

void DataParallel::complete(size_t b) {
  BucketState& st = b_[b];
  st.timing.done = now();
  traceBucket(b);
  // Accumulate this rank's reduced part (micro-batches add up under ZeRO-2/3).
  if (scratch_.size() < st.owned) scratch_.resize(st.owned);
  convertToFloat(commDtype_, st.buf->recv.data(), scratch_.data(), st.owned);
  float* g = grads_.data() + st.ownedAt;
  for (size_t i = 0; i < st.owned; i++) g[i] += scratch_[i];
  freeGrads_.push_back(st.buf);
  st.buf = nullptr;
  inFlight_.erase(std::find(inFlight_.begin(), inFlight_.end(), b));
}

void DataParallel::finishGradients() {
  if (!syncing_) return;
  onGradsReady(0);
  model_.setGradReadyHook({});
  syncing_ = false;
  for (size_t b = 0; b < b_.size(); b++) {
    BucketState& st = b_[b];
    weft::check(weftWait(&st.req), comm_);
    if (zero_ > 0) {
      if (std::find(inFlight_.begin(), inFlight_.end(), b) != inFlight_.end()) complete(b);
    } else if (st.timing.done == 0) {
      st.timing.done = now();
      traceBucket(b);
    }
  }
  if (zero_ == 0 && commDtype_ != model_.dtype())
    for (size_t b = 0; b < buckets_.size(); b++) {
      char* grads = static_cast<char*>(model_.gradData()) + buckets_[b].lo * dtypeSize(model_.dtype());
      convert(commDtype_, b_[b].wire.data(), model_.dtype(), grads, buckets_[b].numel(), &scratch_);
    }
}

// ---- the step -------------------------------------------------------------------

DataParallel::StepResult DataParallel::step(double lr, double gradScale, double localLossSum) {
  StepResult res;
  double t0 = now();
  finishGradients();
  double t1 = now();
  res.waitSeconds += t1 - t0;
  traceSpan(0, "wait for gradient buckets", t0, t1);
  if (zero_ == 0) model_.getGrads(grads_.data());
  if (powerSgdStep_) {
    const double c0 = now();
    volume_.gradientBytes += powerSgd_->reduce(comm_, size_, grads_.data());
    powerSgdStep_ = false;
    const double c1 = now();
    res.waitSeconds += c1 - c0;  // compression and its all-reduces: communication, not the optimizer
    t1 += c1 - c0;
    traceSpan(0, "PowerSGD", c0, c1);
  }
  if (beforeUpdate) beforeUpdate(grads_.data(), grads_.size());
  const double sumsq = adam_.unscaleSumSquares(grads_.data(), float(1.0 / gradScale));
  // One small all-reduce agrees on the loss, the sharded norm and "found inf/nan".
  double stats[3] = {localLossSum, zero_ ? sumsq : 0.0, std::isfinite(sumsq) ? 0.0 : 1.0};
  t0 = now();
  res.optimizerSeconds += t0 - t1;
  if (size_ > 1) {
    weft::check(weftAllReduce(stats, stats, 3, weftFloat64, weftSum, comm_, nullptr), comm_);
    volume_.statsBytes += sizeof stats;
  }
  t1 = now();
  res.waitSeconds += t1 - t0;
  traceSpan(0, "loss, norm, inf/nan all-reduce", t0, t1);
  res.lossSum = stats[0];
  const double total = zero_ ? stats[1] : sumsq;
  if (stats[2] > 0) {
    res.optim.skipped = true;
    res.optim.gradNorm = std::isfinite(total) ? NAN : total;
  } else {
    res.optim.gradNorm = std::sqrt(total);
    adam_.update(grads_.data(), lr, adam_.clipFactor(res.optim.gradNorm));
    if (zero_ == 3) convertFromFloat(model_.dtype(), adam_.master.data(), ownedParams_.data(), adam_.numOwned());
    else adam_.writeParams(model_);
  }
  if (zero_ > 0) std::fill(grads_.begin(), grads_.end(), 0.0f);
  t0 = now();
  res.optimizerSeconds += t0 - t1;
  traceSpan(0, "AdamW", t1, t0);
  if (zero_ > 0 && !res.optim.skipped) allGatherParams();
  res.waitSeconds += now() - t0;
  if (zero_ > 0) traceSpan(0, "all-gather parameters", t0, now());
  lastVolume_ = volume_;
  volume_ = CommVolume{};
  return res;
}

void DataParallel::allGatherParams() {
  const DType mdt = model_.dtype();
  const size_t es = dtypeSize(mdt);
  if (zero_ == 3) {
    // The kept units now; blocks are gathered when a pass reaches them.
    for (int u : keptUnits()) {
      dropUnit(u);
      gatherUnit(u);
      waitUnit(u);
    }
    return;
  }
  // One bucket at a time through one padded buffer, in place.
  char* params = static_cast<char*>(model_.paramData());
  for (size_t b = 0; b < buckets_.size(); b++) {
    const BucketState& st = b_[b];
    const size_t len = buckets_[b].numel(), begin = std::min(len, st.shard * size_t(rank_));
    if (gatherBuf_.size() < st.shard * size_t(size_) * es) gatherBuf_.resize(st.shard * size_t(size_) * es);
    char* mine = gatherBuf_.data() + st.shard * size_t(rank_) * es;
    std::memcpy(mine, params + (buckets_[b].lo + begin) * es, st.owned * es);
    std::memset(mine + st.owned * es, 0, (st.shard - st.owned) * es);
    weft::check(weftAllGather(mine, gatherBuf_.data(), st.shard, weftType(mdt), comm_, nullptr), comm_);
    std::memcpy(params + buckets_[b].lo * es, gatherBuf_.data(), len * es);
    volume_.paramBytes += st.shard * size_t(size_) * es;
  }
}

// ---- trace ----------------------------------------------------------------------------

void DataParallel::traceOn() {
  trace_.clear();
  openUnit_ = TraceEvent{};
  tracing_ = true;
}

void DataParallel::traceOff() {
  tracePassEnd();
  tracing_ = false;
}

void DataParallel::traceSpan(int track, const std::string& name, double begin, double end) {
  if (tracing_) trace_.push_back(TraceEvent{name, track, begin, end});
}

void DataParallel::tracePassEnd() {
  if (!tracing_ || openUnit_.begin == 0) return;
  openUnit_.end = now();
  trace_.push_back(openUnit_);
  openUnit_ = TraceEvent{};
}

void DataParallel::traceBucket(size_t b) {
  if (!tracing_) return;
  const double mib = double(buckets_[b].numel() * dtypeSize(model_.dtype())) / (1 << 20);
  char name[96];
  std::snprintf(name, sizeof name, "%s bucket %zu (%.1f MiB)", zero_ ? "reduce-scatter" : "all-reduce", b, mib);
  trace_.push_back(TraceEvent{name, 1, b_[b].timing.posted, b_[b].timing.done});
}

std::string DataParallel::unitName(Model::Pass pass, size_t pos) const {
  const int unit = sequence_[int(pass)][pos];
  const std::string dir = pass == Model::Pass::forward ? "forward " : "backward ";
  const int block = model_.unitBlock(unit);
  if (block >= 0)
    return dir + "block " + std::to_string(block) + (unit == Model::attentionUnit(block) ? " attention" : " MLP");
  if (unit == model_.numUnits() - 1) return dir + "ln_f";
  const bool first = pos == 0;  // unit 0 opens and closes each pass
  return dir + ((pass == Model::Pass::forward) == first ? "embeddings" : "head");
}

// ---- ZeRO-3: parameters by unit -----------------------------------------------------

void DataParallel::gatherUnit(int unit) {
  UnitState& u = units_[size_t(unit)];
  if (u.buf) return;  // posted or gathered
  const size_t b = bucketOfUnit(unit);
  const BucketState& st = b_[b];
  const size_t es = dtypeSize(model_.dtype()), padded = st.shard * size_t(size_);
  if (!freeUnits_.empty()) {
    u.buf = freeUnits_.back();
    freeUnits_.pop_back();
  } else {
    unitPool_.push_back(std::make_unique<std::vector<char>>());
    u.buf = unitPool_.back().get();
  }
  if (u.buf->size() < padded * es) u.buf->resize(padded * es);
  char* mine = u.buf->data() + st.shard * size_t(rank_) * es;
  std::memcpy(mine, ownedParams_.data() + st.ownedAt * es, st.owned * es);
  std::memset(mine + st.owned * es, 0, (st.shard - st.owned) * es);
  u.posted = now();
  weft::check(weftAllGatherAsync(mine, u.buf->data(), st.shard, weftType(model_.dtype()), comm_, &u.req), comm_);
  volume_.paramBytes += padded * es;
  const Bucket& bk = buckets_[b];
  for (int t = bk.firstTensor; t < bk.firstTensor + bk.numTensors; t++)
    model_.setTensorParams(t, u.buf->data() + (model_.tensors()[size_t(t)].offset - bk.lo) * es);
}

void DataParallel::waitUnit(int unit) {
  UnitState& u = units_[size_t(unit)];
  if (u.req == nullptr) return;
  weft::check(weftWait(&u.req), comm_);
  if (tracing_) trace_.push_back(TraceEvent{"all-gather " + unitName(Model::Pass::forward, size_t(unit)).substr(8), 2,
                                            u.posted, now()});
}

void DataParallel::dropUnit(int unit) {
  UnitState& u = units_[size_t(unit)];
  if (!u.buf) return;
  weft::check(weftWait(&u.req), comm_);
  freeUnits_.push_back(u.buf);
  u.buf = nullptr;
}

void DataParallel::onUnit(Model::Pass pass, int unit) {
  size_t& pos = seqPos_[int(pass)];
  if (pos == 0) sequence_[int(pass)] = unitSequence(pass);  // checkpointing may have been switched
  const std::vector<int>& seq = sequence_[int(pass)];
  if (seq[pos] != unit)
    throw std::logic_error("the model visited unit " + std::to_string(unit) + " where unit " + std::to_string(seq[pos]) +
                           " was expected (" + (pass == Model::Pass::forward ? "forward" : "backward") + ", step " +
                           std::to_string(pos) + ")");
  if (tracing_) {
    tracePassEnd();
    openUnit_ = TraceEvent{unitName(pass, pos), 0, now(), 0};
  }
  pos = (pos + 1) % seq.size();
  if (zero_ != 3 || materialized_) return;
  // The next block this pass reads is fetched while this unit computes.
  int next = -1;
  for (size_t k = pos; k != 0 && next < 0; k = (k + 1) % seq.size())
    if (layerUnit(seq[k])) next = seq[k];
  for (int u = 0; u < model_.numUnits(); u++)
    if (layerUnit(u) && u != unit && u != next) dropUnit(u);
  if (layerUnit(unit)) {
    gatherUnit(unit);
    waitUnit(unit);
  }
  if (next >= 0) gatherUnit(next);
}

void DataParallel::materialize() {
  if (zero_ != 3 || materialized_) return;
  for (int u = 0; u < model_.numUnits(); u++) dropUnit(u);  // the tensors now point into the flat buffer
  model_.setFlatParams(true);
  gatherOwned(ownedParams_.data(), model_.dtype(), model_.paramData());
  materialized_ = true;
}

void DataParallel::release() {
  if (zero_ != 3 || !materialized_) return;
  model_.setFlatParams(false);
  for (int u : keptUnits()) {
    gatherUnit(u);
    waitUnit(u);
  }
  materialized_ = false;
}

// ---- full state for checkpoints ---------------------------------------------------------

// Every rank's owned elements (of type dt, in owned order) into the full array.
void DataParallel::gatherOwned(const void* owned, DType dt, void* full) const {
  const size_t es = dtypeSize(dt);
  std::vector<char> padded;
  for (size_t b = 0; b < buckets_.size(); b++) {
    const BucketState& st = b_[b];
    padded.assign(st.shard * size_t(size_) * es, 0);
    char* mine = padded.data() + st.shard * size_t(rank_) * es;
    std::memcpy(mine, static_cast<const char*>(owned) + st.ownedAt * es, st.owned * es);
    weft::check(weftAllGather(mine, padded.data(), st.shard, weftType(dt), comm_, nullptr), comm_);
    std::memcpy(static_cast<char*>(full) + buckets_[b].lo * es, padded.data(), buckets_[b].numel() * es);
  }
}

void DataParallel::gatherFull(const std::vector<float>& owned, std::vector<float>* full) const {
  full->assign(model_.numParams(), 0.0f);
  if (zero_ == 0) adam_.scatterOwned(owned.data(), full->data());
  else gatherOwned(owned.data(), DType::f32, full->data());
}

void DataParallel::fullState(std::vector<float>* master, std::vector<float>* m, std::vector<float>* v) const {
  gatherFull(adam_.master, master);
  gatherFull(adam_.m, m);
  gatherFull(adam_.v, v);
}

void DataParallel::loadState(const std::vector<float>& master, const std::vector<float>& m,
                             const std::vector<float>& v) {
  adam_.loadFull(model_, master, m, v);
}

void DataParallel::fullParams(std::vector<char>* out) const {
  const size_t bytes = model_.numParams() * dtypeSize(model_.dtype());
  out->resize(bytes);
  if (zero_ == 3 && !materialized_) gatherOwned(ownedParams_.data(), model_.dtype(), out->data());
  else std::memcpy(out->data(), model_.paramData(), bytes);
}

void DataParallel::setParams(const void* raw) {
  if (zero_ != 3 || materialized_) {
    std::memcpy(model_.paramData(), raw, model_.numParams() * dtypeSize(model_.dtype()));
    return;
  }
  const size_t es = dtypeSize(model_.dtype());
  char* dst = ownedParams_.data();
  for (const Segment& s : adam_.owned()) {
    std::memcpy(dst, static_cast<const char*>(raw) + s.offset * es, s.count * es);
    dst += s.count * es;
  }
  for (int u = 0; u < model_.numUnits(); u++) dropUnit(u);
  for (int u : keptUnits()) {
    gatherUnit(u);
    waitUnit(u);
  }
}

MemoryReport DataParallel::memory() const {
  MemoryReport r;
  const size_t es = dtypeSize(model_.dtype());
  r.params = zero_ == 3 ? ownedParams_.size() : model_.numParams() * es;
  r.grads = zero_ >= 2 ? 0 : model_.numParams() * es;
  r.optimizer = adam_.numOwned() * 3 * sizeof(float);
  r.fp32Grads = grads_.size() * sizeof(float);
  for (const auto& st : b_) r.commBuffers += st.wire.size();
  for (const auto& g : gradPool_) {
    (zero_ >= 2 ? r.grads : r.commBuffers) += g->grad.size() + g->wire.size();
    r.commBuffers += g->recv.size();
  }
  for (const auto& u : unitPool_) r.params += u->size();
  r.commBuffers += gatherBuf_.size() + scratch_.size() * sizeof(float);
  return r;
}

}  // namespace weft::train
