// A minimal JSON reader (objects, arrays, strings, numbers, true/false/null), enough
// for topology files, HF config.json and safetensors headers (the trainer reaches it
// through libweft.so). Throws std::runtime_error on bad input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace weft::json {

struct Member;

struct Value {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Value> arr;
  // Members in file order. (Not std::pair: a pair of the still incomplete Value
  // is ill-formed, though GCC lets it pass.)
  std::vector<Member> obj;

  const Value* find(std::string_view key) const;
};

struct Member {
  std::string first;  // the key
  Value second;
};

Value parse(std::string_view text);
std::string quote(std::string_view s);  // JSON string literal

}  // namespace weft::json
