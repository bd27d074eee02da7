// A named POSIX shared-memory segment. The creator unlinks the name as soon as
// every local rank has attached, so nothing stays in /dev/shm after a crash past
// that point (weft-run also sweeps its job's names on exit).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace weft::shm {

class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  Segment(Segment&& other) noexcept { *this = std::move(other); }
  Segment& operator=(Segment&& other) noexcept;
  ~Segment();

  static Status create(const std::string& name, size_t bytes, Segment* out);
  static Status attach(const std::string& name, size_t bytes, Segment* out);
  // Removes the name; the mapping stays valid.
  void unlink();

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owner_linked_ = false;
};

}  // namespace weft::shm
