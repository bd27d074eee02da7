// The bootstrap's wire format: every message is a fixed 40-byte header followed
// by `len` payload bytes. Both ends run the same build on the same architecture
// family, so fields travel in host byte order; the magic in each header catches a
// stray or mis-framed connection early.
//
// Groups: one connection per rank carries the operations of every communicator
// of its family (the one made by init is group 0, with every rank; those split
// from it are groups of some ranks, named by a 64-bit id that every member
// derives alike). An Op of a group other than 0 opens its payload with the
// group's members (GroupPrefix); the root numbers a group's ranks by their place
// there, in replies and in the texts of Lost, Abort and Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.h"

namespace weft::boot {

constexpr uint32_t kWireMagic = 0x77667462;  // "weft boot"
constexpr uint32_t kWireVersion = 5;
// Error's group for a failure of the whole job (every group of every connection).
constexpr uint64_t kJobGroup = ~uint64_t{0};
// Largest payload either side accepts: bounds memory a broken peer can make us allocate.
constexpr uint32_t kMaxPayload = 1u << 30;

enum class MsgType : uint32_t {
  Hello = 1,    // rank -> root: HelloBody; arg 1: the root service runs in this rank's process
  Welcome = 2,  // root -> rank: every rank has joined; payload = WelcomeHead, the text
                // "rank R (host H, pid P)" of the rank whose process runs the root, then
                // every rank's PeerAddr in rank order
  Error = 3,    // root -> rank: group, arg = weftResult_t, payload = message; the group is over
  Op = 4,       // rank -> root: group, seq, arg = OpKind, payload = [GroupPrefix] this rank's part
  Reply = 5,    // root -> rank: group, seq, payload = all parts in the group's rank order
  Lost = 6,     // root -> rank: group, arg = lost rank, payload = "rank R (host H, pid P) ..."
  Abort = 7,    // rank -> root: group, payload = reason; root -> rank: group, arg = aborting rank
  Goodbye = 8,  // rank -> root: clean exit, do not report this rank as lost
  Query = 9,    // rank -> root: group, seq: I timed out; who is the group waiting for?
  Waiting = 10, // root -> rank: group, seq, payload = which ranks have not arrived
  Leave = 11,   // rank -> root: group (not 0): this rank's communicator of the group is gone
  // Stuck-collective diagnosis (diagnosis.h): a rank that timed out, or asks for a
  // dump, reports its StatusRow; the root asks every other member of the group for
  // theirs, then sends every member the diagnosis.
  Report = 12,         // rank -> root: group, arg = ReportKind, payload = StatusRow
  StatusRequest = 13,  // root -> rank: group, seq = round
  StatusReply = 14,    // rank -> root: group, seq = round, payload = StatusRow
  Diagnosis = 15,      // root -> rank: group, seq = ReportKind, arg = the member that prints
                       // the table, payload = the diagnosis line, '\n', the table
  // weftCommRevoke: like Abort, but the group goes on (its all-gathers serve the
  // split or shrink that follows); only its data operations stop.
  Revoke = 16,  // rank -> root: group, payload = reason; root -> rank: group, arg = revoking rank
};


enum class OpKind : int64_t { Allgather = 1, Barrier = 2 };

inline const char* op_name(int64_t kind) {
  switch (static_cast<OpKind>(kind)) {
    case OpKind::Allgather: return "allgather";
    case OpKind::Barrier: return "barrier";
  }
  return "unknown-op";
}

struct MsgHeader {
  uint32_t magic;
  uint32_t type;
  uint32_t len;
  uint32_t reserved;
  uint64_t seq;
  int64_t arg;
  uint64_t group;
};
static_assert(sizeof(MsgHeader) == 40);

// How an Op of a group other than 0 opens: its member count, then each member's
// rank on its connection, in the group's rank order (int32 each).
struct GroupPrefix {
  uint32_t nmembers;
};

// The first message on every connection. The secret leads so that the root can
// reject a stranger before trusting anything else it sent.
struct HelloBody {
  uint8_t secret[16];
  uint32_t version;
  int32_t rank;
  int32_t nranks;
  int32_t pid;
  char host[64];  // hostname, for messages about this rank
  uint32_t standby_port;  // this connection's standby listener (weftCommShrink); 0: none
  uint32_t status_port;   // this connection's status listener (the diagnosis without the root); 0: none
};
static_assert(sizeof(HelloBody) == 104);

struct WelcomeHead {
  int32_t root_rank;   // whose process runs the root; -1: none of the ranks'
  uint32_t owner_len;  // length of the text naming it
};

// How to reach a rank's process without the root, told to every rank in the
// welcome: its standby listener, where it can host the root of a communicator
// shrunk from this one (survivors meet there after the root's process died), and
// its status listener, which answers a StatusAsk with a StatusAnswer (the
// stuck-call diagnosis when the root does not answer). Both were bound when it
// joined, on the address the root saw it connect from (host).
struct PeerAddr {
  char host[64];         // numeric, NUL-terminated
  uint32_t port;         // standby; 0: none
  uint32_t status_port;  // 0: none
  int32_t pid;
  char hostname[64];  // NUL-terminated, for messages about the rank
};

// One connection to a status listener: the asker sends this, the rank answers
// with its row of the group (a Gone row when its communicator of the group is
// destroyed) and closes. A wrong secret is closed on without a word.
struct StatusAsk {
  uint8_t secret[16];
  uint64_t group;
};
struct StatusAnswer {
  StatusRow row;
};

struct Msg {
  MsgHeader hdr{};
  std::string payload;
  MsgType type() const { return static_cast<MsgType>(hdr.type); }
};

// Serialises one message onto the end of `out`.
inline void append_msg(std::string* out, MsgType type, uint64_t seq, int64_t arg,
                       const void* payload, size_t len, uint64_t group = 0) {
  MsgHeader h{kWireMagic, static_cast<uint32_t>(type), static_cast<uint32_t>(len), 0, seq, arg, group};
  out->append(reinterpret_cast<const char*>(&h), sizeof h);
  if (len > 0) out->append(static_cast<const char*>(payload), len);
}

// Accumulates bytes from a stream and cuts complete messages off its front.
class MsgReader {
 public:
  void feed(const char* data, size_t n) { buf_.append(data, n); }
  // true with *m filled when a whole message is buffered; *bad set when the
  // stream is not speaking this protocol (wrong magic, oversized payload).
  bool next(Msg* m, bool* bad) {
    *bad = false;
    if (buf_.size() - pos_ < sizeof(MsgHeader)) return false;
    MsgHeader h;
    std::memcpy(&h, buf_.data() + pos_, sizeof h);
    if (h.magic != kWireMagic || h.len > limit_) {
      *bad = true;
      return false;
    }
    if (buf_.size() - pos_ < sizeof h + h.len) return false;
    m->hdr = h;
    m->payload.assign(buf_.data() + pos_ + sizeof h, h.len);
    pos_ += sizeof h + h.len;
    if (pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    } else if (pos_ > (1u << 16)) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    return true;
  }
  size_t buffered() const { return buf_.size() - pos_; }
  // Largest payload accepted; the root keeps it small until a peer has proved
  // the secret, so a stranger cannot make it buffer a gigabyte.
  void set_limit(uint32_t limit) { limit_ = limit; }

 private:
  uint32_t limit_ = kMaxPayload;
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace weft::boot
