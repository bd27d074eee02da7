// pair_self: a group's exchanges of a rank with itself become local copies, in
// order, and anything unmatched or mismatched is an error, not a wait.
#include <gtest/gtest.h>

#include <vector>

#include "comm/batches.h"

namespace weft {
namespace {

TEST(PairSelf, MatchesInOrderAndLeavesOtherPeers) {
  char a[8], b[8], c[16], d[16], e[4];
  std::vector<exec::P2P> ops = {{true, 2, a, 8},  {false, 1, e, 4},  {true, 2, c, 16},
                                {false, 2, b, 8}, {true, 0, e, 4},   {false, 2, d, 16}};
  std::vector<exec::LocalCopy> copies;
  ASSERT_TRUE(pair_self("test", 2, &ops, &copies).ok());
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].peer, 1);
  EXPECT_EQ(ops[1].peer, 0);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].dst, b);
  EXPECT_EQ(copies[0].src, a);
  EXPECT_EQ(copies[0].bytes, 8u);
  EXPECT_EQ(copies[1].dst, d);
  EXPECT_EQ(copies[1].src, c);
  EXPECT_EQ(copies[1].bytes, 16u);
}

TEST(PairSelf, UnmatchedSendOrReceiveIsAnError) {
  char a[8], b[8];
  std::vector<exec::LocalCopy> copies;
  std::vector<exec::P2P> only_send = {{true, 0, a, 8}};
  Status st = pair_self("weftGroupEnd", 0, &only_send, &copies);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("send 1 to this rank itself (rank 0) has no matching receive"), std::string::npos)
      << st.message();
  std::vector<exec::P2P> two_recvs = {{true, 0, a, 8}, {false, 0, b, 8}, {false, 0, b, 8}};
  st = pair_self("weftGroupEnd", 0, &two_recvs, &copies);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("receive 2 to this rank itself (rank 0) has no matching send"), std::string::npos)
      << st.message();
}

TEST(PairSelf, SizeMismatchAndOverlapAreErrors) {
  char buf[32];
  std::vector<exec::LocalCopy> copies;
  std::vector<exec::P2P> sizes = {{true, 1, buf, 8}, {false, 1, buf + 16, 12}};
  EXPECT_EQ(pair_self("t", 1, &sizes, &copies).code(), weftInvalidUsage);
  std::vector<exec::P2P> overlap = {{true, 1, buf, 16}, {false, 1, buf + 8, 16}};
  EXPECT_EQ(pair_self("t", 1, &overlap, &copies).code(), weftInvalidArgument);
  // The same buffer both ways (in place) needs no copy; an empty message neither.
  std::vector<exec::P2P> same = {{true, 1, buf, 16}, {false, 1, buf, 16}, {true, 1, nullptr, 0},
                                 {false, 1, nullptr, 0}};
  copies.clear();
  EXPECT_TRUE(pair_self("t", 1, &same, &copies).ok());
  EXPECT_TRUE(copies.empty());
  EXPECT_TRUE(same.empty());
}

}  // namespace
}  // namespace weft
