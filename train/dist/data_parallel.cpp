#include "train/dist/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "weft/weft.hpp"

namespace weft::train {

namespace {

weftDataType_t weftType(DType d) {
  switch (d) {
    case DType::f32: return weftFloat32;
    case DType::bf16: return weftBfloat16;
    case DType::f16: return weftFloat16;
    case DType::f64: return weftFloat64;
  }
  throw std::invalid_argument("no weft datatype");
}

// n elements of type `from` at src to type `to` at dst (rounded once, through fp32).
void convert(DType from, const void* src, DType to, void* dst, size_t n, std::vector<float>* scratch) {
  if (from == to) {
    std::memcpy(dst, src, n * dtypeSize(from));
    return;
  }
  scratch->resize(n);
  convertToFloat(from, src, scratch->data(), n);
  convertFromFloat(to, scratch->data(), dst, n);
}

std::vector<Bucket> makeBuckets(const Model& model, const DataParallelOptions& opt) {
  const size_t es = dtypeSize(model.dtype());
  auto bytes = [](double mb) { return mb <= 0 ? size_t(1) : size_t(mb * 1024 * 1024); };
  return assignBuckets(model.tensors(), es, bytes(opt.bucketMb), bytes(opt.firstBucketMb));
}

int commRank(weftComm_t c) { int r = 0; if (c) weft::check(weftCommUserRank(c, &r), c); return r; }
int commSize(weftComm_t c) { int n = 1; if (c) weft::check(weftCommCount(c, &n), c); return n; }

}  // namespace

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
      commDtype_(opt.commDtype.value_or(model.dtype())),
      buckets_(makeBuckets(model, opt)),
      adam_(model, adam, ownedSegments(buckets_, model.numParams(), opt.zero, rank_, size_)) {
  if (opt.zero < 0 || opt.zero > 1) throw std::invalid_argument("--zero must be 0 or 1 (stages 2 and 3 are not built yet)");
  grads_.resize(adam_.numOwned());
  const size_t nb = buckets_.size();
  send_.resize(nb);
  recv_.resize(nb);
  gather_.resize(nb);
  requests_.assign(nb, nullptr);
  timings_.resize(nb);
  const size_t ces = dtypeSize(commDtype_), mes = dtypeSize(model.dtype());
  for (size_t b = 0; b < nb; b++) {
    if (size_ == 1) break;
    if (opt.zero == 0) {
      if (commDtype_ != model.dtype()) send_[b].resize(buckets_[b].numel() * ces);
    } else {
      const size_t c = shardSize(b);
      send_[b].resize(c * size_t(size_) * ces);
      recv_[b].resize(c * ces);
      gather_[b].resize(c * size_t(size_) * mes);
    }
  }
}

DataParallel::~DataParallel() {
  for (auto& r : requests_) weftWait(&r);  // never leave a collective on freed buffers
  model_.setGradReadyHook({});
}

size_t DataParallel::shardSize(size_t b) const {
  return (buckets_[b].numel() + size_t(size_) - 1) / size_t(size_);
}

double DataParallel::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void DataParallel::syncNextBackward() {
  if (size_ == 1) return;
  nextBucket_ = 0;
  syncing_ = true;
  volume_ = CommVolume{};
  for (auto& t : timings_) t = BucketTiming{};
  model_.setGradReadyHook([this](size_t offset) { onGradsReady(offset); });
}

void DataParallel::onGradsReady(size_t offset) {
  while (nextBucket_ < buckets_.size() && buckets_[nextBucket_].lo >= offset) post(nextBucket_++);
  pollDone();
}

void DataParallel::pollDone() {
  for (size_t b = 0; b < nextBucket_; b++) {
    if (timings_[b].done != 0 || requests_[b] == nullptr) continue;
    int done = 0;
    weftResult_t rc = weftTest(&requests_[b], &done);
    if (rc != weftInProgress) weft::check(rc, comm_);
    if (done) timings_[b].done = now();
  }
}

void DataParallel::post(size_t b) {
  const Bucket& bk = buckets_[b];
  const DType mdt = model_.dtype();
  char* grads = static_cast<char*>(model_.gradData()) + bk.lo * dtypeSize(mdt);
  const weftDataType_t wt = weftType(commDtype_);
  const size_t ces = dtypeSize(commDtype_);
  std::vector<float> scratch;
  timings_[b].posted = now();
  if (opt_.zero == 0) {
    void* buf = grads;
    if (commDtype_ != mdt) {
      convert(mdt, grads, commDtype_, send_[b].data(), bk.numel(), &scratch);
      buf = send_[b].data();
    }
    weft::check(weftAllReduceAsync(buf, buf, bk.numel(), wt, weftSum, comm_, &requests_[b]), comm_);
    volume_.gradientBytes += bk.numel() * ces;
  } else {
    const size_t c = shardSize(b);
    convert(mdt, grads, commDtype_, send_[b].data(), bk.numel(), &scratch);
    std::memset(send_[b].data() + bk.numel() * ces, 0, (c * size_t(size_) - bk.numel()) * ces);
    weft::check(weftReduceScatterAsync(send_[b].data(), recv_[b].data(), c, wt, weftSum, comm_, &requests_[b]),
                comm_);
    volume_.gradientBytes += c * size_t(size_) * ces;
  }
}

void DataParallel::finishGradients() {
  if (!syncing_) return;
  onGradsReady(0);
  model_.setGradReadyHook({});
  syncing_ = false;
  for (size_t b = 0; b < buckets_.size(); b++) {
    weft::check(weftWait(&requests_[b]), comm_);
    if (timings_[b].done == 0) timings_[b].done = now();
  }
  std::vector<float> scratch;
  const DType mdt = model_.dtype();
  if (opt_.zero == 0) {
    if (commDtype_ == mdt) return;
    for (size_t b = 0; b < buckets_.size(); b++) {
      char* grads = static_cast<char*>(model_.gradData()) + buckets_[b].lo * dtypeSize(mdt);
      convert(commDtype_, send_[b].data(), mdt, grads, buckets_[b].numel(), &scratch);
    }
    return;
  }
  // ZeRO: this rank's reduced part of each bucket, in owned-segment order.
  float* out = grads_.data();
  for (size_t b = 0; b < buckets_.size(); b++) {
    const size_t c = shardSize(b), begin = std::min(buckets_[b].numel(), c * size_t(rank_));
    const size_t n = std::min(buckets_[b].numel() - begin, c);
    convertToFloat(commDtype_, recv_[b].data(), out, n);
    out += n;
  }
}

DataParallel::StepResult DataParallel::step(double lr, double gradScale, double localLossSum) {
  StepResult res;
  double t0 = now();
  finishGradients();
  double t1 = now();
  res.waitSeconds += t1 - t0;
  if (opt_.zero == 0) model_.getGrads(grads_.data());
  if (beforeUpdate) beforeUpdate(grads_.data(), grads_.size());
  const double sumsq = adam_.unscaleSumSquares(grads_.data(), float(1.0 / gradScale));
  // One small all-reduce agrees on the loss, the sharded norm and "found inf/nan".
  double stats[3] = {localLossSum, opt_.zero ? sumsq : 0.0, std::isfinite(sumsq) ? 0.0 : 1.0};
  t0 = now();
  res.optimizerSeconds += t0 - t1;
  if (size_ > 1) {
    weft::check(weftAllReduce(stats, stats, 3, weftFloat64, weftSum, comm_, nullptr), comm_);
    volume_.statsBytes += sizeof stats;
  }
  t1 = now();
  res.waitSeconds += t1 - t0;
  res.lossSum = stats[0];
  const double total = opt_.zero ? stats[1] : sumsq;
  if (stats[2] > 0) {
    res.optim.skipped = true;
    res.optim.gradNorm = std::isfinite(total) ? NAN : total;
    return res;
  }
  res.optim.gradNorm = std::sqrt(total);
  adam_.update(grads_.data(), lr, adam_.clipFactor(res.optim.gradNorm));
  adam_.writeParams(model_);
  t0 = now();
  res.optimizerSeconds += t0 - t1;
  if (opt_.zero > 0 && size_ > 1) allGatherParams();
  res.waitSeconds += now() - t0;
  return res;
}

void DataParallel::allGatherParams() {
  const DType mdt = model_.dtype();
  const size_t es = dtypeSize(mdt);
  char* params = static_cast<char*>(model_.paramData());
  for (size_t b = 0; b < buckets_.size(); b++) {
    const size_t c = shardSize(b), len = buckets_[b].numel();
    const size_t begin = std::min(len, c * size_t(rank_)), n = std::min(len - begin, c);
    char* mine = gather_[b].data() + c * size_t(rank_) * es;
    std::memcpy(mine, params + (buckets_[b].lo + begin) * es, n * es);
    std::memset(mine + n * es, 0, (c - n) * es);
    weft::check(weftAllGatherAsync(mine, gather_[b].data(), c, weftType(mdt), comm_, &requests_[b]), comm_);
    volume_.paramBytes += c * size_t(size_) * es;
  }
  for (size_t b = 0; b < buckets_.size(); b++) {
    weft::check(weftWait(&requests_[b]), comm_);
    std::memcpy(params + buckets_[b].lo * es, gather_[b].data(), buckets_[b].numel() * es);
  }
}

void DataParallel::gatherFull(const std::vector<float>& owned, std::vector<float>* full) const {
  full->assign(model_.numParams(), 0.0f);
  if (opt_.zero == 0 || size_ == 1) {
    adam_.scatterOwned(owned.data(), full->data());
    return;
  }
  const float* src = owned.data();
  std::vector<float> padded;
  for (size_t b = 0; b < buckets_.size(); b++) {
    const size_t c = shardSize(b), len = buckets_[b].numel();
    const size_t begin = std::min(len, c * size_t(rank_)), n = std::min(len - begin, c);
    padded.assign(c * size_t(size_), 0.0f);
    std::copy(src, src + n, padded.begin() + ptrdiff_t(c * size_t(rank_)));
    src += n;
    float* mine = padded.data() + c * size_t(rank_);
    weft::check(weftAllGather(mine, padded.data(), c, weftFloat32, comm_, nullptr), comm_);
    std::copy(padded.begin(), padded.begin() + ptrdiff_t(len), full->begin() + ptrdiff_t(buckets_[b].lo));
  }
}

void DataParallel::fullState(std::vector<float>* master, std::vector<float>* m, std::vector<float>* v) const {
  gatherFull(adam_.master, master);
  gatherFull(adam_.m, m);
  gatherFull(adam_.v, v);
}

void DataParallel::loadState(const std::vector<float>& master, const std::vector<float>& m,
                             const std::vector<float>& v) {
  if (master.size() != model_.numParams() || m.size() != master.size() || v.size() != master.size())
    throw std::invalid_argument("optimizer state size differs from the model's");
  adam_.gatherOwned(master.data(), adam_.master.data());
  adam_.gatherOwned(m.data(), adam_.m.data());
  adam_.gatherOwned(v.data(), adam_.v.data());
}

MemoryReport DataParallel::memory() const {
  MemoryReport r;
  const size_t es = dtypeSize(model_.dtype());
  r.params = model_.numParams() * es;
  r.grads = model_.numParams() * es;
  r.optimizer = adam_.numOwned() * 3 * sizeof(float) + grads_.size() * sizeof(float);
  for (size_t b = 0; b < buckets_.size(); b++) r.commBuffers += send_[b].size() + recv_[b].size() + gather_[b].size();
  return r;
}

}  // namespace weft::train
