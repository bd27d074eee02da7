// What travels on a TCP transport connection: one handshake each way when the
// connection opens, then frames. All integers are little-endian (every host
// weft runs on is); the structs are fixed-size with explicit padding so both
// ends agree without a serializer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::tcp {

inline constexpr uint64_t kHelloMagic = 0x32504354'74666577ull;  // "weftTCP2"
inline constexpr uint32_t kFrameMagic = 0x46544657u;             // "WFTF"
inline constexpr uint32_t kCreditMagic = 0x43544657u;            // "WFTC"
inline constexpr uint32_t kAskMagic = 0x41544657u;               // "WFTA"

// Sent by the connecting (lower) rank, echoed back with from/to swapped by the
// accepting rank. A connection whose hello does not match is closed.
struct Hello {
  uint64_t magic;
  uint8_t secret[16];  // the job secret of the unique id
  uint64_t comm_hash;  // names the communicator: hash of every rank's nonce
  int32_t from_rank;
  int32_t to_rank;
  int32_t sock_index;  // 0 .. nsocks-1
  int32_t nsocks;
};
static_assert(sizeof(Hello) == 48);

// One slice of a message. A message of n bytes travels as one or more frames
// (exactly one when n == 0) spread over the sockets of the pair; each socket
// carries its frames in message order, so a receiver reassembles by offset.
// The connections of a pair are shared by every communicator of a family
// (split from one): `context` names the communicator (its hash).
//
// Control frames have no payload. An ask (kAskMagic) says the sender of
// `context` waits for credit; the answer, a credit frame (kCreditMagic), says
// how many frame bytes (headers included) of `context` the other end has
// consumed, in `offset`. Nothing travels back unasked: a rank that has sent its
// last message may close its sockets with nothing unread, so no reset cuts
// off data still on its way.
struct FrameHeader {
  uint32_t magic;
  uint32_t slice_bytes;  // payload bytes following this header
  uint64_t seq;          // message number on this pair, context and direction, from 0
  uint64_t tag;          // the executor's tag of the message
  uint64_t msg_bytes;    // size of the whole message
  uint64_t offset;       // where this slice starts in the message
  uint64_t context;
};
static_assert(sizeof(FrameHeader) == 48);

// Why a hello is refused (empty: accepted). `expect_to` is the receiving
// rank; from_rank must be in [0, nranks).
std::string check_hello(const Hello& h, const uint8_t secret[16], uint64_t comm_hash,
                        int expect_to, int nranks, int nsocks);

// Why a frame header is malformed (empty: fine): bad magic, a slice past the
// end of its message, a slice larger than max_slice, a control frame with a payload.
std::string check_frame(const FrameHeader& f, size_t max_slice);

}  // namespace weft::tcp
