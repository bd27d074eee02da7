// The rank side of the bootstrap: one connection to the root per rank, shared by
// the communicators of its family (groups), requests answered in order per group,
// and notices (lost rank, abort, error, diagnosis) that may arrive at any time and
// make every later call of their group (of every group, for the job's) fail with
// the same error. A reader thread per connection takes in everything the root
// sends, so that status requests are answered while the rank computes outside weft.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <vector>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/diagnosis.h"
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

// SIGUSR1 asks every communicator of the process for a status dump: the handler
// only counts, and each connection's reader thread notices the count change.
std::atomic<uint32_t> g_dump_signals{0};
void on_dump_signal(int) { g_dump_signals.fetch_add(1, std::memory_order_relaxed); }
// Installed once, and only over the default action (which would kill the process):
// a handler the program set stays.
void install_dump_signal() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (params::SIGUSR1_DUMP() == 0) return;
    struct sigaction old{};
    if (sigaction(SIGUSR1, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
    struct sigaction sa{};
    sa.sa_handler = on_dump_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

// One joined rank's connection to the root, shared by the bootstraps of its
// family's communicators (a group each; group 0 is the communicator made by
// init). The reader thread reads the socket, sorts what arrives into the
// groups' boxes and answers status requests; callers wait on the condition variable.
class Connection {
 public:
  Connection(const UniqueId& id, const SockAddr& root, int rank, int nranks, Fd fd)
      : id_(id), root_(root), rank_(rank), nranks_(nranks), fd_(std::move(fd)) {}
  ~Connection();

  // The standby and status listeners; before start_reader(), whose thread polls
  // the status listener.
  void open_listeners();
  Status start_reader();
  void stop_reader();
  Status join(Deadline deadline);
  // A communicator's group on this connection: this rank's place in it (me) and
  // its members' ranks on their connections (empty for group 0).
  void open(uint64_t group, int me, const std::vector<int32_t>& members);
  void set_status_source(uint64_t group, Bootstrap::StatusSource source);
  std::string diagnose(uint64_t group, const StatusRow& mine, ReportKind kind, Deadline deadline);
  // One operation of `group` (members: its ranks on their connections, empty
  // for group 0; me: this rank's place there, for messages).
  Status run_op(uint64_t group, const std::vector<int32_t>& members, int me, OpKind kind, const void* mine,
                size_t size, void* all, Deadline deadline);
  Status poll(uint64_t group);
  void abort(uint64_t group, int me, const std::string& reason);
  void revoke(uint64_t group, int me, const std::string& reason);
  Status revoked(uint64_t group);
  Status shrink_root(uint64_t group, int leader, const Secret& secret, UniqueId* id);
  std::vector<int> lost_ranks(uint64_t group);
  std::string status_address(uint64_t group, int rank);
  // A communicator's group is gone here: its box goes, and the root hears of it.
  void leave(uint64_t group);

 private:
  struct Box {
    uint64_t seq = 0;  // the group's next operation
    std::deque<Msg> replies;
    Status sticky;  // the group's failure: its later calls return it
    int me = 0;
    std::vector<int32_t> members;  // empty: every rank, in connection order
    std::set<int> lost;            // members whose connection closed (Lost)
    std::string diagnosis;         // the root's latest diagnosis line
    Status revoked;                // the first Revoke notice (not a failure of the group)
    uint64_t diagnoses = 0;        // how many arrived
  };
  Status send_msg(MsgType type, uint64_t seq, int64_t arg, const void* data, size_t len, Deadline deadline,
                  const char* what, uint64_t group);
  // Waits for `want` #seq of `group`; the group's or the connection's failure ends the wait.
  Status wait_msg(uint64_t group, int me, MsgType want, uint64_t seq, Deadline deadline, const std::string& what,
                  const std::string& waiting_for, Msg* out);
  void read_loop();
  bool read_root(bool closing);
  // Sorts one message into the boxes (mu_ held); what must be done without the
  // lock (answers, printing) goes to *later.
  void dispatch(Msg& m, std::vector<Msg>* later);
  void answer(const Msg& m);
  void dump_all();
  // The reader thread answers every connection pending on the status listener.
  void serve_status();
  // The diagnosis without the root: asks every other member's status listener for
  // its row (until every one answered, or WEFT_DIAG_WAIT_MS) and diagnoses the
  // rows that came. line "" when there is nobody to ask.
  struct PeerDiagnosis {
    std::string line, table;
    int printer = -1;  // the member that prints the table
  };
  PeerDiagnosis peer_diagnosis(uint64_t group, const StatusRow& mine);
  Status failure(uint64_t group);
  // Once the root is gone: the message for a rank of `group`, naming the rank
  // whose process ran the root when the root said which.
  std::string root_lost_text(uint64_t group) const;
  Status lost_root(const std::string& what, int err);

  UniqueId id_;
  SockAddr root_;
  int rank_, nranks_;
  Fd fd_;
  MsgReader in_;        // touched by the reader thread only
  std::mutex send_mu_;  // whole messages
  std::mutex mu_;       // the boxes, sticky_, root_lost_
  std::condition_variable cv_;
  std::map<uint64_t, Box> boxes_;
  std::thread reader_;
  Fd wake_rd_, wake_wr_;  // wakes the reader to stop
  std::atomic<bool> stop_{false};
  std::mutex source_mu_;  // held while a status source runs
  std::map<uint64_t, Bootstrap::StatusSource> sources_;
  int root_rank_ = -1;      // the rank whose process runs the root (Welcome), -1: none
  std::string root_owner_;  // "rank R (host H, pid P)"
  bool root_lost_ = false;  // sticky_ is the loss of the root
  std::set<uint64_t> left_;  // groups whose communicator is gone here
  Status sticky_;  // the connection's failure: every group's
  bool joined_ = false;  // only a joined rank says goodbye and waits for the root
  // Without the root: this rank's standby listener (handed to the root of a
  // shrunk communicator, once), its status listener (answered by the reader
  // thread), and how to reach every rank's, from the welcome.
  Fd standby_;
  Fd status_;
  uint16_t standby_port_ = 0, status_port_ = 0;  // 0: none
  std::vector<PeerAddr> peers_;
};

Status Connection::send_msg(MsgType type, uint64_t seq, int64_t arg, const void* data, size_t len,
                            Deadline deadline, const char* what, uint64_t group) {
  std::string buf;
  buf.reserve(sizeof(MsgHeader) + len);
  append_msg(&buf, type, seq, arg, data, len, group);
  std::lock_guard<std::mutex> lk(send_mu_);
  return send_all(fd_.get(), buf.data(), buf.size(), deadline, what);
}

Status Connection::lost_root(const std::string& what, int err) {
  std::string msg = "rank " + std::to_string(rank_) + ": " + what + ": lost connection to the bootstrap root at " +
                    root_.str();
  if (err != 0) msg += std::string(" (") + std::strerror(err) + ")";
  if (sticky_.ok()) {
    sticky_ = Status(weftRemoteError, msg);
    root_lost_ = true;
  }
  return sticky_;
}

std::string Connection::root_lost_text(uint64_t group) const {
  if (root_rank_ < 0) return sticky_.message();
  auto it = boxes_.find(group);
  int in_group = root_rank_;
  if (it != boxes_.end() && !it->second.members.empty()) {
    const auto& m = it->second.members;
    auto pos = std::find(m.begin(), m.end(), root_rank_);
    in_group = pos == m.end() ? -1 : static_cast<int>(pos - m.begin());
  }
  // The root's process is a rank's: its loss is that rank's death (or its host's),
  // named in this group's numbering where that differs from the first communicator's.
  std::string who;
  if (in_group < 0) who = "the first communicator's " + root_owner_;
  else if (in_group == root_rank_) who = root_owner_;
  else who = "rank " + std::to_string(in_group) + " (the first communicator's " + root_owner_ + ")";
  return sticky_.message() + ", which ran in the process of " + who + ": that rank died, exited or is cut off";
}

Status Connection::failure(uint64_t group) {
  if (!sticky_.ok()) {
    Box& box = boxes_[group];
    // The group's own news (a lost rank, a diagnosis) came first and says more.
    if (!box.sticky.ok()) return box.sticky;
    if (root_lost_) box.sticky = Status(sticky_.code(), root_lost_text(group));
    return root_lost_ ? box.sticky : sticky_;
  }
  return boxes_[group].sticky;
}

void Connection::dispatch(Msg& m, std::vector<Msg>* later) {
  const uint64_t group = m.hdr.group;
  if (left_.count(group) != 0) return;  // late news of a communicator gone here
  switch (m.type()) {
    case MsgType::Welcome: {
      WelcomeHead head{};
      if (m.payload.size() >= sizeof head) std::memcpy(&head, m.payload.data(), sizeof head);
      const size_t owner_end = sizeof head + head.owner_len;
      if (head.owner_len <= 256 && m.payload.size() == owner_end + size_t(nranks_) * sizeof(PeerAddr)) {
        if (head.root_rank >= 0 && head.root_rank < nranks_) {
          root_rank_ = head.root_rank;
          root_owner_ = m.payload.substr(sizeof head, head.owner_len);
        }
        peers_.resize(static_cast<size_t>(nranks_));
        std::memcpy(peers_.data(), m.payload.data() + owner_end, peers_.size() * sizeof(PeerAddr));
        for (PeerAddr& a : peers_) {
          a.host[sizeof a.host - 1] = '\0';
          a.hostname[sizeof a.hostname - 1] = '\0';
        }
      }
      boxes_[group].replies.push_back(std::move(m));
      return;
    }
    case MsgType::Reply:
    case MsgType::Waiting:
      boxes_[group].replies.push_back(std::move(m));
      return;
    case MsgType::Lost:
    case MsgType::Abort:
      if (m.type() == MsgType::Lost) boxes_[group].lost.insert(static_cast<int>(m.hdr.arg));
      if (boxes_[group].sticky.ok()) boxes_[group].sticky = Status(weftRemoteError, m.payload);
      return;
    case MsgType::Revoke:
      if (boxes_[group].revoked.ok()) boxes_[group].revoked = Status(weftRemoteError, m.payload);
      return;
    case MsgType::Error: {
      auto code = static_cast<weftResult_t>(m.hdr.arg);
      if (code <= weftSuccess || code >= weftNumResults) code = weftInternalError;
      Status& st = group == kJobGroup ? sticky_ : boxes_[group].sticky;
      if (st.ok()) st = Status(code, m.payload);
      return;
    }
    case MsgType::Diagnosis: {
      Box& box = boxes_[group];
      std::string line = m.payload.substr(0, m.payload.find('\n'));
      box.diagnosis = line;
      ++box.diagnoses;
      if (static_cast<ReportKind>(m.hdr.seq) == ReportKind::Timeout && box.sticky.ok())
        box.sticky = Status(weftTimeout, "diagnosis: " + line);
      if (m.hdr.arg == box.me) later->push_back(std::move(m));  // this rank prints the table
      return;
    }
    case MsgType::StatusRequest:
      later->push_back(std::move(m));
      return;
    default:
      if (sticky_.ok())
        sticky_ = Error(weftInternalError, "rank %d: unexpected bootstrap message type %u from the root", rank_,
                        m.hdr.type);
  }
}

// A status request is answered from the communicator's source; a diagnosis
// addressed to this rank's place is printed.
void Connection::answer(const Msg& m) {
  const uint64_t group = m.hdr.group;
  if (m.type() == MsgType::Diagnosis) {
    size_t nl = m.payload.find('\n');
    std::string line = m.payload.substr(0, nl);
    std::string table = nl == std::string::npos ? std::string() : m.payload.substr(nl + 1);
    std::fprintf(stderr, "weft diagnosis (rank %d of the communicator, %s): %s\n%s", static_cast<int>(m.hdr.arg),
                 static_cast<ReportKind>(m.hdr.seq) == ReportKind::Dump ? "status dump" : "stuck call",
                 line.c_str(), table.c_str());
    std::fflush(stderr);
    return;
  }
  StatusRow row{};
  row.state = static_cast<int32_t>(RowState::Gone);
  row.peer = -1;
  {
    std::lock_guard<std::mutex> lk(source_mu_);
    auto it = sources_.find(group);
    if (it != sources_.end() && it->second) row = it->second();
  }
  (void)send_msg(MsgType::StatusReply, m.hdr.seq, 0, &row, sizeof row, Deadline::after_ms(1000), "status reply", group);
}

// SIGUSR1: every communicator of this connection with a status source reports for a dump.
void Connection::dump_all() {
  std::vector<std::pair<uint64_t, StatusRow>> rows;
  {
    std::lock_guard<std::mutex> lk(source_mu_);
    for (auto& [group, source] : sources_)
      if (source) rows.emplace_back(group, source());
  }
  for (auto& [group, row] : rows)
    (void)send_msg(MsgType::Report, 0, static_cast<int64_t>(ReportKind::Dump), &row, sizeof row,
                   Deadline::after_ms(1000), "status dump", group);
}

void Connection::read_loop() {
  uint32_t dumps_seen = g_dump_signals.load(std::memory_order_relaxed);
  // Once the root is gone the thread stays for the status listener: the other
  // ranks' diagnosis asks it then.
  bool root_open = true;
  for (;;) {
    pollfd fds[3] = {{root_open ? fd_.get() : -1, POLLIN, 0}, {wake_rd_.get(), POLLIN, 0}, {status_.get(), POLLIN, 0}};
    if (!root_open && !status_.valid()) return;
    int rc = ::poll(fds, status_.valid() ? 3 : 2, 100);
    if (stop_.load(std::memory_order_acquire)) {
      // A dump's table can reach its printer just before that rank leaves (the
      // rank that asked got its answer and ran on with the others).
      if (root_open) (void)read_root(true);
      return;
    }
    if (rc > 0 && status_.valid() && (fds[2].revents & POLLIN) != 0) serve_status();
    uint32_t dumps = g_dump_signals.load(std::memory_order_relaxed);
    if (dumps != dumps_seen) {
      dumps_seen = dumps;
      dump_all();
    }
    if (rc < 0 && errno != EINTR) {
      std::lock_guard<std::mutex> lk(mu_);
      if (sticky_.ok()) sticky_ = SysError(errno, "rank %d: bootstrap: poll", rank_);
      cv_.notify_all();
      return;
    }
    if (rc <= 0 || !root_open || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    root_open = read_root(false);
  }
}

// Reads and acts on what the root sent; false once nothing more will come. While
// the connection closes the root's close is expected and nothing is answered,
// but a diagnosis this rank was to print is printed.
bool Connection::read_root(bool closing) {
  char buf[65536];
  bool closed = false, bad = false;
  int err = 0;
  for (;;) {
    ssize_t n = recv_some(fd_.get(), buf, sizeof buf, &err);
    if (n > 0) {
      in_.feed(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) == sizeof buf) continue;
    } else if (n == 0 || err != 0) {
      closed = true;
    }
    break;
  }
  std::vector<Msg> later;
  {
    std::lock_guard<std::mutex> lk(mu_);
    Msg m;
    while (in_.next(&m, &bad)) dispatch(m, &later);
    if (!closing) {
      if (bad && sticky_.ok())
        sticky_ = Error(weftInternalError, "rank %d: malformed message from the bootstrap root %s", rank_,
                        root_.str().c_str());
      if (closed) (void)lost_root("bootstrap", err);
    }
    cv_.notify_all();
  }
  for (const Msg& m : later)
    if (!closing || m.type() == MsgType::Diagnosis) answer(m);
  return !closed && !bad;
}

Status Connection::start_reader() {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) return SysError(errno, "rank %d: bootstrap: pipe2", rank_);
  wake_rd_.reset(p[0]);
  wake_wr_.reset(p[1]);
  install_dump_signal();
  reader_ = std::thread([this] { read_loop(); });
  return Status::Ok();
}

void Connection::open(uint64_t group, int me, const std::vector<int32_t>& members) {
  std::lock_guard<std::mutex> lk(mu_);
  left_.erase(group);  // a group of that id again
  Box& box = boxes_[group];
  box.me = me;
  box.members = members;
}

void Connection::set_status_source(uint64_t group, Bootstrap::StatusSource source) {
  std::lock_guard<std::mutex> lk(source_mu_);
  if (source) sources_[group] = std::move(source);
  else sources_.erase(group);
}

std::string Connection::diagnose(uint64_t group, const StatusRow& mine, ReportKind kind, Deadline deadline) {
  uint64_t before;
  bool root_gone;
  {
    std::lock_guard<std::mutex> lk(mu_);
    Box& box = boxes_[group];
    // A timeout's diagnosis is the group's end: a second one would say the same.
    if (kind == ReportKind::Timeout && box.diagnoses > 0) return box.diagnosis;
    root_gone = root_lost_;
    before = box.diagnoses;
  }
  Status sent = root_gone ? Status(weftRemoteError, "root gone")
                          : send_msg(MsgType::Report, 0, static_cast<int64_t>(kind), &mine, sizeof mine, deadline,
                                     "status report", group);
  // Meanwhile the same rows are asked of every member directly: the root's
  // answer is kept if it comes, this one used if it does not (a stopped rank 0
  // stops the root), and the error comes no later for it.
  PeerDiagnosis direct = peer_diagnosis(group, mine);
  std::unique_lock<std::mutex> lk(mu_);
  if (sent.ok())
    cv_.wait_until(lk, deadline.at(), [&] { return boxes_[group].diagnoses != before || root_lost_; });
  Box& box = boxes_[group];
  if (box.diagnoses != before) return box.diagnosis;
  std::string why;
  if (root_lost_) {
    why = root_lost_text(group);
  } else {
    std::string owner = root_rank_ < 0 ? std::string()
                                       : "; it runs in the process of " + root_owner_ +
                                             ", which is stopped, hung or cut off";
    why = "the bootstrap root at " + root_.str() + " did not answer a status report" + owner;
  }
  if (direct.line.empty()) return why;
  std::string line = direct.line + " (asked rank to rank: " + why + ")";
  if (kind == ReportKind::Timeout) {
    box.diagnosis = line;
    ++box.diagnoses;
  }
  lk.unlock();
  if (direct.printer == box.me) {
    std::fprintf(stderr, "weft diagnosis (rank %d of the communicator, %s, asked rank to rank): %s\n%s", direct.printer,
                 kind == ReportKind::Dump ? "status dump" : "stuck call", direct.line.c_str(), direct.table.c_str());
    std::fflush(stderr);
  }
  return line;
}

void Connection::serve_status() {
  for (;;) {
    Fd c;
    SockAddr peer;
    if (!accept_one(status_.get(), &c, &peer).ok() || !c.valid()) return;
    // The ask is 24 bytes, sent at once: a short wait, so that a stranger cannot
    // hold the reader thread.
    StatusAsk ask{};
    size_t got = 0;
    Deadline deadline = Deadline::after_ms(200);
    while (got < sizeof ask && !deadline.expired()) {
      int err = 0;
      ssize_t n = recv_some(c.get(), reinterpret_cast<char*>(&ask) + got, sizeof ask - got, &err);
      if (n > 0) got += static_cast<size_t>(n);
      else if (n == 0 || err != 0 || !wait_readable(c.get(), deadline, &err)) break;
    }
    if (got != sizeof ask || std::memcmp(ask.secret, id_.secret.bytes, sizeof ask.secret) != 0) {
      WEFT_INFO(BOOT, "rank %d: status listener: refused a connection from %s (%s)", rank_, peer.str().c_str(),
                got != sizeof ask ? "incomplete ask" : "wrong secret");
      continue;
    }
    StatusAnswer ans{};
    ans.row.state = static_cast<int32_t>(RowState::Gone);
    ans.row.peer = -1;
    {
      std::lock_guard<std::mutex> lk(source_mu_);
      auto it = sources_.find(ask.group);
      if (it != sources_.end() && it->second) ans.row = it->second();
    }
    (void)send_all(c.get(), &ans, sizeof ans, Deadline::after_ms(200), "status answer");
  }
}

Connection::PeerDiagnosis Connection::peer_diagnosis(uint64_t group, const StatusRow& mine) {
  std::vector<int32_t> members;
  std::vector<PeerAddr> peers;
  int me;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const Box& box = boxes_[group];
    members = box.members;
    me = box.me;
    peers = peers_;
  }
  PeerDiagnosis out;
  if (peers.size() != static_cast<size_t>(nranks_)) return out;
  const size_t n = members.empty() ? static_cast<size_t>(nranks_) : members.size();
  const auto began = Clock::now();
  const Deadline deadline = Deadline::after_ms(params::DIAG_WAIT_MS());
  std::vector<RankStatus> rows(n);
  struct Ask {
    size_t i;
    Fd fd;
    std::string got;
  };
  std::vector<Ask> asks;
  StatusAsk q{};
  std::memcpy(q.secret, id_.secret.bytes, sizeof q.secret);
  q.group = group;
  for (size_t i = 0; i < n; ++i) {
    const PeerAddr& a = peers[members.empty() ? i : static_cast<size_t>(members[i])];
    rows[i].who = "host " + std::string(a.hostname) + ", pid " + std::to_string(a.pid);
    rows[i].row.peer = -1;  // state NoAnswer until it answers
    if (static_cast<int>(i) == me) {
      rows[i].row = mine;
      continue;
    }
    SockAddr addr;
    Fd fd;
    if (a.status_port == 0 || a.status_port > 65535 || !parse_numeric(a.host, static_cast<uint16_t>(a.status_port), &addr))
      continue;
    // A live kernel accepts at once, also for a stopped process; a refusal means
    // nothing listens there any more: the process is gone.
    Status st = connect_retry(addr, 1000, Deadline::after_ms(std::min<int64_t>(100, deadline.remaining_ms())), &fd);
    if (!st.ok()) {
      if (st.message().find(std::strerror(ECONNREFUSED)) != std::string::npos)
        rows[i].row.state = static_cast<int32_t>(RowState::Lost);
      continue;
    }
    if (send_all(fd.get(), &q, sizeof q, Deadline::after_ms(100), "status ask").ok())
      asks.push_back({i, std::move(fd), {}});
  }
  while (!deadline.expired()) {
    std::vector<pollfd> fds;
    std::vector<Ask*> waiting;
    for (Ask& a : asks)
      if (a.fd.valid()) {
        fds.push_back({a.fd.get(), POLLIN, 0});
        waiting.push_back(&a);
      }
    if (fds.empty()) break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(deadline.remaining_ms(), 50))) < 0 &&
        errno != EINTR)
      break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Ask& a = *waiting[k];
      char buf[sizeof(StatusAnswer)];
      int err = 0;
      ssize_t got = recv_some(a.fd.get(), buf, sizeof buf - a.got.size(), &err);
      if (got > 0) a.got.append(buf, static_cast<size_t>(got));
      if (a.got.size() == sizeof(StatusAnswer)) {
        StatusAnswer ans;
        std::memcpy(&ans, a.got.data(), sizeof ans);
        rows[a.i].row = ans.row;
        a.fd.reset();
      } else if (got == 0 || (got < 0 && err != 0)) {
        a.fd.reset();  // closed without an answer: no answer
      }
    }
  }
  const int64_t waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count();
  out.line = boot::diagnose(rows, waited, &out.table);
  // The lowest member that answered prints the table, as the root would pick it.
  for (size_t i = 0; i < n && out.printer < 0; ++i) {
    auto st = static_cast<RowState>(rows[i].row.state);
    if (st != RowState::Lost && st != RowState::Gone && st != RowState::NoAnswer) out.printer = static_cast<int>(i);
  }
  return out;
}

Status Connection::wait_msg(uint64_t group, int me, MsgType want, uint64_t seq, Deadline deadline,
                            const std::string& what, const std::string& waiting_for, Msg* out) {
  auto start = Clock::now();
  // At the deadline, ask the root once which ranks are missing and give it a
  // moment to answer, so the timeout can name them.
  bool asked = false;
  int64_t waited_ms = 0;
  std::string missing;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    Box& box = boxes_[group];
    for (auto it = box.replies.begin(); it != box.replies.end();) {
      if (it->type() == want && it->hdr.seq == seq) {
        *out = std::move(*it);
        box.replies.erase(it);
        return Status::Ok();
      }
      if (it->type() == MsgType::Waiting && asked && it->hdr.seq == seq) missing = it->payload;
      it = it->type() == MsgType::Waiting ? box.replies.erase(it) : std::next(it);
    }
    WEFT_TRY(failure(group));
    if (deadline.expired() && !asked) {
      waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      asked = true;
      deadline = Deadline::after_ms(300);
      lk.unlock();
      Status st = send_msg(MsgType::Query, seq, 0, nullptr, 0, deadline, what.c_str(), group);
      lk.lock();
      if (!st.ok()) missing = "";
      continue;
    }
    if (asked && (deadline.expired() || !missing.empty())) {
      // The reply may still come; a late one must not be taken for a later
      // request's, so the communicator is over for this rank.
      Status st = Error(weftTimeout, "rank %d: %s: timed out after %lld ms waiting for %s%s%s", me, what.c_str(),
                        static_cast<long long>(waited_ms), waiting_for.c_str(), missing.empty() ? "" : "; ",
                        missing.c_str());
      if (boxes_[group].sticky.ok()) boxes_[group].sticky = st;
      return st;
    }
    // Wait in short slices so that an abort on this rank is noticed.
    cv_.wait_for(lk, std::chrono::milliseconds(std::max<int64_t>(1, std::min<int64_t>(deadline.remaining_ms(), 100))));
  }
}

// Bound to the address this rank reaches the root from, so that whoever reached
// the root can reach them too. A failure only costs weftCommShrink its option of
// putting a new root in this rank's process (standby), or the diagnosis this
// rank's row when the root does not answer (status).
void Connection::open_listeners() {
  SockAddr local;
  if (!local_address(fd_.get(), &local).ok()) return;
  local.set_port(0);
  auto listen_here = [&](Fd* out) -> uint16_t {
    Fd listener;
    SockAddr bound;
    if (!listen_on(local, &listener).ok() || !local_address(listener.get(), &bound).ok()) return 0;
    *out = std::move(listener);
    return bound.port();
  };
  standby_port_ = listen_here(&standby_);
  status_port_ = listen_here(&status_);
}

Status Connection::join(Deadline deadline) {
  HelloBody h{};
  std::memcpy(h.secret, id_.secret.bytes, sizeof h.secret);
  h.version = kWireVersion;
  h.rank = rank_;
  h.nranks = nranks_;
  h.pid = static_cast<int32_t>(::getpid());
  if (gethostname(h.host, sizeof h.host - 1) != 0) std::strcpy(h.host, "?");
  h.standby_port = standby_port_;
  h.status_port = status_port_;
  std::string what = "bootstrap join (rank " + std::to_string(rank_) + " of " + std::to_string(nranks_) + ")";
  const bool hosts_root = find_root_service(id_) != nullptr;
  WEFT_TRY(send_msg(MsgType::Hello, 0, hosts_root ? 1 : 0, &h, sizeof h, deadline, what.c_str(), 0));
  Msg m;
  std::string waiting = "all " + std::to_string(nranks_) + " ranks to connect to the root at " + root_.str();
  Status st = wait_msg(0, rank_, MsgType::Welcome, 0, deadline, what, waiting, &m);
  joined_ = st.ok();
  bool root_closed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    root_closed = root_lost_;
  }
  if (joined_ && hosts_root) join_root_process(id_);
  if (st.code() == weftRemoteError && root_closed)
    // The root closes on a stranger without a word; say the likely cause.
    return Status(weftRemoteError, st.message() + "; the root closed the connection during the "
                                                  "join (wrong job secret, or the root exited)");
  return st;
}

Status Connection::run_op(uint64_t group, const std::vector<int32_t>& members, int me, OpKind kind,
                          const void* mine, size_t size, void* all, Deadline deadline) {
  const size_t n = members.empty() ? static_cast<size_t>(nranks_) : members.size();
  const char* name = op_name(static_cast<int64_t>(kind));
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(mu_);
    WEFT_TRY(failure(group));
    seq = boxes_[group].seq;
  }
  std::string what = std::string("bootstrap ") + name + " #" + std::to_string(seq);
  if (kind == OpKind::Allgather) what += " (" + std::to_string(size) + " bytes)";
  // Checked before taking a sequence number: a call refused here never reached the root.
  if (size > kMaxPayload / n - members.size() * sizeof(int32_t) - sizeof(GroupPrefix))
    return Error(weftInvalidArgument, "rank %d: %s: too large for the bootstrap (limit %u bytes in all)", me,
                 what.c_str(), kMaxPayload);
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++boxes_[group].seq;
  }
  const void* payload = mine;
  std::string framed;  // a group other than 0 names its members first
  if (!members.empty()) {
    GroupPrefix p{static_cast<uint32_t>(members.size())};
    framed.append(reinterpret_cast<const char*>(&p), sizeof p);
    framed.append(reinterpret_cast<const char*>(members.data()), members.size() * sizeof(int32_t));
    if (size > 0) framed.append(static_cast<const char*>(mine), size);
    payload = framed.data();
  }
  Status st = send_msg(MsgType::Op, seq, static_cast<int64_t>(kind), payload, members.empty() ? size : framed.size(),
                       deadline, what.c_str(), group);
  if (!st.ok()) {
    std::lock_guard<std::mutex> lk(mu_);
    if (st.code() == weftRemoteError) return lost_root(what, 0);
    // A message cut off midway leaves the stream unusable: every group is over here.
    if (sticky_.ok()) sticky_ = st;
    return st;
  }
  Msg m;
  std::string waiting = "all " + std::to_string(n) + " ranks to arrive (reply from the root at " + root_.str() + ")";
  WEFT_TRY(wait_msg(group, me, MsgType::Reply, seq, deadline, what, waiting, &m));
  if (m.payload.size() != size * n) {
    Status bad = Error(weftInternalError, "rank %d: %s: the root replied with %zu bytes, expected %zu", me,
                       what.c_str(), m.payload.size(), size * n);
    std::lock_guard<std::mutex> lk(mu_);
    if (boxes_[group].sticky.ok()) boxes_[group].sticky = bad;
    return bad;
  }
  if (size > 0) std::memcpy(all, m.payload.data(), m.payload.size());
  return Status::Ok();
}

Status Connection::poll(uint64_t group) {
  std::lock_guard<std::mutex> lk(mu_);
  return failure(group);
}

void Connection::abort(uint64_t group, int me, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    Status& st = boxes_[group].sticky;
    if (st.ok()) st = Error(weftRemoteError, "rank %d aborted the job: %s", me, reason.c_str());
    cv_.notify_all();
  }
  Status st = send_msg(MsgType::Abort, 0, 0, reason.data(), reason.size(), Deadline::after_ms(1000), "abort", group);
  if (!st.ok()) WEFT_WARN(BOOT, "rank %d: could not tell the root about the abort: %s", me, st.message().c_str());
}

void Connection::revoke(uint64_t group, int me, const std::string& reason) {
  Status st = send_msg(MsgType::Revoke, 0, 0, reason.data(), reason.size(), Deadline::after_ms(1000), "revoke", group);
  if (!st.ok()) WEFT_WARN(BOOT, "rank %d: could not tell the root about the revoke: %s", me, st.message().c_str());
}

Status Connection::revoked(uint64_t group) {
  std::lock_guard<std::mutex> lk(mu_);
  return boxes_[group].revoked;
}

std::string Connection::status_address(uint64_t group, int rank) {
  std::lock_guard<std::mutex> lk(mu_);
  const Box& box = boxes_[group];
  const int on_conn = box.members.empty() ? rank : rank >= 0 && static_cast<size_t>(rank) < box.members.size()
                                                       ? box.members[static_cast<size_t>(rank)]
                                                       : -1;
  if (on_conn < 0 || static_cast<size_t>(on_conn) >= peers_.size() || peers_[static_cast<size_t>(on_conn)].status_port == 0)
    return "";
  const PeerAddr& a = peers_[static_cast<size_t>(on_conn)];
  return std::string(a.host) + ":" + std::to_string(a.status_port);
}

Status Connection::shrink_root(uint64_t group, int leader, const Secret& secret, UniqueId* id) {
  std::lock_guard<std::mutex> lk(mu_);
  const Box& box = boxes_[group];
  const int on_conn = box.members.empty() ? leader : box.members[static_cast<size_t>(leader)];
  if (static_cast<size_t>(on_conn) >= peers_.size() || peers_[static_cast<size_t>(on_conn)].port == 0)
    return Error(weftInternalError, "rank %d: the bootstrap root did not say where rank %d can host a new root", box.me,
                 leader);
  const PeerAddr& a = peers_[static_cast<size_t>(on_conn)];
  std::memset(id, 0, sizeof *id);
  std::snprintf(id->host, sizeof id->host, "%s", a.host);
  id->port = static_cast<uint16_t>(a.port);
  id->secret = secret;
  if (leader != box.me) return Status::Ok();
  if (!standby_.valid())
    return Error(weftInvalidUsage,
                 "rank %d: this rank's standby socket already serves the root of an earlier shrink in this "
                 "communicator's family (one per family and lowest staying rank; to lose more ranks, shrink the "
                 "new communicator)",
                 box.me);
  SockAddr bound;
  return start_root_service_on(std::move(standby_), secret, &bound);
}

std::vector<int> Connection::lost_ranks(uint64_t group) {
  std::lock_guard<std::mutex> lk(mu_);
  const Box& box = boxes_[group];
  std::set<int> lost = box.lost;
  if (root_lost_ && root_rank_ >= 0) {
    const auto& m = box.members;
    auto pos = std::find(m.begin(), m.end(), root_rank_);
    if (m.empty()) lost.insert(root_rank_);
    else if (pos != m.end()) lost.insert(static_cast<int>(pos - m.begin()));
  }
  return {lost.begin(), lost.end()};
}

void Connection::leave(uint64_t group) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    boxes_.erase(group);
    left_.insert(group);
    if (!sticky_.ok()) return;  // the root is gone or the job failed: nobody to tell
  }
  (void)send_msg(MsgType::Leave, 0, 0, nullptr, 0, Deadline::after_ms(1000), "leave", group);
}

void Connection::stop_reader() {
  if (!reader_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  char b = 1;
  ssize_t n = ::write(wake_wr_.get(), &b, 1);
  (void)n;
  reader_.join();
}

Connection::~Connection() {
  if (!joined_) {  // fd_ closes; the root frees this rank's slot
    stop_reader();
    return;
  }
  // A goodbye tells the root this close is deliberate, so no rank hears "lost".
  Status st = send_msg(MsgType::Goodbye, 0, 0, nullptr, 0, Deadline::after_ms(1000), "goodbye", 0);
  (void)st;
  ::shutdown(fd_.get(), SHUT_WR);
  stop_reader();
  fd_.reset();
  // The root's process must keep serving until every rank has left: its last
  // rank to leave waits (weftCommInitAll puts every rank in one process, and
  // they leave one after another).
  auto svc = find_root_service(id_);
  if (svc != nullptr && leave_root_process(id_) == 0) {
    if (!wait_root_service(*svc, Deadline::from_params()))
      WEFT_WARN(BOOT, "rank %d: bootstrap root %s still has ranks connected after %lld ms; leaving it", rank_,
                root_.str().c_str(), static_cast<long long>(params::TIMEOUT_MS()));
  }
}

// A communicator's bootstrap: its group on the family's connection.
class GroupBootstrap final : public Bootstrap {
 public:
  GroupBootstrap(std::shared_ptr<Connection> conn, uint64_t id, std::vector<int32_t> members, int rank, int nranks)
      : conn_(std::move(conn)), id_(id), members_(std::move(members)), rank_(rank), nranks_(nranks) {
    conn_->open(id_, rank_, members_);
  }
  // Group 0 ends with the connection (its goodbye).
  ~GroupBootstrap() override {
    conn_->set_status_source(id_, nullptr);
    if (id_ != 0) conn_->leave(id_);
  }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  Status allgather(const void* mine, size_t size, void* all, Deadline deadline) override {
    std::lock_guard<std::mutex> lk(op_mu_);
    return conn_->run_op(id_, members_, rank_, OpKind::Allgather, mine, size, all, deadline);
  }
  Status barrier(Deadline deadline) override {
    std::lock_guard<std::mutex> lk(op_mu_);
    return conn_->run_op(id_, members_, rank_, OpKind::Barrier, nullptr, 0, nullptr, deadline);
  }
  Status poll() override { return conn_->poll(id_); }
  void abort(const std::string& reason) override { conn_->abort(id_, rank_, reason); }
  void revoke(const std::string& reason) override { conn_->revoke(id_, rank_, reason); }
  Status revoked() override { return conn_->revoked(id_); }
  Status shrink_root(int leader, const Secret& secret, UniqueId* id) override {
    return conn_->shrink_root(id_, leader, secret, id);
  }
  std::vector<int> lost_ranks() override { return conn_->lost_ranks(id_); }
  void set_status_source(StatusSource source) override { conn_->set_status_source(id_, std::move(source)); }
  std::string status_address(int rank) override { return conn_->status_address(id_, rank); }
  std::string diagnose(const StatusRow& mine, ReportKind kind, Deadline deadline) override {
    return conn_->diagnose(id_, mine, kind, deadline);
  }
  Status subgroup(uint64_t tag, const std::vector<int>& ranks, std::unique_ptr<Bootstrap>* out) override {
    std::vector<int32_t> members;
    int me = -1;
    for (int r : ranks) {
      if (r < 0 || r >= nranks_)
        return Error(weftInternalError, "bootstrap subgroup: rank %d is out of range [0, %d)", r, nranks_);
      if (r == rank_) me = static_cast<int>(members.size());
      members.push_back(members_.empty() ? r : members_[static_cast<size_t>(r)]);
    }
    if (me < 0) return Error(weftInternalError, "bootstrap subgroup: rank %d is not a member", rank_);
    // Every member derives the same id from the same (group, tag); 0 stays the family's first.
    uint64_t id = splitmix(id_ ^ splitmix(tag)) | 1;
    *out = std::make_unique<GroupBootstrap>(conn_, id, std::move(members), me, static_cast<int>(ranks.size()));
    return Status::Ok();
  }

 private:
  static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

  std::shared_ptr<Connection> conn_;
  uint64_t id_;
  std::vector<int32_t> members_;  // ranks on the connection, in this group's order; empty for group 0
  int rank_, nranks_;
  std::mutex op_mu_;  // one operation at a time
};

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
  auto c = std::make_shared<Connection>(id, root, rank, nranks, std::move(fd));
  c->open_listeners();
  WEFT_TRY(c->start_reader());
  WEFT_TRY(c->join(deadline));
  WEFT_INFO(BOOT, "rank %d of %d joined the bootstrap at %s", rank, nranks, root.str().c_str());
  *out = std::make_unique<GroupBootstrap>(std::move(c), 0, std::vector<int32_t>{}, rank, nranks);
  return Status::Ok();
}

}  // namespace weft::boot
