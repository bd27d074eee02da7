// WEFT_TUNING_FILE and WEFT_ALGO: text from the user's environment. A table that
// parses must print (format_table) as text that parses to the same table.
#include <cstdint>
#include <string>

#include "tune/algo_spec.h"
#include "tune/table.h"

using namespace weft;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  tune::AlgoSpec spec;
  (void)tune::parse_algo_spec(text, &spec);
  tune::Table t;
  if (!tune::parse_tuning_text(text, "fuzz", &t).ok()) return 0;
  std::string printed = tune::format_table(t);
  tune::Table u;
  Status st = tune::parse_tuning_text(printed, "fuzz (printed)", &u);
  if (!st.ok() || tune::format_table(u) != printed) __builtin_trap();
  return 0;
}
