// What the communicators of a family (one made by init and every communicator
// split from it) share in this process: shm channels, TCP connections. A
// transport enrolls what it created under the family and a key of its own; a
// split communicator finds it there while any communicator still holds it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transports/transport.h"

namespace weft::transport {

// The family every rank of the communicator belongs to, or 0 when the cards
// disagree or the communicator starts its own (made by init).
inline uint64_t shared_family(const std::vector<Card>& cards) {
  const uint64_t family = cards.empty() ? 0 : cards[0].family;
  for (const Card& c : cards)
    if (c.family != family) return 0;
  return family;
}

template <typename Key, typename T>
class FamilyRegistry {
 public:
  void enroll(const Key& k, const std::shared_ptr<T>& t) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(map_, [](const auto& e) { return e.second.expired(); });
    map_[k] = t;
  }
  std::shared_ptr<T> find(const Key& k) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(k);
    return it == map_.end() ? nullptr : it->second.lock();
  }

 private:
  std::mutex mu_;
  std::map<Key, std::weak_ptr<T>> map_;
};

}  // namespace weft::transport
