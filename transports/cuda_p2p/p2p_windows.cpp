// Group's symmetric windows: each rank's window is a range of one of its
// allocations; a peer maps that allocation through its IPC handle (once for
// all the windows in it) and finds the range at the same offset.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/log.h"
#include "transports/cuda_p2p/p2p_group.h"

namespace weft::transport::cuda_p2p {
namespace {

using exec::cuda::dptr;

// What a rank tells the others of its window.
struct WindowCard {
  exec::cuda::IpcHandle handle;  // of the allocation holding it
  uint64_t offset = 0;           // of the window in that allocation
  int32_t ok = 0;                // 0: why says why this rank cannot share it
  char why[108] = {};
};

// Each rank's verdict on mapping the others' windows.
struct Verdict {
  int32_t ok = 0;
  char why[124] = {};
};

}  // namespace

std::string Group::map_allocation(int rank, const exec::cuda::IpcHandle& h, exec::cuda::DevicePtr* base) {
  for (Mapping& m : mappings_)
    if (m.rank == rank && std::memcmp(&m.handle, &h, sizeof(h)) == 0) {
      ++m.windows;
      *base = m.base;
      return "";
    }
  const int rc = d_->ipc_open_handle(base, h, exec::cuda::kIpcLazyEnablePeerAccess);
  if (rc != 0) return "rank " + std::to_string(rank) + "'s window: cuIpcOpenMemHandle: " + exec::cuda::error_text(rc);
  mappings_.push_back({rank, h, *base, 1});
  return "";
}

void Group::unmap_allocation(int rank, exec::cuda::DevicePtr base) {
  for (size_t i = 0; i < mappings_.size(); ++i) {
    Mapping& m = mappings_[i];
    if (m.rank != rank || m.base != base || --m.windows > 0) continue;
    d_->ipc_close_handle(m.base);
    mappings_.erase(mappings_.begin() + static_cast<long>(i));
    return;
  }
}

Status Group::add_window(const void* base, size_t size, const Exchange& exchange, std::string* why_not) {
  std::lock_guard<std::mutex> lock(mu_);
  if (o_.host_buffers) {  // every rank's group is alike: no rank maps
    *why_not = "the ranks' GPUs do not reach each other's memory (the group's buffers are in host memory)";
    return Status::Ok();
  }
  WindowCard mine;
  auto refuse = [&](const std::string& why) { std::snprintf(mine.why, sizeof(mine.why), "%s", why.c_str()); };
  exec::cuda::DevicePtr alloc = 0;
  size_t alloc_bytes = 0;
  int rc = 0;
  if (d_->address_range == nullptr) refuse("the CUDA driver lacks cuMemGetAddressRange");
  else if ((rc = d_->address_range(&alloc, &alloc_bytes, dptr(base))) != 0)
    refuse("cuMemGetAddressRange: " + exec::cuda::error_text(rc));
  else if (dptr(base) + size > alloc + alloc_bytes) refuse("the window spans more than one allocation");
  else if ((rc = d_->ipc_get_handle(&mine.handle, alloc)) != 0)
    refuse("cuIpcGetMemHandle of its allocation: " + exec::cuda::error_text(rc));
  else {
    mine.offset = dptr(base) - alloc;
    mine.ok = 1;
  }
  std::vector<WindowCard> cards(static_cast<size_t>(o_.nranks));
  WEFT_TRY(exchange(&mine, cards.data(), sizeof(mine)));

  const auto n = static_cast<size_t>(o_.nranks);
  Window w{static_cast<unsigned char*>(const_cast<void*>(base)), size, std::vector<unsigned char*>(n, nullptr),
           std::vector<exec::cuda::DevicePtr>(n, 0)};
  Verdict verdict;
  std::string why;
  for (int p = 0; p < o_.nranks && why.empty(); ++p) {
    const WindowCard& c = cards[static_cast<size_t>(p)];
    if (!c.ok) why = "rank " + std::to_string(p) + ": " + c.why;
    else if (p == o_.rank) w.at[static_cast<size_t>(p)] = w.base;
    else {
      exec::cuda::DevicePtr mapped = 0;
      why = map_allocation(p, c.handle, &mapped);
      if (!why.empty()) break;
      w.mapping[static_cast<size_t>(p)] = mapped;
      w.at[static_cast<size_t>(p)] = reinterpret_cast<unsigned char*>(mapped + c.offset);
    }
  }
  verdict.ok = why.empty() ? 1 : 0;
  std::snprintf(verdict.why, sizeof(verdict.why), "%s", why.c_str());
  std::vector<Verdict> verdicts(static_cast<size_t>(o_.nranks));
  Status st = exchange(&verdict, verdicts.data(), sizeof(verdict));
  why.clear();
  for (int p = 0; p < o_.nranks && why.empty(); ++p)
    if (!verdicts[static_cast<size_t>(p)].ok) why = "rank " + std::to_string(p) + " sees " + verdicts[static_cast<size_t>(p)].why;
  if (!st.ok() || !why.empty()) {
    for (int p = 0; p < o_.nranks; ++p)
      if (w.mapping[static_cast<size_t>(p)] != 0) unmap_allocation(p, w.mapping[static_cast<size_t>(p)]);
    *why_not = why;
    return st;
  }
  std::lock_guard<std::mutex> windows_lock(windows_mu_);
  windows_.push_back(std::move(w));
  why_not->clear();
  return Status::Ok();
}

Status Group::remove_window(const void* base) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(windows_.begin(), windows_.end(), [&](const Window& w) { return w.base == base; });
  if (it == windows_.end()) return Status::Ok();
  // The streams may still read it (this rank's its peers', theirs this rank's).
  if (broken_ || !streams_finished(Deadline::after_ms(o_.timeout_ms)))
    return Error(weftInternalError,
                 "cuda_p2p: rank %d: a stream has not finished the calls on the window at %p after %lld ms (or a "
                 "call failed part-way): its mappings stay",
                 o_.rank, base, static_cast<long long>(o_.timeout_ms));
  for (int p = 0; p < o_.nranks; ++p)
    if (it->mapping[static_cast<size_t>(p)] != 0) unmap_allocation(p, it->mapping[static_cast<size_t>(p)]);
  std::lock_guard<std::mutex> windows_lock(windows_mu_);
  windows_.erase(it);
  return Status::Ok();
}

bool Group::in_window(const void* p, size_t bytes) const {
  const auto* b = static_cast<const unsigned char*>(p);
  std::lock_guard<std::mutex> lock(windows_mu_);
  return std::any_of(windows_.begin(), windows_.end(),
                     [&](const Window& w) { return b >= w.base && b + bytes <= w.base + w.size; });
}

unsigned char* Group::peer_address(int rank, const void* p) const {
  const auto* b = static_cast<const unsigned char*>(p);
  std::lock_guard<std::mutex> lock(windows_mu_);
  for (const Window& w : windows_)
    if (b >= w.base && b < w.base + w.size) return w.at[static_cast<size_t>(rank)] + (b - w.base);
  return nullptr;
}

}  // namespace weft::transport::cuda_p2p
