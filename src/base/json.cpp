#include "base/json.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace weft::json {

const Value* Value::find(std::string_view key) const {
  for (const auto& kv : obj)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

namespace {

struct Parser {
  std::string_view s;
  size_t i = 0;

  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(std::string("JSON: ") + what + " at offset " + std::to_string(i));
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
  }
  char peek() {
    ws();
    if (i >= s.size()) fail("unexpected end");
    return s[i];
  }
  void expect(char c) {
    if (peek() != c) fail("unexpected character");
    i++;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i >= s.size()) fail("unterminated string");
      char c = s[i++];
      if (c == '"') break;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i >= s.size()) fail("bad escape");
      char e = s[i++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          if (i + 4 > s.size()) fail("bad \\u escape");
          unsigned cp = unsigned(std::strtoul(std::string(s.substr(i, 4)).c_str(), nullptr, 16));
          i += 4;
          // BMP only (no surrogate pairs needed for our files); encode as UTF-8.
          if (cp < 0x80) {
            out.push_back(char(cp));
          } else if (cp < 0x800) {
            out.push_back(char(0xC0 | (cp >> 6)));
            out.push_back(char(0x80 | (cp & 0x3F)));
          } else {
            out.push_back(char(0xE0 | (cp >> 12)));
            out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(char(0x80 | (cp & 0x3F)));
          }
          break;
        }
        default: fail("bad escape");
      }
    }
    return out;
  }
  // Nesting is bounded: each level is a stack frame here (and in ~Value), and a
  // file of 10,000 '[' overflowed the stack (found by fuzz_topology_file).
  static constexpr int kMaxDepth = 256;
  Value value(int depth = 0) {
    if (depth > kMaxDepth) fail("nesting deeper than 256 levels");
    Value v;
    char c = peek();
    if (c == '{') {
      i++;
      v.kind = Value::Object;
      if (peek() == '}') { i++; return v; }
      while (true) {
        std::string k = string();
        expect(':');
        v.obj.push_back({std::move(k), value(depth + 1)});
        char d = peek();
        i++;
        if (d == '}') break;
        if (d != ',') fail("expected , or }");
      }
    } else if (c == '[') {
      i++;
      v.kind = Value::Array;
      if (peek() == ']') { i++; return v; }
      while (true) {
        v.arr.push_back(value(depth + 1));
        char d = peek();
        i++;
        if (d == ']') break;
        if (d != ',') fail("expected , or ]");
      }
    } else if (c == '"') {
      v.kind = Value::String;
      v.str = string();
    } else if (s.substr(i, 4) == "true") {
      i += 4; v.kind = Value::Bool; v.b = true;
    } else if (s.substr(i, 5) == "false") {
      i += 5; v.kind = Value::Bool;
    } else if (s.substr(i, 4) == "null") {
      i += 4;
    } else {
      size_t j = i;
      while (j < s.size() && (std::isdigit((unsigned char)s[j]) || s[j] == '-' || s[j] == '+' ||
                              s[j] == '.' || s[j] == 'e' || s[j] == 'E'))
        j++;
      if (j == i) fail("unexpected character");
      v.kind = Value::Number;
      v.num = std::strtod(std::string(s.substr(i, j - i)).c_str(), nullptr);
      i = j;
    }
    return v;
  }
};

}  // namespace

Value parse(std::string_view text) {
  Parser p{text};
  Value v = p.value();
  p.ws();
  if (p.i != text.size()) p.fail("trailing characters");
  return v;
}

std::string quote(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') { o.push_back('\\'); o.push_back(c); }
    else if (c == '\n') o += "\\n";
    else if ((unsigned char)c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
    else o.push_back(c);
  }
  return o + "\"";
}

}  // namespace weft::json
