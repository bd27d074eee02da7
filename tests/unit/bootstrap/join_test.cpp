// Joining, all-gather and barrier with ranks as threads over loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "tests/unit/bootstrap/helpers.h"

namespace weft::boot::test {
namespace {

class JoinTest : public ::testing::TestWithParam<int> {};

TEST_P(JoinTest, AllgatherInRankOrder) {
  const int n = GetParam();
  UniqueId id = loopback_root();
  std::atomic<int> ok{0};
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, n, Deadline::after_ms(20000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(b->rank(), rank);
    EXPECT_EQ(b->nranks(), n);
    // Several rounds with different sizes, so sequence numbers advance.
    for (size_t size : {size_t{8}, size_t{1}, size_t{1000}, size_t{70000}}) {
      std::vector<uint8_t> mine(size), all(size * n);
      for (size_t i = 0; i < size; ++i) mine[i] = static_cast<uint8_t>(rank * 31 + i);
      st = b->allgather(mine.data(), size, all.data(), Deadline::after_ms(20000));
      ASSERT_TRUE(st.ok()) << st.message();
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < size; i += 97)
          ASSERT_EQ(all[r * size + i], static_cast<uint8_t>(r * 31 + i)) << "rank " << r << " byte " << i;
    }
    st = b->barrier(Deadline::after_ms(20000));
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(b->poll().ok()) << b->poll().message();
    ++ok;
  });
  EXPECT_EQ(ok.load(), n);
  // Every rank said goodbye; the service has finished and left the registry.
  EXPECT_EQ(find_root_service(id), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Sizes, JoinTest, ::testing::Range(1, 9));

TEST(Bootstrap, BarrierWaitsForTheLastRank) {
  const int n = 4;
  UniqueId id = loopback_root();
  std::atomic<int> arrived{0};
  std::atomic<bool> early_exit{false};
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, n, Deadline::after_ms(20000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    for (int round = 0; round < 5; ++round) {
      if (rank == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      arrived++;
      st = b->barrier(Deadline::after_ms(20000));
      ASSERT_TRUE(st.ok()) << st.message();
      // Nobody leaves round k before everyone has entered it.
      if (arrived.load() < n * (round + 1)) early_exit = true;
    }
  });
  EXPECT_FALSE(early_exit.load());
}

TEST(Bootstrap, RankStartingLateIsWaitedFor) {
  // The root's address exists before anyone listens on it? No: the root listens
  // at once. Here a rank connects 300 ms late and the others wait for it.
  const int n = 3;
  UniqueId id = loopback_root();
  run_ranks(n, [&](int rank) {
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(id, rank, n, Deadline::after_ms(20000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    int v = rank, all[3];
    ASSERT_TRUE(b->allgather(&v, sizeof v, all, Deadline::after_ms(20000)).ok());
    EXPECT_EQ(all[2], 2);
  });
}

TEST(Bootstrap, ConnectRetriesUntilTheRootListens) {
  // Reserve a port, close it, connect in the background, then start the root there.
  UniqueId probe = loopback_root();
  uint16_t port = probe.port;
  {
    std::unique_ptr<Bootstrap> b;
    ASSERT_TRUE(Bootstrap::connect(probe, 0, 1, Deadline::after_ms(5000), &b).ok());
  }  // service finishes, port free again
  Secret secret = random_secret();
  UniqueId id{};
  std::strcpy(id.host, "127.0.0.1");
  id.port = port;
  id.secret = secret;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    UniqueId got;
    Status st = create_root_at("127.0.0.1", port, secret, &got);
    EXPECT_TRUE(st.ok()) << st.message();
  });
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::connect(id, 0, 1, Deadline::after_ms(10000), &b);
  late.join();
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(Bootstrap, Ipv6Loopback) {
  UniqueId id{};
  Status st = create_root_at("::1", 0, random_secret(), &id);
  if (!st.ok()) GTEST_SKIP() << "no IPv6 loopback: " << st.message();
  EXPECT_STREQ(id.host, "::1");
  const int n = 3;
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Status s = Bootstrap::connect(id, rank, n, Deadline::after_ms(20000), &b);
    ASSERT_TRUE(s.ok()) << s.message();
    int v = 100 + rank, all[3] = {0, 0, 0};
    s = b->allgather(&v, sizeof v, all, Deadline::after_ms(20000));
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(all[0], 100);
    EXPECT_EQ(all[1], 101);
    EXPECT_EQ(all[2], 102);
  });
}

TEST(Bootstrap, CreateRootPicksAnInterface) {
  UniqueId id{};
  Status st = create_root(&id);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NE(id.port, 0);
  EXPECT_NE(id.host[0], '\0');
  std::unique_ptr<Bootstrap> b;
  st = Bootstrap::connect(id, 0, 1, Deadline::after_ms(10000), &b);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(Bootstrap, HostIdentityIsStable) {
  std::string a = host_identity(), b = host_identity();
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("net:["), std::string::npos) << a;
}

}  // namespace
}  // namespace weft::boot::test
