#include "comm/communicator.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "algorithms/registry.h"
#include "comm/operations.h"
#include "comm/settings.h"
#include "exec/buffer_kind.h"
#include "exec/data_engine.h"
#include "weft_config.h"
#include "base/log.h"
#include "base/params.h"
#include "base/trace.h"
#include "topo/nvml.h"
#include "topo/topology.h"
#include "transports/transport.h"

namespace weft {
namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

Status check_memory(const char* what, const char* which, const void* p, bool on_stream) {
  exec::BufferKind k = exec::buffer_kind(p);
  if (k.device == on_stream) return Status::Ok();
  if (on_stream)
    return Error(weftInvalidArgument,
                 "%s: %s %p is host memory, but the call has a stream: a call on a stream moves device memory "
                 "(host memory takes stream NULL)",
                 what, which, p);
  return Error(weftInvalidArgument,
               "%s: %s %p is device memory (GPU %d): device memory goes through the calls that take a stream "
               "(NULL: the legacy default stream); the non-blocking (request) forms take host memory",
               what, which, p, k.gpu);
}

Status Communicator::create(const boot::UniqueId& id, int nranks, int rank,
                            const weftConfig_t* config, std::unique_ptr<Communicator>* out, Lineage lineage,
                            std::unique_ptr<boot::Bootstrap> boot) {
  if (nranks < 1)
    return Error(weftInvalidArgument, "weftCommInitRank: nranks must be >= 1, got %d", nranks);
  if (rank < 0 || rank >= nranks)
    return Error(weftInvalidArgument, "weftCommInitRank: rank %d is out of range [0, %d)", rank,
                 nranks);
  std::unique_ptr<Communicator> c(new Communicator);
  c->rank_ = rank;
  c->nranks_ = nranks;
  c->lineage_ = lineage;
  c->boot_ = std::move(boot);
  c->id_ = id;
  log::set_rank(rank);
  WEFT_TRY(c->init(id, config));
  *out = std::move(c);
  return Status::Ok();
}

Status Communicator::init(const boot::UniqueId& id, const weftConfig_t* config) {
  timeout_ms_ = params::TIMEOUT_MS();
  check_ = params::CHECK() != 0;
  cu_device_ = exec::cuda::current_device();
  tune::Options topt = tune::Options::from_params();
  if (config != nullptr) {
    // A program built against an older weft.h passes a shorter struct (size set by
    // its initializer); fields past its end keep their defaults.
    constexpr size_t kFirstSize = offsetof(weftConfig_t, algo);
    if (config->magic != WEFT_CONFIG_MAGIC || config->size < kFirstSize || config->size > sizeof(weftConfig_t))
      return Error(weftInvalidArgument,
                   "weftCommInitRankConfig: config was not initialized with WEFT_CONFIG_INITIALIZER");
    if (config->timeoutMs > 0) timeout_ms_ = config->timeoutMs;
    if (config->commName != nullptr) name_ = config->commName;
    if (config->size > kFirstSize && config->algo != nullptr) {
      topt.algo = config->algo;
      topt.algo_source = "weftConfig_t.algo";
    }
  }
  staging_.set_timeout_ms(timeout_ms_);
  if (rank_ == 0) {
    WEFT_INFO(INIT, "weft %s, %d ranks, reduce kernels: %s", WEFT_VERSION_STRING,
              nranks_, reduce::kernel_name());
    params::log_all();
  }
  // A split communicator comes with its group on the family's bootstrap connection.
  const bool first_of_family = boot_ == nullptr;
  Status st = boot_ != nullptr ? Status::Ok()
                               : boot::Bootstrap::connect(id, rank_, nranks_, Deadline::after_ms(timeout_ms_), &boot_);
  // The bootstrap's own errors already name the rank and say "bootstrap".
  if (!st.ok() && st.message().rfind("rank " + std::to_string(rank_) + ": ", 0) != 0)
    return st.prefix("rank " + std::to_string(rank_) + ": bootstrap: ");
  if (!st.ok()) return st;
  st = agree_on_settings(*boot_, nranks_, shared_settings(topt), Deadline::after_ms(timeout_ms_));
  if (!st.ok()) return st.prefix("rank " + std::to_string(rank_) + ": init: ");
  st = connect_transports(id);
  if (!st.ok()) {
    boot_->abort(st.message());
    return st.prefix("rank " + std::to_string(rank_) + ": init: ");
  }
  std::vector<transport::Link*> by_rank(static_cast<size_t>(nranks_), nullptr);
  for (auto& l : links_) by_rank[static_cast<size_t>(l->peer())] = l.get();
  // Ranks reached over shared memory share this host: all of them -> shm constants.
  int local_ranks = 1;
  for (auto& l : links_) local_ranks += std::strncmp(l->name(), "shm", 3) == 0 ? 1 : 0;
  if (first_of_family) st = bind_to_host_share();
  if (st.ok()) st = plan_layout();
  topt.log_table = rank_ == 0;
  topt.explain = rank_ == 0 && params::EXPLAIN() != 0;
  topt.layout = layout_;
  if (st.ok()) st = tune::Tuner::create(nranks_, local_ranks, topt, &tuner_);
  if (st.ok()) st = load_tuning_state();
  if (st.ok() && first_of_family) st = dump_topology();
  if (!st.ok()) {
    boot_->abort(st.message());
    return st.prefix("rank " + std::to_string(rank_) + ": init: ");
  }
  exec_ = std::make_unique<exec::Executor>(rank_, std::move(by_rank), this);
  trace::init(rank_);
  if (trace::on()) {
    // One row per communicator, under the process's rank in its family's first.
    static std::atomic<int> rows{0};
    trace_row_ = rows.fetch_add(1);
    char name[96];
    std::snprintf(name, sizeof(name), "comm %04llx rank %d of %d%s%s",
                  static_cast<unsigned long long>(lineage_.family & 0xffff), rank_, nranks_, name_.empty() ? "" : " ",
                  name_.c_str());
    trace::name_row(lineage_.family_rank, trace_row_, name);
    exec_->set_trace(lineage_.family_rank, trace_row_);
  }
  queue_ = engine::Engine::get().add_queue();
  boot_->set_status_source([this] { return status_row(false, false); });
  WEFT_INFO(INIT, "rank %d of %d ready%s%s", rank_, nranks_, name_.empty() ? "" : ", comm ",
            name_.c_str());
  return Status::Ok();
}

// Every transport of the registry that WEFT_TRANSPORT allows describes this rank
// on its card; with every card known, each pair of ranks goes to the first
// transport that can carry it (the same choice on every rank); then every
// transport some pair uses sets up, in phases separated by barriers.
Status Communicator::connect_transports(const boot::UniqueId& id) {
  const std::vector<transport::Registration>& reg = transport::registry();
  const std::string& forced = params::TRANSPORT();
  std::vector<size_t> allowed;
  std::string names;
  for (size_t i = 0; i < reg.size(); ++i) {
    names += (names.empty() ? "" : ", ") + std::string(reg[i].name);
    if (forced.empty() || forced == reg[i].name) allowed.push_back(i);
  }
  if (allowed.empty())
    return Error(weftInvalidArgument, "WEFT_TRANSPORT=%s: unknown transport (available: %s)", forced.c_str(),
                 names.c_str());
  transport::SetupContext base;
  base.rank = rank_;
  base.nranks = nranks_;
  base.forced = !forced.empty();
  base.id = &id;
  base.boot = boot_.get();
  base.deadline = Deadline::after_ms(timeout_ms_);
  auto ctx = [&](size_t i) {
    transport::SetupContext c = base;
    c.slot = i;
    return c;
  };

  transport::Card mine{};
  mine.rank = rank_;
  mine.pid = getpid();
  std::string ident = boot::host_identity();
  mine.host_hash = fnv1a(ident.data(), ident.size());
  const std::string machine = boot::machine_identity();
  mine.machine_hash = fnv1a(machine.data(), machine.size());
  if (getrandom(&mine.nonce, sizeof(mine.nonce), 0) != sizeof(mine.nonce)) return SysError(errno, "getrandom");
  gethostname(mine.host, sizeof(mine.host) - 1);
  mine.family = lineage_.family;
  mine.family_rank = lineage_.family != 0 ? lineage_.family_rank : rank_;
  transports_.resize(reg.size());
  for (size_t i : allowed) {
    transports_[i] = reg[i].make();
    WEFT_TRY(transports_[i]->describe(ctx(i), mine.blob[i]));
  }
  std::vector<transport::Card> cards(static_cast<size_t>(nranks_));
  WEFT_TRY(boot_->allgather(&mine, sizeof(mine), cards.data(), base.deadline));
  uint64_t comm_hash = 1469598103934665603ull;
  for (const transport::Card& c : cards) comm_hash = fnv1a(&c.nonce, sizeof(c.nonce), comm_hash);
  base.cards = &cards;
  base.comm_hash = comm_hash;
  if (lineage_.family == 0) lineage_ = {comm_hash, rank_};

  // Ranks sharing this host; two-level algorithms need hosts of equal size
  // holding consecutive ranks.
  int same_host = 0, same_machine = 0;
  for (const transport::Card& c : cards) {
    same_host += c.host_hash == mine.host_hash ? 1 : 0;
    same_machine += c.machine_hash == mine.machine_hash ? 1 : 0;
  }
  // Waiters spin only where every rank of this kernel can have a core: ranks of
  // other network namespaces on it take the same cores.
  set_machine_ranks(same_machine);
  local_ranks_on_host_ = same_host;
  local_rank_ = 0;
  for (int r = 0; r < rank_; ++r) local_rank_ += cards[static_cast<size_t>(r)].host_hash == mine.host_hash ? 1 : 0;
  host_hash_ = mine.host_hash;
  machine_hash_ = mine.machine_hash;
  same_host_.resize(cards.size());
  for (size_t r = 0; r < cards.size(); ++r) same_host_[r] = cards[r].host_hash == mine.host_hash;

  std::vector<std::vector<int>> peers(reg.size());
  std::vector<bool> used(reg.size(), false);
  for (int a = 0; a < nranks_; ++a)
    for (int b = a + 1; b < nranks_; ++b) {
      const transport::Card &ca = cards[static_cast<size_t>(a)], &cb = cards[static_cast<size_t>(b)];
      std::string why;
      size_t chosen = reg.size();
      for (size_t i : allowed) {
        std::string no;
        if (transports_[i]->can_connect(ctx(i), ca, cb, &no)) {
          chosen = i;
          break;
        }
        why += (why.empty() ? "" : "; ") + no;
      }
      if (chosen == reg.size())
        return Error(weftInvalidArgument, "%s%s no transport connects rank %d (host %s) and rank %d (host %s): %s",
                     forced.empty() ? "" : "WEFT_TRANSPORT=", forced.empty() ? "" : (forced + ":").c_str(), a, ca.host,
                     b, cb.host, why.c_str());
      used[chosen] = true;
      if (a == rank_) peers[chosen].push_back(b);
      if (b == rank_) peers[chosen].push_back(a);
    }

  for (size_t i : allowed)
    if (used[i]) WEFT_TRY(transports_[i]->create(ctx(i), peers[i]));
  WEFT_TRY(boot_->barrier(base.deadline));
  for (size_t i : allowed)
    if (used[i]) WEFT_TRY(transports_[i]->connect(ctx(i), peers[i], &links_));
  WEFT_TRY(boot_->barrier(base.deadline));
  for (size_t i : allowed) {
    transports_[i]->finish(!peers[i].empty());
    if (!used[i]) transports_[i].reset();
  }
  return Status::Ok();
}

Communicator::~Communicator() {
  // The levels' streams and queues first: this communicator's staged calls never
  // wait for theirs, theirs may wait on its bootstrap's family connection.
  device_cross_.reset();
  device_local_.reset();
  p2p_.stop_watchdog();  // its timeouts fail this communicator, which is going
  {
    std::lock_guard<std::mutex> lock(pairs_mu_);
    if (pairs_ != nullptr) pairs_->stop_watchdog();
  }
  if (boot_ != nullptr) boot_->set_status_source(nullptr);
  // In-flight operations finish first (promptly once aborted: they fail).
  if (queue_ != nullptr) {
    queue_->drain();
    engine::Engine::get().remove_queue(queue_);
  }
  exec_.reset();
  links_.clear();
  transports_.clear();  // after the links: verbs queue pairs live in the transport's protection domain
  boot_.reset();
}

Status Communicator::check() {
  if (aborted_.load(std::memory_order_relaxed))
    return Error(weftRemoteError, "the communicator was aborted");
  if (!revoked()) {
    WEFT_TRY(boot_->poll());
    Status notice = boot_->revoked();
    if (notice.ok()) return Status::Ok();
    set_revoked(notice);
  }
  std::lock_guard<std::mutex> lock(err_mu_);
  return revoke_error_;
}

void Communicator::explain_failure(Status* st) {
  if (revoked()) return;  // the revoke is the explanation
  if (st->code() == weftTimeout) {
    // Every rank's status, gathered by the root; a rank that already holds the
    // group's diagnosis (it failed by it) gets it back at once.
    if (st->message().find("diagnosis: ") != std::string::npos) return;
    std::string line = boot_->diagnose(status_row(true, true), boot::ReportKind::Timeout,
                                       Deadline::after_ms(params::DIAG_WAIT_MS() + 250));
    *st = Status(weftTimeout, st->message() + "; diagnosis: " + line);
    return;
  }
  if (st->code() != weftRemoteError) return;
  // A peer failing under us is often a consequence: it gave up because a third
  // rank died. The bootstrap's first notice names that rank; wait briefly for it.
  Deadline wait = Deadline::after_ms(200);
  SpinWait spin;
  while (!wait.expired()) {
    Status notice = boot_->poll();
    if (!notice.ok()) {
      if (st->message().find(notice.message()) == std::string::npos)
        *st = Status(st->code(), st->message() + "; the bootstrap reports: " + notice.message());
      return;
    }
    spin.pause();
  }
}

void Communicator::waiting(const exec::WaitInfo& w) {
  std::lock_guard<std::mutex> lock(wait_mu_);
  boot::StatusRow& r = wait_pos_.row;
  if (w.plan != wait_pos_.plan || w.plan == nullptr) {
    // The collective's name, from the key of its cached plan (once per call).
    const char* op = w.plan == nullptr ? "point-to-point" : "collective";
    for (const auto& [key, plan] : plans_)
      if (&plan == w.plan) op = sched::coll_name(static_cast<sched::Coll>(std::get<0>(key.first)));
    std::snprintf(r.op, sizeof r.op, "%s", op);
    wait_pos_.plan = w.plan;
  }
  r.state = static_cast<int32_t>(boot::RowState::InCall);
  r.peer = w.peer;
  r.seq = w.plan == nullptr ? seq_ : w.seq;
  r.step = static_cast<uint32_t>(w.step);
  r.nsteps = static_cast<uint32_t>(w.nsteps);
  r.bytes_done = w.bytes_done;
  r.bytes = w.bytes;
  std::snprintf(r.waiting, sizeof r.waiting, "%s", w.what);
  wait_pos_.at = Clock::now();
}

boot::StatusRow Communicator::status_row(bool in_call, bool timed_out) {
  // Nothing queued and nobody driving the queue: no call is in progress, and
  // holding the drive lock makes seq_ safe to read.
  if (!in_call && queue_->pending() == 0 && queue_->drive_mu().try_lock()) {
    boot::StatusRow r{};
    r.state = static_cast<int32_t>(boot::RowState::Idle);
    r.peer = -1;
    r.seq = seq_;
    r.age_ms = static_cast<uint32_t>(std::clamp(ms_since(queue_->left()), 1.0, 4e9));
    queue_->drive_mu().unlock();
    return r;
  }
  std::lock_guard<std::mutex> lock(wait_mu_);
  boot::StatusRow r = wait_pos_.row;
  r.state = static_cast<int32_t>(boot::RowState::InCall);
  if (wait_pos_.plan == nullptr && r.op[0] == '\0') {
    // In a call that has not waited long yet (or queued behind one).
    r.peer = -1;
    std::snprintf(r.op, sizeof r.op, "%s", "collective");
  }
  r.age_ms = static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - wait_pos_.at).count());
  r.timed_out = timed_out ? 1 : 0;
  return r;
}

std::string Communicator::dump() {
  std::string line = boot_->diagnose(status_row(false, false), boot::ReportKind::Dump,
                                     Deadline::after_ms(params::DIAG_WAIT_MS() + 250));
  WEFT_WARN(COLL, "rank %d: status dump: %s", rank_, line.c_str());
  return line;
}

void Communicator::fail(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(err_mu_);
    if (error_.ok()) error_ = st;
  }
  failed_.store(true, std::memory_order_release);
  // Operations stopped by a revoke fail here too: the other ranks know, and the
  // bootstrap group must stay up for the split or shrink that follows.
  if (revoked()) return;
  unblock_streams();
  if (device_levels_.load(std::memory_order_acquire)) {
    device_local_->abort("its communicator across hosts failed: " + st.message());
    device_cross_->abort("its communicator across hosts failed: " + st.message());
  }
  // Tell the other ranks at once, so they fail now rather than at their deadline.
  boot_->abort(st.message());
}

Status Communicator::async_error() {
  // Checked before every call: the flag spares the common case the lock.
  if (!failed_.load(std::memory_order_acquire)) {
    if (!device_levels_.load(std::memory_order_acquire)) return Status::Ok();
    // A level's failure (a stuck stream, a lost peer) is this communicator's.
    for (Communicator* level : {device_local_.get(), device_cross_.get()}) {
      Status st = level->async_error();
      if (!st.ok()) fail(st);
    }
    if (!failed_.load(std::memory_order_acquire)) return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(err_mu_);
  return error_;
}

Status Communicator::poll_async_error() {
  WEFT_TRY(async_error());
  Status st = check();
  if (!st.ok()) fail(st);
  return async_error();
}

void Communicator::unblock_streams() {
  p2p_.unblock();  // a stream waiting at a cuda_p2p barrier must not wait for ranks that will not come
  std::lock_guard<std::mutex> lock(pairs_mu_);
  if (pairs_ != nullptr) pairs_->unblock();
}

void Communicator::set_revoked(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(err_mu_);
    if (revoked()) return;
    revoke_error_ = why;
    // Operations stopped by it fail with why; later calls are misuse.
    if (error_.ok()) error_ = Status(weftInvalidUsage, why.message());
    revoked_.store(true, std::memory_order_release);
  }
  failed_.store(true, std::memory_order_release);
  unblock_streams();
  if (device_levels_.load(std::memory_order_acquire)) {
    device_local_->set_revoked(why);
    device_cross_->set_revoked(why);
  }
}

void Communicator::revoke() {
  set_revoked(Error(weftInvalidUsage,
                    "the communicator was revoked on this rank (weftCommRevoke); it allows only "
                    "weftCommSplit, weftCommShrink, weftCommDestroy and weftCommAbort"));
  boot_->revoke("weftCommRevoke called");
  if (device_levels_.load(std::memory_order_acquire)) {
    device_local_->boot_->revoke("weftCommRevoke called");
    device_cross_->boot_->revoke("weftCommRevoke called");
  }
}

bool Communicator::quiescent() {
  if (queue_->pending() != 0 || !queue_->drive_mu().try_lock()) return false;
  queue_->drive_mu().unlock();
  if (!device_levels_.load(std::memory_order_acquire)) return true;
  return device_local_->quiescent() && device_cross_->quiescent();
}

void Communicator::abort(const std::string& reason) {
  aborted_.store(true);
  fail(Error(weftRemoteError, "rank %d: %s", rank_, reason.c_str()));
}

Status Communicator::validate(const CollArgs& a, bool on_stream) const {
  // Runs on every call: the names for messages are looked up only on errors.
  auto what = [&] { return sched::coll_name(a.coll); };
  if (static_cast<int>(a.dtype) < 0 || a.dtype >= weftNumTypes)
    return Error(weftInvalidArgument, "%s: invalid datatype %d", what(), static_cast<int>(a.dtype));
  bool reduces = a.coll == sched::Coll::AllReduce || a.coll == sched::Coll::Reduce ||
                 a.coll == sched::Coll::ReduceScatter;
  if (reduces && (static_cast<int>(a.op) < 0 || a.op >= weftNumOps)) {
    auto it = premul_.find(static_cast<int>(a.op));
    if (it == premul_.end())
      return Error(weftInvalidArgument, "%s: invalid reduction op %d", what(), static_cast<int>(a.op));
    if (it->second.dtype != a.dtype)
      return Error(weftInvalidArgument, "%s: pre-multiplied sum op %d was created for %s, not %s",
                   what(), static_cast<int>(a.op), reduce::dtype_name(it->second.dtype),
                   reduce::dtype_name(a.dtype));
    if (it->second.on_device && !on_stream)
      return Error(weftInvalidArgument,
                   "%s: pre-multiplied sum op %d has its scalar in device memory: it serves calls on device "
                   "buffers with a stream only",
                   what(), static_cast<int>(a.op));
  }
  if (reduces && reduce::is_bitwise(reduce::elementwise_op(a.op)) && reduce::is_float_dtype(a.dtype))
    return Error(weftInvalidArgument, "%s: bitwise op %s needs an integer datatype, not %s", what(),
                 reduce::op_name(a.op), reduce::dtype_name(a.dtype));
  if (a.root < 0 || a.root >= nranks_)
    return Error(weftInvalidArgument, "%s: root %d is out of range [0, %d)", what(), a.root, nranks_);
  size_t esize = reduce::dtype_size(a.dtype);
  sched::BuildArgs b{a.coll, nranks_, a.count, a.root, 0};
  uint64_t sends = sched::send_count(b), recvs = sched::recv_count(b);
  size_t product;
  if (__builtin_mul_overflow(a.count, esize * static_cast<size_t>(nranks_), &product) ||
      __builtin_mul_overflow(std::max(sends, recvs), esize, &product))
    return Error(weftInvalidArgument, "%s: count %zu of %s overflows the address space", what(),
                 a.count, reduce::dtype_name(a.dtype));
  const bool uses_send = this->uses_send(a), uses_recv = this->uses_recv(a);
  if (a.count > 0 && uses_send && a.send == nullptr)
    return Error(weftInvalidArgument, "%s: sendbuff is NULL with count %zu", what(), a.count);
  if (a.count > 0 && uses_recv && a.recv == nullptr)
    return Error(weftInvalidArgument, "%s: recvbuff is NULL with count %zu", what(), a.count);
  if (a.count > 0 && uses_send) WEFT_TRY(check_memory(what(), "sendbuff", a.send, on_stream));
  if (a.count > 0 && uses_recv && !(uses_send && a.recv == a.send))
    WEFT_TRY(check_memory(what(), "recvbuff", a.recv, on_stream));
  if (a.count == 0 || !uses_send || !uses_recv) return Status::Ok();
  // Buffers may overlap only in the collective's in-place position.
  auto s = reinterpret_cast<uintptr_t>(a.send), r = reinterpret_cast<uintptr_t>(a.recv);
  uintptr_t sb = sends * esize, rb = recvs * esize;
  if (s >= r + rb || r >= s + sb) return Status::Ok();
  uintptr_t shift = static_cast<uintptr_t>(rank_) * a.count * esize;
  bool in_place = a.coll == sched::Coll::AllGather       ? s == r + shift
                  : a.coll == sched::Coll::ReduceScatter ? r == s + shift
                  : a.coll == sched::Coll::AllToAll      ? false
                                                         : s == r;
  if (!in_place)
    return Error(weftInvalidArgument,
                 "%s: sendbuff and recvbuff overlap but are not in the in-place position "
                 "(%s)",
                 what(),
                 a.coll == sched::Coll::AllGather       ? "sendbuff == recvbuff + rank * sendcount"
                 : a.coll == sched::Coll::ReduceScatter ? "recvbuff == sendbuff + rank * recvcount"
                 : a.coll == sched::Coll::AllToAll      ? "all-to-all has no in-place form"
                                                        : "sendbuff == recvbuff");
  return Status::Ok();
}

Status Communicator::validate_p2p(bool send, const void* buf, size_t count, weftDataType_t dtype, int peer,
                                  bool on_stream) const {
  const char* what = send ? "send" : "recv";
  if (static_cast<int>(dtype) < 0 || dtype >= weftNumTypes)
    return Error(weftInvalidArgument, "%s: invalid datatype %d", what, static_cast<int>(dtype));
  if ((peer < 0 && !(peer == exec::kAnySource && !send)) || peer >= nranks_)
    return Error(weftInvalidArgument, "%s: peer %d is out of range [0, %d)", what, peer, nranks_);
  if (count > SIZE_MAX / reduce::dtype_size(dtype))
    return Error(weftInvalidArgument, "%s: count %zu overflows the address space", what, count);
  if (count > 0 && buf == nullptr)
    return Error(weftInvalidArgument, "%s: buffer is NULL with count %zu", what, count);
  if (count > 0) WEFT_TRY(check_memory(what, "buffer", buf, on_stream));
  return Status::Ok();
}

// Nothing this thread posted is still queued. (Another thread posting at this
// moment races with the call anyway: calls of one communicator from several
// threads have no order.)
bool Communicator::lock_idle() {
  if (queue_->pending() != 0) return false;
  queue_->drive_mu().lock();
  return true;
}

Status Communicator::run_p2p(const std::vector<exec::P2P>& ops, const std::vector<exec::LocalCopy>& copies) {
  if (!lock_idle()) {
    weftRequestImpl* req = nullptr;
    WEFT_TRY(post_p2p(ops, copies, &req));
    return wait(req);
  }
  std::lock_guard<std::mutex> lock(queue_->drive_mu(), std::adopt_lock);
  WEFT_TRY(async_error());
  const double began = trace::on() ? trace::now_us() : 0;
  Status st = exec_->run_p2p(ops, copies, timeout_ms_);
  queue_->note_left();
  if (trace::on()) trace_p2p(ops, began, st);
  if (!st.ok()) {
    exec_->abandon_sends();
    explain_failure(&st);
    st.prefix("point-to-point group: ");
    fail(st);
  }
  return st;
}

Status Communicator::split(int color, int key, boot::UniqueId* id, int* nranks, int* rank, Lineage* lineage,
                           std::unique_ptr<boot::Bootstrap>* boot) {
  // Ordered like a collective: after everything posted before it.
  queue_->drain();
  if (Status st = poll_async_error(); !st.ok() && !revoked()) return st;
  Deadline deadline = Deadline::after_ms(timeout_ms_);
  struct Place {
    int32_t color, key;
  } mine{color, key};
  std::vector<Place> all(static_cast<size_t>(nranks_));
  WEFT_TRY(boot_->allgather(&mine, sizeof(mine), all.data(), deadline));
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (all[static_cast<size_t>(r)].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key;
  });
  // Every split of this communicator is numbered alike on all ranks: with the
  // color, that names the new group on the family's bootstrap connection.
  const uint64_t tag = splits_++ << 32 | static_cast<uint32_t>(color);
  *nranks = 0;
  if (color == WEFT_SPLIT_NOCOLOR) return Status::Ok();
  WEFT_TRY(boot_->subgroup(tag, members, boot));
  *id = id_;
  *nranks = static_cast<int>(members.size());
  *rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  // A revoked communicator's channels may hold the remains of stopped operations:
  // the new one starts a family of its own (NCCL shares nothing while revoked).
  // A peer's revoke sent before its part of the all-gather has arrived by now.
  (void)check();
  *lineage = revoked() ? Lineage{} : lineage_;
  return Status::Ok();
}

Status Communicator::shrink(const int* exclude, int nexclude, boot::UniqueId* id, int* nranks, int* rank) {
  if (nexclude < 0 || (nexclude > 0 && exclude == nullptr))
    return Error(weftInvalidArgument, "excludeRanks is %s with n = %d", exclude == nullptr ? "NULL" : "set",
                 nexclude);
  std::vector<bool> out(static_cast<size_t>(nranks_), false);
  std::string gone;  // the excluded ranks in increasing order, for the new job's secret
  for (int i = 0; i < nexclude; ++i) {
    const int r = exclude[i];
    if (r < 0 || r >= nranks_)
      return Error(weftInvalidArgument, "excludeRanks[%d] = %d is out of range [0, %d)", i, r, nranks_);
    if (out[static_cast<size_t>(r)]) return Error(weftInvalidArgument, "excludeRanks lists rank %d twice", r);
    out[static_cast<size_t>(r)] = true;
  }
  if (out[static_cast<size_t>(rank_)])
    return Error(weftInvalidArgument, "rank %d is in excludeRanks: only the ranks that stay call weftCommShrink",
                 rank_);
  std::vector<int> stay;
  for (int r = 0; r < nranks_; ++r) {
    if (out[static_cast<size_t>(r)]) gone += std::to_string(r) + ",";
    else stay.push_back(r);
  }
  // Survivors that disagree on who left derive different secrets: the new root
  // refuses whoever is not of its job, and they time out instead of joining.
  const uint64_t nth = shrinks_.fetch_add(1);
  boot::Secret secret =
      boot::derive_secret(boot::secret_hex(id_.secret) + " shrink #" + std::to_string(nth) + " of family " +
                              std::to_string(lineage_.family) + " of " + std::to_string(nranks_) + " without " + gone,
                          "");
  // The first half stays the job's: shared-memory names start with it, and
  // launchers remove a dead job's segments by that prefix.
  std::memcpy(secret.bytes, id_.secret.bytes, sizeof secret.bytes / 2);
  WEFT_TRY(boot_->shrink_root(stay.front(), secret, id));
  *nranks = static_cast<int>(stay.size());
  *rank = static_cast<int>(std::find(stay.begin(), stay.end(), rank_) - stay.begin());
  return Status::Ok();
}

namespace {
// PCI address of a CUDA device, as sysfs names it ("" without a driver or device).
std::string gpu_pci_address(int device) {
  const exec::cuda::Api* d = exec::cuda::api();
  char id[32] = {};
  if (d == nullptr || device < 0 || d->pci_bus_id == nullptr || d->pci_bus_id(id, sizeof(id), device) != 0) return "";
  // The driver's "0000:17:00.0" is sysfs's name in upper case.
  std::string out = id;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The GPU a rank drives (its CUDA device at init), which of its host's GPUs
// that one reaches peer to peer, as the CUDA driver the application loaded says,
// and which of those over NVLink, as NVML says where it is installed.
void describe_gpu(int device, const topo::Host& host, topo::Rank* r) {
  const exec::cuda::Api* d = exec::cuda::api();
  r->gpu = gpu_pci_address(device);
  if (r->gpu.empty() || d->device_by_pci_bus_id == nullptr || d->can_access_peer == nullptr) return;
  for (const topo::Gpu& g : host.gpus) {
    int other = -1, can = 0;
    if (g.pci != r->gpu && d->device_by_pci_bus_id(&other, g.pci.c_str()) == 0 &&
        d->can_access_peer(&can, device, other) == 0 && can != 0)
      r->gpu_peers.push_back(g.pci);
  }
  std::string why;
  r->gpu_nvlink = topo::nvlink_peers(r->gpu, r->gpu_peers, &why);
  if (!why.empty() && !r->gpu_peers.empty())
    WEFT_INFO(INIT, "GPU %s: NVLink not told from PCIe: %s", r->gpu.c_str(), why.c_str());
}
}  // namespace

Status Communicator::bind_to_host_share() {
  const std::string& mode = params::BIND();
  if (mode.empty() || mode == "none") return Status::Ok();
  // A rank that drives a GPU goes near it, as NCCL binds to the GPU's CPUs.
  const std::string gpu = gpu_pci_address(cu_device_);
  const int near = topo::pci_numa_node("/sys", gpu);
  std::string cpus, error;
  if (!topo::bind_local_rank(mode, local_rank_, local_ranks_on_host_, &cpus, &error, near))
    return Error(weftInvalidArgument, "%s", error.c_str());
  if (!cpus.empty())
    WEFT_INFO(INIT, "rank %d bound to CPUs %s (WEFT_BIND=%s, local rank %d of %d%s%s%s)", rank_, cpus.c_str(),
              mode.c_str(), local_rank_, local_ranks_on_host_, near >= 0 && mode == "numa" ? ", its GPU " : "",
              near >= 0 && mode == "numa" ? gpu.c_str() : "",
              near >= 0 && mode == "numa" ? (" on NUMA node " + std::to_string(near)).c_str() : "");
  return Status::Ok();
}

Status Communicator::plan_layout() {
  struct Place {
    uint64_t host;      // equal for ranks of one host
    int64_t numa;
    uint64_t machine;   // equal for ranks of one kernel (hosts that share its CPUs)
    uint64_t cpus[16];  // the CPUs the rank may run on, 0-1023, as bits
  } mine{host_hash_, topo::numa_node_of_binding(), machine_hash_, {}};
  auto set_cpus = [&mine](const std::vector<int>& cpus) {
    for (int c : cpus)
      if (c >= 0 && c < 1024) mine.cpus[c / 64] |= uint64_t{1} << (c % 64);
  };
  const std::string& file = params::TOPO_FILE();
  if (!file.empty()) {
    // Planning for the machine the file describes: its hosts and NUMA nodes by the
    // rank's place in its family's first communicator. The transports still
    // connect the hosts this job really has.
    topo::System s;
    try {
      s = topo::load_file(file);
    } catch (const std::exception& e) {
      return Error(weftInvalidArgument, "WEFT_TOPO_FILE: %s", e.what());
    }
    const int r = lineage_.family_rank;
    if (r < 0 || static_cast<size_t>(r) >= s.ranks.size())
      return Error(weftInvalidArgument, "WEFT_TOPO_FILE=%s describes %zu ranks; rank %d of the job is not among them",
                   file.c_str(), s.ranks.size(), r);
    const topo::Rank& where = s.ranks[static_cast<size_t>(r)];
    const std::string machine = s.machine_of(r);
    mine = {static_cast<uint64_t>(where.host), where.numa.size() == 1 ? where.numa[0] : -1,
            fnv1a(machine.data(), machine.size()), {}};
    set_cpus(topo::parse_cpu_list(where.cpus));
  } else {
    set_cpus(topo::bound_cpus());
  }
  std::vector<Place> all(static_cast<size_t>(nranks_));
  WEFT_TRY(boot_->allgather(&mine, sizeof(mine), all.data(), Deadline::after_ms(timeout_ms_)));
  // One network port per host that its ranks take turns on (one TCP interface);
  // a domain per (host, NUMA node), unbound ranks in one of their own.
  layout_ = sim::Fabric{};
  layout_.nranks = nranks_;
  std::map<uint64_t, int> host_index;
  std::map<std::pair<int, int64_t>, int> domain_index;
  for (const Place& p : all) {
    const auto h = host_index.emplace(p.host, static_cast<int>(host_index.size()));
    if (h.second) layout_.nics.push_back({-1.0});
    layout_.host.push_back(h.first->second);
    layout_.domain.push_back(
        domain_index.emplace(std::make_pair(h.first->second, p.numa), static_cast<int>(domain_index.size()))
            .first->second);
    layout_.nic.push_back(h.first->second);
  }
  // Machines and their cores (network namespaces on one kernel share them;
  // bench/topology's hosts do).
  std::map<uint64_t, int> machine_index;
  std::vector<int> machine;
  std::vector<std::vector<int>> cpus(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    machine.push_back(machine_index.emplace(all[r].machine, static_cast<int>(machine_index.size())).first->second);
    for (int c = 0; c < 1024; ++c)
      if (all[r].cpus[c / 64] >> (c % 64) & 1) cpus[r].push_back(c);
  }
  sim::set_machines(machine, cpus, &layout_);
  for (size_t m = 0; m < layout_.machine_cores.size(); ++m) {
    const auto ranks = std::count(machine.begin(), machine.end(), static_cast<int>(m));
    if (ranks > layout_.machine_cores[m])
      WEFT_INFO(INIT, "rank %d: %d ranks share a machine's %d cores (where the tuner simulates schedules, they queue "
                "for the cores)", rank_, static_cast<int>(ranks), layout_.machine_cores[m]);
  }
  // Relabelable collectives run with each host's (and domain's) ranks next to each
  // other, so rings cross hosts once per host and two-level algorithms apply to
  // any placement.
  order_ = sim::grouped_order(layout_);
  position_ = static_cast<int>(std::find(order_.begin(), order_.end(), rank_) - order_.begin());
  const sim::Fabric grouped = sim::reordered(layout_, order_);
  grouped_local_size_ = sim::block_size(grouped);
  grouped_domain_size_ = sim::domain_block_size(grouped);
  local_size_ = sim::block_size(layout_);
  domain_size_ = sim::domain_block_size(layout_);
  if (domain_index.size() > host_index.size())
    WEFT_INFO(INIT, "rank %d: %zu hosts, %zu NUMA domains among the ranks%s", rank_, host_index.size(),
              domain_index.size(), file.empty() ? "" : " (WEFT_TOPO_FILE)");
  return Status::Ok();
}


Status Communicator::dump_topology() {
  const std::string& path = params::TOPO_DUMP_FILE();
  if (path.empty()) return Status::Ok();
  topo::System local = topo::discover_local();
  describe_gpu(cu_device_, local.hosts[0], &local.ranks[0]);
  std::string mine = topo::to_json(local);
  Deadline deadline = Deadline::after_ms(timeout_ms_);
  uint64_t len = mine.size();
  std::vector<uint64_t> lens(static_cast<size_t>(nranks_));
  WEFT_TRY(boot_->allgather(&len, sizeof(len), lens.data(), deadline));
  const uint64_t longest = *std::max_element(lens.begin(), lens.end());
  mine.resize(longest, ' ');
  std::vector<char> all(longest * static_cast<size_t>(nranks_));
  WEFT_TRY(boot_->allgather(mine.data(), longest, all.data(), deadline));
  if (rank_ != 0) return Status::Ok();
  std::vector<topo::System> parts;
  try {
    for (size_t r = 0; r < lens.size(); ++r) parts.push_back(topo::from_json(std::string(&all[r * longest], lens[r])));
    const std::string text = topo::to_json(topo::join(parts));
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out) return Error(weftSystemError, "WEFT_TOPO_DUMP_FILE=%s: cannot write it", path.c_str());
  } catch (const std::exception& e) {
    return Error(weftInternalError, "WEFT_TOPO_DUMP_FILE: %s", e.what());
  }
  WEFT_INFO(INIT, "topology of %d ranks written to %s", nranks_, path.c_str());
  return Status::Ok();
}

Status Communicator::load_tuning_state() {
  const std::string& path = params::TUNE_STATE_FILE();
  if (path.empty()) return Status::Ok();
  std::string text;
  if (rank_ == 0) {
    std::ifstream in(path, std::ios::binary);  // none yet: nothing settled
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  Deadline deadline = Deadline::after_ms(timeout_ms_);
  uint64_t len = text.size();
  std::vector<uint64_t> lens(static_cast<size_t>(nranks_));
  WEFT_TRY(boot_->allgather(&len, sizeof(len), lens.data(), deadline));
  const uint64_t n = lens[0];
  if (n > (uint64_t{1} << 20))
    return Error(weftInvalidArgument, "WEFT_TUNE_STATE_FILE=%s: %llu bytes, more than a tuning state has", path.c_str(),
                 static_cast<unsigned long long>(n));
  if (n > 0) {
    std::string mine = rank_ == 0 ? text : std::string(n, '\0');
    std::vector<char> all(n * static_cast<size_t>(nranks_));
    WEFT_TRY(boot_->allgather(mine.data(), n, all.data(), deadline));
    text.assign(all.data(), n);
  }
  return tuner_->load_state(text, "WEFT_TUNE_STATE_FILE=" + path);
}

void Communicator::save_tuning_state() {
  const std::string& path = params::TUNE_STATE_FILE();
  if (path.empty() || rank_ != 0) return;
  // Lines of other communicator shapes (rank count, link class) stay.
  std::string mine = tuner_->settled_state();
  std::string prefix = mine.substr(0, mine.find(' ', mine.find(' ') + 1) + 1);
  std::string kept, line;
  std::ifstream in(path);
  while (std::getline(in, line))
    if (!line.empty() && line.compare(0, prefix.size(), prefix) != 0) kept += line + "\n";
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept << mine;
    if (!out) {
      WEFT_WARN(TUNE, "WEFT_TUNE_STATE_FILE=%s: cannot write %s", path.c_str(), tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    WEFT_WARN(TUNE, "WEFT_TUNE_STATE_FILE=%s: rename failed: %s", path.c_str(), std::strerror(errno));
}

Status Communicator::tuning_state(std::string* out) {
  queue_->drain();
  std::lock_guard<std::mutex> lock(queue_->drive_mu());
  *out = tuner_->settled_state();
  return Status::Ok();
}

Status Communicator::create_premul(const void* scalar, weftDataType_t dtype, weftScalarResidence_t residence,
                                   weftRedOp_t* op) {
  if (op == nullptr || scalar == nullptr)
    return Error(weftInvalidArgument, "weftRedOpCreatePreMulSum: op or scalar is NULL");
  if (static_cast<int>(dtype) < 0 || dtype >= weftNumTypes)
    return Error(weftInvalidArgument, "weftRedOpCreatePreMulSum: invalid datatype %d",
                 static_cast<int>(dtype));
  const bool on_device = exec::buffer_kind(scalar).device;
  if (on_device && residence == weftScalarHostImmediate)
    return Error(weftInvalidArgument,
                 "weftRedOpCreatePreMulSum: the scalar %p is in device memory; weftScalarHostImmediate reads it "
                 "now, from host memory (use weftScalarDevice)",
                 scalar);
  std::lock_guard<std::mutex> lock(queue_->drive_mu());
  PreMul p{dtype, {}};
  if (residence == weftScalarDevice) {
    p.source = scalar;
    p.on_device = on_device;
  } else {
    std::memcpy(p.scalar, scalar, reduce::dtype_size(dtype));
  }
  int id = next_premul_++;
  premul_[id] = p;
  *op = static_cast<weftRedOp_t>(id);
  return Status::Ok();
}

Status Communicator::agree_on_window(const char* what, const WindowCall& mine, const std::string& objection) {
  // Ordered like a collective: after everything posted before it.
  queue_->drain();
  WEFT_TRY(async_error());
  std::vector<WindowCall> all(static_cast<size_t>(nranks_));
  WEFT_TRY(boot_->allgather(&mine, sizeof(mine), all.data(), Deadline::after_ms(timeout_ms_)));
  if (!objection.empty()) return Error(weftInvalidArgument, "%s: %s", what, objection.c_str());
  for (int r = 0; r < nranks_; ++r) {
    const WindowCall& w = all[static_cast<size_t>(r)];
    if (w.ok == 0) return Error(weftInvalidUsage, "%s: rank %d's arguments were refused (its error says why)", what, r);
    if (w.flags != mine.flags)
      return Error(weftInvalidUsage, "%s: rank %d passed flags %d, rank %d flags %d", what, rank_, mine.flags, r,
                   w.flags);
    if (w.device != mine.device)
      return Error(weftInvalidUsage, "%s: rank %d passed %s memory, rank %d %s memory", what, rank_,
                   mine.device ? "device" : "host", r, w.device ? "device" : "host");
    if ((mine.flags & WEFT_WIN_COLL_SYMMETRIC) != 0 && w.size != mine.size)
      return Error(weftInvalidUsage, "%s: a symmetric window needs one size on every rank: rank %d has %llu bytes, "
                   "rank %d %llu", what, rank_, static_cast<unsigned long long>(mine.size), r,
                   static_cast<unsigned long long>(w.size));
  }
  return Status::Ok();
}

Status Communicator::register_window(void* buff, size_t size, int flags, weftWindow** out) {
  const char* what = "weftCommWindowRegister";
  std::string objection;
  if (out == nullptr) objection = "win is NULL";
  else if (buff == nullptr || size == 0) objection = "buff is NULL or size is 0";
  else if ((flags & ~WEFT_WIN_COLL_SYMMETRIC) != 0) objection = "unknown flags " + std::to_string(flags);
  else if ((flags & WEFT_WIN_COLL_SYMMETRIC) != 0 && reinterpret_cast<uintptr_t>(buff) % WEFT_WIN_REQUIRED_ALIGNMENT != 0)
    objection = "a symmetric window must start at a multiple of WEFT_WIN_REQUIRED_ALIGNMENT (" +
                std::to_string(WEFT_WIN_REQUIRED_ALIGNMENT) + " bytes)";
  const bool device = objection.empty() && exec::buffer_kind(buff).device;
  WEFT_TRY(agree_on_window(what, WindowCall{size, flags, objection.empty() ? 1 : 0, device ? 1 : 0}, objection));
  if (device && (flags & WEFT_WIN_COLL_SYMMETRIC) != 0) WEFT_TRY(share_device_window(buff, size));
  auto w = std::make_unique<weftWindow>(weftWindow{buff, size, flags});
  *out = w.get();
  std::lock_guard<std::mutex> lock(windows_mu_);
  windows_.emplace(w.get(), std::move(w));
  return Status::Ok();
}

Status Communicator::deregister_window(weftWindow* win) {
  std::unique_lock<std::mutex> lock(windows_mu_);
  auto it = windows_.find(win);
  const bool known = it != windows_.end();
  const void* buff = known ? it->second->buff : nullptr;
  const bool device = known && exec::buffer_kind(buff).device;
  const WindowCall mine{known ? it->second->size : 0, known ? it->second->flags : 0, known ? 1 : 0, device ? 1 : 0};
  lock.unlock();
  WEFT_TRY(agree_on_window("weftCommWindowDeregister", mine,
                           known ? "" : "the window is not one of this communicator's (or was deregistered)"));
  if (device) WEFT_TRY(p2p_.remove_window(buff));
  lock.lock();
  windows_.erase(win);
  return Status::Ok();
}

Status Communicator::destroy_premul(weftRedOp_t op) {
  std::lock_guard<std::mutex> lock(queue_->drive_mu());
  if (premul_.erase(static_cast<int>(op)) == 0)
    return Error(weftInvalidArgument, "weftRedOpDestroy: op %d was not created by weftRedOpCreatePreMulSum",
                 static_cast<int>(op));
  return Status::Ok();
}

// WEFT_CHECK=1: every rank compares its call with everyone's before moving data.
Status Communicator::check_consistent(const CollArgs& a) {
  struct Sig {
    uint64_t seq, count;
    int32_t coll, dtype, op, root;
  } mine{seq_, a.count, static_cast<int32_t>(a.coll), a.dtype, a.op, a.root};
  std::vector<Sig> all(static_cast<size_t>(nranks_));
  WEFT_TRY(boot_->allgather(&mine, sizeof(mine), all.data(), Deadline::after_ms(timeout_ms_)));
  for (int r = 0; r < nranks_; ++r) {
    const Sig& s = all[static_cast<size_t>(r)];
    if (std::memcmp(&s, &mine, sizeof(Sig)) != 0)
      return Error(weftInvalidUsage,
                   "WEFT_CHECK: mismatched calls: rank %d called %s(count=%llu, %s, %s, root=%d) "
                   "but rank %d called %s(count=%llu, %s, %s, root=%d)",
                   rank_, sched::coll_name(a.coll), static_cast<unsigned long long>(a.count),
                   reduce::dtype_name(a.dtype), reduce::op_name(a.op), a.root, r,
                   sched::coll_name(static_cast<sched::Coll>(s.coll)),
                   static_cast<unsigned long long>(s.count),
                   reduce::dtype_name(static_cast<weftDataType_t>(s.dtype)),
                   reduce::op_name(static_cast<weftRedOp_t>(s.op)), s.root);
  }
  return Status::Ok();
}

sched::BuildArgs Communicator::build_args(const CollArgs& a) const {
  sched::BuildArgs b{a.coll, nranks_, a.count, a.root,
                     static_cast<uint64_t>(params::CHUNK_BYTES()) / reduce::dtype_size(a.dtype)};
  b.local_size = local_size_;
  b.domain_size = domain_size_;
  if (sched::relabelable(a.coll)) {
    // Built in host-grouped order: the root by its position there.
    for (int i = 0; i < nranks_; ++i)
      if (order_[static_cast<size_t>(i)] == a.root) b.root = i;
    b.local_size = grouped_local_size_;
    b.domain_size = grouped_domain_size_;
  }
  return b;
}

const sched::RankPlan& Communicator::plan_of(const CollArgs& a, const algo::Algorithm* alg,
                                             const sched::BuildArgs& b) {
  const auto key = std::make_pair(plan_key(a), alg);
  // Calls whose counts never repeat (variable sequence lengths) would grow the
  // cache without end. No plan is in use here (one collective runs at a time per
  // communicator, and this one has not started), so dropping them all costs only
  // rebuilding those still wanted.
  if (plans_.size() >= static_cast<size_t>(std::max<int64_t>(1, params::PLAN_CACHE())) && !plans_.count(key)) {
    plans_.clear();
    last_plan_ = nullptr;
  }
  auto [pos, inserted] = plans_.try_emplace(key);
  if (inserted) {
    if (sched::relabelable(a.coll)) {
      pos->second = alg->build(b, position_);
      sched::relabel(&pos->second, order_);
    } else {
      pos->second = alg->build(b, rank_);
    }
    WEFT_INFO(COLL, "%s count %llu: algorithm %s%s%s%s, %zu steps", sched::coll_name(a.coll),
              static_cast<unsigned long long>(a.count), alg->name, alg->describe ? " [" : "",
              alg->describe ? alg->describe(b).c_str() : "", alg->describe ? "]" : "", pos->second.steps.size());
  }
  return pos->second;
}

const sched::RankPlan* Communicator::find_plan(const CollArgs& a, Status* st, tune::Trial** trial) {
  // The tuner picks by predicted time or what WEFT_ALGO forces, and while the call's
  // size class is being measured, by turns (tune/online.h).
  const sched::BuildArgs b = build_args(a);
  tune::Pick pick;
  *st = tuner_->pick(a.coll, b, reduce::dtype_size(a.dtype), &pick);
  if (!st->ok()) return nullptr;
  const sched::RankPlan& plan = plan_of(a, pick.algo, tuner_->tailored(*pick.algo, b, reduce::dtype_size(a.dtype)));
  *trial = pick.trial;
  found_algo_ = pick.algo->name;
  // Only a settled pick may serve the next call of this shape without asking again;
  // traced calls always come this way, so the untraced fast path needs no check.
  last_key_ = plan_key(a);
  last_plan_ = pick.trial == nullptr && !trace::on() ? &plan : nullptr;
  return &plan;
}

Status Communicator::begin(const CollArgs& a, const algo::Algorithm* forced, std::optional<exec::Call>* call,
                           tune::Trial** trial, const char** algo_out) {
  *trial = nullptr;
  const sched::RankPlan* plan;
  const char* algo = nullptr;
  if (forced != nullptr) {
    WEFT_TRY(async_error());
    plan = &plan_of(a, forced, tuner_->tailored(*forced, build_args(a), reduce::dtype_size(a.dtype)));
    algo = forced->name;
  } else {
    if (failed_.load(std::memory_order_acquire) || check_) WEFT_TRY(precheck(a));
    if (last_plan_ != nullptr && plan_key(a) == last_key_) {
      plan = last_plan_;
    } else {
      Status st;
      plan = find_plan(a, &st, trial);
      if (plan == nullptr) return st;
      algo = found_algo_;
    }
  }
  ++seq_;
  const void* send = a.op >= weftNumOps ? premul_input(a) : a.send;
  call->emplace(exec::Call{plan, send, a.recv, a.dtype, reduce::elementwise_op(a.op), seq_, LazyDeadline(timeout_ms_),
                           host_data_});
  *algo_out = algo;
  return Status::Ok();
}

Status Communicator::query_algorithm(const CollArgs& a, const char** name, bool* settled) {
  if (static_cast<int>(a.dtype) < 0 || a.dtype >= weftNumTypes)
    return Error(weftInvalidArgument, "weftCommGetAlgorithm: invalid datatype %d", static_cast<int>(a.dtype));
  if (a.root < 0 || a.root >= nranks_)
    return Error(weftInvalidArgument, "weftCommGetAlgorithm: root %d is out of range [0, %d)", a.root, nranks_);
  // A posted agreement of online tuning may settle the class: answer after it.
  queue_->drain();
  std::lock_guard<std::mutex> lock(queue_->drive_mu());
  const algo::Algorithm* alg = nullptr;
  WEFT_TRY(tuner_->query(a.coll, build_args(a), reduce::dtype_size(a.dtype), &alg, settled));
  *name = alg->name;
  return Status::Ok();
}

Status Communicator::explain_algorithm(const CollArgs& a, weftAlgoExplanation_t* out) {
  bool settled = true;
  const char* now = nullptr;
  WEFT_TRY(query_algorithm(a, &now, &settled));
  std::lock_guard<std::mutex> lock(queue_->drive_mu());
  tune::Tuner::Explanation e;
  WEFT_TRY(tuner_->explain_terms(a.coll, build_args(a), reduce::dtype_size(a.dtype), &e));
  *out = {};
  out->algorithm = now;
  out->settled = settled ? 1 : 0;
  out->model_pick = e.pick->name;
  out->simulated = e.simulated ? 1 : 0;
  for (const tune::Tuner::Term& t : e.terms) {
    if (out->ncandidates == WEFT_MAX_CANDIDATES) break;
    weftAlgoCandidate_t& c = out->candidates[out->ncandidates++];
    c = {t.algo->name, t.predicted, t.latency, t.bandwidth, t.reduction, t.measured, t.simulated ? 1 : 0, {}};
    std::snprintf(c.choices, sizeof(c.choices), "%s", t.choices.c_str());
  }
  return Status::Ok();
}

Status Communicator::estimate(const CollArgs& a, double* seconds) {
  weftAlgoExplanation_t e;
  WEFT_TRY(explain_algorithm(a, &e));
  for (int i = 0; i < e.ncandidates; ++i) {
    const weftAlgoCandidate_t& c = e.candidates[i];
    if (std::strcmp(c.algorithm, e.algorithm) != 0) continue;
    if (c.measured >= 0 || c.predicted >= 0) {
      *seconds = c.measured >= 0 ? c.measured : c.predicted;
      return Status::Ok();
    }
  }
  return Error(weftInvalidUsage, "%s (count %zu): %s has no cost model to estimate it by", sched::coll_name(a.coll),
               a.count, e.algorithm);
}

Status Communicator::estimate_p2p(const std::vector<exec::P2P>& ops, bool device, double* seconds) const {
  std::map<int, uint64_t> bytes;  // by peer, both ways
  for (const exec::P2P& op : ops) bytes[op.peer] += op.bytes;
  const bool all_here = std::all_of(same_host_.begin(), same_host_.end(), [](bool b) { return b; });
  const bool over_p2p = device && p2p_.active();
  const algo::LinkCost& stg = tuner_->table().base.of(tune::LinkClass::Stg);
  *seconds = 0;
  for (const auto& [peer, b] : bytes) {
    // A receive from any rank may come over the slowest link this rank has.
    const bool here = peer == exec::kAnySource ? all_here : same_host_[static_cast<size_t>(peer)];
    const algo::LinkCost& k =
        tuner_->table().base.of(over_p2p ? p2p_link_ : here ? tune::LinkClass::Shm : tune::LinkClass::Net);
    double t = k.alpha_s + static_cast<double>(b) * k.beta_s_per_byte;
    if (device && !over_p2p) t += 2 * stg.alpha_s + static_cast<double>(b) * stg.beta_s_per_byte;
    *seconds = std::max(*seconds, t);
  }
  return Status::Ok();
}

// execute()'s rare paths, out of line so that its own frame stays small: an
// 8-byte all-reduce spends a good part of its time in call overhead.
Status Communicator::precheck(const CollArgs& a) {
  WEFT_TRY(async_error());
  if (check_) {
    Status st = check_consistent(a);
    if (!st.ok()) {
      fail(st);
      return st;
    }
  }
  return Status::Ok();
}

const void* Communicator::premul_input(const CollArgs& a) {
  auto pm = premul_.find(static_cast<int>(a.op));
  if (pm == premul_.end() || a.count == 0) return a.send;
  // Pre-multiplied sum: scale this rank's input once, then a plain sum. The
  // scalar as it is now, for weftScalarDevice (NCCL reads it as the call runs).
  const PreMul& p = pm->second;
  const void* scalar = a.scalar != nullptr ? a.scalar : p.source != nullptr ? p.source : p.scalar;
  size_t n = sched::send_count({a.coll, nranks_, a.count, a.root, 0});
  premul_input_.resize(n * reduce::dtype_size(a.dtype));
  host_data_->scale(premul_input_.data(), a.send, n, a.dtype, scalar);
  return premul_input_.data();
}

const void* Communicator::device_scalar(weftRedOp_t op) const {
  auto pm = premul_.find(static_cast<int>(op));
  return pm != premul_.end() && pm->second.on_device ? pm->second.source : nullptr;
}

Status Communicator::call_failed(const CollArgs& a, Status st) {
  exec_->abandon_sends();
  explain_failure(&st);
  st.prefix(std::string(sched::coll_name(a.coll)) + " #" + std::to_string(seq_) + " (count " +
            std::to_string(a.count) + ", " + reduce::dtype_name(a.dtype) + "): ");
  fail(st);
  return st;
}

// A call like the last one runs its settled plan with nothing else to decide; any
// other shape goes through the tuner, out of line (execute_new_shape).
Status Communicator::execute(const CollArgs& a) {
  if (failed_.load(std::memory_order_acquire) || check_) WEFT_TRY(precheck(a));
  if (last_plan_ == nullptr || !(plan_key(a) == last_key_)) return execute_new_shape(a);
  return run_call<false>(a, last_plan_);
}

Status Communicator::execute_new_shape(const CollArgs& a) {
  Status st;
  tune::Trial* trial = nullptr;
  const sched::RankPlan* plan = find_plan(a, &st, &trial);
  if (plan == nullptr) return st;
  if (trial == nullptr) return run_plan(a, plan, found_algo_);
  const auto t0 = Clock::now();
  WEFT_TRY(run_plan(a, plan, found_algo_));
  // The round's agreement runs on the engine, before anything posted later.
  std::unique_ptr<engine::Op> agree = measured(a, trial, std::chrono::duration<double>(Clock::now() - t0).count());
  if (agree != nullptr) queue_->post_front(std::move(agree));
  return Status::Ok();
}

inline Status Communicator::run_plan(const CollArgs& a, const sched::RankPlan* plan, const char* algo) {
  if (__builtin_expect(trace::on(), 0)) return run_plan_traced(a, plan, algo);
  return run_call<false>(a, plan);
}

Status Communicator::run_plan_traced(const CollArgs& a, const sched::RankPlan* plan, const char* algo) {
  const double began = trace::now_us();
  Status st = run_call<true>(a, plan);
  trace_call(a, seq_, algo, began, st);
  return st;
}

template <bool kTraced>
inline Status Communicator::run_call(const CollArgs& a, const sched::RankPlan* plan) {
  ++seq_;
  const void* send = a.op >= weftNumOps ? premul_input(a) : a.send;
  exec::Call call{plan, send, a.recv, a.dtype, reduce::elementwise_op(a.op), seq_, LazyDeadline(timeout_ms_),
                  host_data_};
  Status st = kTraced ? exec_->run_traced(call) : exec_->run(call);
  if (!st.ok()) return call_failed(a, std::move(st));
  if (a.op == weftAvg) finish_call(a);
  return st;
}

void Communicator::trace_call(const CollArgs& a, uint64_t seq, const char* algo, double began_us,
                              const Status& st) const {
  char args[256];
  std::snprintf(args, sizeof(args),
                "\"seq\": %llu, \"count\": %llu, \"dtype\": \"%s\", \"op\": \"%s\", \"root\": %d, "
                "\"algorithm\": \"%s\", \"ok\": %s",
                static_cast<unsigned long long>(seq), static_cast<unsigned long long>(a.count),
                reduce::dtype_name(a.dtype), reduce::op_name(a.op), a.root, algo ? algo : "?", st.ok() ? "true" : "false");
  trace::span("coll", std::string(sched::coll_name(a.coll)) + " #" + std::to_string(seq), began_us, trace::now_us(),
              lineage_.family_rank, trace_row_, args);
}

void Communicator::trace_p2p(const std::vector<exec::P2P>& ops, double began_us, const Status& st) const {
  size_t sends = 0, bytes = 0;
  std::string peers;
  for (const exec::P2P& op : ops) {
    sends += op.send ? 1 : 0;
    bytes += op.bytes;
    peers += (peers.empty() ? "" : ",") + std::string(op.send ? "to " : "from ") + std::to_string(op.peer);
  }
  trace::span("p2p", "send/recv group", began_us, trace::now_us(), lineage_.family_rank, trace_row_,
              "\"sends\": " + std::to_string(sends) + ", \"recvs\": " + std::to_string(ops.size() - sends) +
                  ", \"bytes\": " + std::to_string(bytes) + ", \"peers\": \"" + peers +
                  "\", \"ok\": " + (st.ok() ? "true" : "false"));
}

void Communicator::finish_call(const CollArgs& a) {
  bool has_result = !(a.coll == sched::Coll::Reduce && rank_ != a.root);
  if (a.op == weftAvg && a.count > 0 && has_result)
    host_data_->divide(a.recv, a.recv, sched::recv_count({a.coll, nranks_, a.count, a.root, 0}), a.dtype,
                                   nranks_);
}

Status Communicator::run(const CollArgs& a) {
  if (!last_valid_ || !(*last_valid_ == a)) {
    WEFT_TRY(validate(a));
    if (a.op < weftNumOps) last_valid_ = a;
  }
  if (lock_idle()) {
    std::lock_guard<std::mutex> lock(queue_->drive_mu(), std::adopt_lock);
    Status st = execute(a);
    queue_->note_left();
    return st;
  }
  // Earlier operations are queued: run behind them.
  auto* req = new weftRequestImpl;
  queue_->post(std::make_unique<CollOp>(this, a, req));
  return wait(req);
}

Status Communicator::post(const CollArgs& a, weftRequestImpl** out) {
  WEFT_TRY(validate(a));
  auto* req = new weftRequestImpl;
  queue_->post(std::make_unique<CollOp>(this, a, req));
  *out = req;
  return Status::Ok();
}

Status Communicator::post_p2p(std::vector<exec::P2P> ops, std::vector<exec::LocalCopy> copies,
                              weftRequestImpl** out) {
  auto* req = new weftRequestImpl;
  queue_->post(std::make_unique<P2POp>(this, std::move(ops), std::move(copies), req));
  *out = req;
  return Status::Ok();
}

Status Communicator::wait(weftRequestImpl* req) {
  // The waiter drives the engine itself rather than spin idle (and with
  // WEFT_PROGRESS_THREADS=0 nothing else would).
  engine::Engine& engine = engine::Engine::get();
  SpinWait wait;
  while (!req->done.load(std::memory_order_acquire)) {
    engine.progress();
    if (!req->done.load(std::memory_order_acquire)) wait.pause();
  }
  Status st = std::move(req->result);
  delete req;
  return st;
}

}  // namespace weft
