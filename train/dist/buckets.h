// Gradient buckets for data parallelism: runs of whole parameter tensors taken in
// reverse parameter order (the order backward finishes them), as PyTorch DDP's
// compute_bucket_assignment_by_size builds them.
#pragma once

#include <cstddef>
#include <vector>

#include "train/gpt2.h"

namespace weft::train {

// Elements [lo, hi) of the flat parameter (and gradient) buffer. Because the
// buffer is in parameter order and buckets take tensors in reverse order, each
// bucket is one contiguous range: its gradients need no copy (PyTorch's
// gradient_as_bucket_view).
struct Bucket {
  size_t lo = 0, hi = 0;
  int firstTensor = 0;  // lowest tensor index in the bucket
  int numTensors = 0;
  size_t numel() const { return hi - lo; }
};

// A bucket is closed as soon as it holds at least its cap: firstCapBytes for the
// first (so communication starts early in backward), capBytes for the others. A
// tensor is never split, so a bucket can exceed its cap by its last tensor.
// Buckets come out in the order backward completes them (highest offsets first).
std::vector<Bucket> assignBuckets(const std::vector<ParamTensor>& tensors, size_t elemBytes, size_t capBytes,
                                  size_t firstCapBytes);

}  // namespace weft::train
