#include "transports/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace weft::shm {

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    this->~Segment();
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    owner_linked_ = other.owner_linked_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.owner_linked_ = false;
  }
  return *this;
}

Segment::~Segment() {
  unlink();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
}

static Status map_fd(int fd, const std::string& name, size_t bytes, void** out) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return SysError(errno, "mmap of shared memory %s (%zu bytes)", name.c_str(), bytes);
  *out = p;
  return Status::Ok();
}

Status Segment::create(const std::string& name, size_t bytes, Segment* out) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return SysError(errno, "shm_open(%s) to create", name.c_str());
  Segment seg;
  seg.name_ = name;
  seg.owner_linked_ = true;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    return SysError(err, "ftruncate of shared memory %s to %zu bytes (is /dev/shm full?)",
                    name.c_str(), bytes);
  }
  Status st = map_fd(fd, name, bytes, &seg.data_);
  close(fd);
  WEFT_TRY(st);
  seg.size_ = bytes;
  *out = std::move(seg);
  return Status::Ok();
}

Status Segment::attach(const std::string& name, size_t bytes, Segment* out) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return SysError(errno, "shm_open(%s) to attach", name.c_str());
  struct stat st_buf;
  if (fstat(fd, &st_buf) != 0 || static_cast<size_t>(st_buf.st_size) < bytes) {
    close(fd);
    return Error(weftInternalError, "shared memory %s is smaller than the expected %zu bytes",
                 name.c_str(), bytes);
  }
  Segment seg;
  seg.name_ = name;
  Status st = map_fd(fd, name, bytes, &seg.data_);
  close(fd);
  WEFT_TRY(st);
  seg.size_ = bytes;
  *out = std::move(seg);
  return Status::Ok();
}

void Segment::unlink() {
  if (owner_linked_) shm_unlink(name_.c_str());
  owner_linked_ = false;
}

}  // namespace weft::shm
