// How a communicator sets up its links. Every transport registers (registry.cpp)
// in priority order. At init each transport describes this rank on its card (a
// listening address, a probe address, whether it has a device), the cards are
// all-gathered, and each pair of ranks goes to the first transport whose
// can_connect() accepts it (only the one WEFT_TRANSPORT names, when set). Then
// every transport that any pair uses creates what peers attach to, a bootstrap
// barrier, connects its peers, a second barrier, and finishes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "transports/link.h"

namespace weft::transport {

constexpr size_t kMaxTransports = 4;
constexpr size_t kCardBlobBytes = 48;

// What one rank tells every other at init.
struct Card {
  int32_t rank;
  int32_t pid;
  uint64_t host_hash;     // equal for ranks that share memory (same host and netns)
  uint64_t machine_hash;  // equal for ranks on one kernel (network namespaces share its cores)
  uint64_t nonce;      // random: the hash of all nonces names the communicator
  // The family (communicators split from one, at any depth, share what their
  // transports allow): the first communicator's hash and this rank's rank in
  // it; family 0 for a communicator made by init (it starts its own family).
  uint64_t family;
  int32_t family_rank;
  int32_t pad;
  char host[64];
  unsigned char blob[kMaxTransports][kCardBlobBytes];  // each transport's part, in registry order
};

struct SetupContext {
  int rank = -1;
  int nranks = 0;
  bool forced = false;  // WEFT_TRANSPORT names this transport: it carries every pair
  const boot::UniqueId* id = nullptr;
  boot::Bootstrap* boot = nullptr;
  Deadline deadline = Deadline::after_ms(0);
  size_t slot = 0;                          // this transport's blob on the cards
  const std::vector<Card>* cards = nullptr;  // once all-gathered
  uint64_t comm_hash = 0;                    // once all-gathered
  template <typename T>
  const T& blob_of(const Card& c) const {
    static_assert(sizeof(T) <= kCardBlobBytes);
    return *reinterpret_cast<const T*>(c.blob[slot]);
  }
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Before the all-gather: this rank's part of its card (`blob`, kCardBlobBytes,
  // zeroed). A transport that cannot serve this rank says so there; it fails
  // nothing by itself.
  virtual Status describe(const SetupContext& ctx, void* blob) = 0;
  // Whether this transport may carry the pair (the same answer for (a, b) and
  // (b, a)); *why: the reason when not.
  virtual bool can_connect(const SetupContext& ctx, const Card& a, const Card& b, std::string* why) const = 0;
  // Run by every rank when any pair uses this transport, each with its own peers
  // (possibly none), in registry order: create before the first barrier (what
  // peers attach to), connect after it (one link per peer, in peer order).
  virtual Status create(const SetupContext&, const std::vector<int>&) { return Status::Ok(); }
  virtual Status connect(const SetupContext& ctx, const std::vector<int>& peers,
                         std::vector<std::unique_ptr<Link>>* links) = 0;
  // After the second barrier; `used`: this rank has peers here.
  virtual void finish(bool) {}
};

struct Registration {
  const char* name;
  std::unique_ptr<Transport> (*make)();
};
// Every transport, highest priority first.
const std::vector<Registration>& registry();

}  // namespace weft::transport
