// The frame format against a hand-driven peer: a TcpLink on one end of
// socket pairs, raw bytes written or read by the test on the other end.
// Covers partial reads (a frame dribbled byte by byte), slices arriving out of
// order across sockets, striping of the sender, and malformed input.
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"

namespace weft::tcp::test {
namespace {

constexpr uint64_t kCtx = 0x5eed;

struct Raw {
  std::unique_ptr<TcpLink> link;
  std::vector<boot::Fd> far;  // the test's ends
};

Raw make_raw(int nsocks, LinkOptions lo = {}) {
  Raw r;
  std::vector<boot::Fd> near;
  for (int i = 0; i < nsocks; ++i) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    near.emplace_back(sv[0]);
    r.far.emplace_back(sv[1]);
  }
  auto conn = std::make_shared<Connection>("192.0.2.7:4000", std::move(near), largest_slice(lo));
  r.link = std::make_unique<TcpLink>(3, std::move(conn), kCtx, lo);
  return r;
}

void write_all(int fd, const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w > 0) c += w, n -= static_cast<size_t>(w);
  }
}

std::vector<unsigned char> frame(uint64_t seq, uint64_t tag, uint64_t msg_bytes, uint64_t off,
                                 const unsigned char* payload, uint32_t len) {
  FrameHeader h{kFrameMagic, len, seq, tag, msg_bytes, off, kCtx};
  std::vector<unsigned char> v(sizeof h + len);
  std::memcpy(v.data(), &h, sizeof h);
  if (len > 0) std::memcpy(v.data() + sizeof h, payload, len);
  return v;
}

Status poll_once(TcpLink& l, transport::RecvOp& op, bool* complete) { return l.poll_recv(op, complete); }

TEST(Framing, FrameDribbledByteByByteCompletesOnlyAtTheEnd) {
  Raw r = make_raw(1);
  auto msg = pattern(1000, 1);
  auto f = frame(0, 42, msg.size(), 0, msg.data(), 1000);
  std::vector<unsigned char> got(msg.size());
  transport::RecvOp op;
  op.tag = 42;
  op.bytes = got.size();
  op.dst = got.data();
  for (size_t i = 0; i < f.size(); ++i) {
    bool complete = true;
    ASSERT_TRUE(poll_once(*r.link, op, &complete).ok());
    ASSERT_FALSE(complete) << "complete before byte " << i;
    write_all(r.far[0].get(), &f[i], 1);
  }
  bool complete = false;
  ASSERT_TRUE(poll_once(*r.link, op, &complete).ok());
  EXPECT_TRUE(complete);
  EXPECT_TRUE(got == msg);
}

TEST(Framing, SlicesOutOfOrderAcrossSocketsReachTheConsumerInOrder) {
  Raw r = make_raw(3);
  auto msg = pattern(3 * 65536, 2);
  struct Check final : transport::Consumer {
    std::vector<unsigned char> data = std::vector<unsigned char>(3 * 65536);
    size_t next = 0;
    bool in_order = true;
    bool consume(const void* p, size_t off, size_t n) override {
      in_order &= off == next;
      std::memcpy(data.data() + off, p, n);
      next = off + n;
      return true;
    }
  } c;
  transport::RecvOp op;
  op.tag = 1;
  op.bytes = msg.size();
  op.consumer = &c;
  // Slice 2 arrives first, then 1, then 0.
  for (int k = 2; k >= 0; --k) {
    auto f = frame(0, 1, msg.size(), static_cast<uint64_t>(k) * 65536,
                   msg.data() + static_cast<size_t>(k) * 65536, 65536);
    write_all(r.far[static_cast<size_t>(k)].get(), f.data(), f.size());
    bool complete = false;
    for (int spin = 0; spin < 100; ++spin) ASSERT_TRUE(poll_once(*r.link, op, &complete).ok());
    EXPECT_EQ(complete, k == 0);
    if (k > 0) {
      EXPECT_EQ(c.next, 0u) << "delivered ahead of slice 0";
    }
  }
  EXPECT_TRUE(c.in_order);
  EXPECT_TRUE(c.data == msg);
}

TEST(Framing, SenderStripesSlicesRoundRobin) {
  LinkOptions lo;
  lo.min_slice = 65536;
  Raw r = make_raw(2, lo);
  auto msg = pattern(1 << 20, 3);
  uint64_t t = r.link->send(msg.data(), msg.size(), 9);
  // Each far end carries exactly one 512 KiB slice; read them back.
  for (size_t s = 0; s < 2; ++s) {
    std::vector<unsigned char> buf(sizeof(FrameHeader) + (512 << 10));
    size_t got = 0;
    while (got < buf.size()) {
      r.link->progress();
      ssize_t n = ::read(r.far[s].get(), buf.data() + got, buf.size() - got);
      if (n > 0) got += static_cast<size_t>(n);
    }
    FrameHeader h;
    std::memcpy(&h, buf.data(), sizeof h);
    EXPECT_EQ(h.magic, kFrameMagic);
    EXPECT_EQ(h.tag, 9u);
    EXPECT_EQ(h.seq, 0u);
    EXPECT_EQ(h.msg_bytes, msg.size());
    EXPECT_EQ(h.offset, s * (512 << 10));
    EXPECT_EQ(h.slice_bytes, 512u << 10);
    EXPECT_EQ(std::memcmp(buf.data() + sizeof h, msg.data() + h.offset, h.slice_bytes), 0);
  }
  EXPECT_TRUE(r.link->send_done(t));
  // A small message goes whole to the next socket in turn; a zero-byte one is one empty frame.
  uint32_t v = 5;
  r.link->send(&v, 4, 10);
  r.link->send(&v, 0, 11);
  FrameHeader h;
  std::vector<unsigned char> buf(sizeof h + 4);
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::read(r.far[0].get(), buf.data() + got, buf.size() - got);
    if (n > 0) got += static_cast<size_t>(n);
  }
  std::memcpy(&h, buf.data(), sizeof h);
  EXPECT_EQ(h.seq, 1u);
  EXPECT_EQ(h.slice_bytes, 4u);
  got = 0;
  while (got < sizeof h) {
    ssize_t n = ::read(r.far[1].get(), reinterpret_cast<char*>(&h) + got, sizeof h - got);
    if (n > 0) got += static_cast<size_t>(n);
  }
  EXPECT_EQ(h.seq, 2u);
  EXPECT_EQ(h.slice_bytes, 0u);
  EXPECT_EQ(h.msg_bytes, 0u);
}

Status receive_after(const std::vector<unsigned char>& bytes, bool close_after, size_t expect = 64) {
  Raw r = make_raw(1);
  write_all(r.far[0].get(), bytes.data(), bytes.size());
  if (close_after) r.far[0].reset();
  std::vector<unsigned char> got(expect);
  transport::RecvOp op;
  op.tag = 1;
  op.bytes = expect;
  op.dst = got.data();
  // A closed peer is reported after a short grace (kLostGraceMs): poll past it.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    bool complete = false;
    WEFT_TRY(r.link->poll_recv(op, &complete));
    if (complete) return Status::Ok();
  }
  return Error(weftTimeout, "test: nothing happened");
}

TEST(Framing, BadMagicIsAnErrorNamingThePeer) {
  auto f = frame(0, 1, 64, 0, pattern(64, 1).data(), 64);
  f[0] ^= 0xff;
  Status st = receive_after(f, false);
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("peer rank 3 at 192.0.2.7:4000"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("magic"), std::string::npos) << st.message();
}

TEST(Framing, SlicePastTheEndOfItsMessageIsMalformed) {
  auto p = pattern(64, 1);
  Status st = receive_after(frame(0, 1, 64, 32, p.data(), 64), false);
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("malformed frame"), std::string::npos) << st.message();
}

TEST(Framing, OversizedSliceIsMalformed) {
  FrameHeader h{kFrameMagic, 0xffffffffu, 0, 1, 1ull << 40, 0, kCtx};
  std::vector<unsigned char> v(sizeof h);
  std::memcpy(v.data(), &h, sizeof h);
  Status st = receive_after(v, false);
  EXPECT_NE(st.message().find("malformed frame"), std::string::npos) << st.message();
}

TEST(Framing, StaleSequenceIsAnError) {
  Raw r = make_raw(1);
  auto p = pattern(8, 1);
  auto f0 = frame(0, 1, 8, 0, p.data(), 8);
  auto f1 = frame(0, 2, 8, 0, p.data(), 8);  // seq 0 again
  write_all(r.far[0].get(), f0.data(), f0.size());
  write_all(r.far[0].get(), f1.data(), f1.size());
  uint64_t got = 0;
  transport::RecvOp op;
  op.tag = 1;
  op.bytes = 8;
  op.dst = &got;
  bool complete = false;
  while (!complete) ASSERT_TRUE(r.link->poll_recv(op, &complete).ok());
  transport::RecvOp op2;
  op2.tag = 2;
  op2.bytes = 8;
  op2.dst = &got;
  Status st = r.link->poll_recv(op2, &complete);
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("frame of message 0 while expecting message 1"), std::string::npos) << st.message();
}

// Nothing travels back unasked (a peer that sent its last message may close
// with nothing unread, so no reset cuts off its data); an ask is answered with
// the bytes consumed so far.
TEST(Framing, CreditGoesBackOnlyWhenAskedAndCountsEveryByteConsumed) {
  LinkOptions lo;
  lo.max_slice = 65536;
  Raw r = make_raw(1, lo);
  auto msg = pattern(1 << 20, 9);
  std::vector<unsigned char> stream;
  for (size_t off = 0; off < msg.size(); off += 65536) {
    auto f = frame(0, 1, msg.size(), off, msg.data() + off, 65536);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  std::vector<unsigned char> got(msg.size());
  transport::RecvOp op;
  op.tag = 1;
  op.bytes = got.size();
  op.dst = got.data();
  bool complete = false;
  for (size_t written = 0; !complete;) {  // the socket pair holds less than the stream
    ssize_t n = written < stream.size() ? ::write(r.far[0].get(), stream.data() + written, stream.size() - written) : 0;
    if (n > 0) written += static_cast<size_t>(n);
    ASSERT_TRUE(r.link->poll_recv(op, &complete).ok());
  }
  EXPECT_TRUE(got == msg);
  for (int k = 0; k < 10; ++k) r.link->progress();
  unsigned char byte;
  EXPECT_EQ(::read(r.far[0].get(), &byte, 1), -1) << "a byte came back unasked";
  // The peer waits for credit before its next message; the receive of that
  // message reads the ask.
  FrameHeader ask{kAskMagic, 0, 0, 0, 0, 0, kCtx};
  write_all(r.far[0].get(), &ask, sizeof ask);
  uint64_t next = 0;
  transport::RecvOp op2;
  op2.tag = 2;
  op2.bytes = sizeof next;
  op2.dst = &next;
  FrameHeader credit{};
  size_t have = 0;
  for (int spin = 0; spin < 1000000 && have < sizeof credit; ++spin) {
    ASSERT_TRUE(r.link->poll_recv(op2, &complete).ok());
    ssize_t n = ::read(r.far[0].get(), reinterpret_cast<char*>(&credit) + have, sizeof credit - have);
    if (n > 0) have += static_cast<size_t>(n);
  }
  ASSERT_EQ(have, sizeof credit);
  EXPECT_EQ(credit.magic, kCreditMagic);
  EXPECT_EQ(credit.context, kCtx);
  EXPECT_EQ(credit.offset, 16 * (sizeof(FrameHeader) + 65536));
  ASSERT_TRUE(r.link->poll_recv(op2, &complete).ok());
  EXPECT_EQ(::read(r.far[0].get(), &byte, 1), -1) << "more than one answer to one ask";
}

TEST(Framing, CloseInTheMiddleOfAFrameIsAnError) {
  auto f = frame(0, 1, 64, 0, pattern(64, 1).data(), 64);
  f.resize(sizeof(FrameHeader) + 10);
  Status st = receive_after(f, true);
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("in the middle of a message"), std::string::npos) << st.message();
}

TEST(Framing, CloseBeforeTheMessageIsAnErrorNamingThePeer) {
  Status st = receive_after({}, true);
  EXPECT_EQ(st.code(), weftRemoteError);
  EXPECT_NE(st.message().find("peer rank 3 at 192.0.2.7:4000 closed the connection"),
            std::string::npos)
      << st.message();
}

TEST(Framing, MessageQueuedBeforeCloseIsStillReceived) {
  auto p = pattern(64, 4);
  EXPECT_TRUE(receive_after(frame(0, 1, 64, 0, p.data(), 64), true).ok());
}

}  // namespace
}  // namespace weft::tcp::test
