// Multi-process correctness sweep, run under weft-run: every (dtype, op, count)
// asked for, out-of-place and in-place, checked element by element on every
// rank against expectations computed here from small integers (exact in every
// datatype). Prints one summary line per rank; exits 1 on any wrong element.
//
//   weft-check-allreduce [--counts 0,1,7] [--dtypes all|float,half,...]
//                        [--ops all|sum,...] [--memalloc] [--iters N]
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "numeric.h"
#include "weft/weft.h"

namespace {

const char* kTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                            "half", "float", "double", "bfloat16"};
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};
const size_t kTypeSize[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

bool is_float(int t) { return t >= weftFloat16 && t <= weftBfloat16; }

// Input of rank r at element i: small integers, so sums over 8 ranks stay exact
// even in bf16 (8 significant bits) and products stay within 2^8.
int64_t input(int op, int r, size_t i) {
  switch (op) {
    case weftProd: return 1 + static_cast<int64_t>((i + static_cast<size_t>(r)) % 3 == 0);  // 1 or 2
    case weftMax:
    case weftMin: return static_cast<int64_t>((i * 7 + static_cast<size_t>(r) * 13) % 23) - 11;
    default: return static_cast<int64_t>((i + static_cast<size_t>(r) * 3) % 9) - 4 + (r % 2);
  }
}

// Unsigned types get the magnitudes only, so min/max/sum stay meaningful.
int64_t input_for(int type, int op, int r, size_t i) {
  int64_t v = input(op, r, i);
  if (type == weftUint8 || type == weftUint32 || type == weftUint64) v = v < 0 ? -v : v;
  return v;
}

void store(void* buf, int type, size_t i, double v) {
  switch (type) {
    case weftInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case weftUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case weftInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case weftUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(static_cast<int64_t>(v)); break;
    case weftInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case weftUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(static_cast<int64_t>(v)); break;
    case weftFloat16: static_cast<uint16_t*>(buf)[i] = weft_test::float_to_half(static_cast<float>(v)); break;
    case weftFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case weftFloat64: static_cast<double*>(buf)[i] = v; break;
    case weftBfloat16: static_cast<uint16_t*>(buf)[i] = weft_test::float_to_bf16(static_cast<float>(v)); break;
  }
}

// The exact result for element i, as the bytes of the result type.
void expected(int type, int op, int n, size_t i, void* out) {
  int64_t acc = input_for(type, op, 0, i);
  for (int r = 1; r < n; ++r) {
    int64_t v = input_for(type, op, r, i);
    switch (op) {
      case weftProd: acc *= v; break;
      case weftMax: acc = v > acc ? v : acc; break;
      case weftMin: acc = v < acc ? v : acc; break;
      default: acc += v;
    }
  }
  if (op != weftAvg) {
    store(out, type, 0, static_cast<double>(acc));
    return;
  }
  if (!is_float(type)) {
    // Integer avg: the sum wraps in the type first, then divides (truncating).
    unsigned char tmp[8];
    store(tmp, type, 0, static_cast<double>(acc));
    int64_t wrapped;
    switch (type) {
      case weftInt8: wrapped = *reinterpret_cast<int8_t*>(tmp); break;
      case weftUint8: wrapped = *reinterpret_cast<uint8_t*>(tmp); break;
      case weftInt32: wrapped = *reinterpret_cast<int32_t*>(tmp); break;
      case weftUint32: wrapped = *reinterpret_cast<uint32_t*>(tmp); break;
      default: wrapped = acc;
    }
    if (type == weftUint64) {
      std::memcpy(out, tmp, 8);
      *static_cast<uint64_t*>(out) /= static_cast<uint64_t>(n);
      return;
    }
    store(out, type, 0, static_cast<double>(wrapped / n));
    return;
  }
  if (type == weftFloat64) store(out, type, 0, static_cast<double>(acc) / n);
  else store(out, type, 0, static_cast<double>(static_cast<float>(acc) / static_cast<float>(n)));
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

int index_of(const char* const* names, int n, const std::string& s) {
  for (int i = 0; i < n; ++i)
    if (s == names[i]) return i;
  std::fprintf(stderr, "unknown name %s\n", s.c_str());
  std::exit(2);
}

struct Buffers {
  bool memalloc;
  void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;
  void alloc(size_t b) {
    release();
    bytes = b == 0 ? 64 : b;
    if (memalloc) {
      if (weftMemAlloc(&send, bytes) != weftSuccess || weftMemAlloc(&recv, bytes) != weftSuccess) {
        std::fprintf(stderr, "weftMemAlloc failed: %s\n", weftGetLastError(nullptr));
        std::exit(1);
      }
    } else {
      send = std::malloc(bytes);
      recv = std::malloc(bytes);
    }
  }
  void release() {
    if (send == nullptr) return;
    if (memalloc) weftMemFree(send), weftMemFree(recv);
    else std::free(send), std::free(recv);
    send = recv = nullptr;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> counts = {"0", "1", "7", "1023", "65537"};
  std::vector<std::string> dtypes(kTypeNames, kTypeNames + 10), ops(kOpNames, kOpNames + 5);
  bool memalloc = false;
  int iters = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--counts" && i + 1 < argc) counts = split(argv[++i]);
    else if (a == "--dtypes" && i + 1 < argc) {
      std::string v = argv[++i];
      if (v != "all") dtypes = split(v);
    } else if (a == "--ops" && i + 1 < argc) {
      std::string v = argv[++i];
      if (v != "all") ops = split(v);
    } else if (a == "--memalloc") memalloc = true;
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--counts a,b] [--dtypes ...] [--ops ...] [--memalloc] [--iters N]\n", argv[0]);
      return 2;
    }
  }

  weftComm_t comm;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int rank, n;
  weftCommUserRank(comm, &rank);
  weftCommCount(comm, &n);

  Buffers buf{memalloc};
  int64_t wrong = 0, calls = 0, failures = 0;
  // Inputs and results repeat with this period in the element index, so large
  // counts are filled and checked from one precomputed period.
  constexpr size_t kPeriod = 3 * 9 * 23;
  std::vector<unsigned char> in_pattern(kPeriod * 8), want_pattern(kPeriod * 8);
  for (const std::string& cs : counts) {
    for (const std::string& ds : dtypes) {
      int type = index_of(kTypeNames, 10, ds);
      size_t es = kTypeSize[type];
      // "64M" means 64 MiB of data in every datatype; a plain number is a count.
      size_t count = std::strtoull(cs.c_str(), nullptr, 0);
      if (!cs.empty() && cs.back() == 'M') count = (count << 20) / es;
      buf.alloc(count * es);
      for (const std::string& os : ops) {
        int op = index_of(kOpNames, 5, os);
        for (size_t i = 0; i < kPeriod; ++i) {
          store(in_pattern.data(), type, i, static_cast<double>(input_for(type, op, rank, i)));
          expected(type, op, n, i, want_pattern.data() + i * es);
        }
        for (int in_place = 0; in_place < 2; ++in_place) {
          for (int it = 0; it < iters; ++it) {
            void* src = in_place ? buf.recv : buf.send;
            for (size_t i = 0; i < count; i += kPeriod)
              std::memcpy(static_cast<unsigned char*>(src) + i * es, in_pattern.data(),
                          std::min(kPeriod, count - i) * es);
            if (!in_place) std::memset(buf.recv, 0xA5, count * es);
            ++calls;
            weftResult_t rc = weftAllReduce(src, buf.recv, count, static_cast<weftDataType_t>(type),
                                            static_cast<weftRedOp_t>(op), comm, nullptr);
            if (rc != weftSuccess) {
              std::fprintf(stderr, "rank %d: allreduce %s %s count %zu %s failed: %s\n", rank,
                           ds.c_str(), os.c_str(), count, in_place ? "in-place" : "out-of-place",
                           weftGetLastError(comm));
              ++failures;
              break;
            }
            int64_t bad = 0;
            for (size_t i = 0; i < count; ++i) {
              const unsigned char* want = want_pattern.data() + (i % kPeriod) * es;
              if (std::memcmp(static_cast<unsigned char*>(buf.recv) + i * es, want, es) != 0) {
                if (bad < 3)
                  std::fprintf(stderr, "rank %d: %s %s count %zu %s: element %zu wrong\n", rank,
                               ds.c_str(), os.c_str(), count, in_place ? "in-place" : "out-of-place", i);
                ++bad;
              }
            }
            wrong += bad;
          }
          if (failures) break;
        }
        if (failures) break;
      }
      if (failures) break;
    }
    if (failures) break;
  }
  buf.release();
  std::printf("rank %d/%d: %" PRId64 " calls, %" PRId64 " wrong elements, %" PRId64 " failed calls%s\n",
              rank, n, calls, wrong, failures, memalloc ? " (weftMemAlloc buffers)" : "");
  if (failures == 0) weftCommDestroy(comm);
  return (wrong == 0 && failures == 0) ? 0 : 1;
}
