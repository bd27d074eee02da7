#include "train/dist/buckets.h"

#include <stdexcept>

namespace weft::train {

std::vector<Bucket> assignBuckets(const std::vector<ParamTensor>& tensors, size_t elemBytes, size_t capBytes,
                                  size_t firstCapBytes) {
  if (elemBytes == 0) throw std::invalid_argument("assignBuckets: element size 0");
  std::vector<Bucket> out;
  Bucket cur;
  bool open = false;
  for (int i = int(tensors.size()) - 1; i >= 0; i--) {
    const ParamTensor& t = tensors[size_t(i)];
    if (!open) {
      cur = Bucket{t.offset + t.numel, t.offset + t.numel, i, 0};
      open = true;
    }
    if (t.offset + t.numel != cur.lo) throw std::invalid_argument("assignBuckets: tensors are not contiguous");
    cur.lo = t.offset;
    cur.firstTensor = i;
    cur.numTensors++;
    const size_t cap = out.empty() ? firstCapBytes : capBytes;
    if (cur.numel() * elemBytes >= cap) {
      out.push_back(cur);
      open = false;
    }
  }
  if (open) out.push_back(cur);
  return out;
}

}  // namespace weft::train
