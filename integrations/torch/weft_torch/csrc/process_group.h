// The torch.distributed backend "weft": c10d's operations on CPU tensors as
// weft calls on one communicator per process group. Every operation is posted
// to the communicator's queue (weft's *Async calls), so operations run in
// issue order while the caller computes; a call with asyncOp false runs weft's
// blocking form on the caller's thread and returns a completed work.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "weft/weft.h"
#include "work.h"

namespace weft_torch {

class ProcessGroupWeft : public c10d::Backend {
 public:
  // Rendezvous through the group's store (already prefixed per group by c10d):
  // rank 0 publishes weft's unique id, the others read it. timeout is the
  // deadline of every wait of the group's communicator.
  ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout);
  // A group made by split(): owns comm.
  ProcessGroupWeft(weftComm_t comm, int rank, int size, std::chrono::milliseconds timeout);
  ~ProcessGroupWeft() override;

  // dist.split_group: weftCommSplit of this group's communicator, so the child
  // shares its bootstrap connection and channels instead of a store rendezvous.
  // Every rank of this group calls it; `ranks` are this group's ranks in the
  // child's order; a rank not among them gets nullptr. (split and
  // getBackendOptions are not virtual in every torch version weft_torch builds
  // against, hence no `override`.)
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts);
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions();

  const std::string getBackendName() const override { return "weft"; }
  weftComm_t comm() const { return comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  // Virtual in c10d::Backend from torch 2.7 (earlier, only the destructor
  // shuts down), hence no `override`.
  void shutdown();
  void abort();

 private:
  c10::intrusive_ptr<WeftWork> make_work(c10d::OpType type, const char* what, std::vector<at::Tensor> outputs);
  // Hands a work whose requests are all posted to the completer, or completes
  // it here (sync).
  c10::intrusive_ptr<c10d::Work> launch(const c10::intrusive_ptr<WeftWork>& work, bool async);
  // The weft op for a c10d reduce op; a pre-multiplied sum's op is destroyed
  // when the work is done.
  weftRedOp_t reduce_op(WeftWork& work, const c10d::ReduceOp& op, at::ScalarType type, const char* what);
  // One weft call of the work: call(&request) posts it (async), call(nullptr)
  // runs the blocking form on this thread, inline when the queue is idle.
  void issue(const c10::intrusive_ptr<WeftWork>& work, bool async,
             const std::function<weftResult_t(weftRequest_t*)>& call);
  // rc of a weft post: on failure the work's posted requests are completed and
  // the call throws with weft's message.
  void check_post(weftResult_t rc, const c10::intrusive_ptr<WeftWork>& work);

  weftComm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Completer> completer_;
};

}  // namespace weft_torch
