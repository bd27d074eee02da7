// WEFT_TOPO_FILE / weft-topo --file / weft-sim --topo: JSON from a file. Bad
// input throws std::runtime_error (and nothing else); a topology that loads
// prints as JSON that loads to the same text, and one rank's joins with itself
// into one host of two ranks.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "base/json.h"
#include "topo/topology.h"

using namespace weft;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)json::parse(text);
  } catch (const std::runtime_error&) {
  }
  topo::System s;
  try {
    s = topo::from_json(text);
  } catch (const std::runtime_error&) {
    return 0;
  }
  std::string printed = topo::to_json(s);
  topo::System again;
  try {
    again = topo::from_json(printed);
  } catch (const std::runtime_error&) {
    __builtin_trap();
  }
  if (topo::to_json(again) != printed) __builtin_trap();
  // join() takes what each rank contributes at init: one host, one rank.
  if (s.hosts.size() == 1 && s.ranks.size() == 1) {
    topo::System both = topo::join({s, again});
    if (both.hosts.size() != 1 || both.ranks.size() != 2) __builtin_trap();
  }
  return 0;
}
