// The communicator: lifecycle (init, destroy, abort), argument validation,
// error state and the in-order queue of non-blocking operations. It owns the
// bootstrap, the transports' links and the executor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "exec/executor.h"
#include "reduce/reduce.h"
#include "sched/schedule.h"
#include "transports/link.h"
#include "transports/ibverbs/ib_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#include "tune/tuner.h"
#include "weft/weft.h"

struct weftRequestImpl;

namespace weft {

// One collective call, as posted.
struct CollArgs {
  sched::Coll coll = sched::Coll::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  weftDataType_t dtype = weftFloat32;
  weftRedOp_t op = weftSum;
  int root = 0;

  bool operator==(const CollArgs&) const = default;
};

class Communicator final : public exec::Health {
 public:
  static Status create(const boot::UniqueId& id, int nranks, int rank, const weftConfig_t* config,
                       std::unique_ptr<Communicator>* out);
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // Blocking (returns when recv holds the result).
  Status run(const CollArgs& args);
  // Non-blocking: queued behind earlier posts; *req is owned by the caller
  // until weftWait/weftTest frees it.
  Status post(const CollArgs& args, weftRequestImpl** req);

  // A group's point-to-point operations, run together (after earlier posts).
  Status run_p2p(const std::vector<exec::P2P>& ops);
  Status validate_p2p(bool send, const void* buf, size_t count, weftDataType_t dtype, int peer) const;

  // The algorithm a call of this shape runs now (weftCommGetAlgorithm); *settled
  // false while online tuning is still measuring its size class.
  Status query_algorithm(const CollArgs& args, const char** name, bool* settled);

  // Pre-multiplied sum ops: ids from weftNumOps up, valid for one datatype.
  Status create_premul(const void* scalar, weftDataType_t dtype, weftRedOp_t* op);
  Status destroy_premul(weftRedOp_t op);

  Status validate(const CollArgs& args) const;

  // Unblocks every wait of this communicator; pending operations fail.
  void abort(const std::string& reason);
  // The error that broke the communicator, if any.
  Status async_error();

  Status check() override;  // exec::Health

 private:
  Communicator() = default;
  Status init(const boot::UniqueId& id, const weftConfig_t* config);
  Status connect_transports(const boot::UniqueId& id);
  Status check_consistent(const CollArgs& args);
  Status execute(const CollArgs& args);
  [[gnu::noinline]] Status execute_new_shape(const CollArgs& a);
  Status run_plan(const CollArgs& a, const sched::RankPlan* plan);
  // (coll, count, root, element size): what a plan depends on, with its algorithm.
  using PlanKey = std::tuple<int, uint64_t, int, size_t>;
  static PlanKey plan_key(const CollArgs& a) {
    return {static_cast<int>(a.coll), static_cast<uint64_t>(a.count), a.root, reduce::dtype_size(a.dtype)};
  }
  sched::BuildArgs build_args(const CollArgs& a) const;
  // The plan of the tuner's pick for a call of a new shape; *trial: time this call
  // and record it there (its size class is being measured).
  const sched::RankPlan* find_plan(const CollArgs& args, Status* st, tune::Trial** trial);
  const sched::RankPlan& plan_of(const CollArgs& a, const algo::Algorithm* alg, const sched::BuildArgs& b);
  [[gnu::noinline]] Status measured(const CollArgs& a, tune::Trial* trial, double seconds);
  void fail(const Status& st);
  [[gnu::noinline, gnu::cold]] Status precheck(const CollArgs& a);
  [[gnu::noinline]] const void* premul_input(const CollArgs& a);
  [[gnu::noinline, gnu::cold]] Status call_failed(const CollArgs& a, Status st);
  void explain_remote(Status* st);
  void worker_loop();

  int rank_ = -1;
  int nranks_ = 0;
  int64_t timeout_ms_ = 0;
  bool check_ = false;  // WEFT_CHECK
  int local_size_ = 0;  // ranks per host when hosts are equal and hold consecutive ranks, else 0
  std::string name_;
  std::unique_ptr<boot::Bootstrap> boot_;
  std::unique_ptr<shm::ShmTransport> shm_;
  std::unique_ptr<tcp::TcpTransport> tcp_;  // ranks on other hosts (or all, WEFT_TRANSPORT=tcp)
  std::unique_ptr<ib::IbTransport> ib_;     // ... over ibverbs where every rank has a device
  std::vector<std::unique_ptr<transport::Link>> links_;
  std::unique_ptr<exec::Executor> exec_;
  std::unique_ptr<tune::Tuner> tuner_;  // picks each call's algorithm
  uint64_t seq_ = 0;

  // This rank's plans of the tuner's picks; a size class being measured has several.
  std::map<std::pair<PlanKey, const algo::Algorithm*>, sched::RankPlan> plans_;
  PlanKey last_key_{};
  const sched::RankPlan* last_plan_ = nullptr;  // the plan of last_key_'s settled pick
  // The last blocking call that passed validate() (built-in ops only: a
  // pre-multiplied op can be destroyed between calls); the same call again
  // skips the checks.
  std::optional<CollArgs> last_valid_;

  struct PreMul {
    weftDataType_t dtype;
    unsigned char scalar[8];
  };
  std::map<int, PreMul> premul_;  // guarded by exec_mu_
  int next_premul_ = weftNumOps;
  std::vector<unsigned char> premul_input_;  // the scaled input of a pre-multiplied sum
  void wait_for_queue();

  std::mutex exec_mu_;  // one operation at a time, in posting order
  std::atomic<bool> aborted_{false};
  std::mutex err_mu_;
  Status error_;  // sticky: the communicator is unusable after it is set
  std::atomic<bool> failed_{false};  // error_ is set

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<weftRequestImpl*> queue_;
  std::atomic<int> pending_{0};
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace weft

// A non-blocking operation; shared by the caller and the worker thread.
struct weftRequestImpl {
  weft::CollArgs args;
  weft::Status result;
  std::atomic<bool> done{false};
};
