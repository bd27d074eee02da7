#include "process_group.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "compat.h"
#include "convert.h"

namespace weft_torch {
namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

void check_cpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "weft ", what, ": tensors must be on the CPU (got ", t.device(), ")");
  TORCH_CHECK(t.layout() == at::kStrided, "weft ", what, ": only dense tensors are supported");
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* what) {
  TORCH_CHECK(ts.size() == 1, "weft ", what, ": takes one tensor per call (got ", ts.size(), ")");
  check_cpu(ts[0], what);
  return ts[0];
}

void check_like(const at::Tensor& t, const at::Tensor& ref, const char* what) {
  check_cpu(t, what);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "weft ", what, ": dtype ", t.scalar_type(), " does not match ",
              ref.scalar_type());
  TORCH_CHECK(t.numel() == ref.numel(), "weft ", what, ": tensor of ", t.numel(), " elements where ", ref.numel(),
              " are expected");
}

// A contiguous tensor weft can work in: t itself, or a contiguous copy whose
// result goes back into t when the work succeeds (write).
at::Tensor staged(const at::Tensor& t, WeftWork& w, bool write) {
  if (t.is_contiguous()) {
    w.keep(t);
    return t;
  }
  at::Tensor c = t.contiguous();
  w.keep(c);
  if (write) w.on_success([t, c] { t.copy_(c); });
  return c;
}

// The tensors end to end in one new contiguous tensor.
at::Tensor concat(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const at::Tensor& t : ts) flat.push_back(t.reshape(-1));
  return at::cat(flat);
}

// On success, consecutive slices of flat go into the tensors.
void unpack_on_success(WeftWork& w, const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  w.keep(flat);
  w.on_success([flat, ts] {
    int64_t off = 0;
    for (const at::Tensor& t : ts) {
      t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  });
}

void* ptr(const at::Tensor& t) { return t.numel() == 0 ? nullptr : t.data_ptr(); }

size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

}  // namespace

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout) {
  weftUniqueId id;
  const std::string key = "weft_unique_id";
  if (rank == 0) {
    TORCH_CHECK(weftGetUniqueId(&id) == weftSuccess, "weft: weftGetUniqueId failed: ", weftGetLastError(nullptr));
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof id.internal, "weft: the store's ", key, " holds ", bytes.size(),
                " bytes, not a weft unique id (", sizeof id.internal, ")");
    std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  }
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.timeoutMs = timeout.count();
  config.commName = "torch";
  if (weftCommInitRankConfig(&comm_, size, id, rank, &config) != weftSuccess)
    std::rethrow_exception(backend_error(std::string("weft: process group init (rank ") + std::to_string(rank) +
                                         " of " + std::to_string(size) + ") failed: " + weftGetLastError(nullptr)));
  completer_ = std::make_unique<Completer>();
}

ProcessGroupWeft::ProcessGroupWeft(weftComm_t comm, int rank, int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), comm_(comm), timeout_(timeout) {
  completer_ = std::make_unique<Completer>();
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupWeft::getBackendOptions() {
  return c10::make_intrusive<c10d::Backend::Options>("weft", timeout_);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupWeft::split(const c10::intrusive_ptr<c10d::Store>&,
                                                          const std::vector<int>& ranks,
                                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  TORCH_CHECK(comm_ != nullptr, "weft split: the process group was shut down or aborted");
  // Ranks of one child share a color: a hash of its sorted member list, as every
  // member can compute it and the others (in other children) get other colors.
  int color = WEFT_SPLIT_NOCOLOR, key = 0;
  auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me != ranks.end()) {
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    uint64_t h = 1469598103934665603ull;
    for (int r : sorted) h = (h ^ static_cast<uint64_t>(r)) * 1099511628211ull;
    color = static_cast<int>(h & 0x7fffffff);
    key = static_cast<int>(me - ranks.begin());
  }
  const std::chrono::milliseconds timeout = opts ? opts->timeout : timeout_;
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.timeoutMs = timeout.count();
  config.commName = "torch";
  weftComm_t child = nullptr;
  if (weftCommSplit(comm_, color, key, &child, &config) != weftSuccess)
    std::rethrow_exception(backend_error(std::string("weft: split of rank ") + std::to_string(rank_) + " of " +
                                         std::to_string(size_) + " failed: " + weftGetLastError(comm_)));
  if (child == nullptr) return nullptr;
  return c10::make_intrusive<ProcessGroupWeft>(child, key, static_cast<int>(ranks.size()), timeout);
}

ProcessGroupWeft::~ProcessGroupWeft() { shutdown(); }

void ProcessGroupWeft::shutdown() {
  completer_.reset();  // every handed-out work completes first
  if (comm_ != nullptr) weftCommDestroy(comm_);
  comm_ = nullptr;
}

void ProcessGroupWeft::abort() {
  // Fails what is in flight, here and (through weft) on the other ranks.
  if (comm_ != nullptr) weftCommAbort(comm_);
  comm_ = nullptr;
  completer_.reset();
}

c10::intrusive_ptr<WeftWork> ProcessGroupWeft::make_work(OpType type, const char* what,
                                                         std::vector<at::Tensor> outputs) {
  TORCH_CHECK(comm_ != nullptr, "weft ", what, ": the process group was shut down or aborted");
  return c10::make_intrusive<WeftWork>(rank_, type, what, std::move(outputs));
}

void ProcessGroupWeft::check_post(weftResult_t rc, const c10::intrusive_ptr<WeftWork>& work) {
  if (rc == weftSuccess) return;
  std::string msg = weftGetLastError(nullptr);
  work->drive(true);  // what was posted before completes; its outcome is moot
  TORCH_CHECK(false, "weft ", work->what(), ": ", msg);
}

void ProcessGroupWeft::issue(const c10::intrusive_ptr<WeftWork>& work, bool async,
                             const std::function<weftResult_t(weftRequest_t*)>& call) {
  if (async) {
    weftRequest_t req = nullptr;
    check_post(call(&req), work);
    work->add(req);
    return;
  }
  if (work->sync_failed()) return;  // an earlier call of this work failed
  weftResult_t rc = call(nullptr);
  if (rc == weftSuccess) return;
  // Raised by wait(), as DistBackendError: a mismatch with the other ranks'
  // calls is reported as bad usage too, so no code tells it from a local slip.
  work->sync_fail(rc, weftGetLastError(nullptr));
}

weftRedOp_t ProcessGroupWeft::reduce_op(WeftWork& work, const c10d::ReduceOp& op, at::ScalarType type,
                                        const char* what) {
  bool premul = false;
  const weftRedOp_t out = weft_op(op, type, comm_, what, &premul);
  if (premul) work.on_done([out, c = comm_] { weftRedOpDestroy(out, c); });
  return out;
}

WorkPtr ProcessGroupWeft::launch(const c10::intrusive_ptr<WeftWork>& work, bool async) {
  if (async)
    completer_->push(work);
  else
    work->complete_sync();
  return work;
}

WorkPtr ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  auto w = make_work(OpType::BROADCAST, "broadcast", tensors);
  at::Tensor buf = staged(t, *w, true);
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftBroadcastAsync(ptr(buf), ptr(buf), count(buf), weft_dtype(t.scalar_type(), "broadcast"),
                                  static_cast<int>(opts.rootRank), comm_, r)
             : weftBroadcast(ptr(buf), ptr(buf), count(buf), weft_dtype(t.scalar_type(), "broadcast"),
                             static_cast<int>(opts.rootRank), comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "all_reduce");
  weftDataType_t dtype = weft_dtype(t.scalar_type(), "all_reduce");
  auto w = make_work(OpType::ALLREDUCE, "all_reduce", tensors);
  at::Tensor buf = staged(t, *w, true);
  const weftRedOp_t op = reduce_op(*w, opts.reduceOp, t.scalar_type(), "all_reduce");
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftAllReduceAsync(ptr(buf), ptr(buf), count(buf), dtype, op, comm_, r)
             : weftAllReduce(ptr(buf), ptr(buf), count(buf), dtype, op, comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "weft all_reduce_coalesced: no tensors");
  for (const at::Tensor& t : tensors) {
    check_cpu(t, "all_reduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "weft all_reduce_coalesced: mixed dtypes ",
                t.scalar_type(), " and ", tensors[0].scalar_type());
  }
  at::ScalarType type = tensors[0].scalar_type();
  auto w = make_work(OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", tensors);
  // One all-reduce of everything end to end: one call's latency, not one per
  // tensor.
  at::Tensor flat = concat(tensors);
  unpack_on_success(*w, flat, tensors);
  const weftRedOp_t op = reduce_op(*w, opts.reduceOp, type, "all_reduce_coalesced");
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftAllReduceAsync(ptr(flat), ptr(flat), count(flat), weft_dtype(type, "all_reduce_coalesced"), op,
                                  comm_, r)
             : weftAllReduce(ptr(flat), ptr(flat), count(flat), weft_dtype(type, "all_reduce_coalesced"), op, comm_,
                             nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  weftDataType_t dtype = weft_dtype(t.scalar_type(), "reduce");
  auto w = make_work(OpType::REDUCE, "reduce", tensors);
  at::Tensor buf = staged(t, *w, true);
  const weftRedOp_t op = reduce_op(*w, opts.reduceOp, t.scalar_type(), "reduce");
  const int root = static_cast<int>(opts.rootRank);
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftReduceAsync(ptr(buf), ptr(buf), count(buf), dtype, op, root, comm_, r)
             : weftReduce(ptr(buf), ptr(buf), count(buf), dtype, op, root, comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "weft all_gather: expects one list of ", size_, " output tensors");
  for (const at::Tensor& o : outputs[0]) check_like(o, in, "all_gather");
  auto w = make_work(OpType::ALLGATHER, "all_gather", outputs[0]);
  at::Tensor src = staged(in, *w, false);
  at::Tensor flat = at::empty({in.numel() * size_}, in.options().memory_format(at::MemoryFormat::Contiguous));
  unpack_on_success(*w, flat, outputs[0]);
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftAllGatherAsync(ptr(src), ptr(flat), count(src), weft_dtype(in.scalar_type(), "all_gather"), comm_, r)
             : weftAllGather(ptr(src), ptr(flat), count(src), weft_dtype(in.scalar_type(), "all_gather"), comm_,
                             nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  check_cpu(input, "all_gather_into_tensor");
  check_cpu(output, "all_gather_into_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "weft all_gather_into_tensor: output dtype ",
              output.scalar_type(), " does not match input dtype ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_, "weft all_gather_into_tensor: output has ", output.numel(),
              " elements, expected ", size_, " x ", input.numel());
  auto w = make_work(OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {output});
  at::Tensor dst = staged(output, *w, true);
  at::Tensor src = staged(input, *w, false);
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftAllGatherAsync(ptr(src), ptr(dst), count(src),
                                  weft_dtype(input.scalar_type(), "all_gather_into_tensor"), comm_, r)
             : weftAllGather(ptr(src), ptr(dst), count(src), weft_dtype(input.scalar_type(), "all_gather_into_tensor"),
                             comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                              std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "weft all_gather_coalesced: ", outputs.size(), " output lists for ",
              inputs.size(), " inputs");
  std::vector<at::Tensor> all_outputs;
  for (auto& list : outputs) all_outputs.insert(all_outputs.end(), list.begin(), list.end());
  auto w = make_work(OpType::ALLGATHER_COALESCED, "all_gather_coalesced", all_outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& in = inputs[i];
    check_cpu(in, "all_gather_coalesced");
    TORCH_CHECK(static_cast<int>(outputs[i].size()) == size_, "weft all_gather_coalesced: output list ", i, " has ",
                outputs[i].size(), " tensors, expected ", size_);
    for (const at::Tensor& o : outputs[i]) check_like(o, in, "all_gather_coalesced");
    at::Tensor src = staged(in, *w, false);
    at::Tensor flat = at::empty({in.numel() * size_}, in.options().memory_format(at::MemoryFormat::Contiguous));
    unpack_on_success(*w, flat, outputs[i]);
    issue(w, is_async(opts), [&](weftRequest_t* r) {
      return r ? weftAllGatherAsync(ptr(src), ptr(flat), count(src),
                                    weft_dtype(in.scalar_type(), "all_gather_coalesced"), comm_, r)
               : weftAllGather(ptr(src), ptr(flat), count(src), weft_dtype(in.scalar_type(), "all_gather_coalesced"),
                               comm_, nullptr);
    });
  }
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "weft all_gather_into_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  auto w = make_work(OpType::COALESCED, "all_gather_into_tensor_coalesced", outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_cpu(inputs[i], "all_gather_into_tensor_coalesced");
    check_cpu(outputs[i], "all_gather_into_tensor_coalesced");
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() && outputs[i].numel() == inputs[i].numel() * size_,
                "weft all_gather_into_tensor_coalesced: output ", i, " must hold ", size_, " x its input");
    at::Tensor dst = staged(outputs[i], *w, true);
    at::Tensor src = staged(inputs[i], *w, false);
    issue(w, is_async(opts), [&](weftRequest_t* r) {
      return r ? weftAllGatherAsync(ptr(src), ptr(dst), count(src),
                                    weft_dtype(inputs[i].scalar_type(), "all_gather_into_tensor_coalesced"), comm_, r)
               : weftAllGather(ptr(src), ptr(dst), count(src),
                               weft_dtype(inputs[i].scalar_type(), "all_gather_into_tensor_coalesced"), comm_, nullptr);
    });
  }
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = rank_ == root;
  if (is_root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "weft gather: the root expects one list of ", size_, " output tensors");
    for (const at::Tensor& o : outputs[0]) check_like(o, in, "gather");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), "weft gather: only the root (rank ",
                root, ") passes output tensors");
  }
  auto w = make_work(OpType::GATHER, "gather", is_root ? outputs[0] : std::vector<at::Tensor>{});
  at::Tensor src = staged(in, *w, false);
  at::Tensor flat;
  if (is_root) {
    flat = at::empty({in.numel() * size_}, in.options().memory_format(at::MemoryFormat::Contiguous));
    unpack_on_success(*w, flat, outputs[0]);
  }
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftGatherAsync(ptr(src), is_root ? ptr(flat) : nullptr, count(src),
                               weft_dtype(in.scalar_type(), "gather"), root, comm_, r)
             : weftGather(ptr(src), is_root ? ptr(flat) : nullptr, count(src), weft_dtype(in.scalar_type(), "gather"),
                          root, comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = rank_ == root;
  at::Tensor flat;
  if (is_root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "weft scatter: the root expects one list of ", size_, " input tensors");
    for (const at::Tensor& i : inputs[0]) check_like(i, out, "scatter");
    flat = concat(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), "weft scatter: only the root (rank ", root,
                ") passes input tensors");
  }
  auto w = make_work(OpType::SCATTER, "scatter", outputs);
  if (is_root) w->keep(flat);
  at::Tensor dst = staged(out, *w, true);
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftScatterAsync(is_root ? ptr(flat) : nullptr, ptr(dst), count(dst),
                                weft_dtype(out.scalar_type(), "scatter"), root, comm_, r)
             : weftScatter(is_root ? ptr(flat) : nullptr, ptr(dst), count(dst),
                           weft_dtype(out.scalar_type(), "scatter"), root, comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "weft reduce_scatter: expects one list of ", size_, " input tensors");
  for (const at::Tensor& i : inputs[0]) check_like(i, out, "reduce_scatter");
  auto w = make_work(OpType::REDUCE_SCATTER, "reduce_scatter", outputs);
  at::Tensor flat = concat(inputs[0]);
  w->keep(flat);
  at::Tensor dst = staged(out, *w, true);
  const weftRedOp_t op = reduce_op(*w, opts.reduceOp, out.scalar_type(), "reduce_scatter");
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftReduceScatterAsync(ptr(flat), ptr(dst), count(dst), weft_dtype(out.scalar_type(), "reduce_scatter"),
                                      op, comm_, r)
             : weftReduceScatter(ptr(flat), ptr(dst), count(dst), weft_dtype(out.scalar_type(), "reduce_scatter"), op,
                                 comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outputs{output}, inputs{input};
  return reduce_scatter_tensor_coalesced(outputs, inputs, opts);
}

WorkPtr ProcessGroupWeft::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor";
  TORCH_CHECK(outputs.size() == inputs.size(), "weft ", what, ": ", outputs.size(), " outputs for ", inputs.size(),
              " inputs");
  auto w = make_work(OpType::_REDUCE_SCATTER_BASE, what, outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_cpu(inputs[i], what);
    check_cpu(outputs[i], what);
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "weft ", what, ": output dtype ",
                outputs[i].scalar_type(), " does not match input dtype ", inputs[i].scalar_type());
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_, "weft ", what, ": input has ", inputs[i].numel(),
                " elements, expected ", size_, " x ", outputs[i].numel());
    at::Tensor src = staged(inputs[i], *w, false);
    at::Tensor dst = staged(outputs[i], *w, true);
    const weftRedOp_t op = reduce_op(*w, opts.reduceOp, src.scalar_type(), what);
    const weftDataType_t dtype = weft_dtype(src.scalar_type(), what);
    issue(w, is_async(opts), [&](weftRequest_t* r) {
      return r ? weftReduceScatterAsync(ptr(src), ptr(dst), count(dst), dtype, op, comm_, r)
               : weftReduceScatter(ptr(src), ptr(dst), count(dst), dtype, op, comm_, nullptr);
    });
  }
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                        std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const char* what = "all_to_all_single";
  check_cpu(input, what);
  check_cpu(output, what);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "weft ", what, ": output dtype ", output.scalar_type(),
              " does not match input dtype ", input.scalar_type());
  weftDataType_t dtype = weft_dtype(input.scalar_type(), what);
  auto w = make_work(OpType::ALLTOALL_BASE, what, {output});
  at::Tensor src = staged(input, *w, false);
  at::Tensor dst = staged(output, *w, true);
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0, "weft ", what, ": ", input.numel(),
                " input and ", output.numel(), " output elements do not split evenly over ", size_, " ranks");
    issue(w, is_async(opts), [&](weftRequest_t* r) {
      return r ? weftAlltoAllAsync(ptr(src), ptr(dst), count(src) / size_, dtype, comm_, r)
               : weftAlltoAll(ptr(src), ptr(dst), count(src) / size_, dtype, comm_, nullptr);
    });
  } else {
    // Splits count rows of dim 0; an empty list splits that side evenly.
    auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, std::vector<size_t>* n,
                      std::vector<size_t>* displs) {
      const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
      const int64_t row = rows == 0 ? 0 : t.numel() / rows;
      int64_t off = 0;
      for (int r = 0; r < size_; ++r) {
        int64_t k = splits.empty() ? rows / size_ : splits[r];
        TORCH_CHECK(k >= 0, "weft ", what, ": negative split size");
        n->push_back(static_cast<size_t>(k * row));
        displs->push_back(static_cast<size_t>(off));
        off += k * row;
      }
      TORCH_CHECK(off == t.numel(), "weft ", what, ": split sizes cover ", off, " of the tensor's ", t.numel(),
                  " elements");
    };
    TORCH_CHECK(input_splits.empty() || static_cast<int>(input_splits.size()) == size_, "weft ", what, ": ",
                input_splits.size(), " input split sizes for ", size_, " ranks");
    TORCH_CHECK(output_splits.empty() || static_cast<int>(output_splits.size()) == size_, "weft ", what, ": ",
                output_splits.size(), " output split sizes for ", size_, " ranks");
    std::vector<size_t> sc, sd, rc, rd;
    counts(src, input_splits, &sc, &sd);
    counts(dst, output_splits, &rc, &rd);
    issue(w, is_async(opts), [&](weftRequest_t* r) {
      return r ? weftAlltoAllvAsync(ptr(src), sc.data(), sd.data(), ptr(dst), rc.data(), rd.data(), dtype, comm_, r)
               : weftAlltoAllv(ptr(src), sc.data(), sd.data(), ptr(dst), rc.data(), rd.data(), dtype, comm_, nullptr);
    });
  }
  return launch(w, is_async(opts));
}

WorkPtr ProcessGroupWeft::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::AllToAllOptions& opts) {
  const char* what = "all_to_all";
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_, "weft ", what,
              ": expects ", size_, " input and ", size_, " output tensors");
  at::ScalarType type = inputs[0].scalar_type();
  for (int r = 0; r < size_; ++r) {
    for (const at::Tensor* t : {&inputs[r], &outputs[r]}) {
      check_cpu(*t, what);
      TORCH_CHECK(t->scalar_type() == type, "weft ", what, ": mixed dtypes ", t->scalar_type(), " and ", type);
    }
  }
  auto w = make_work(OpType::ALLTOALL, what, outputs);
  at::Tensor src = concat(inputs);
  w->keep(src);
  int64_t total = 0;
  std::vector<size_t> sc, sd, rc, rd;
  for (int r = 0; r < size_; ++r) {
    sc.push_back(count(inputs[r]));
    sd.push_back(r == 0 ? 0 : sd[r - 1] + sc[r - 1]);
    rc.push_back(count(outputs[r]));
    rd.push_back(r == 0 ? 0 : rd[r - 1] + rc[r - 1]);
    total += outputs[r].numel();
  }
  at::Tensor dst = at::empty({total}, src.options());
  unpack_on_success(*w, dst, outputs);
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftAlltoAllvAsync(ptr(src), sc.data(), sd.data(), ptr(dst), rc.data(), rd.data(),
                                  weft_dtype(type, what), comm_, r)
             : weftAlltoAllv(ptr(src), sc.data(), sd.data(), ptr(dst), rc.data(), rd.data(), weft_dtype(type, what),
                             comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

// Tags are not matched: a peer's messages arrive in the order it sent them
// (as NCCL's point-to-point).
WorkPtr ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) {
  const at::Tensor& t = single(tensors, "send");
  auto w = make_work(OpType::SEND, "send", {});
  at::Tensor buf = staged(t, *w, false);
  weftRequest_t req;
  check_post(weftSendAsync(ptr(buf), count(buf), weft_dtype(t.scalar_type(), "send"), dst, comm_, &req), w);
  w->add(req);
  return launch(w, true);
}

WorkPtr ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) {
  const at::Tensor& t = single(tensors, "recv");
  auto w = make_work(OpType::RECV, "recv", tensors);
  *w->source_slot() = src;
  at::Tensor buf = staged(t, *w, true);
  weftRequest_t req;
  check_post(weftRecvAsync(ptr(buf), count(buf), weft_dtype(t.scalar_type(), "recv"), src, comm_, &req), w);
  w->add(req);
  return launch(w, true);
}

// The sender's rank in this group is the work's sourceRank() once it completes.
WorkPtr ProcessGroupWeft::recvAnysource(std::vector<at::Tensor>& tensors, int /*tag*/) {
  const at::Tensor& t = single(tensors, "recv");
  auto w = make_work(OpType::RECVANYSOURCE, "recv", tensors);
  at::Tensor buf = staged(t, *w, true);
  weftRequest_t req;
  check_post(weftRecvAnyAsync(ptr(buf), count(buf), weft_dtype(t.scalar_type(), "recv"), w->source_slot(), comm_,
                              &req),
             w);
  w->add(req);
  return launch(w, true);
}

WorkPtr ProcessGroupWeft::barrier(const c10d::BarrierOptions& opts) {
  // Nobody's result exists before everybody's contribution arrived.
  auto w = make_work(OpType::BARRIER, "barrier", {});
  at::Tensor token = at::zeros({1}, at::kByte);
  w->keep(token);
  issue(w, is_async(opts), [&](weftRequest_t* r) {
    return r ? weftAllReduceAsync(ptr(token), ptr(token), 1, weftUint8, weftMax, comm_, r)
             : weftAllReduce(ptr(token), ptr(token), 1, weftUint8, weftMax, comm_, nullptr);
  });
  return launch(w, is_async(opts));
}

void ProcessGroupWeft::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  // Every rank checks in with rank 0, which names the ranks that did not
  // within the timeout, then releases them all.
  TORCH_CHECK(comm_ != nullptr, "weft monitored_barrier: the process group was shut down or aborted");
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  at::Tensor tokens = at::zeros({size_}, at::kByte);
  uint8_t* t = tokens.data_ptr<uint8_t>();
  auto wait_for = [&](std::vector<weftRequest_t>& reqs, std::vector<int>& peers, std::vector<int>* missing,
                      bool all) -> std::string {
    std::vector<bool> done(reqs.size(), false);
    size_t left = reqs.size();
    while (left > 0) {
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (done[i]) continue;
        int d = 0;
        weftResult_t rc = weftTest(&reqs[i], &d);
        if (!d) continue;
        if (rc != weftSuccess) return weftGetLastError(nullptr);
        done[i] = true;
        --left;
      }
      if (left == 0) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        for (size_t i = 0; i < reqs.size(); ++i)
          if (!done[i]) {
            missing->push_back(peers[i]);
            if (!all) break;
          }
        return "";
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return "";
  };
  std::vector<weftRequest_t> reqs;
  std::vector<int> peers, missing;
  std::string err;
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) {
      weftRequest_t req;
      TORCH_CHECK(weftRecvAsync(t + r, 1, weftUint8, r, comm_, &req) == weftSuccess,
                  "weft monitored_barrier: ", weftGetLastError(nullptr));
      reqs.push_back(req);
      peers.push_back(r);
    }
    err = wait_for(reqs, peers, &missing, wait_all_ranks);
    if (err.empty() && missing.empty()) {
      reqs.clear();
      for (int r = 1; r < size_; ++r) {
        weftRequest_t req;
        TORCH_CHECK(weftSendAsync(t, 1, weftUint8, r, comm_, &req) == weftSuccess,
                    "weft monitored_barrier: ", weftGetLastError(nullptr));
        reqs.push_back(req);
      }
      err = wait_for(reqs, peers, &missing, true);
    }
  } else {
    weftRequest_t req;
    TORCH_CHECK(weftSendAsync(t, 1, weftUint8, 0, comm_, &req) == weftSuccess,
                "weft monitored_barrier: ", weftGetLastError(nullptr));
    reqs.push_back(req);
    TORCH_CHECK(weftRecvAsync(t + 1, 1, weftUint8, 0, comm_, &req) == weftSuccess,
                "weft monitored_barrier: ", weftGetLastError(nullptr));
    reqs.push_back(req);
    peers = {0, 0};
    err = wait_for(reqs, peers, &missing, false);
  }
  // Requests still pending (a late or dead peer) go to the completer with the
  // tokens they write, so memory outlives them; the group's deadline ends them.
  auto left = make_work(OpType::BARRIER, "monitored_barrier", {});
  left->keep(tokens);
  for (weftRequest_t r : reqs)
    if (r != nullptr) left->add(r);
  completer_->push(left);
  if (!err.empty()) std::rethrow_exception(backend_error("weft monitored_barrier failed: " + err));
  if (!missing.empty()) {
    std::string ranks;
    for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    std::string msg = rank_ == 0 ? "rank(s) " + ranks + " did not reach monitored_barrier"
                                 : "rank 0 did not release monitored_barrier";
    std::rethrow_exception(backend_error("weft monitored_barrier: " + msg + " within " +
                                         std::to_string(timeout.count()) + " ms (rank " + std::to_string(rank_) + ")"));
  }
}

}  // namespace weft_torch
