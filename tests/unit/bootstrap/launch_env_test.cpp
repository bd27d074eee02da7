// Launcher environment parsing: each launcher's variables, precedence, and the
// errors for missing pieces. Every test restores the variables it touched.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "tests/unit/bootstrap/helpers.h"

namespace weft::boot::test {
namespace {

// All variables read_launch_env looks at; a fixture clears them and puts the
// original values back afterwards.
const char* const kVars[] = {
    "WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", "WEFT_COMM_ID", "WEFT_JOB_SECRET",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_MCA_ess_base_jobid", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID",
    "SLURM_STEP_ID", "WEFT_RENDEZVOUS_FILE"};

class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      const char* cur = std::getenv(v);
      saved_[v] = cur ? std::optional<std::string>(cur) : std::nullopt;
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (auto& [k, v] : saved_) {
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
    }
  }
  void set(const char* k, const char* v) { setenv(k, v, 1); }

  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(LaunchEnvTest, WeftRun) {
  Secret s = random_secret();
  set("WEFT_RANK", "3");
  set("WEFT_NRANKS", "8");
  set("WEFT_LOCAL_RANK", "1");
  set("WEFT_COMM_ID", "10.1.2.3:29500");
  set("WEFT_JOB_SECRET", secret_hex(s).c_str());
  LaunchEnv env;
  Status st = read_launch_env(&env);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(env.source, "weft-run");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.nranks, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.root_address, "10.1.2.3:29500");
  EXPECT_EQ(std::memcmp(env.secret.bytes, s.bytes, 16), 0);
}

TEST_F(LaunchEnvTest, WeftRunBadSecret) {
  set("WEFT_RANK", "0");
  set("WEFT_NRANKS", "2");
  set("WEFT_COMM_ID", "127.0.0.1:1234");
  set("WEFT_JOB_SECRET", "xyz");
  LaunchEnv env;
  Status st = read_launch_env(&env);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("WEFT_JOB_SECRET"), std::string::npos) << st.message();
}

TEST_F(LaunchEnvTest, TorchrunWithDerivedSecret) {
  set("RANK", "1");
  set("WORLD_SIZE", "4");
  set("LOCAL_RANK", "1");
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", "29500");
  set("TORCHELASTIC_RUN_ID", "job-a");
  LaunchEnv a;
  ASSERT_TRUE(read_launch_env(&a).ok());
  EXPECT_EQ(a.source, "torchrun");
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.nranks, 4);
  EXPECT_EQ(a.local_rank, 1);
  EXPECT_EQ(a.root_address, "127.0.0.1:29500");
  // Another rank of the same job derives the same secret...
  set("RANK", "2");
  LaunchEnv b;
  ASSERT_TRUE(read_launch_env(&b).ok());
  EXPECT_EQ(secret_hex(a.secret), secret_hex(b.secret));
  // ...another job does not.
  set("TORCHELASTIC_RUN_ID", "job-b");
  LaunchEnv c;
  ASSERT_TRUE(read_launch_env(&c).ok());
  EXPECT_NE(secret_hex(a.secret), secret_hex(c.secret));
}

TEST_F(LaunchEnvTest, WeftCommIdWinsOverMasterAddr) {
  set("RANK", "0");
  set("WORLD_SIZE", "2");
  set("MASTER_ADDR", "10.0.0.1");
  set("MASTER_PORT", "29500");
  set("WEFT_COMM_ID", "[::1]:4000");
  LaunchEnv env;
  ASSERT_TRUE(read_launch_env(&env).ok());
  EXPECT_EQ(env.root_address, "[::1]:4000");
}

TEST_F(LaunchEnvTest, Ipv6MasterAddrIsBracketed) {
  set("RANK", "0");
  set("WORLD_SIZE", "2");
  set("MASTER_ADDR", "::1");
  set("MASTER_PORT", "29500");
  LaunchEnv env;
  ASSERT_TRUE(read_launch_env(&env).ok());
  EXPECT_EQ(env.root_address, "[::1]:29500");
}

TEST_F(LaunchEnvTest, OpenMpi) {
  set("OMPI_COMM_WORLD_RANK", "5");
  set("OMPI_COMM_WORLD_SIZE", "6");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "2");
  set("OMPI_MCA_ess_base_jobid", "12345");
  set("WEFT_COMM_ID", "node1:7000");
  LaunchEnv env;
  Status st = read_launch_env(&env);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(env.source, "openmpi");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.nranks, 6);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.root_address, "node1:7000");
}

TEST_F(LaunchEnvTest, OpenMpiWithoutAddressNamesWhatIsMissing) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "2");
  LaunchEnv env;
  Status st = read_launch_env(&env);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("openmpi"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("WEFT_COMM_ID"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("MASTER_ADDR"), std::string::npos) << st.message();
}

TEST_F(LaunchEnvTest, Slurm) {
  set("SLURM_PROCID", "7");
  set("SLURM_NTASKS", "16");
  set("SLURM_LOCALID", "3");
  set("SLURM_JOB_ID", "999");
  set("SLURM_STEP_ID", "0");
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", "6000");
  LaunchEnv a;
  ASSERT_TRUE(read_launch_env(&a).ok());
  EXPECT_EQ(a.source, "slurm");
  EXPECT_EQ(a.rank, 7);
  EXPECT_EQ(a.nranks, 16);
  EXPECT_EQ(a.local_rank, 3);
  set("SLURM_STEP_ID", "1");  // the next job step is another job
  LaunchEnv b;
  ASSERT_TRUE(read_launch_env(&b).ok());
  EXPECT_NE(secret_hex(a.secret), secret_hex(b.secret));
}

TEST_F(LaunchEnvTest, SlurmMissingTasks) {
  set("SLURM_PROCID", "0");
  set("WEFT_COMM_ID", "127.0.0.1:6000");
  LaunchEnv env;
  Status st = read_launch_env(&env);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("SLURM_NTASKS"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("slurm"), std::string::npos) << st.message();
}

TEST_F(LaunchEnvTest, NoLauncher) {
  LaunchEnv env;
  Status st = read_launch_env(&env);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("no launcher"), std::string::npos) << st.message();
}

TEST_F(LaunchEnvTest, MalformedValues) {
  set("WEFT_RANK", "two");
  set("WEFT_NRANKS", "4");
  set("WEFT_COMM_ID", "no-port-here");
  LaunchEnv env;
  Status st = read_launch_env(&env);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("WEFT_RANK"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("WEFT_COMM_ID"), std::string::npos) << st.message();
}

TEST_F(LaunchEnvTest, RankNotBelowSize) {
  set("WEFT_RANK", "4");
  set("WEFT_NRANKS", "4");
  set("WEFT_COMM_ID", "127.0.0.1:1");
  LaunchEnv env;
  EXPECT_EQ(read_launch_env(&env).code(), weftInvalidUsage);
}

// End to end: rank 0 starts the root on the given port from the environment,
// the others connect to it.
TEST_F(LaunchEnvTest, UniqueIdFromEnvJoins) {
  // Find a free port by letting the kernel pick one, then give it back.
  UniqueId probe = loopback_root();
  uint16_t port = probe.port;
  stop_root(probe);
  std::string comm_id = "localhost:" + std::to_string(port);
  set("WEFT_NRANKS", "3");
  set("WEFT_COMM_ID", comm_id.c_str());
  set("WEFT_JOB_SECRET", secret_hex(random_secret()).c_str());
  LaunchEnv envs[3];
  for (int r = 0; r < 3; ++r) {
    set("WEFT_RANK", std::to_string(r).c_str());
    ASSERT_TRUE(read_launch_env(&envs[r]).ok());
  }
  UniqueId ids[3];
  for (int r = 0; r < 3; ++r) {
    Status st = unique_id_from_env(envs[r], Deadline::after_ms(10000), &ids[r]);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(ids[r].port, port);
  }
  run_ranks(3, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Status st = Bootstrap::connect(ids[rank], rank, 3, Deadline::after_ms(10000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(b->barrier(Deadline::after_ms(10000)).ok());
  });
}

// WEFT_RENDEZVOUS_FILE: rank 0 starts a root and publishes it; ranks 1 and 2
// wait for the file (they may look before it exists) and join.
TEST_F(LaunchEnvTest, RendezvousFileJoins) {
  std::string path = "/tmp/weft-rdv-test-" + std::to_string(getpid());
  unlink(path.c_str());
  set("OMPI_COMM_WORLD_SIZE", "3");
  set("OMPI_MCA_ess_base_jobid", "4242");
  set("WEFT_RENDEZVOUS_FILE", path.c_str());
  LaunchEnv envs[3];
  for (int r = 0; r < 3; ++r) {
    set("OMPI_COMM_WORLD_RANK", std::to_string(r).c_str());
    Status st = read_launch_env(&envs[r]);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(envs[r].root_address.empty());
    EXPECT_EQ(envs[r].rendezvous_file, path);
  }
  UniqueId ids[3];
  run_ranks(3, [&](int rank) {
    // Rank 0 comes last, so the others do wait for the file.
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Status st = unique_id_from_env(envs[rank], Deadline::after_ms(10000), &ids[rank]);
    ASSERT_TRUE(st.ok()) << st.message();
    std::unique_ptr<Bootstrap> b;
    st = Bootstrap::connect(ids[rank], rank, 3, Deadline::after_ms(10000), &b);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(b->barrier(Deadline::after_ms(10000)).ok());
  });
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(ids[r].port, ids[0].port);
    EXPECT_STREQ(ids[r].host, ids[0].host);
    EXPECT_EQ(secret_hex(ids[r].secret), secret_hex(ids[0].secret));
  }
  struct stat sb{};
  ASSERT_EQ(stat(path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u) << "the file carries the job secret";
  unlink(path.c_str());
}

// A file another job left behind is not used: the rank waits, then times out
// naming itself, the path and the mismatch. A file that is not ours is an error.
TEST_F(LaunchEnvTest, RendezvousFileOfAnotherJobIsIgnored) {
  std::string path = "/tmp/weft-rdv-stale-" + std::to_string(getpid());
  std::ofstream(path) << "weft-rendezvous 1\njob openmpi|OMPI_MCA_ess_base_jobid=1\naddress 127.0.0.1:9\nsecret "
                      << secret_hex(random_secret()) << "\n";
  UniqueId id{};
  Status st = await_rendezvous(path, "openmpi|OMPI_MCA_ess_base_jobid=2", 1, Deadline::after_ms(200), &id);
  EXPECT_EQ(st.code(), weftTimeout);
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not this job"), std::string::npos) << st.message();

  std::ofstream(path) << "something else\n";
  st = await_rendezvous(path, "x", 2, Deadline::after_ms(200), &id);
  EXPECT_EQ(st.code(), weftInvalidUsage);
  EXPECT_NE(st.message().find("not a weft rendezvous file"), std::string::npos) << st.message();
  unlink(path.c_str());

  st = await_rendezvous(path, "x", 3, Deadline::after_ms(100), &id);
  EXPECT_EQ(st.code(), weftTimeout);
  EXPECT_NE(st.message().find("does not exist"), std::string::npos) << st.message();
}

// An address in the environment wins over the file.
TEST_F(LaunchEnvTest, CommIdWinsOverRendezvousFile) {
  set("WEFT_RANK", "1");
  set("WEFT_NRANKS", "2");
  set("WEFT_COMM_ID", "10.0.0.1:29500");
  set("WEFT_RENDEZVOUS_FILE", "/nonexistent/rdv");
  LaunchEnv env;
  ASSERT_TRUE(read_launch_env(&env).ok());
  EXPECT_EQ(env.root_address, "10.0.0.1:29500");
  EXPECT_TRUE(env.rendezvous_file.empty());
}

}  // namespace
}  // namespace weft::boot::test
