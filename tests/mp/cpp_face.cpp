// The C++ face over a real communicator (run under weft-run): every wrapper
// once, results checked, errors surfacing as weft::Error with the C API's code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <thread>
#include <vector>

#include "weft/weft.hpp"

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  failures += ok ? 0 : 1;
}
}  // namespace

int main() {
  weft::Communicator comm = weft::init_from_env();
  const int r = comm.rank(), n = comm.size();

  std::vector<float> x(1000, static_cast<float>(r + 1));
  comm.allreduce(std::span<float>(x));
  expect(x[0] == n * (n + 1) / 2.0f && x[999] == x[0], "allreduce sum");

  std::vector<int64_t> b(17, r == n - 1 ? 42 : -1);
  comm.broadcast(std::span<int64_t>(b), n - 1);
  expect(b[0] == 42 && b[16] == 42, "broadcast from the last rank");

  std::vector<int32_t> in(5, r), out(5 * static_cast<size_t>(n), -1);
  comm.allgather(std::span<const int32_t>(in), std::span<int32_t>(out));
  bool ok = true;
  for (int p = 0; p < n; ++p) ok = ok && out[static_cast<size_t>(p) * 5] == p;
  expect(ok, "allgather");

  std::vector<double> rs_in(3 * static_cast<size_t>(n)), rs_out(3);
  std::iota(rs_in.begin(), rs_in.end(), 0.0);
  comm.reducescatter(std::span<const double>(rs_in), std::span<double>(rs_out), weft::Op::max);
  expect(rs_out[0] == 3.0 * r && rs_out[2] == 3.0 * r + 2, "reducescatter max");

  std::vector<float> red(4, 1.0f), red_out(4, 0.0f);
  comm.reduce(std::span<const float>(red), std::span<float>(red_out), 0);
  expect(r != 0 || red_out[3] == static_cast<float>(n), "reduce to root");

  std::vector<int32_t> a_in(static_cast<size_t>(n)), a_out(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) a_in[static_cast<size_t>(p)] = r * 100 + p;
  comm.alltoall(std::span<const int32_t>(a_in), std::span<int32_t>(a_out));
  ok = true;
  for (int p = 0; p < n; ++p) ok = ok && a_out[static_cast<size_t>(p)] == p * 100 + r;
  expect(ok, "alltoall");

  if (n > 1) {
    std::vector<uint8_t> s(64, static_cast<uint8_t>(r)), got(64, 255);
    {
      weft::Group g;
      comm.recv(std::span<uint8_t>(got), (r + n - 1) % n);
      comm.send(std::span<const uint8_t>(s), (r + 1) % n);
      g.end();
    }
    expect(got[63] == (r + n - 1) % n, "send/recv ring in a group");
    std::fill(got.begin(), got.end(), 255);
    double seconds = 0;
    {
      weft::Group g;
      comm.recv(std::span<uint8_t>(got), (r + n - 1) % n);
      comm.send(std::span<const uint8_t>(s), (r + 1) % n);
      seconds = g.simulate_end();
    }
    expect(seconds > 0 && got[63] == 255, "a simulated group: an estimate, nothing received");
  }

  std::vector<float> f(256, 1.0f);
  weft::Future fut = comm.allreduce_async(std::span<float>(f));
  fut.wait();
  expect(f[255] == static_cast<float>(n), "async allreduce future");
  comm.barrier();

  try {
    std::vector<float> small(3), big(3 * static_cast<size_t>(n) + 1);
    comm.allgather(std::span<const float>(small), std::span<float>(big));
    expect(false, "allgather size mismatch throws");
  } catch (const weft::Error& e) {
    expect(e.code() == weftInvalidArgument, "allgather size mismatch throws weft::Error");
  }

  // Split by parity; revoke the half on every rank of it; it settles, refuses
  // calls, and splits again.
  weft::Communicator half = comm.split(r % 2, r);
  int want = 0;
  for (int p = r % 2; p < n; p += 2) want += p + 1;
  std::vector<int32_t> v(8, r + 1);
  half.allreduce(std::span<int32_t>(v));
  expect(v[7] == want && half.size() == (n - r % 2 + 1) / 2, "allreduce on a split by parity");
  expect(!comm.split(WEFT_SPLIT_NOCOLOR, r), "WEFT_SPLIT_NOCOLOR gives an empty communicator");
  half.revoke();
  bool settled = false;
  for (int tries = 0; tries < 1000 && !(settled = half.quiescent()); ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  expect(settled, "a revoked communicator settles");
  try {
    half.allreduce(std::span<int32_t>(v));
    expect(false, "a call on a revoked communicator throws");
  } catch (const weft::Error& e) {
    expect(e.code() == weftInvalidUsage, "a call on a revoked communicator throws weftInvalidUsage");
  }
  weft::Communicator again = half.split(0, r);
  std::fill(v.begin(), v.end(), r + 1);
  again.allreduce(std::span<int32_t>(v));
  expect(v[0] == want, "allreduce on a split of the revoked communicator");
  return failures == 0 ? 0 : 1;
}
