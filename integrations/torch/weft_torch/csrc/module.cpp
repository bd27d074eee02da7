// The extension module weft_torch._C: the process group's constructor, and
// timing loops the benchmark uses to measure what the binding adds over weft.
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include <chrono>

#include "compat.h"
#include "process_group.h"

namespace weft_torch {
namespace {

c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                         int64_t timeout_ms) {
  return c10::make_intrusive<ProcessGroupWeft>(store, rank, size, std::chrono::milliseconds(timeout_ms));
}

// Seconds per call of iters blocking all-reduces of t (float32, sum), either
// as weftAllReduce on the group's communicator or through the backend's
// allreduce(...)->wait() as c10d calls it. Every rank calls it alike.
double time_allreduce(const c10::intrusive_ptr<c10d::Backend>& backend, at::Tensor t, int iters, bool direct) {
  auto* pg = dynamic_cast<ProcessGroupWeft*>(backend.get());
  TORCH_CHECK(pg != nullptr, "time_allreduce: not a weft process group");
  TORCH_CHECK(t.is_contiguous() && t.scalar_type() == at::kFloat, "time_allreduce: contiguous float32 tensor");
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions opts;
  set_sync(opts, 0);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (direct) {
      TORCH_CHECK(weftAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), weftFloat32, weftSum, pg->comm(), nullptr) ==
                      weftSuccess,
                  weftGetLastError(nullptr));
    } else {
      pg->allreduce(tensors, opts)->wait();
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
}

}  // namespace
}  // namespace weft_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "weft as a torch.distributed backend";
  m.def("create_backend", &weft_torch::create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout_ms"), py::call_guard<py::gil_scoped_release>());
  m.def("time_allreduce", &weft_torch::time_allreduce, py::arg("backend"), py::arg("tensor"), py::arg("iters"),
        py::arg("direct"), py::call_guard<py::gil_scoped_release>());
}
