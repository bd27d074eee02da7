// Self-test of the -c 1 data pattern (check.cpp), no communicator needed: for every
// datatype, op and a spread of rank counts, reduce the pattern the way an algorithm
// might (in the datatype's own arithmetic, rounding after every step, in several
// orders) and require CountWrong == 0; then require that a corrupted element is
// caught. This is what makes "#wrong > 0" mean a bug in weft, not in weft-perf.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "check.h"
#include "datatype.h"

using namespace weftperf;

namespace {

float HalfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  float mag = exp == 0    ? std::ldexp(static_cast<float>(mant), -24)
              : exp == 31 ? (mant != 0 ? NAN : INFINITY)
                          : std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return (h & 0x8000) != 0 ? -mag : mag;
}

// OCP fp8: E4M3's only non-finite codes are NaN (S.1111.111); E5M2's all-ones
// exponent is Inf or NaN.
double Fp8ToDouble(uint64_t raw, int man_bits, int bias) {
  const int exp = static_cast<int>(raw & 0x7f) >> man_bits, mant = static_cast<int>(raw) & ((1 << man_bits) - 1);
  double mag;
  if (man_bits == 3 && (raw & 0x7f) == 0x7f) mag = NAN;
  else if (man_bits == 2 && exp == 31) mag = mant != 0 ? NAN : INFINITY;
  else if (exp == 0) mag = std::ldexp(mant, 1 - bias - man_bits);
  else mag = std::ldexp(mant | (1 << man_bits), exp - bias - man_bits);
  return (raw & 0x80) != 0 ? -mag : mag;
}

double Decode(weftDataType_t t, uint64_t raw) {
  switch (t) {
    case weftInt8: return static_cast<int8_t>(raw);
    case weftUint8: return static_cast<uint8_t>(raw);
    case weftInt32: return static_cast<int32_t>(raw);
    case weftUint32: return static_cast<uint32_t>(raw);
    case weftInt64: return static_cast<double>(static_cast<int64_t>(raw));
    case weftUint64: return static_cast<double>(raw);
    case weftFloat16: return HalfToFloat(static_cast<uint16_t>(raw));
    case weftFloat8e4m3: return Fp8ToDouble(raw, 3, 7);
    case weftFloat8e5m2: return Fp8ToDouble(raw, 2, 15);
    case weftBfloat16: {
      uint32_t u = static_cast<uint32_t>(raw) << 16;
      float f;
      std::memcpy(&f, &u, sizeof(f));
      return f;
    }
    case weftFloat32: {
      uint32_t u = static_cast<uint32_t>(raw);
      float f;
      std::memcpy(&f, &u, sizeof(f));
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, &raw, sizeof(d));
      return d;
    }
  }
}

template <typename T>
T Combine(weftRedOp_t op, T a, T b) {
  switch (op) {
    case weftProd: return a * b;
    case weftMax: return std::max(a, b);
    case weftMin: return std::min(a, b);
    default: return a + b;  // sum, and avg before its division
  }
}

// One reduction step as a kernel would do it: 8- and 16-bit floats in float, the result
// rounded back to the datatype; integers wrap.
uint64_t Step(weftDataType_t t, weftRedOp_t op, uint64_t a, uint64_t b) {
  const TypeInfo& info = Info(t);
  if (!info.is_float)
    return EncodeInt(t, Combine<int64_t>(op, static_cast<int64_t>(Decode(t, a)),
                                         static_cast<int64_t>(Decode(t, b))));
  if (t == weftFloat64) return EncodeReal(t, Combine(op, Decode(t, a), Decode(t, b)));
  float r = Combine(op, static_cast<float>(Decode(t, a)), static_cast<float>(Decode(t, b)));
  return EncodeReal(t, r);
}

uint64_t Reduce(const ReducePattern& p, weftDataType_t t, weftRedOp_t op, size_t i,
                const std::vector<int>& order, bool pairwise) {
  std::vector<uint64_t> v;
  for (int r : order) v.push_back(EncodeInt(t, p.Value(r, i)));
  if (pairwise) {  // tree-shaped, as recursive halving would combine
    while (v.size() > 1) {
      std::vector<uint64_t> next;
      for (size_t k = 0; k + 1 < v.size(); k += 2) next.push_back(Step(t, op, v[k], v[k + 1]));
      if (v.size() % 2 == 1) next.push_back(v.back());
      v.swap(next);
    }
    return v[0];
  }
  uint64_t acc = v[0];
  for (size_t k = 1; k < v.size(); ++k) acc = Step(t, op, acc, v[k]);
  return acc;
}

uint64_t Average(weftDataType_t t, uint64_t sum, int n, bool by_reciprocal) {
  const TypeInfo& info = Info(t);
  if (!info.is_float) return EncodeInt(t, static_cast<int64_t>(Decode(t, sum)) / n);
  if (t == weftFloat64) {
    double s = Decode(t, sum);
    return EncodeReal(t, by_reciprocal ? s * (1.0 / n) : s / n);
  }
  float s = static_cast<float>(Decode(t, sum));
  return EncodeReal(t, by_reciprocal ? s * (1.0f / static_cast<float>(n)) : s / static_cast<float>(n));
}

}  // namespace

int main() {
  std::vector<weftDataType_t> types;
  std::vector<weftRedOp_t> ops;
  ParseTypes("all", &types);
  ParseOps("all", &ops);
  int failures = 0, cases = 0;
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 31, 127, 128, 129, 256, 257, 1024}) {
    for (weftDataType_t t : types) {
      for (weftRedOp_t op : ops) {
        ReducePattern p(t, op, n);
        const size_t count = n > 64 ? 200 : 1500;
        const size_t size = Info(t).size;
        std::vector<unsigned char> out(count * size);
        std::vector<int> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        for (int variant = 0; variant < 4; ++variant) {
          bool pairwise = variant & 1, reciprocal = variant & 2;
          if (variant == 2) std::reverse(order.begin(), order.end());
          for (size_t i = 0; i < count; ++i) {
            uint64_t r = Reduce(p, t, op, i, order, pairwise);
            if (op == weftAvg) r = Average(t, r, n, reciprocal);
            StoreRaw(out.data(), i, size, r);
          }
          ++cases;
          if (int64_t wrong = p.CountWrong(out.data(), count); wrong != 0) {
            std::printf("FAIL: %d ranks %s %s variant %d: %lld wrong\n", n, Info(t).name,
                        OpName(op), variant, static_cast<long long>(wrong));
            ++failures;
          }
        }
        // Poison (what an output holds before the checked call) must never pass.
        p.Poison(out.data(), count);
        if (p.CountWrong(out.data(), count) != static_cast<int64_t>(count)) {
          std::printf("FAIL: %d ranks %s %s: poisoned elements pass\n", n, Info(t).name,
                      OpName(op));
          ++failures;
        }
        for (size_t i = 0; i < count; ++i) StoreRaw(out.data(), i, size, p.ExpectedRaw(i));
        // A wrong element must be caught (float avg accepts 1 ulp, so move it further).
        uint64_t raw = LoadRaw(out.data(), 7, size);
        StoreRaw(out.data(), 7, size, raw + (p.Tolerant() ? 3 : 1));
        if (p.CountWrong(out.data(), count) != 1) {
          std::printf("FAIL: %d ranks %s %s: corrupted element not detected\n", n, Info(t).name,
                      OpName(op));
          ++failures;
        }
      }
    }
  }
  // Contributions must depend on the rank, or a rank's data could go missing unseen.
  ReducePattern p(weftFloat32, weftSum, 2);
  int differ = 0;
  for (size_t i = 0; i < 100; ++i) differ += p.Value(0, i) != p.Value(1, i);
  if (differ < 50) {
    std::printf("FAIL: ranks 0 and 1 differ at only %d of 100 elements\n", differ);
    ++failures;
  }
  // The copy pattern: exact round trip, poison never passes, a block from another
  // source or offset is caught, floats are all finite.
  for (weftDataType_t t : types) {
    CopyPattern c(t);
    const size_t count = 1000, size = Info(t).size;
    std::vector<unsigned char> buf(count * size);
    auto expect = [&](const char* what, int64_t got, bool ok) {
      ++cases;
      if (ok) return;
      std::printf("FAIL: copy pattern %s: %s (%lld wrong)\n", Info(t).name, what,
                  static_cast<long long>(got));
      ++failures;
    };
    c.Poison(buf.data(), count, 2, 5);
    int64_t w = c.CountWrong(buf.data(), count, 2, 5);
    expect("poison passes", w, w == static_cast<int64_t>(count));
    c.Fill(buf.data(), count, 2, 5);
    w = c.CountWrong(buf.data(), count, 2, 5);
    expect("fill does not round-trip", w, w == 0);
    w = c.CountWrong(buf.data(), count, 3, 5);  // 1-byte types match by chance 1 in 256
    expect("another source's block passes", w, w > static_cast<int64_t>(count) * 9 / 10);
    w = c.CountWrong(buf.data(), count, 2, 6);
    expect("a shifted block passes", w, w > static_cast<int64_t>(count) * 9 / 10);
    if (Info(t).is_float) {
      int64_t nonfinite = 0;
      for (size_t i = 0; i < count; ++i) nonfinite += !std::isfinite(Decode(t, c.Raw(1, i)));
      expect("non-finite values", nonfinite, nonfinite == 0);
    }
  }
  std::printf("%d cases, %d failures\n", cases, failures);
  return failures == 0 ? 0 : 1;
}
