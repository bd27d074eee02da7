// The communicator: lifecycle (init, destroy, abort), argument validation,
// error state, and its queue on the progress engine (every non-blocking
// operation is posted there; a blocking call runs inline when nothing is
// queued, else is posted and waited for). It owns the bootstrap, the
// transports' links and the executor.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "comm/device_staging.h"
#include "engine/engine.h"
#include "exec/executor.h"
#include "reduce/reduce.h"
#include "sched/schedule.h"
#include "transports/cuda_p2p/p2p_group.h"
#include "transports/cuda_p2p/p2p_pairs.h"
#include "transports/link.h"
#include "transports/transport.h"
#include "tune/device_cost.h"
#include "tune/tuner.h"
#include "weft/weft.h"

struct weftRequestImpl;
// A registered memory window (weftCommWindowRegister).
struct weftWindow {
  void* buff;
  size_t size;
  int flags;
};

namespace weft {

class StagingLayout;

// weftInvalidArgument, naming the call (what) and the buffer (which), unless p
// is device memory for a call on a stream (on_stream), host memory otherwise.
Status check_memory(const char* what, const char* which, const void* p, bool on_stream = false);

// One collective call, as posted.
struct CollArgs {
  sched::Coll coll = sched::Coll::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  weftDataType_t dtype = weftFloat32;
  weftRedOp_t op = weftSum;
  int root = 0;
  // A staged call of a pre-multiplied sum whose scalar is in device memory: where
  // the stream copied the scalar (pinned memory). nullptr: the op's own.
  const void* scalar = nullptr;

  bool operator==(const CollArgs&) const = default;
};

// Communicators split from one (at any depth) form its family and share what
// their transports allow (shm: the channels between two ranks). A communicator
// made by init starts a family: {0, -1} until its init names it.
struct Lineage {
  uint64_t family = 0;  // the first communicator's hash
  int family_rank = -1;  // this rank's rank in it
};

class Communicator final : public exec::Health {
 public:
  static Status create(const boot::UniqueId& id, int nranks, int rank, const weftConfig_t* config,
                       std::unique_ptr<Communicator>* out, Lineage lineage = {},
                       std::unique_ptr<boot::Bootstrap> boot = nullptr);
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // Blocking (returns when recv holds the result).
  Status run(const CollArgs& args);
  // Non-blocking: posted behind earlier operations; *req is owned by the caller
  // until weftWait/weftTest frees it.
  Status post(const CollArgs& args, weftRequestImpl** req);
  // On device memory: enqueued on the CUDA stream (device_staging.h); returns
  // without waiting for the GPU. Errors of the call itself come later, from
  // weftCommGetAsyncError and the next call.
  Status enqueue(const CollArgs& args, void* stream);
  // Point-to-point operations (a group, a gather, ...) on device memory,
  // likewise: over cuda_p2p with the peers whose pair connected so (at its
  // first call, with the peer's matching one), staged with the others.
  Status enqueue_p2p(const std::vector<exec::P2P>& ops, const std::vector<exec::LocalCopy>& copies, void* stream);
  // The CUDA device current on the thread that created this communicator (-1: none).
  int cu_device() const { return cu_device_; }

  // A group's point-to-point operations and local copies, run together (after
  // earlier posts).
  Status run_p2p(const std::vector<exec::P2P>& ops, const std::vector<exec::LocalCopy>& copies);
  // Non-blocking form: runs beside neighbouring point-to-point posts.
  Status post_p2p(std::vector<exec::P2P> ops, std::vector<exec::LocalCopy> copies, weftRequestImpl** req);
  // Waits for a posted operation, driving the engine meanwhile; frees req.
  static Status wait(weftRequestImpl* req);
  // peer: a rank, or exec::kAnySource for a receive.
  Status validate_p2p(bool send, const void* buf, size_t count, weftDataType_t dtype, int peer,
                      bool on_stream = false) const;

  // weftCommSplit's exchange over this communicator's bootstrap: the new
  // communicator's size, this rank's place in it, its family, and its group on
  // the family's bootstrap connection (*nranks 0 for WEFT_SPLIT_NOCOLOR).
  Status split(int color, int key, boot::UniqueId* id, int* nranks, int* rank, Lineage* lineage,
               std::unique_ptr<boot::Bootstrap>* boot);

  // weftCommShrink's plan: the new communicator's size, this rank's place in it
  // (the survivors keep their order) and the unique id of its root, which runs in
  // the lowest survivor's process (started here when that is this rank). Does not
  // wait for this communicator's queue: it may be stuck or broken.
  Status shrink(const int* exclude, int nexclude, boot::UniqueId* id, int* nranks, int* rank);

  // weftCommGetFailedRanks: the ranks the bootstrap says are gone. Any thread.
  std::vector<int> failed_ranks() { return boot_->lost_ranks(); }

  // Online tuning's settled picks (tune::Tuner::settled_state), after queued work.
  Status tuning_state(std::string* out);

  // The algorithm a call of this shape runs now (weftCommGetAlgorithm); *settled
  // false while online tuning is still measuring its size class.
  Status query_algorithm(const CollArgs& args, const char** name, bool* settled);
  // weftCommExplainAlgorithm: query_algorithm() with the tuner's explanation.
  Status explain_algorithm(const CollArgs& a, weftAlgoExplanation_t* out);
  // weftGroupSimulateEnd's seconds for one collective: what the algorithm it would
  // run now takes, measured by online tuning once its class has settled, else
  // predicted; an error where neither exists.
  Status estimate(const CollArgs& a, double* seconds);
  // ...and for a group's point-to-point operations: they progress together, so the
  // busiest peer's link (alpha + beta x the bytes both ways, the link class's
  // generic constants: shm on this host, net off it). On device memory
  // (`device`): over cuda_p2p the device link class's; staged, the host link's
  // plus the copies through pinned memory (stg).
  Status estimate_p2p(const std::vector<exec::P2P>& ops, bool device, double* seconds) const;
  // ...and for a collective on device memory, once the first device collective
  // has chosen the path: over cuda_p2p tune/device_cost.h's formula for what it
  // would run (windows, one- or two-shot); across hosts by levels, that plan's
  // price (device_cost.h); staged, the host call's estimate plus the copies
  // through pinned memory.
  Status estimate_device(const CollArgs& dev, double* seconds);

  // weftCommWindowRegister / Deregister: after the queued work, every rank's
  // arguments compared through the bootstrap.
  Status register_window(void* buff, size_t size, int flags, weftWindow** out);
  Status deregister_window(weftWindow* win);

  // Pre-multiplied sum ops: ids from weftNumOps up, valid for one datatype.
  Status create_premul(const void* scalar, weftDataType_t dtype, weftScalarResidence_t residence, weftRedOp_t* op);
  Status destroy_premul(weftRedOp_t op);

  // on_stream: the buffers must be device memory (a call with a stream), else host memory.
  Status validate(const CollArgs& args, bool on_stream = false) const;

  // Unblocks every wait of this communicator; pending operations fail. Any
  // thread, also while a call of this communicator is blocked.
  void abort(const std::string& reason);
  // weftCommRevoke: pending operations here fail at once and the other ranks'
  // through the bootstrap, as with abort, but the communicator stays: its
  // bootstrap group still serves weftCommSplit (whose communicator then shares
  // no channel or connection with this one) and weftCommShrink. Later calls fail
  // with weftInvalidUsage. Any thread.
  void revoke();
  // Revoked here or by another rank's notice (read by check()).
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // Nothing queued or running (weftCommGetAsyncError of a revoked communicator).
  bool quiescent();
  // The error that broke the communicator, if any.
  Status async_error();
  // async_error(), after reading what the bootstrap has from the other ranks (a
  // peer's abort, a lost rank): weftCommGetAsyncError, so that a communicator
  // whose work is all on streams, which no host wait polls, still learns of them.
  Status poll_async_error();

  Status check() override;  // exec::Health
  void waiting(const exec::WaitInfo& where) override;

  // weftCommDump: every rank's status, printed as one table by the lowest rank
  // that answers; returns the diagnosis line. Any thread.
  std::string dump();

 private:
  friend class CollOp;
  friend class P2POp;
  friend class StreamGate;
  Communicator() = default;
  Status init(const boot::UniqueId& id, const weftConfig_t* config);
  // Broadcast reads sendbuff only at the root; reduce writes recvbuff only there.
  bool uses_send(const CollArgs& a) const { return !(a.coll == sched::Coll::Broadcast && rank_ != a.root); }
  bool uses_recv(const CollArgs& a) const { return !(a.coll == sched::Coll::Reduce && rank_ != a.root); }
  // The parts of enqueue and enqueue_p2p (device_calls.cpp): a stream step that
  // fails fails the communicator; a slot's copies in, staged flag and gated
  // operation; its wait, copies back and free flag; both for one slot; a large
  // collective in chunks through two slots (chunk i's ranges: layout_of(i); its
  // operation on the slot's data at `base`: op_of(i, layout, base); where given,
  // (*before)(i) enqueues stream work ahead of chunk i's copies in and (*after)(i)
  // after its copies back).
  Status stream_step(int rc, DeviceStaging::Slot* slot, const char* what, void* stream, const char* doing);
  template <class Op>
  Status stage_in(const exec::cuda::Api& d, const char* what, void* stream, const StagingLayout& layout,
                  DeviceStaging::Slot* slot, uint32_t gen, std::unique_ptr<Op> op);
  Status stage_out(const exec::cuda::Api& d, const char* what, void* stream, const StagingLayout& layout,
                   DeviceStaging::Slot* slot, uint32_t gen);
  template <class MakeOp>
  Status stage_on_stream(const char* what, void* stream, StagingLayout& layout, MakeOp make_op);
  using ChunkHook = std::function<Status(size_t)>;
  template <class LayoutOf, class OpOf>
  Status enqueue_chunked(const char* what, void* stream, size_t nchunks, LayoutOf layout_of, OpOf op_of,
                         const ChunkHook* before = nullptr, const ChunkHook* after = nullptr);
  // The part across hosts of a levels all-reduce in overlapped rounds: round i's
  // in-place all-reduce of at(i) = (device pointer, count) on this communicator,
  // staged in chunks as above with the hooks of the levels within hosts.
  Status enqueue_allreduce_rounds(void* stream, weftDataType_t dtype, weftRedOp_t op, size_t rounds,
                                  const std::function<std::pair<void*, size_t>(size_t)>& at, const ChunkHook& before,
                                  const ChunkHook& after);
  // At the first collective on device memory (collective): whether the ranks'
  // GPUs can map each other's memory (cuda_p2p) or calls are staged.
  Status choose_device_path(const exec::cuda::Api& d);
  Status try_device_group(const exec::cuda::Api& d, const transport::cuda_p2p::Group::Options& o,
                          std::string* why_not);
  // Whether a cuda_p2p all-reduce goes one-shot: WEFT_P2P_ONESHOT_BYTES, or the
  // cheaper by tune/device_cost.h with p2p_link_'s constants (shown by
  // WEFT_EXPLAIN), unless the call's place in symmetric windows decides.
  bool p2p_oneshot(const CollArgs& dev, transport::cuda_p2p::WindowUse use);
  // Where the ranks span hosts of equal size: the two communicators of a
  // hierarchical device all-reduce (below), kept where every host's ranks agreed
  // on cuda_p2p among themselves.
  Status split_device_levels(const exec::cuda::Api& d);
  // A device collective across hosts (comm/device_levels.cpp): cuda_p2p within
  // each host, staged across hosts among the ranks of one local rank, all on the
  // stream; a failure fails the communicator.
  // An all-reduce goes in `rounds` overlapped rounds where rounds >= 2.
  Status enqueue_across_hosts(const CollArgs& dev, void* stream, int rounds);
  Status all_reduce_in_rounds(const CollArgs& dev, void* stream, int rounds);
  // Whether the levels can run this call (device_levels_ set) ...
  bool levels_serve(const CollArgs& dev) const;
  // ... and whether they do: WEFT_DEVICE_LEVELS as rank 0 set it, or the cheaper
  // plan by tune/device_cost.h (every rank prices alike), cached per call shape;
  // WEFT_EXPLAIN shows both plans once per (collective, size class). *rounds:
  // an all-reduce's overlapped rounds (1: none), WEFT_DEVICE_LEVEL_ROUNDS as rank
  // 0 set it or the model's choice.
  Status device_plan(const CollArgs& dev, bool* levels, int* rounds, tune::DevicePlanCost* cost = nullptr);
  // The host tuner model's best predicted time for `a` on this communicator.
  Status host_prediction(const CollArgs& a, double* seconds, std::string* algo);
  // The copies of a staged call `a` through pinned memory (tune::staging_copies_cost).
  double staging_copies(const CollArgs& a) const;
  // A call on device memory through pinned host memory.
  Status enqueue_staged(const CollArgs& dev, void* stream);
  Status enqueue_staged_p2p(const std::vector<exec::P2P>& ops, const std::vector<exec::LocalCopy>& copies,
                            void* stream);
  // The cuda_p2p pairs of device point-to-point calls, made at the first.
  transport::cuda_p2p::Pairs& device_pairs(const exec::cuda::Api& d);
  Status connect_transports(const boot::UniqueId& id);
  Status check_consistent(const CollArgs& args);
  Status execute(const CollArgs& args);
  [[gnu::noinline]] Status execute_new_shape(const CollArgs& a);
  Status run_plan(const CollArgs& a, const sched::RankPlan* plan, const char* algo);
  // run_plan under WEFT_TRACE, out of line so that the untraced call stays as it was.
  [[gnu::noinline]] Status run_plan_traced(const CollArgs& a, const sched::RankPlan* plan, const char* algo);
  template <bool kTraced>
  Status run_call(const CollArgs& a, const sched::RankPlan* plan);
  // WEFT_TRACE: the call's span, from began_us to now.
  void trace_call(const CollArgs& a, uint64_t seq, const char* algo, double began_us, const Status& st) const;
  // WEFT_TRACE: a point-to-point group's span.
  void trace_p2p(const std::vector<exec::P2P>& ops, double began_us, const Status& st) const;
  // After the data moved: avg's division.
  void finish_call(const CollArgs& a);
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
  // Records a measured call of a trial; at the end of a round, the agreement on
  // the times that must run next on this communicator (nullptr otherwise).
  [[gnu::noinline]] std::unique_ptr<engine::Op> measured(const CollArgs& a, tune::Trial* trial, double seconds);
  // A posted collective's start: checks, plan, sequence number; *trial as find_plan;
  // *algo the plan's algorithm (for traces).
  Status begin(const CollArgs& a, const algo::Algorithm* forced, std::optional<exec::Call>* call,
               tune::Trial** trial, const char** algo);
  // A blocking call runs inline while nothing is queued; else posted and waited for.
  bool lock_idle();
  void fail(const Status& st);
  [[gnu::noinline, gnu::cold]] Status precheck(const CollArgs& a);
  [[gnu::noinline]] const void* premul_input(const CollArgs& a);
  [[gnu::noinline, gnu::cold]] Status call_failed(const CollArgs& a, Status st);
  // A failed call's error completed: a peer's failure with the bootstrap's first
  // notice (often a third rank that died); a timeout with the diagnosis of the
  // whole communicator (who holds it up).
  void explain_failure(Status* st);
  // This rank's status row for the diagnosis. in_call: the caller is the thread
  // running this communicator's call (it holds the drive lock).
  boot::StatusRow status_row(bool in_call, bool timed_out);
  // WEFT_TUNE_STATE_FILE: rank 0's copy, loaded by every rank at init; rewritten
  // by rank 0 when a class settles.
  Status load_tuning_state();
  // WEFT_TOPO_DUMP_FILE: every rank's topology joined, written by rank 0 (first
  // communicator of a family only; collective over the bootstrap).
  Status dump_topology();
  // WEFT_BIND: pins this process near its share of the host (first communicator of a family only).
  Status bind_to_host_share();
  // The tuner's layout (hosts, and NUMA domains by each rank's binding or
  // WEFT_TOPO_FILE) and the orders and sizes the builders get; collective.
  Status plan_layout();
  void save_tuning_state();

  int rank_ = -1;
  int nranks_ = 0;
  int64_t timeout_ms_ = 0;
  bool check_ = false;  // WEFT_CHECK
  int local_size_ = 0;  // ranks per host when hosts are equal and hold consecutive ranks, else 0
  int domain_size_ = 0; // ranks per NUMA domain, likewise within the hosts
  int trace_row_ = 0;   // WEFT_TRACE: this communicator's row (tid) under its family rank (pid)
  sim::Fabric layout_;  // which host and NUMA domain each rank is on, for the tuner
  // Relabelable collectives (sched::relabelable) are built in host-grouped order:
  // order_[i] = the rank at position i (sim::grouped_order), position_ = this
  // rank's, grouped_local_size_ = ranks per host in that order (0: unequal hosts),
  // grouped_domain_size_ per NUMA domain.
  std::vector<int> order_;
  int position_ = 0, grouped_local_size_ = 0, grouped_domain_size_ = 0;
  int local_rank_ = 0, local_ranks_on_host_ = 1;  // this rank among those on its host (any layout)
  uint64_t host_hash_ = 0;     // this rank's card's: equal for ranks sharing memory
  uint64_t machine_hash_ = 0;  // this rank's card's: equal for ranks on one kernel
  std::vector<bool> same_host_;  // by rank: whether it shares memory with this one
  std::string name_;
  boot::UniqueId id_{};  // the family's first rendezvous (its job secret)
  Lineage lineage_;
  uint64_t splits_ = 0;  // weftCommSplit calls so far
  std::unique_ptr<boot::Bootstrap> boot_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;  // in registry order; those in use
  std::vector<std::unique_ptr<transport::Link>> links_;
  std::unique_ptr<exec::Executor> exec_;
  // The data engine of host buffers (every buffer is host memory until device
  // buffers arrive with the GPU work).
  exec::DataEngine* host_data_ = &exec::cpu_data_engine();
  std::unique_ptr<tune::Tuner> tuner_;  // picks each call's algorithm
  uint64_t seq_ = 0;

  // This rank's plans of the tuner's picks; a size class being measured has several.
  std::map<std::pair<PlanKey, const algo::Algorithm*>, sched::RankPlan> plans_;
  PlanKey last_key_{};
  const sched::RankPlan* last_plan_ = nullptr;  // the plan of last_key_'s settled pick
  const char* found_algo_ = nullptr;             // the algorithm of find_plan's last plan
  // The last blocking call that passed validate() (built-in ops only: a
  // pre-multiplied op can be destroyed between calls); the same call again
  // skips the checks.
  std::optional<CollArgs> last_valid_;

  struct PreMul {
    weftDataType_t dtype;
    unsigned char scalar[8];        // weftScalarHostImmediate: the value, read at creation
    const void* source = nullptr;   // weftScalarDevice: read each time a call runs
    bool on_device = false;         // ... from CUDA device memory (staged calls copy it in)
  };
  // The device-memory scalar of pre-multiplied sum op, or nullptr.
  const void* device_scalar(weftRedOp_t op) const;
  std::map<int, PreMul> premul_;  // guarded by the queue's drive lock
  std::mutex windows_mu_;
  std::map<weftWindow*, std::unique_ptr<weftWindow>> windows_;
  // Every rank's verdict on a window call (objection: this rank's, "" if none),
  // compared: the first rank that objects or disagrees fails it everywhere.
  struct WindowCall {
    uint64_t size;
    int32_t flags;
    int32_t ok;
    int32_t device;  // the window is device memory
  };
  // A symmetric window of device memory: mapped by every rank where the device
  // collectives go over cuda_p2p, so that calls on it read it in place (collective).
  Status share_device_window(void* buff, size_t size);
  Status agree_on_window(const char* what, const WindowCall& mine, const std::string& objection);
  int next_premul_ = weftNumOps;
  std::vector<unsigned char> premul_input_;  // the scaled input of a pre-multiplied sum
  DeviceStaging staging_;  // pinned host copies of the calls on device memory
  transport::cuda_p2p::Group p2p_;  // device collectives over mapped GPU memory, where the ranks agreed
  // The slowest link between the group's GPUs (gpu < nvl < p2p), agreed by all.
  tune::LinkClass p2p_link_ = tune::LinkClass::Gpu;
  std::mutex device_explain_mu_;
  std::set<int> device_explained_;  // all-reduce size classes WEFT_EXPLAIN has shown
  // device_plan's: (collective, count, element size, root) -> levels?, and the
  // (collective, size class) pairs WEFT_EXPLAIN has shown; under device_explain_mu_.
  std::map<std::tuple<int, uint64_t, size_t, int>, std::pair<bool, tune::DevicePlanCost>> device_plans_;
  std::set<std::pair<int, int>> device_plans_explained_;
  // Set before device_levels_: WEFT_DEVICE_LEVELS of rank 0, and the slowest
  // link class of every host's cuda_p2p (the local level's constants).
  int device_levels_mode_ = -1;
  int device_level_rounds_mode_ = -1;  // WEFT_DEVICE_LEVEL_ROUNDS of rank 0
  std::atomic<bool> rounds_said_{false};  // the first all-reduce in rounds was logged
  tune::LinkClass device_levels_link_ = tune::LinkClass::Gpu;
  std::mutex pairs_mu_;  // pairs_ is made by the enqueueing thread and unblocked by any
  std::unique_ptr<transport::cuda_p2p::Pairs> pairs_;
  bool device_path_chosen_ = false;
  std::atomic<uint32_t> windowed_said_{0};  // collectives whose first run on windows was logged (bit per Coll)
  // The levels of split_device_levels: this rank's host's ranks, and the ranks of
  // its local rank on every host. Set once, before device_levels_ (any thread
  // may read them after it, as fail() does).
  std::unique_ptr<Communicator> device_local_, device_cross_;
  std::atomic<bool> device_levels_{false};
  int cu_device_ = -1;

  // Everything above the error state is touched only under queue_'s drive lock.
  std::shared_ptr<engine::Queue> queue_;
  // Where the call in progress last waited (exec::Health::waiting), for status rows.
  struct WaitPosition {
    boot::StatusRow row{};
    Clock::time_point at{};
    const sched::RankPlan* plan = nullptr;
  };
  std::mutex wait_mu_;
  WaitPosition wait_pos_;
  std::atomic<bool> aborted_{false};
  // Set once; revoke_error_ (under err_mu_) is what operations stopped by it return.
  std::atomic<bool> revoked_{false};
  Status revoke_error_;
  void set_revoked(const Status& why);
  // Streams waiting on peers at cuda_p2p barriers go on (the call failed).
  void unblock_streams();
  std::atomic<uint64_t> shrinks_{0};  // weftCommShrink calls so far (any thread)
  std::mutex err_mu_;
  Status error_;  // sticky: the communicator is unusable after it is set
  std::atomic<bool> failed_{false};  // error_ is set
};

}  // namespace weft

// A non-blocking operation's completion; shared by the caller and whoever
// drives the operation. Freed by weftTest/weftWait once done.
struct weftRequestImpl {
  weft::Status result;
  std::atomic<bool> done{false};
};
