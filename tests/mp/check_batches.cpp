// Multi-process correctness of the collectives built from point-to-point
// operations: gather and scatter from every root (in and out of place), and
// all-to-all-v with uneven counts (zeros among them) at scattered displacements,
// blocking, non-blocking (the count arrays overwritten right after the call) and
// inside a group. Every element of every rank is checked against bytes computed
// here from (source rank, destination rank, element); gaps between the parts
// must keep their poison.
//
//   weft-check-batches [--counts 0,1,7,1023,70001]
#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "call_log.h"
#include "weft/weft.h"

namespace {

constexpr unsigned char kPoison = 0xEE;

struct Checker : weft_test::CallLog {
  // bytes of buf at byte offset `at` must equal want(k) for k < bytes.
  template <class Want>
  void check(const std::string& what, const std::vector<unsigned char>& buf, size_t at, size_t bytes, Want want) {
    int64_t bad = 0;
    for (size_t k = 0; k < bytes; ++k)
      if (buf[at + k] != want(k) && bad++ < 3)
        std::fprintf(stderr, "rank %d: %s: byte %zu is %d, want %d\n", rank, what.c_str(), k, buf[at + k], want(k));
    wrong += bad;
  }
};

// Byte k of what rank `from` sends rank `to` (element size independent: parts are
// compared as bytes). Distinct per pair, and shifted parts do not match.
unsigned char byte_of(int from, int to, size_t k) {
  uint64_t h = (static_cast<uint64_t>(from) * 131 + static_cast<uint64_t>(to) + 1) * 0x9e3779b97f4a7c15ull ^
               (static_cast<uint64_t>(k) * 0xbf58476d1ce4e5b9ull);
  h ^= h >> 31;
  return static_cast<unsigned char>(h == kPoison ? h + 1 : h);
}

void fill(std::vector<unsigned char>& buf, size_t at, size_t bytes, int from, int to) {
  for (size_t k = 0; k < bytes; ++k) buf[at + k] = byte_of(from, to, k);
}

void gather_scatter(Checker& c, weftDataType_t dt, size_t es, size_t count) {
  const int n = c.n, me = c.rank;
  const size_t block = count * es;
  const std::string tag = " dtype " + std::to_string(dt) + " count " + std::to_string(count);
  for (int in_place = 0; in_place < 2; ++in_place) {
    const std::string how = in_place ? " in place" : "";
    for (int root = 0; root < n; ++root) {
      const std::string at_root = " root " + std::to_string(root) + tag + how;
      // Gather: block r of the root's buffer is rank r's input.
      std::vector<unsigned char> all(n * block + 1, kPoison), mine(block + 1, kPoison);
      const bool place = in_place && me == root;
      unsigned char* send = place ? all.data() + me * block : mine.data();
      for (size_t k = 0; k < block; ++k) send[k] = byte_of(me, root, k);
      if (c.ok(weftGather(send, all.data(), count, dt, root, c.comm, nullptr), "gather" + at_root) && me == root)
        for (int r = 0; r < n; ++r)
          c.check("gather from " + std::to_string(r) + at_root, all, r * block, block,
                  [&](size_t k) { return byte_of(r, root, k); });
      // Scatter: rank r gets block r of the root's buffer.
      std::fill(all.begin(), all.end(), kPoison);
      std::fill(mine.begin(), mine.end(), kPoison);
      if (me == root)
        for (int r = 0; r < n; ++r) fill(all, r * block, block, root, r);
      unsigned char* recv = place ? all.data() + me * block : mine.data();
      if (c.ok(weftScatter(all.data(), recv, count, dt, root, c.comm, nullptr), "scatter" + at_root)) {
        std::vector<unsigned char> got(recv, recv + block);
        c.check("scatter" + at_root, got, 0, block, [&](size_t k) { return byte_of(root, me, k); });
      }
      if (!place) c.check("scatter: past recvbuff" + at_root, mine, block, 1, [](size_t) { return kPoison; });
    }
  }
  // Non-blocking, and inside a group: a gather to rank 0 and a scatter from the
  // last rank together.
  for (int grouped = 0; grouped < 2; ++grouped) {
    const std::string how = grouped ? " in a group" : " async";
    std::vector<unsigned char> all(n * block, kPoison), mine(block), src(n * block), got(block, kPoison);
    fill(mine, 0, block, me, 0);
    if (me == n - 1)
      for (int r = 0; r < n; ++r) fill(src, r * block, block, n - 1, r);
    bool ran;
    if (grouped) {
      weftGroupStart();
      ran = c.ok(weftGather(mine.data(), all.data(), count, dt, 0, c.comm, nullptr), "gather" + how) &
            c.ok(weftScatter(src.data(), got.data(), count, dt, n - 1, c.comm, nullptr), "scatter" + how);
      ran = c.ok(weftGroupEnd(), "group end" + how) && ran;
    } else {
      weftRequest_t g = nullptr, s = nullptr;
      ran = c.ok(weftGatherAsync(mine.data(), all.data(), count, dt, 0, c.comm, &g), "gather" + how) &
            c.ok(weftScatterAsync(src.data(), got.data(), count, dt, n - 1, c.comm, &s), "scatter" + how);
      ran = c.ok(weftWait(&g), "wait gather") & c.ok(weftWait(&s), "wait scatter") & ran;
    }
    if (!ran) continue;
    if (me == 0)
      for (int r = 0; r < n; ++r)
        c.check("gather from " + std::to_string(r) + how + tag, all, r * block, block,
                [&](size_t k) { return byte_of(r, 0, k); });
    c.check("scatter" + how + tag, got, 0, block, [&](size_t k) { return byte_of(n - 1, me, k); });
  }
}

// Elements rank `from` sends rank `to`: uneven, zero for about one pair in five.
size_t part(int from, int to, size_t count, int call) {
  const size_t k = static_cast<size_t>((from * 3 + to * 5 + call) % 5);
  return k == 0 || count == 0 ? 0 : count * k / 4 + k;
}

// Displacements with gaps, in reverse rank order on the send side, forward on
// the receive side; returns the buffer's length in elements.
size_t layout(const std::vector<size_t>& counts, std::vector<size_t>* displs, bool reverse) {
  const int n = static_cast<int>(counts.size());
  size_t cursor = 0;
  displs->assign(counts.size(), 0);
  for (int i = 0; i < n; ++i) {
    const int p = reverse ? n - 1 - i : i;
    cursor += static_cast<size_t>(p % 3) + 1;  // a gap before every part
    (*displs)[p] = cursor;
    cursor += counts[p];
  }
  return cursor + 2;
}

void alltoallv(Checker& c, weftDataType_t dt, size_t es, size_t count, int call, int mode) {
  const int n = c.n, me = c.rank;
  static const char* const kModes[] = {"blocking", "async", "in a group"};
  const std::string tag = std::string(" alltoallv ") + kModes[mode] + " dtype " + std::to_string(dt) + " count " +
                          std::to_string(count) + " call " + std::to_string(call);
  std::vector<size_t> sendcounts(n), recvcounts(n), sdispls, rdispls;
  for (int p = 0; p < n; ++p) {
    sendcounts[p] = part(me, p, count, call);
    recvcounts[p] = part(p, me, count, call);
  }
  const size_t slen = layout(sendcounts, &sdispls, true), rlen = layout(recvcounts, &rdispls, false);
  std::vector<unsigned char> send(slen * es, kPoison), recv(rlen * es, kPoison);
  for (int p = 0; p < n; ++p) fill(send, sdispls[p] * es, sendcounts[p] * es, me, p);
  bool ran;
  if (mode == 1) {
    weftRequest_t req = nullptr;
    ran = c.ok(weftAlltoAllvAsync(send.data(), sendcounts.data(), sdispls.data(), recv.data(), recvcounts.data(),
                                  rdispls.data(), dt, c.comm, &req), tag);
    // The arrays are the caller's again once the call returns.
    for (std::vector<size_t>* v : {&sendcounts, &sdispls, &recvcounts, &rdispls})
      for (size_t& x : *v) x = ~x;
    ran = c.ok(weftWait(&req), "wait" + tag) && ran;
    for (std::vector<size_t>* v : {&sendcounts, &sdispls, &recvcounts, &rdispls})
      for (size_t& x : *v) x = ~x;
  } else {
    if (mode == 2) weftGroupStart();
    ran = c.ok(weftAlltoAllv(send.data(), sendcounts.data(), sdispls.data(), recv.data(), recvcounts.data(),
                             rdispls.data(), dt, c.comm, nullptr), tag);
    if (mode == 2) ran = c.ok(weftGroupEnd(), "group end" + tag) && ran;
  }
  if (!ran) return;
  std::vector<bool> inside(recv.size(), false);
  for (int p = 0; p < n; ++p) {
    c.check("from " + std::to_string(p) + tag, recv, rdispls[p] * es, recvcounts[p] * es,
            [&](size_t k) { return byte_of(p, me, k); });
    for (size_t k = 0; k < recvcounts[p] * es; ++k) inside[rdispls[p] * es + k] = true;
  }
  for (size_t b = 0; b < recv.size(); ++b)
    if (!inside[b] && recv[b] != kPoison && c.wrong++ < 3)
      std::fprintf(stderr, "rank %d:%s: byte %zu outside every part was written\n", me, tag.c_str(), b);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> counts = {0, 1, 7, 1023, 70001};
  if (!weft_test::parse_counts(argc, argv, &counts)) return 2;
  Checker c;
  if (!weft_test::init_from_env(&c)) return 1;
  const struct {
    weftDataType_t dt;
    size_t es;
  } types[] = {{weftInt8, 1}, {weftFloat16, 2}, {weftInt32, 4}, {weftUint64, 8}};
  for (size_t count : counts)
    for (const auto& t : types) {
      gather_scatter(c, t.dt, t.es, count);
      for (int mode = 0; mode < 3; ++mode)
        for (int call = 0; call < 2; ++call) alltoallv(c, t.dt, t.es, count, call, mode);
    }
  c.ok(weftBarrier(c.comm), "barrier");
  std::printf("rank %d/%d: %" PRId64 " calls, %" PRId64 " wrong bytes, %" PRId64 " failed calls\n", c.rank, c.n,
              c.calls, c.wrong, c.failures);
  weftCommDestroy(c.comm);
  return c.wrong == 0 && c.failures == 0 ? 0 : 1;
}
