// Environment parameters. Each is read once, on first use, from WEFT_<NAME>.
#pragma once

#include <cstdint>
#include <string>

namespace weft::params {

#define WEFT_PARAM_INT(name, def, help) int64_t name();
#define WEFT_PARAM_STR(name, def, help) const std::string& name();
#include "base/params_table.h"
#undef WEFT_PARAM_INT
#undef WEFT_PARAM_STR

// Logs every parameter, its value and where it came from (INFO, INIT).
void log_all();

// Parses an integer with an optional K/M/G suffix (powers of 1024); false if malformed.
bool parse_int(const std::string& text, int64_t* out);

}  // namespace weft::params
