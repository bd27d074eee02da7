#include "bootstrap/root_service.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/diagnosis.h"
#include "bootstrap/wire.h"

namespace weft::boot {

namespace {

// One accepted connection. Until its hello arrives it is nobody's; after that
// it belongs to a rank.
struct Conn {
  Fd fd;
  SockAddr peer;
  MsgReader in;
  std::string out;           // bytes queued for this peer, flushed on POLLOUT
  bool hello_ok = false;     // proved the secret; may be told about failures
  int rank = -1;             // set once a valid hello was accepted
  bool close_after_flush = false;
  bool dead = false;         // to be removed at the end of this loop iteration
};

struct RankInfo {
  Conn* conn = nullptr;
  bool goodbye = false;      // left cleanly
  bool lost = false;         // connection closed without a goodbye
  std::string host;
  int pid = 0;
  std::string addr;
  PeerAddr reach{};  // told to every rank in the welcome
};

std::string describe(int rank, const RankInfo& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "rank %d (host %s, pid %d)", rank, r.host.c_str(), r.pid);
  return buf;
}

// The ranks of one communicator of the family and its operation in flight:
// members cannot run ahead, since each waits for the reply to operation k
// before it sends k+1. A group's ranks are numbered by their place in members.
struct Group {
  std::vector<int> members;  // ranks on their connections
  std::vector<bool> left;    // per member: its communicator is gone (Leave)
  bool failed = false;
  weftResult_t fail_code = weftSuccess;
  std::string fail_msg;
  uint64_t op_seq = 0;
  bool op_active = false;
  int64_t op_kind = 0;
  uint64_t op_size = 0;
  int op_first = -1;  // in the group's numbering
  int op_count = 0;
  std::vector<bool> op_arrived;
  std::string op_data;

  // A diagnosis round: the members' status rows, gathered until every member
  // answered or its deadline.
  struct Round {
    bool active = false;
    bool dump = true;  // only dumps were asked for: nobody fails
    uint64_t id = 0;
    Clock::time_point began, deadline;
    std::vector<bool> answered;
    std::vector<RankStatus> rows;
  } round;
  std::string diagnosis;  // a timeout's round result (line, '\n', table): later reports get it at once

  int index_of(int rank) const {
    auto it = std::find(members.begin(), members.end(), rank);
    return it == members.end() ? -1 : static_cast<int>(it - members.begin());
  }
};

}  // namespace

class RootService : public std::enable_shared_from_this<RootService> {
 public:
  RootService(Fd listen_fd, SockAddr bound, const Secret& secret)
      : listen_(std::move(listen_fd)), bound_(bound), secret_(secret),
        started_(Clock::now()) {}

  Status start();
  bool wait(Deadline deadline);
  void stop();
  uint16_t port() const { return bound_.port(); }
  const Secret& secret() const { return secret_; }

 private:
  void run();
  void serve();  // the loop, until finished()
  void on_readable(Conn* c);
  void on_message(Conn* c, Msg& m);
  void on_hello(Conn* c, const Msg& m);
  void on_op(Conn* c, const Msg& m);
  // Abort and Revoke: the notice goes to every other member of the group.
  void on_abort(Conn* c, const Msg& m);
  void on_leave(Conn* c, const Msg& m);
  void on_report(Conn* c, const Msg& m);
  void on_status_reply(Conn* c, const Msg& m);
  // Ends rounds that are complete or past their deadline; the time until the next deadline.
  int64_t finish_rounds();
  void finish_round(uint64_t id, Group& g);
  void on_closed(Conn* c);
  void fail_all(weftResult_t code, const std::string& msg);
  void fail_group(uint64_t id, Group& g, weftResult_t code, const std::string& msg);
  // The group an Op names (created by its first Op), or nullptr after failing
  // the sender's request; *data: the rank's part, past the member list.
  Group* group_of(Conn* c, const Msg& m, std::string_view* data);
  void send(Conn* c, MsgType type, uint64_t seq, int64_t arg, const void* data, size_t len, uint64_t group = 0);
  void flush(Conn* c);
  void drop(Conn* c, const char* why);
  bool finished() const;
  std::string waiting_text(uint64_t group) const;
  int joined() const;

  Fd listen_;
  SockAddr bound_;
  Secret secret_;
  Clock::time_point started_;
  Fd wake_rd_, wake_wr_;     // self-pipe: stop() interrupts poll()
  std::atomic<bool> stop_{false};

  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;

  // State below is touched only by the service thread.
  std::vector<std::unique_ptr<Conn>> conns_;
  int nranks_ = -1;
  int32_t root_rank_ = -1;  // the rank whose process runs this service (its hello said so)
  int max_nranks_seen_ = 0;
  int hellos_ = 0;           // connections that proved the secret
  std::vector<RankInfo> ranks_;
  bool welcomed_ = false;
  bool failed_ = false;
  weftResult_t fail_code_ = weftSuccess;
  std::string fail_msg_;
  Clock::time_point failed_at_{};

  // Group 0 (every rank) from the welcome on; the others from their first Op.
  std::map<uint64_t, Group> groups_;
};

namespace {
// Leaked on purpose: services may still run while static destructors do.
std::mutex& registry_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<std::pair<uint16_t, std::string>, std::shared_ptr<RootService>>& registry() {
  static auto* map = new std::map<std::pair<uint16_t, std::string>, std::shared_ptr<RootService>>;
  return *map;
}
std::pair<uint16_t, std::string> key_of(uint16_t port, const Secret& s) {
  return {port, std::string(reinterpret_cast<const char*>(s.bytes), sizeof s.bytes)};
}
// The process whose threads run the registered services. A child forked after a
// root was created inherits the registry but not the threads: it must not wait
// for services that do not run in it.
pid_t& registry_pid() {
  static pid_t pid = 0;
  return pid;
}
}  // namespace

Status RootService::start() {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) return SysError(errno, "bootstrap root: pipe2");
  wake_rd_.reset(p[0]);
  wake_wr_.reset(p[1]);
  // The thread holds a reference, so the service outlives its registry entry
  // until the loop is done with it.
  std::thread([self = shared_from_this()] { self->run(); }).detach();
  return Status::Ok();
}

bool RootService::wait(Deadline deadline) {
  std::unique_lock<std::mutex> lk(done_mu_);
  return done_cv_.wait_for(lk, std::chrono::milliseconds(deadline.remaining_ms()),
                           [&] { return done_; });
}

void RootService::stop() {
  stop_ = true;
  char b = 1;
  ssize_t n = ::write(wake_wr_.get(), &b, 1);
  (void)n;
}

int RootService::joined() const {
  int n = 0;
  for (const auto& r : ranks_) n += r.conn != nullptr || r.goodbye || r.lost;
  return n;
}

bool RootService::finished() const {
  if (stop_) return true;
  for (const auto& c : conns_)
    if (!c->out.empty()) return false;  // let queued errors and notices reach their ranks
  if (welcomed_) {
    for (const auto& r : ranks_)
      if (!r.goodbye && !r.lost) return false;
    return true;
  }
  if (failed_) {
    // Before everyone joined, a failed job lingers so that late ranks still learn
    // why instead of timing out: until every expected rank was told, or the deadline.
    if (hellos_ >= max_nranks_seen_) return true;
    return Clock::now() - failed_at_ > std::chrono::milliseconds(params::TIMEOUT_MS());
  }
  return false;
}

void RootService::send(Conn* c, MsgType type, uint64_t seq, int64_t arg, const void* data,
                       size_t len, uint64_t group) {
  if (c == nullptr || c->dead) return;
  append_msg(&c->out, type, seq, arg, data, len, group);
  flush(c);
}

void RootService::flush(Conn* c) {
  while (!c->out.empty() && !c->dead) {
    ssize_t n = ::send(c->fd.get(), c->out.data(), c->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // The peer is gone; what we had for it no longer matters.
    c->out.clear();
    on_closed(c);
    return;
  }
  if (c->out.empty() && c->close_after_flush && !c->dead) {
    c->dead = true;
    if (c->rank >= 0 && c->rank < static_cast<int>(ranks_.size()) &&
        ranks_[c->rank].conn == c)
      ranks_[c->rank].conn = nullptr;
  }
}

void RootService::drop(Conn* c, const char* why) {
  WEFT_WARN(BOOT, "bootstrap root %s: dropped connection from %s: %s", bound_.str().c_str(),
            c->peer.str().c_str(), why);
  c->out.clear();
  c->dead = true;
}

void RootService::fail_all(weftResult_t code, const std::string& msg) {
  if (failed_) return;
  failed_ = true;
  fail_code_ = code;
  fail_msg_ = msg;
  failed_at_ = Clock::now();
  WEFT_WARN(BOOT, "bootstrap root %s: %s", bound_.str().c_str(), msg.c_str());
  for (auto& c : conns_) {
    if (!c->hello_ok || c->dead) continue;
    c->close_after_flush = !welcomed_;
    send(c.get(), MsgType::Error, 0, code, msg.data(), msg.size(), kJobGroup);
  }
}

// An operation of one group went wrong: its members fail, the family's other
// communicators go on.
void RootService::fail_group(uint64_t id, Group& g, weftResult_t code, const std::string& msg) {
  if (g.failed) return;
  g.failed = true;
  g.fail_code = code;
  g.fail_msg = msg;
  WEFT_WARN(BOOT, "bootstrap root %s: %s", bound_.str().c_str(), msg.c_str());
  for (int r : g.members) send(ranks_[static_cast<size_t>(r)].conn, MsgType::Error, 0, code, msg.data(), msg.size(), id);
}

// A connection closed. Before the job is complete that only frees the rank (a
// rank may retry); afterwards, without a goodbye, every other rank must know.
void RootService::on_closed(Conn* c) {
  if (c->dead) return;
  c->dead = true;
  int r = c->rank;
  if (r < 0 || r >= static_cast<int>(ranks_.size()) || ranks_[r].conn != c) return;
  RankInfo& info = ranks_[r];
  info.conn = nullptr;
  if (!welcomed_) {
    WEFT_INFO(BOOT, "bootstrap root %s: rank %d left before the job was complete", bound_.str().c_str(), r);
    return;
  }
  if (info.goodbye) return;
  info.lost = true;
  WEFT_WARN(BOOT, "bootstrap root %s: %s disconnected from the bootstrap", bound_.str().c_str(),
            describe(r, info).c_str());
  // Every communicator of the family that has the rank hears of it, in its own numbering.
  for (auto& [id, g] : groups_) {
    int lost = g.index_of(r);
    if (lost < 0) continue;
    if (g.round.active && !g.round.answered[static_cast<size_t>(lost)]) {
      g.round.answered[static_cast<size_t>(lost)] = true;
      g.round.rows[static_cast<size_t>(lost)].row.state = static_cast<int32_t>(RowState::Lost);
    }
    std::string text = describe(lost, info) + " disconnected from the bootstrap";
    for (int m : g.members)
      if (m != r) send(ranks_[static_cast<size_t>(m)].conn, MsgType::Lost, 0, lost, text.data(), text.size(), id);
  }
}

void RootService::on_hello(Conn* c, const Msg& m) {
  HelloBody h;
  if (m.type() != MsgType::Hello || m.payload.size() != sizeof h) {
    drop(c, "first message is not a weft bootstrap hello");
    return;
  }
  std::memcpy(&h, m.payload.data(), sizeof h);
  if (std::memcmp(h.secret, secret_.bytes, sizeof h.secret) != 0) {
    drop(c, "wrong job secret (another job, or a stray connection)");
    return;
  }
  h.host[sizeof h.host - 1] = '\0';
  ++hellos_;
  c->hello_ok = true;
  c->in.set_limit(kMaxPayload);
  max_nranks_seen_ = std::max(max_nranks_seen_, h.nranks);
  c->rank = h.rank;
  if (h.version != kWireVersion && !failed_) {
    std::string msg = "bootstrap protocol version mismatch: rank " + std::to_string(h.rank) +
                      " speaks " + std::to_string(h.version) + ", the root " +
                      std::to_string(kWireVersion);
    fail_all(weftInvalidUsage, msg);  // tells this connection too
    return;
  }
  if (failed_) {
    c->close_after_flush = true;
    send(c, MsgType::Error, 0, fail_code_, fail_msg_.data(), fail_msg_.size());
    return;
  }
  RankInfo me{nullptr, false, false, h.host, h.pid, c->peer.str(), PeerAddr{}};
  std::snprintf(me.reach.host, sizeof me.reach.host, "%s", c->peer.host().c_str());
  if (h.standby_port <= 65535) me.reach.port = h.standby_port;
  if (h.status_port <= 65535) me.reach.status_port = h.status_port;
  me.reach.pid = h.pid;
  std::snprintf(me.reach.hostname, sizeof me.reach.hostname, "%.*s", static_cast<int>(sizeof h.host), h.host);
  if (nranks_ < 0) {
    nranks_ = h.nranks;
    ranks_.assign(static_cast<size_t>(std::max(nranks_, 0)), RankInfo{});
  }
  char buf[512];
  if (h.nranks != nranks_) {
    // Name both values and who holds them: the usual cause is one rank's launcher line.
    int other = -1;
    for (int i = 0; i < nranks_; ++i)
      if (ranks_[i].conn != nullptr) other = i;
    std::string first = other >= 0 ? describe(other, ranks_[other]) : "an earlier rank";
    std::snprintf(buf, sizeof buf, "nranks mismatch: %s says nranks=%d, but %s says nranks=%d",
                  describe(h.rank, me).c_str(), h.nranks, first.c_str(), nranks_);
    fail_all(weftInvalidUsage, buf);
    return;
  }
  if (h.rank < 0 || h.rank >= nranks_) {
    std::snprintf(buf, sizeof buf, "%s from %s: rank %d is out of range for nranks=%d",
                  describe(h.rank, me).c_str(), me.addr.c_str(), h.rank, nranks_);
    fail_all(weftInvalidArgument, buf);
    return;
  }
  RankInfo& slot = ranks_[h.rank];
  if (slot.conn != nullptr || slot.goodbye || slot.lost) {
    std::snprintf(buf, sizeof buf, "rank %d joined twice: %s from %s and host %s, pid %d from %s",
                  h.rank, describe(h.rank, slot).c_str(), slot.addr.c_str(), h.host, h.pid,
                  me.addr.c_str());
    fail_all(weftInvalidArgument, buf);
    return;
  }
  me.conn = c;
  slot = me;
  // With several ranks in this process (weftCommInitAll) the lowest names it.
  if (m.hdr.arg == 1 && (root_rank_ < 0 || h.rank < root_rank_)) root_rank_ = h.rank;
  WEFT_INFO(BOOT, "bootstrap root %s: rank %d joined from %s (%d of %d)", bound_.str().c_str(),
            h.rank, me.addr.c_str(), joined(), nranks_);
  if (joined() == nranks_) {
    welcomed_ = true;
    Group& all = groups_[0];
    for (int i = 0; i < nranks_; ++i) all.members.push_back(i);
    all.left.assign(static_cast<size_t>(nranks_), false);
    all.op_arrived.assign(static_cast<size_t>(nranks_), false);
    // Every rank learns whose process runs the root (if the root goes, that rank
    // went) and where each rank's process could host a new one.
    std::string owner = root_rank_ >= 0 ? describe(root_rank_, ranks_[static_cast<size_t>(root_rank_)]) : "";
    WelcomeHead head{root_rank_, static_cast<uint32_t>(owner.size())};
    std::string welcome(reinterpret_cast<const char*>(&head), sizeof head);
    welcome += owner;
    for (const auto& r : ranks_) welcome.append(reinterpret_cast<const char*>(&r.reach), sizeof r.reach);
    for (auto& r : ranks_) send(r.conn, MsgType::Welcome, 0, nranks_, welcome.data(), welcome.size());
    WEFT_INFO(BOOT, "bootstrap root %s: all %d ranks joined", bound_.str().c_str(), nranks_);
  }
}

Group* RootService::group_of(Conn* c, const Msg& m, std::string_view* data) {
  *data = m.payload;
  const uint64_t id = m.hdr.group;
  auto it = groups_.find(id);
  if (id == 0) return &it->second;
  // The member list leads every Op of a group other than 0.
  GroupPrefix p{};
  std::vector<int> members;
  bool ok = data->size() >= sizeof p;
  if (ok) {
    std::memcpy(&p, data->data(), sizeof p);
    ok = p.nmembers >= 1 && p.nmembers <= static_cast<uint32_t>(nranks_) &&
         data->size() >= sizeof p + size_t{p.nmembers} * sizeof(int32_t);
  }
  for (uint32_t i = 0; ok && i < p.nmembers; ++i) {
    int32_t r;
    std::memcpy(&r, data->data() + sizeof p + i * sizeof r, sizeof r);
    ok = r >= 0 && r < nranks_;
    members.push_back(r);
  }
  if (!ok || std::find(members.begin(), members.end(), c->rank) == members.end()) {
    drop(c, "malformed group operation");
    on_closed(c);
    return nullptr;
  }
  data->remove_prefix(sizeof p + size_t{p.nmembers} * sizeof(int32_t));
  if (it == groups_.end()) {
    Group& g = groups_[id];
    g.members = std::move(members);
    g.left.assign(g.members.size(), false);
    g.op_arrived.assign(g.members.size(), false);
    return &g;
  }
  if (it->second.members != members) {
    std::string msg = "bootstrap group " + std::to_string(id) + ": rank " + std::to_string(c->rank) +
                      " names other members than the group's first operation did";
    send(c, MsgType::Error, 0, weftInternalError, msg.data(), msg.size(), id);
    return nullptr;
  }
  return &it->second;
}

void RootService::on_op(Conn* c, const Msg& m) {
  std::string_view data;
  Group* gp = group_of(c, m, &data);
  if (gp == nullptr) return;
  Group& g = *gp;
  const uint64_t id = m.hdr.group;
  const int r = g.index_of(c->rank);  // in the group's numbering
  const int n = static_cast<int>(g.members.size());
  int64_t kind = m.hdr.arg;
  uint64_t size = data.size();
  char buf[512];
  if (g.failed) {
    send(c, MsgType::Error, 0, g.fail_code, g.fail_msg.data(), g.fail_msg.size(), id);
    return;
  }
  if (m.hdr.seq != g.op_seq) {
    std::snprintf(buf, sizeof buf,
                  "bootstrap operation order mismatch: rank %d sent %s #%llu while the job is at #%llu",
                  r, op_name(kind), static_cast<unsigned long long>(m.hdr.seq),
                  static_cast<unsigned long long>(g.op_seq));
    fail_group(id, g, weftInvalidUsage, buf);
    return;
  }
  for (int i = 0; i < n; ++i) {
    const RankInfo& info = ranks_[static_cast<size_t>(g.members[static_cast<size_t>(i)])];
    const bool left = g.left[static_cast<size_t>(i)];
    if (!left && !info.goodbye && !info.lost) continue;
    std::snprintf(buf, sizeof buf, "rank %d called bootstrap %s #%llu, but rank %d has %s", r, op_name(kind),
                  static_cast<unsigned long long>(m.hdr.seq), i,
                  left ? "destroyed its communicator" : info.lost ? "disconnected from the bootstrap"
                                                              : "already left the bootstrap");
    send(c, MsgType::Error, 0, left || info.lost ? weftRemoteError : weftInvalidUsage, buf, std::strlen(buf), id);
    return;
  }
  if (!g.op_active) {
    g.op_active = true;
    g.op_kind = kind;
    g.op_size = size;
    g.op_first = r;
    g.op_count = 0;
    std::fill(g.op_arrived.begin(), g.op_arrived.end(), false);
    g.op_data.assign(size * static_cast<uint64_t>(n), '\0');
  } else if (kind != g.op_kind || size != g.op_size) {
    std::snprintf(buf, sizeof buf,
                  "bootstrap operation #%llu mismatch: rank %d called %s(%llu bytes) but rank %d "
                  "called %s(%llu bytes)",
                  static_cast<unsigned long long>(g.op_seq), r, op_name(kind),
                  static_cast<unsigned long long>(size), g.op_first, op_name(g.op_kind),
                  static_cast<unsigned long long>(g.op_size));
    fail_group(id, g, weftInvalidUsage, buf);
    return;
  }
  if (g.op_arrived[static_cast<size_t>(r)]) {
    fail_group(id, g, weftInternalError,
               "rank " + std::to_string(r) + " sent bootstrap operation #" + std::to_string(g.op_seq) + " twice");
    return;
  }
  g.op_arrived[static_cast<size_t>(r)] = true;
  ++g.op_count;
  if (size > 0) std::memcpy(g.op_data.data() + size * static_cast<uint64_t>(r), data.data(), size);
  if (g.op_count < n) return;
  for (int member : g.members)
    send(ranks_[static_cast<size_t>(member)].conn, MsgType::Reply, g.op_seq, g.op_kind, g.op_data.data(),
         g.op_data.size(), id);
  g.op_active = false;
  ++g.op_seq;
  g.op_data.clear();
}

// A member's communicator is gone: an operation it never joined fails at once
// (its peers would otherwise wait for it until their deadline), and the group is
// forgotten once every member has left, so its id may name a new group.
void RootService::on_leave(Conn* c, const Msg& m) {
  auto it = groups_.find(m.hdr.group);
  if (m.hdr.group == 0 || it == groups_.end()) return;
  Group& g = it->second;
  int r = g.index_of(c->rank);
  if (r < 0) return;
  g.left[static_cast<size_t>(r)] = true;
  if (std::all_of(g.left.begin(), g.left.end(), [](bool b) { return b; })) {
    groups_.erase(it);
    return;
  }
  if (g.op_active && !g.op_arrived[static_cast<size_t>(r)])
    fail_group(m.hdr.group, g, weftRemoteError,
               describe(r, ranks_[static_cast<size_t>(c->rank)]) + " destroyed its communicator during bootstrap " +
                   op_name(g.op_kind) + " #" + std::to_string(g.op_seq));
}

void RootService::on_abort(Conn* c, const Msg& m) {
  auto it = groups_.find(m.hdr.group);
  if (it == groups_.end()) return;  // a communicator that never reached the root: nobody waits on it here
  Group& g = it->second;
  int r = g.index_of(c->rank);
  if (r < 0) return;
  const bool revoke = m.type() == MsgType::Revoke;
  std::string text = describe(r, ranks_[static_cast<size_t>(c->rank)]) +
                     (revoke ? " revoked the communicator: " : " aborted: ") + m.payload;
  WEFT_WARN(BOOT, "bootstrap root %s: %s", bound_.str().c_str(), text.c_str());
  for (int member : g.members)
    if (member != c->rank)
      send(ranks_[static_cast<size_t>(member)].conn, m.type(), 0, r, text.data(), text.size(), m.hdr.group);
}

namespace {
// "1,4,7" for up to 16 ranks, then "and N more": enough to act on, bounded for 10k ranks.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  size_t shown = std::min<size_t>(ranks.size(), 16);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ranks[i]);
  }
  if (ranks.size() > shown) out += " and " + std::to_string(ranks.size() - shown) + " more";
  return out;
}
}  // namespace

// What a rank of `group` that timed out is waiting for, in the root's view.
std::string RootService::waiting_text(uint64_t group) const {
  std::vector<int> missing;
  if (failed_) return "the job has already failed: " + fail_msg_;
  if (!welcomed_) {
    for (int i = 0; i < nranks_; ++i)
      if (ranks_[i].conn == nullptr) missing.push_back(i);
    return "the root has not heard from rank" + std::string(missing.size() == 1 ? " " : "s ") +
           rank_list(missing);
  }
  auto it = groups_.find(group);
  if (it == groups_.end()) return "no rank has called an operation of this communicator yet";
  const Group& g = it->second;
  if (g.failed) return "the communicator has already failed: " + g.fail_msg;
  if (!g.op_active) return "";
  for (size_t i = 0; i < g.members.size(); ++i)
    if (!g.op_arrived[i]) missing.push_back(static_cast<int>(i));
  return "rank" + std::string(missing.size() == 1 ? " " : "s ") + rank_list(missing) + " ha" +
         (missing.size() == 1 ? "s" : "ve") + " not called " + op_name(g.op_kind) + " #" +
         std::to_string(g.op_seq) + " yet";
}

// A rank timed out (or asks for a dump): gather every member's status row.
void RootService::on_report(Conn* c, const Msg& m) {
  const uint64_t id = m.hdr.group;
  auto it = groups_.find(id);
  const auto kind = static_cast<ReportKind>(m.hdr.arg);
  if (m.payload.size() != sizeof(StatusRow) || (kind != ReportKind::Timeout && kind != ReportKind::Dump)) {
    drop(c, "malformed status report");
    on_closed(c);
    return;
  }
  int r = it == groups_.end() ? -1 : it->second.index_of(c->rank);
  if (r < 0) {
    // A communicator that never ran a bootstrap operation, or not this rank's.
    std::string text = "the bootstrap root knows no such communicator of rank " + std::to_string(c->rank);
    send(c, MsgType::Diagnosis, m.hdr.arg, -1, text.data(), text.size(), id);
    return;
  }
  Group& g = it->second;
  if (kind == ReportKind::Timeout && !g.diagnosis.empty()) {
    send(c, MsgType::Diagnosis, m.hdr.arg, -1, g.diagnosis.data(), g.diagnosis.size(), id);
    return;
  }
  Group::Round& round = g.round;
  const size_t n = g.members.size();
  if (!round.active) {
    round.active = true;
    round.dump = true;
    ++round.id;
    round.began = Clock::now();
    round.deadline = round.began + std::chrono::milliseconds(params::DIAG_WAIT_MS());
    round.answered.assign(n, false);
    round.rows.assign(n, RankStatus{});
    for (size_t i = 0; i < n; ++i) {
      const RankInfo& info = ranks_[static_cast<size_t>(g.members[i])];
      RankStatus& rs = round.rows[i];
      rs.who = "host " + info.host + ", pid " + std::to_string(info.pid);
      rs.row.peer = -1;
      if (info.lost || info.conn == nullptr || g.left[i]) {
        rs.row.state = static_cast<int32_t>(info.lost || info.conn == nullptr ? RowState::Lost : RowState::Gone);
        round.answered[i] = true;
      } else if (static_cast<int>(i) != r) {
        send(info.conn, MsgType::StatusRequest, round.id, 0, nullptr, 0, id);
      }
    }
  }
  if (kind == ReportKind::Timeout) round.dump = false;
  std::memcpy(&round.rows[static_cast<size_t>(r)].row, m.payload.data(), sizeof(StatusRow));
  round.answered[static_cast<size_t>(r)] = true;
  finish_rounds();
}

void RootService::on_status_reply(Conn* c, const Msg& m) {
  auto it = groups_.find(m.hdr.group);
  if (it == groups_.end()) return;
  Group& g = it->second;
  int r = g.index_of(c->rank);
  if (r < 0 || !g.round.active || m.hdr.seq != g.round.id) return;  // late: that round is over
  if (m.payload.size() != sizeof(StatusRow)) {
    drop(c, "malformed status reply");
    on_closed(c);
    return;
  }
  std::memcpy(&g.round.rows[static_cast<size_t>(r)].row, m.payload.data(), sizeof(StatusRow));
  g.round.answered[static_cast<size_t>(r)] = true;
  finish_rounds();
}

int64_t RootService::finish_rounds() {
  int64_t next = 100;
  const auto now = Clock::now();
  for (auto& [id, g] : groups_) {
    if (!g.round.active) continue;
    const bool all = std::all_of(g.round.answered.begin(), g.round.answered.end(), [](bool b) { return b; });
    if (all || now >= g.round.deadline) {
      finish_round(id, g);
      continue;
    }
    next = std::min<int64_t>(
        next, std::chrono::duration_cast<std::chrono::milliseconds>(g.round.deadline - now).count() + 1);
  }
  return next;
}

void RootService::finish_round(uint64_t id, Group& g) {
  Group::Round& round = g.round;
  round.active = false;
  const int64_t waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - round.began).count();
  std::string table;
  std::string line = diagnose(round.rows, waited, &table);
  // The lowest rank that answered prints the table.
  int printer = -1;
  for (size_t i = 0; i < round.rows.size() && printer < 0; ++i) {
    auto st = static_cast<RowState>(round.rows[i].row.state);
    if (round.answered[i] && st != RowState::Lost && st != RowState::Gone && st != RowState::NoAnswer)
      printer = static_cast<int>(i);
  }
  const auto kind = round.dump ? ReportKind::Dump : ReportKind::Timeout;
  WEFT_WARN(BOOT, "bootstrap root %s: %s of a communicator of %zu ranks: %s", bound_.str().c_str(),
            round.dump ? "status dump" : "diagnosis", g.members.size(), line.c_str());
  std::string text = line + "\n" + table;
  if (!round.dump) g.diagnosis = text;
  for (int member : g.members)
    send(ranks_[static_cast<size_t>(member)].conn, MsgType::Diagnosis, static_cast<uint64_t>(kind), printer,
         text.data(), text.size(), id);
}

void RootService::on_message(Conn* c, Msg& m) {
  if (!c->hello_ok) {
    on_hello(c, m);
    return;
  }
  if (m.type() == MsgType::Query) {
    std::string text = waiting_text(m.hdr.group);
    send(c, MsgType::Waiting, m.hdr.seq, 0, text.data(), text.size(), m.hdr.group);
    return;
  }
  if (failed_ || !welcomed_) {
    // Nothing but a goodbye is meaningful before the welcome or after the job failed.
    if (m.type() == MsgType::Goodbye && c->rank < static_cast<int>(ranks_.size()) &&
        c->rank >= 0 && ranks_[c->rank].conn == c && welcomed_)
      ranks_[c->rank].goodbye = true;
    return;
  }
  int r = c->rank;
  switch (m.type()) {
    case MsgType::Op:
      on_op(c, m);
      break;
    case MsgType::Abort:
    case MsgType::Revoke:
      on_abort(c, m);
      break;
    case MsgType::Leave:
      on_leave(c, m);
      break;
    case MsgType::Report:
      on_report(c, m);
      break;
    case MsgType::StatusReply:
      on_status_reply(c, m);
      break;
    case MsgType::Goodbye:
      ranks_[r].goodbye = true;
      break;
    default:
      drop(c, "unexpected message type");
      on_closed(c);
  }
}

void RootService::on_readable(Conn* c) {
  char buf[65536];
  for (;;) {
    int err = 0;
    ssize_t n = recv_some(c->fd.get(), buf, sizeof buf, &err);
    if (n < 0 && err == 0) break;  // drained
    if (n <= 0) {
      on_closed(c);
      return;
    }
    c->in.feed(buf, static_cast<size_t>(n));
    Msg m;
    bool bad = false;
    while (!c->dead && c->in.next(&m, &bad)) on_message(c, m);
    if (bad && !c->dead) {
      if (!c->hello_ok) drop(c, "not a weft bootstrap connection (bad header)");
      else {
        drop(c, "malformed message");
        on_closed(c);
      }
    }
    if (c->dead) return;
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
}

void RootService::run() {
  serve();
  // Everything the service holds goes before it says it is done: a waiter may
  // end the process (or check it for leaks) at once.
  conns_.clear();
  listen_.reset();
  groups_.clear();
  ranks_.clear();
  {
    std::lock_guard<std::mutex> lk(registry_mu());
    registry().erase(key_of(bound_.port(), secret_));
  }
  WEFT_INFO(BOOT, "bootstrap root %s: service finished", bound_.str().c_str());
  std::lock_guard<std::mutex> lk(done_mu_);
  done_ = true;
  done_cv_.notify_all();
}

void RootService::serve() {
  WEFT_INFO(BOOT, "bootstrap root listening on %s", bound_.str().c_str());
  std::vector<pollfd> fds;
  while (!finished()) {
    if (!welcomed_ && !failed_ && nranks_ > 0 &&
        Clock::now() - started_ > std::chrono::milliseconds(params::TIMEOUT_MS())) {
      std::string missing;
      for (int i = 0; i < nranks_; ++i)
        if (ranks_[i].conn == nullptr) {
          if (!missing.empty()) missing += ',';
          missing += std::to_string(i);
        }
      fail_all(weftTimeout, "bootstrap root: timed out after " + std::to_string(params::TIMEOUT_MS()) +
                                " ms waiting for ranks " + missing + " to join");
      max_nranks_seen_ = 0;  // nobody else is coming; leave once the errors are out
    }
    fds.clear();
    fds.push_back({listen_.get(), POLLIN, 0});
    fds.push_back({wake_rd_.get(), POLLIN, 0});
    for (auto& c : conns_)
      fds.push_back({c->fd.get(), static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(finish_rounds()));
    if (rc < 0 && errno != EINTR) {
      WEFT_WARN(BOOT, "bootstrap root %s: poll failed: %s", bound_.str().c_str(), std::strerror(errno));
      break;
    }
    if (rc <= 0) continue;
    size_t nconns = conns_.size();  // accepted below are polled next round
    for (size_t i = 0; i < nconns; ++i) {
      Conn* c = conns_[i].get();
      short re = fds[i + 2].revents;
      if (c->dead || re == 0) continue;
      if (re & (POLLIN | POLLHUP | POLLERR)) on_readable(c);
      if (!c->dead && (re & POLLOUT)) flush(c);
    }
    if (fds[0].revents & POLLIN) {
      for (;;) {
        auto c = std::make_unique<Conn>();
        Status st = accept_one(listen_.get(), &c->fd, &c->peer);
        if (!st.ok()) {
          WEFT_WARN(BOOT, "%s", st.message().c_str());
          break;
        }
        if (!c->fd.valid()) break;
        c->in.set_limit(sizeof(HelloBody));
        conns_.push_back(std::move(c));
      }
    }
    conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->dead; }),
                 conns_.end());
  }
}

Status start_root_service(const SockAddr& addr, const Secret& secret, SockAddr* bound) {
  Fd fd;
  WEFT_TRY(listen_on(addr, &fd));
  return start_root_service_on(std::move(fd), secret, bound);
}

Status start_root_service_on(Fd fd, const Secret& secret, SockAddr* bound) {
  WEFT_TRY(local_address(fd.get(), bound));
  auto svc = std::make_shared<RootService>(std::move(fd), *bound, secret);
  {
    std::lock_guard<std::mutex> lk(registry_mu());
    if (registry_pid() != getpid()) {
      // First service of this process, or first since a fork: forget the parent's.
      registry().clear();
      registry_pid() = getpid();
    }
    registry()[key_of(bound->port(), secret)] = svc;
  }
  Status st = svc->start();
  if (!st.ok()) {
    std::lock_guard<std::mutex> lk(registry_mu());
    registry().erase(key_of(bound->port(), secret));
  }
  return st;
}

std::shared_ptr<RootService> find_root_service(const UniqueId& id) {
  std::lock_guard<std::mutex> lk(registry_mu());
  if (registry_pid() != getpid()) return nullptr;
  auto it = registry().find(key_of(id.port, id.secret));
  return it == registry().end() ? nullptr : it->second;
}

bool wait_root_service(RootService& service, Deadline deadline) { return service.wait(deadline); }

void stop_root_service(RootService& service) { service.stop(); }

}  // namespace weft::boot
