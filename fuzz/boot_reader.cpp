// The bootstrap's framing (MsgReader) over arbitrary bytes fed in arbitrary
// pieces, and the diagnosis over whatever status rows the messages carry: what
// a root or a rank reads from its socket before it trusts anything.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/diagnosis.h"
#include "bootstrap/wire.h"

using namespace weft::boot;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  MsgReader reader;
  // As the root reads a stranger (a hello at most) or a rank that proved the secret.
  reader.set_limit(data[0] & 1 ? static_cast<uint32_t>(sizeof(HelloBody)) : 1u << 16);
  const size_t piece = data[1] % 64 + 1;
  std::vector<RankStatus> rows;
  for (size_t i = 2; i < size; i += piece) {
    reader.feed(reinterpret_cast<const char*>(data + i), std::min(piece, size - i));
    Msg m;
    bool bad = false;
    while (reader.next(&m, &bad)) {
      if (m.payload.size() == sizeof(StatusRow) && rows.size() < 64) {
        RankStatus s;
        std::memcpy(&s.row, m.payload.data(), sizeof s.row);
        s.who = "fuzz";
        rows.push_back(s);
      }
    }
    if (bad) break;  // the connection would be dropped here
  }
  std::string table;
  std::string line = diagnose(rows, 1, &table);
  return line.empty() ? 1 : 0;
}
