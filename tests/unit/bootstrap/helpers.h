// Shared pieces of the bootstrap tests: ranks as threads, a root on loopback.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root_service.h"

namespace weft::boot::test {

// A root on 127.0.0.1 (or another numeric host) with a fresh secret.
inline UniqueId loopback_root(const std::string& host = "127.0.0.1") {
  UniqueId id{};
  Status st = create_root_at(host, 0, random_secret(), &id);
  EXPECT_TRUE(st.ok()) << st.message();
  return id;
}

// Runs fn(rank) on n threads and joins them all.
inline void run_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back(fn, r);
  for (auto& t : ts) t.join();
}

// Stops the root of `id` if it is still running (a test that leaves it failed).
inline void stop_root(const UniqueId& id) {
  if (auto svc = find_root_service(id)) {
    stop_root_service(*svc);
    wait_root_service(*svc, Deadline::after_ms(5000));
  }
}

}  // namespace weft::boot::test
