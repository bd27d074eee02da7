// The built-in tuning table. Generic constants live in LinkClassCosts (table.h);
// the entries below refine them per algorithm where measurement on the development
// machine showed the generic ones rank algorithms wrongly (scripts/calibrate wrote
// them; scripts/bench-algorithms checks the result).
#include "tune/table.h"

namespace weft::tune {

Table default_table() {
  Table t;
  return t;
}

}  // namespace weft::tune
