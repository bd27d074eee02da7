// The rank side of the bootstrap: one connection to the root, requests answered
// in order, and notices (lost rank, abort, job error) that may arrive at any time
// and make every later call fail with the same error.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/root_service.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

namespace weft::boot {

namespace {

// Ranks of this process joined to each root service this process runs.
std::mutex g_local_mu;
std::map<std::pair<uint16_t, std::string>, int>& local_ranks() {
  static auto* m = new std::map<std::pair<uint16_t, std::string>, int>;
  return *m;
}
void join_root_process(const UniqueId& id) {
  std::lock_guard<std::mutex> lock(g_local_mu);
  ++local_ranks()[{id.port, secret_hex(id.secret)}];
}
// How many ranks of this process are still joined to that root after this one leaves.
int leave_root_process(const UniqueId& id) {
  std::lock_guard<std::mutex> lock(g_local_mu);
  auto it = local_ranks().find({id.port, secret_hex(id.secret)});
  if (it == local_ranks().end()) return 0;
  int left = --it->second;
  if (left == 0) local_ranks().erase(it);
  return left;
}

class Client final : public Bootstrap {
 public:
  Client(const UniqueId& id, const SockAddr& root, int rank, int nranks, Fd fd)
      : id_(id), root_(root), rank_(rank), nranks_(nranks), fd_(std::move(fd)) {}
  ~Client() override;

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  Status allgather(const void* mine, size_t size, void* all, Deadline deadline) override;
  Status barrier(Deadline deadline) override;
  Status poll() override;
  void abort(const std::string& reason) override;

  Status join(Deadline deadline);

 private:
  Status send_msg(MsgType type, uint64_t seq, int64_t arg, const void* data, size_t len,
                  Deadline deadline, const char* what);
  // Waits for the reply to operation `seq`; notices that arrive instead fail the call.
  Status wait_msg(MsgType want, uint64_t seq, Deadline deadline, const std::string& what,
                  const std::string& waiting_for, Msg* out);
  // Turns a notice or a closed connection into the sticky error; returns it.
  Status handle_notice(const Msg& m);
  Status lost_root(const std::string& what, int err);
  Status sticky() {
    std::lock_guard<std::mutex> lk(state_mu_);
    return sticky_;
  }
  void set_sticky(const Status& st) {
    std::lock_guard<std::mutex> lk(state_mu_);
    if (sticky_.ok()) sticky_ = st;
  }
  Status run_op(OpKind kind, const void* mine, size_t size, void* all, Deadline deadline);

  UniqueId id_;
  SockAddr root_;
  int rank_, nranks_;
  Fd fd_;
  MsgReader in_;
  uint64_t seq_ = 0;
  // op_mu_ serialises requests and all reads; send_mu_ serialises writes so that
  // abort() can speak while another thread waits for a reply.
  std::mutex op_mu_, send_mu_, state_mu_;
  Status sticky_;
  std::atomic<bool> aborted_{false};
  bool joined_ = false;  // only a joined rank says goodbye and waits for the root
};

Status Client::send_msg(MsgType type, uint64_t seq, int64_t arg, const void* data, size_t len,
                        Deadline deadline, const char* what) {
  std::string buf;
  buf.reserve(sizeof(MsgHeader) + len);
  append_msg(&buf, type, seq, arg, data, len);
  std::lock_guard<std::mutex> lk(send_mu_);
  return send_all(fd_.get(), buf.data(), buf.size(), deadline, what);
}

Status Client::lost_root(const std::string& what, int err) {
  std::string msg = "rank " + std::to_string(rank_) + ": " + what +
                    ": lost connection to the bootstrap root at " + root_.str();
  if (err != 0) msg += std::string(" (") + std::strerror(err) + ")";
  Status st(weftRemoteError, msg);
  set_sticky(st);
  return sticky();
}

Status Client::handle_notice(const Msg& m) {
  switch (m.type()) {
    case MsgType::Lost:
    case MsgType::Abort:
      set_sticky(Status(weftRemoteError, m.payload));
      break;
    case MsgType::Error: {
      auto code = static_cast<weftResult_t>(m.hdr.arg);
      if (code <= weftSuccess || code >= weftNumResults) code = weftInternalError;
      set_sticky(Status(code, m.payload));
      break;
    }
    default:
      set_sticky(Error(weftInternalError, "rank %d: unexpected bootstrap message type %u from the root",
                       rank_, m.hdr.type));
  }
  return sticky();
}

Status Client::wait_msg(MsgType want, uint64_t seq, Deadline deadline, const std::string& what,
                        const std::string& waiting_for, Msg* out) {
  auto start = Clock::now();
  char buf[65536];
  // At the deadline, ask the root once which ranks are missing and give it a
  // moment to answer, so the timeout can name them.
  bool asked = false;
  int64_t waited_ms = 0;
  std::string missing;
  for (;;) {
    bool bad = false;
    while (in_.next(out, &bad)) {
      if (out->type() == want && out->hdr.seq == seq) return Status::Ok();
      if (out->type() == MsgType::Waiting) {
        if (asked) missing = out->payload;
        continue;
      }
      return handle_notice(*out);
    }
    if (bad) {
      Status st = Error(weftInternalError, "rank %d: %s: malformed message from the bootstrap root %s",
                        rank_, what.c_str(), root_.str().c_str());
      set_sticky(st);
      return st;
    }
    if (aborted_) return sticky();
    int err = 0;
    ssize_t n = recv_some(fd_.get(), buf, sizeof buf, &err);
    if (n > 0) {
      in_.feed(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || err != 0) return lost_root(what, err);
    if (deadline.expired() && !asked) {
      waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      asked = true;
      deadline = Deadline::after_ms(300);
      if (!send_msg(MsgType::Query, seq, 0, nullptr, 0, deadline, what.c_str()).ok()) missing = "";
      continue;
    }
    if (asked && (deadline.expired() || !missing.empty())) {
      // The reply may still come; a late one must not be taken for a later
      // request's, so the job is over for this rank.
      Status st = Error(weftTimeout, "rank %d: %s: timed out after %lld ms waiting for %s%s%s", rank_,
                        what.c_str(), static_cast<long long>(waited_ms), waiting_for.c_str(),
                        missing.empty() ? "" : "; ", missing.c_str());
      set_sticky(st);
      return st;
    }
    // Nothing yet: wait in short slices so that a local abort() is noticed.
    Deadline slice = Deadline::after_ms(std::min<int64_t>(deadline.remaining_ms(), 100));
    int perr = 0;
    if (!wait_readable(fd_.get(), slice, &perr) && perr != 0)
      return SysError(perr, "rank %d: %s: poll", rank_, what.c_str());
  }
}

Status Client::join(Deadline deadline) {
  HelloBody h{};
  std::memcpy(h.secret, id_.secret.bytes, sizeof h.secret);
  h.version = kWireVersion;
  h.rank = rank_;
  h.nranks = nranks_;
  h.pid = static_cast<int32_t>(::getpid());
  if (gethostname(h.host, sizeof h.host - 1) != 0) std::strcpy(h.host, "?");
  std::string what = "bootstrap join (rank " + std::to_string(rank_) + " of " +
                     std::to_string(nranks_) + ")";
  WEFT_TRY(send_msg(MsgType::Hello, 0, 0, &h, sizeof h, deadline, what.c_str()));
  Msg m;
  std::string waiting = "all " + std::to_string(nranks_) + " ranks to connect to the root at " + root_.str();
  Status st = wait_msg(MsgType::Welcome, 0, deadline, what, waiting, &m);
  joined_ = st.ok();
  if (joined_ && find_root_service(id_) != nullptr) join_root_process(id_);
  if (st.code() == weftRemoteError && st.message().find("lost connection") != std::string::npos)
    // The root closes on a stranger without a word; say the likely cause.
    return Status(weftRemoteError, st.message() + "; the root closed the connection during the "
                                                  "join (wrong job secret, or the root exited)");
  return st;
}

Status Client::run_op(OpKind kind, const void* mine, size_t size, void* all, Deadline deadline) {
  std::lock_guard<std::mutex> lk(op_mu_);
  WEFT_TRY(sticky());
  const char* name = op_name(static_cast<int64_t>(kind));
  std::string what = std::string("bootstrap ") + name + " #" + std::to_string(seq_);
  if (kind == OpKind::Allgather) what += " (" + std::to_string(size) + " bytes)";
  // Checked before taking a sequence number: a call refused here never reached the root.
  if (size > kMaxPayload / static_cast<size_t>(nranks_))
    return Error(weftInvalidArgument, "rank %d: %s: too large for the bootstrap (limit %u bytes in all)",
                 rank_, what.c_str(), kMaxPayload);
  uint64_t seq = seq_++;
  Status st = send_msg(MsgType::Op, seq, static_cast<int64_t>(kind), mine, size, deadline, what.c_str());
  if (!st.ok()) {
    if (st.code() == weftRemoteError) return lost_root(what, 0);
    // A message cut off midway leaves the stream unusable: the job is over here.
    set_sticky(st);
    return st;
  }
  Msg m;
  std::string waiting = "all " + std::to_string(nranks_) + " ranks to arrive (reply from the root at " +
                        root_.str() + ")";
  WEFT_TRY(wait_msg(MsgType::Reply, seq, deadline, what, waiting, &m));
  if (m.payload.size() != size * static_cast<size_t>(nranks_)) {
    set_sticky(Error(weftInternalError, "rank %d: %s: the root replied with %zu bytes, expected %zu",
                     rank_, what.c_str(), m.payload.size(), size * static_cast<size_t>(nranks_)));
    return sticky();
  }
  if (size > 0) std::memcpy(all, m.payload.data(), m.payload.size());
  return Status::Ok();
}

Status Client::allgather(const void* mine, size_t size, void* all, Deadline deadline) {
  return run_op(OpKind::Allgather, mine, size, all, deadline);
}

Status Client::barrier(Deadline deadline) { return run_op(OpKind::Barrier, nullptr, 0, nullptr, deadline); }

Status Client::poll() {
  // A thread waiting in allgather/barrier reads the socket itself and will see
  // any notice; do not wait for it.
  std::unique_lock<std::mutex> lk(op_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return sticky();
  WEFT_TRY(sticky());
  char buf[4096];
  int err = 0;
  ssize_t n = recv_some(fd_.get(), buf, sizeof buf, &err);
  if (n > 0) in_.feed(buf, static_cast<size_t>(n));
  // Parse even when nothing new came: a notice may have arrived together with the
  // last reply and be waiting in the buffer. Outside a request only notices can
  // arrive; each one ends the job.
  Msg m;
  bool bad = false;
  while (in_.next(&m, &bad))
    if (m.type() != MsgType::Waiting) WEFT_TRY(handle_notice(m));
  if (bad)
    set_sticky(Error(weftInternalError, "rank %d: bootstrap poll: malformed message from the root %s",
                     rank_, root_.str().c_str()));
  if (n == 0 || (n < 0 && err != 0)) return lost_root("bootstrap poll", err);
  return sticky();
}

void Client::abort(const std::string& reason) {
  set_sticky(Error(weftRemoteError, "rank %d aborted the job: %s", rank_, reason.c_str()));
  aborted_ = true;
  Status st = send_msg(MsgType::Abort, 0, 0, reason.data(), reason.size(), Deadline::after_ms(1000),
                       "abort");
  if (!st.ok()) WEFT_WARN(BOOT, "rank %d: could not tell the root about the abort: %s", rank_,
                          st.message().c_str());
}

Client::~Client() {
  if (!joined_) return;  // fd_ closes; the root frees this rank's slot
  // A goodbye tells the root this close is deliberate, so no rank hears "lost".
  Status st = send_msg(MsgType::Goodbye, 0, 0, nullptr, 0, Deadline::after_ms(1000), "goodbye");
  (void)st;
  ::shutdown(fd_.get(), SHUT_WR);
  fd_.reset();
  // The root's process must keep serving until every rank has left: its last
  // rank to leave waits (weftCommInitAll puts every rank in one process, and
  // they leave one after another).
  auto svc = find_root_service(id_);
  if (svc != nullptr && leave_root_process(id_) == 0) {
    if (!wait_root_service(*svc, Deadline::from_params()))
      WEFT_WARN(BOOT, "rank %d: bootstrap root %s still has ranks connected after %lld ms; leaving it",
                rank_, root_.str().c_str(), static_cast<long long>(params::TIMEOUT_MS()));
  }
}

}  // namespace

Status Bootstrap::connect(const UniqueId& id, int rank, int nranks, Deadline deadline,
                          std::unique_ptr<Bootstrap>* out) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return Error(weftInvalidArgument, "bootstrap connect: rank %d is out of range for nranks=%d", rank,
                 nranks);
  std::string host(id.host, strnlen(id.host, sizeof id.host));
  SockAddr root;
  if (!parse_numeric(host, id.port, &root))
    return Error(weftInvalidArgument, "bootstrap connect: unique id holds a bad root address '%s'",
                 host.c_str());
  Fd fd;
  Status st = connect_retry(root, params::BOOT_RETRY_MS(), deadline, &fd);
  if (!st.ok()) return st.prefix("rank " + std::to_string(rank) + ": ");
  auto c = std::make_unique<Client>(id, root, rank, nranks, std::move(fd));
  WEFT_TRY(c->join(deadline));
  WEFT_INFO(BOOT, "rank %d of %d joined the bootstrap at %s", rank, nranks, root.str().c_str());
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace weft::boot
