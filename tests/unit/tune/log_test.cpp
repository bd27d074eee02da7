// WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=TUNE: every candidate's prediction and the pick,
// once per (collective, power-of-two size class). Its own binary: the log reads
// its environment once, on first use, so it is set here before anything logs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tune/tuner.h"

namespace weft::tune {
namespace {

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(TuneLog, OncePerCollectiveAndSizeClass) {
  setenv("WEFT_DEBUG", "INFO", 1);
  setenv("WEFT_DEBUG_SUBSYS", "TUNE", 1);
  testing::internal::CaptureStderr();
  Options o;  // log_table: the constants at INFO too
  std::unique_ptr<Tuner> t;
  ASSERT_TRUE(Tuner::create(4, 4, o, &t).ok());
  const algo::Algorithm* a = nullptr;
  // 1024..2047 bytes are one size class; 2048 the next; broadcast is separate.
  for (uint64_t count : {256u, 300u, 511u, 256u, 512u}) {
    sched::BuildArgs b{sched::Coll::AllReduce, 4, count, 0, 262144};
    ASSERT_TRUE(t->choose(sched::Coll::AllReduce, b, 4, &a).ok());
  }
  sched::BuildArgs bc{sched::Coll::Broadcast, 4, 256, 0, 262144};
  ASSERT_TRUE(t->choose(sched::Coll::Broadcast, bc, 4, &a).ok());
  std::string err = testing::internal::GetCapturedStderr();

  EXPECT_EQ(count_of(err, "TUNE allreduce 1024 B (size class 11"), 1) << err;
  EXPECT_EQ(count_of(err, "TUNE allreduce 1200 B"), 0) << err;
  EXPECT_EQ(count_of(err, "TUNE allreduce 2048 B (size class 12"), 1) << err;
  EXPECT_EQ(count_of(err, "TUNE broadcast 1024 B"), 1) << err;
  // Every all-reduce candidate is named with a time, then the pick.
  size_t line = err.find("TUNE allreduce 1024 B");
  std::string l = err.substr(line, err.find('\n', line) - line);
  for (const char* name : {"ring ", "tree ", "butterfly ", "recdoubling ", "rabenseifner ", "direct ",
                           "naive ", "oneshot "})
    EXPECT_NE(l.find(name), std::string::npos) << name << " missing: " << l;
  EXPECT_NE(l.find(" us"), std::string::npos) << l;
  EXPECT_NE(l.find("-> "), std::string::npos) << l;
  // The constants table, printed at create.
  EXPECT_NE(err.find("link class shm"), std::string::npos) << err;
  EXPECT_NE(err.find("shm * * 0 0"), std::string::npos) << err;
}

}  // namespace
}  // namespace weft::tune
