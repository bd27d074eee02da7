// Multi-process correctness of the bitwise reductions (weftBand, weftBor,
// weftBxor) on every integer datatype: all-reduce in and out of place, reduce
// to every root, reduce-scatter; non-blocking once. Each rank's input is its own
// pseudo-random bits per element, and the expectation is folded here over the
// ranks' inputs, byte by byte.
//
//   weft-check-bitwise [--counts 0,1,7,1023,70001]
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

struct Type {
  weftDataType_t dt;
  const char* name;
  size_t es;
};
constexpr Type kTypes[] = {{weftInt8, "int8", 1},   {weftUint8, "uint8", 1},   {weftInt32, "int32", 4},
                           {weftUint32, "uint32", 4}, {weftInt64, "int64", 8}, {weftUint64, "uint64", 8}};
constexpr struct {
  weftRedOp_t op;
  const char* name;
} kOps[] = {{weftBand, "band"}, {weftBor, "bor"}, {weftBxor, "bxor"}};

// Byte b of rank r's input: biased towards ones for band and zeros for bor per
// rank, so neither result is all zeros or all ones.
unsigned char input(int r, size_t b, weftRedOp_t op) {
  uint64_t h = (static_cast<uint64_t>(b) + 1) * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(r) + 1) * 0xc2b2ae3d27d4eb4full;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  const auto x = static_cast<unsigned char>(h), y = static_cast<unsigned char>(h >> 8);
  return op == weftBand ? (x | y) : op == weftBor ? (x & y) : x;
}

unsigned char expected(int n, size_t b, weftRedOp_t op) {
  unsigned char acc = input(0, b, op);
  for (int r = 1; r < n; ++r) {
    const unsigned char v = input(r, b, op);
    acc = op == weftBand ? (acc & v) : op == weftBor ? (acc | v) : (acc ^ v);
  }
  return acc;
}

struct Checker : weft_test::CallLog {
  // bytes of got against the reduction's bytes [first, first + bytes).
  void check(const std::string& what, const unsigned char* got, size_t first, size_t bytes, weftRedOp_t op) {
    int64_t bad = 0;
    for (size_t b = 0; b < bytes; ++b)
      if (got[b] != expected(n, first + b, op) && bad++ < 3)
        std::fprintf(stderr, "rank %d: %s: byte %zu wrong\n", rank, what.c_str(), first + b);
    wrong += bad;
  }
};

void fill(std::vector<unsigned char>& buf, int r, weftRedOp_t op) {
  for (size_t b = 0; b < buf.size(); ++b) buf[b] = input(r, b, op);
}

void run(Checker& c, const Type& t, weftRedOp_t op, const char* opname, size_t count) {
  const int n = c.n, me = c.rank;
  const size_t bytes = count * t.es;
  const std::string tag = std::string(" ") + opname + " " + t.name + " count " + std::to_string(count);
  std::vector<unsigned char> in(bytes), out(n * bytes + 1);
  fill(in, me, op);
  if (c.ok(weftAllReduce(in.data(), out.data(), count, t.dt, op, c.comm, nullptr), "allreduce" + tag))
    c.check("allreduce" + tag, out.data(), 0, bytes, op);
  if (c.ok(weftAllReduce(in.data(), in.data(), count, t.dt, op, c.comm, nullptr), "allreduce in place" + tag))
    c.check("allreduce in place" + tag, in.data(), 0, bytes, op);
  for (int root = 0; root < n; ++root) {
    fill(in, me, op);
    if (c.ok(weftReduce(in.data(), out.data(), count, t.dt, op, root, c.comm, nullptr), "reduce" + tag) && me == root)
      c.check("reduce root " + std::to_string(root) + tag, out.data(), 0, bytes, op);
  }
  // Reduce-scatter: rank r gets block r of the reduction of everyone's n blocks.
  std::vector<unsigned char> all(n * bytes);
  fill(all, me, op);
  if (c.ok(weftReduceScatter(all.data(), out.data(), count, t.dt, op, c.comm, nullptr), "reducescatter" + tag))
    c.check("reducescatter" + tag, out.data(), me * bytes, bytes, op);
  weftRequest_t req = nullptr;
  fill(in, me, op);
  if (c.ok(weftAllReduceAsync(in.data(), out.data(), count, t.dt, op, c.comm, &req), "allreduce async" + tag) &&
      c.ok(weftWait(&req), "wait" + tag))
    c.check("allreduce async" + tag, out.data(), 0, bytes, op);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> counts = {0, 1, 7, 1023, 70001};
  if (!weft_test::parse_counts(argc, argv, &counts)) return 2;
  Checker c;
  if (!weft_test::init_from_env(&c)) return 1;
  for (size_t count : counts)
    for (const Type& t : kTypes)
      for (const auto& o : kOps) run(c, t, o.op, o.name, count);
  std::printf("rank %d/%d: %" PRId64 " calls, %" PRId64 " wrong bytes, %" PRId64 " failed calls\n", c.rank, c.n,
              c.calls, c.wrong, c.failures);
  weftCommDestroy(c.comm);
  return c.wrong == 0 && c.failures == 0 ? 0 : 1;
}
