// Communicators split from one share its bootstrap connection as groups of its
// ranks: operations, aborts and failures of a group concern its members only.
// Ranks are threads over loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/bootstrap/helpers.h"

namespace weft::boot::test {
namespace {

Deadline soon() { return Deadline::after_ms(20000); }

// Rank `rank` of `n` joined to the root of `id`: the family's first bootstrap.
std::unique_ptr<Bootstrap> join(const UniqueId& id, int rank, int n) {
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::connect(id, rank, n, soon(), &b);
  EXPECT_TRUE(st.ok()) << st.message();
  return b;
}

// Runs fn(rank, world) on n ranks (threads) joined to a fresh loopback root.
void with_world(int n, const std::function<void(int, Bootstrap&)>& fn) {
  UniqueId id = loopback_root();
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> world = join(id, rank, n);
    ASSERT_NE(world, nullptr);
    fn(rank, *world);
  });
}

// The group's all-gather of each member's (connection rank, tag) pair.
std::vector<int> gather(Bootstrap& b, int label) {
  std::vector<int> all(static_cast<size_t>(b.nranks()));
  Status st = b.allgather(&label, sizeof label, all.data(), soon());
  EXPECT_TRUE(st.ok()) << st.message();
  return all;
}

TEST(BootstrapGroups, SubgroupsGatherAmongTheirMembersInTheirOrder) {
  const int n = 5;
  UniqueId id = loopback_root();
  std::atomic<int> done{0};
  run_ranks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> world = join(id, rank, n), group, nested;
    ASSERT_NE(world, nullptr);
    // Two groups in a chosen rank order (odd ranks, descending; even ranks), as
    // a split by color with keys gives them.
    std::vector<int> members = rank % 2 ? std::vector<int>{3, 1} : std::vector<int>{0, 2, 4};
    // Tags as a split's: the same sequence number, the color.
    ASSERT_TRUE(world->subgroup(uint64_t{7} << 32 | static_cast<uint64_t>(rank % 2), members, &group).ok());
    ASSERT_EQ(group->nranks(), static_cast<int>(members.size()));
    ASSERT_EQ(members[static_cast<size_t>(group->rank())], rank);
    for (int round = 0; round < 3; ++round) {
      // The groups and the world interleave; each answers in its own order.
      EXPECT_EQ(gather(*group, rank * 10 + round), [&] {
        std::vector<int> want;
        for (int m : members) want.push_back(m * 10 + round);
        return want;
      }());
      std::vector<int> w = gather(*world, rank);
      for (int r = 0; r < n; ++r) EXPECT_EQ(w[static_cast<size_t>(r)], r);
    }
    // A group of the group: numbered through it, on the same connection.
    if (group->nranks() == 3) {
      std::vector<int> sub = {2, 0};  // group ranks: connection ranks 4 and 0
      if (group->rank() != 1) {
        ASSERT_TRUE(group->subgroup(1, sub, &nested).ok());
        EXPECT_EQ(gather(*nested, rank), (std::vector<int>{4, 0}));
        EXPECT_TRUE(nested->barrier(soon()).ok());
      }
    }
    EXPECT_TRUE(group->barrier(soon()).ok());
    EXPECT_TRUE(world->barrier(soon()).ok());
    ++done;
  });
  EXPECT_EQ(done.load(), n);
  EXPECT_EQ(find_root_service(id), nullptr) << "the root outlived its ranks";
}

TEST(BootstrapGroups, AnAbortFailsItsGroupOnly) {
  const int n = 4;
  with_world(n, [&](int rank, Bootstrap& world) {
    std::unique_ptr<Bootstrap> group;
    std::vector<int> members = rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    ASSERT_TRUE(world.subgroup(rank < 2 ? 1 : 2, members, &group).ok());
    gather(*group, rank);
    if (rank == 1) group->abort("testing");
    if (rank == 0) {
      // Rank 0's all-gather on the group fails with rank 1's reason (group numbering).
      int x = 0;
      std::vector<int> all(2);
      Status st = group->allgather(&x, sizeof x, all.data(), soon());
      EXPECT_EQ(st.code(), weftRemoteError) << st.message();
      EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("testing"), std::string::npos) << st.message();
    }
    // The other group and the world go on.
    if (rank >= 2) {
      EXPECT_EQ(gather(*group, rank), (std::vector<int>{2, 3}));
    }
    std::vector<int> w = gather(world, rank);
    for (int r = 0; r < n; ++r) EXPECT_EQ(w[static_cast<size_t>(r)], r);
    EXPECT_TRUE(world.poll().ok()) << world.poll().message();
  });
}

TEST(BootstrapGroups, AMismatchInAGroupFailsItsMembersOnly) {
  const int n = 3;
  with_world(n, [&](int rank, Bootstrap& world) {
    std::unique_ptr<Bootstrap> group;
    if (rank < 2) {
      ASSERT_TRUE(world.subgroup(5, {0, 1}, &group).ok());
      // Rank 0 gathers 4 bytes, rank 1 8: both hear of it, naming both sizes.
      std::vector<char> mine(rank == 0 ? 4 : 8), all(2 * mine.size());
      Status st = group->allgather(mine.data(), mine.size(), all.data(), soon());
      EXPECT_EQ(st.code(), weftInvalidUsage) << st.message();
      EXPECT_NE(st.message().find("4 bytes"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("8 bytes"), std::string::npos) << st.message();
    }
    std::vector<int> w = gather(world, rank);
    for (int r = 0; r < n; ++r) EXPECT_EQ(w[static_cast<size_t>(r)], r);
  });
}

TEST(BootstrapGroups, AGroupTimeoutNamesItsMissingMember) {
  const int n = 3;
  with_world(n, [&](int rank, Bootstrap& world) {
    std::unique_ptr<Bootstrap> group;
    std::vector<int> members = {2, 0};
    if (rank == 1) return;
    ASSERT_TRUE(world.subgroup(3, members, &group).ok());
    if (rank == 2) {
      // Group rank 1 (connection rank 0) never calls.
      Status st = group->barrier(Deadline::after_ms(300));
      EXPECT_EQ(st.code(), weftTimeout) << st.message();
      EXPECT_NE(st.message().find("rank 1 has not called barrier #0"), std::string::npos) << st.message();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // in the group, but silent
    }
  });
}

TEST(BootstrapGroups, AMemberThatLeavesFailsTheOperationItMissesAtOnce) {
  const int n = 2;
  with_world(n, [&](int rank, Bootstrap& world) {
    std::unique_ptr<Bootstrap> group;
    ASSERT_TRUE(world.subgroup(9, {0, 1}, &group).ok());
    gather(*group, rank);
    if (rank == 1) {
      group.reset();  // its communicator is destroyed
    } else {
      auto t0 = std::chrono::steady_clock::now();
      Status st = group->barrier(soon());
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(st.code(), weftRemoteError) << st.message();
      EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("destroyed its communicator"), std::string::npos) << st.message();
      EXPECT_LT(s, 5.0) << "waited for the deadline";
    }
    EXPECT_EQ(gather(world, rank), (std::vector<int>{0, 1}));
  });
}

TEST(BootstrapGroups, AGroupEveryMemberLeftIsForgotten) {
  // The same id names other members once the first group is gone; while it
  // lives, the root refuses that (SubgroupsGatherAmongTheirMembersInTheirOrder).
  const int n = 3;
  with_world(n, [&](int rank, Bootstrap& world) {
    std::unique_ptr<Bootstrap> group;
    if (rank < 2) {
      ASSERT_TRUE(world.subgroup(4, {0, 1}, &group).ok());
      gather(*group, rank);
      group.reset();
    }
    gather(world, rank);  // both have left before anyone goes on
    if (rank != 1) {
      ASSERT_TRUE(world.subgroup(4, {0, 2}, &group).ok());
      EXPECT_EQ(gather(*group, rank), (std::vector<int>{0, 2}));
    }
    gather(world, rank);
  });
}

}  // namespace
}  // namespace weft::boot::test
