#include "base/params.h"

#include <cstdlib>

#include "base/log.h"

namespace weft::params {

bool parse_int(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 0);
  int64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1LL << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1LL << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1LL << 30, ++end;
  if (*end != '\0') return false;
  *out = v * mult;
  return true;
}

namespace {
template <typename T>
struct Value {
  T value;
  bool from_env;
};

Value<int64_t> read_int(const char* env, int64_t def) {
  const char* s = std::getenv(env);
  if (s == nullptr || *s == '\0') return {def, false};
  int64_t v;
  if (!parse_int(s, &v)) {
    WEFT_WARN(INIT, "%s=%s is not an integer; using the default %lld", env, s,
              static_cast<long long>(def));
    return {def, false};
  }
  return {v, true};
}

Value<std::string> read_str(const char* env, const char* def) {
  const char* s = std::getenv(env);
  if (s == nullptr) return {def, false};
  return {s, true};
}
}  // namespace

#define WEFT_PARAM_INT(name, def, help)                                  \
  static const Value<int64_t>& name##_value() {                         \
    static const Value<int64_t> v = read_int("WEFT_" #name, def);       \
    return v;                                                          \
  }                                                                     \
  int64_t name() { return name##_value().value; }
#define WEFT_PARAM_STR(name, def, help)                                  \
  static const Value<std::string>& name##_value() {                     \
    static const Value<std::string> v = read_str("WEFT_" #name, def);   \
    return v;                                                          \
  }                                                                     \
  const std::string& name() { return name##_value().value; }
#include "base/params_table.h"
#undef WEFT_PARAM_INT
#undef WEFT_PARAM_STR

void log_all() {
#define WEFT_PARAM_INT(name, def, help)                                          \
  WEFT_INFO(INIT, "param WEFT_%-16s = %-10lld (%s) %s", #name,                  \
            static_cast<long long>(name()), name##_value().from_env ? "env" : "default", help);
#define WEFT_PARAM_STR(name, def, help)                                          \
  WEFT_INFO(INIT, "param WEFT_%-16s = %-10s (%s) %s", #name, name().c_str(),    \
            name##_value().from_env ? "env" : "default", help);
#include "base/params_table.h"
#undef WEFT_PARAM_INT
#undef WEFT_PARAM_STR
}

}  // namespace weft::params
