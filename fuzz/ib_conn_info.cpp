// The ibverbs connection info a rank reads from its peer through the bootstrap:
// parse() must refuse what serialize() cannot have written, and what it accepts
// must serialize back to the same bytes.
#include <cstdint>
#include <cstring>
#include <string>

#include "transports/ibverbs/conn_info.h"

using namespace weft::ib;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size != kConnInfoBytes) return 0;
  ConnInfo c;
  std::string why;
  if (!parse(data, &c, &why)) return why.empty() ? (__builtin_trap(), 0) : 0;
  uint8_t again[kConnInfoBytes] = {}, twice[kConnInfoBytes] = {};
  serialize(c, again);
  ConnInfo d;
  if (!parse(again, &d, &why)) __builtin_trap();
  serialize(d, twice);
  if (std::memcmp(again, twice, sizeof again) != 0) __builtin_trap();
  (void)common_mtu(c.mtu, d.mtu);
  return 0;
}
