#include "json/json_reader.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <string>

#include "json/json_writer.h"
#include "opscope/error.h"

namespace opscope::internal {
namespace {

struct ParseError {
  std::size_t offset;
  const char* what;
};

// Recursive descent over the RFC 8259 grammar. With a null output it only checks, so
// is_valid_json allocates nothing for numbers and structure.
class Parser {
 public:
  explicit Parser(std::string_view text)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()) {}

  void document(JsonValue* out) {
    skip_ws();
    value(out, 0);
    skip_ws();
    if (p_ != end_) fail("unexpected text after the JSON value");
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw ParseError{static_cast<std::size_t>(p_ - begin_), what};
  }
  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool consume(char c) {
    if (p_ != end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }

  void value(JsonValue* out, int depth) {
    if (p_ == end_) fail("expected a value, found the end of the text");
    switch (*p_) {
      case '{': return object(out, depth);
      case '[': return array(out, depth);
      case '"': {
        std::string s;
        string(out ? &s : nullptr);
        if (out) *out = JsonValue(std::move(s));
        return;
      }
      case 't': return literal("true", out, JsonValue(true));
      case 'f': return literal("false", out, JsonValue(false));
      case 'n': return literal("null", out, JsonValue());
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return number(out);
        fail("expected a value");
    }
  }

  void literal(std::string_view word, JsonValue* out, JsonValue v) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      fail("expected a value");
    }
    p_ += word.size();
    if (out) *out = std::move(v);
  }

  void enter(int depth) const {
    if (depth >= kMaxJsonDepth) fail("nesting deeper than 512 levels");
  }

  void object(JsonValue* out, int depth) {
    enter(depth);
    ++p_;  // '{'
    JsonValue::Object members;
    skip_ws();
    if (!consume('}')) {
      for (;;) {
        skip_ws();
        if (p_ == end_ || *p_ != '"') fail("expected a string as object key");
        std::string key;
        string(out ? &key : nullptr);
        skip_ws();
        if (!consume(':')) fail("expected ':' after an object key");
        skip_ws();
        JsonValue v;
        value(out ? &v : nullptr, depth + 1);
        if (out) members.emplace_back(std::move(key), std::move(v));
        skip_ws();
        if (consume('}')) break;
        if (!consume(',')) fail("expected ',' or '}' after an object member");
      }
    }
    if (out) *out = JsonValue(std::move(members));
  }

  void array(JsonValue* out, int depth) {
    enter(depth);
    ++p_;  // '['
    JsonValue::Array items;
    skip_ws();
    if (!consume(']')) {
      for (;;) {
        skip_ws();
        JsonValue v;
        value(out ? &v : nullptr, depth + 1);
        if (out) items.push_back(std::move(v));
        skip_ws();
        if (consume(']')) break;
        if (!consume(',')) fail("expected ',' or ']' after an array element");
      }
    }
    if (out) *out = JsonValue(std::move(items));
  }

  unsigned hex4() {
    if (end_ - p_ < 4) fail("incomplete \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      const char c = *p_;
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else fail("invalid hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string* s, unsigned cp) {
    if (cp < 0x80) {
      s->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  void string(std::string* out) {
    ++p_;  // '"'
    for (;;) {
      const char* run = p_;
      while (p_ != end_ && *p_ != '"' && *p_ != '\\' &&
             static_cast<unsigned char>(*p_) >= 0x20 && static_cast<unsigned char>(*p_) < 0x80) {
        ++p_;
      }
      if (out) out->append(run, p_);
      if (p_ == end_) fail("unterminated string");
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return;
      }
      if (c < 0x20) fail("control character in string (must be escaped)");
      if (c >= 0x80) {
        const std::size_t n = utf8_sequence_length(reinterpret_cast<const unsigned char*>(p_),
                                                    reinterpret_cast<const unsigned char*>(end_));
        if (n == 0) fail("invalid UTF-8 in string");
        if (out) out->append(p_, n);
        p_ += n;
        continue;
      }
      ++p_;  // backslash
      if (p_ == end_) fail("unterminated string");
      const char e = *p_++;
      char plain;
      switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
            const char* save = p_;
            p_ += 2;
            const unsigned low = hex4();
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              p_ = save;  // not a pair: the next escape stands on its own
            }
          }
          // RFC 8259 allows a lone surrogate in the text; it has no UTF-8 form.
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
          if (out) append_utf8(out, cp);
          continue;
        }
        default:
          --p_;
          fail("invalid escape in string");
      }
      if (out) out->push_back(plain);
    }
  }

  void number(JsonValue* out) {
    const char* start = p_;
    consume('-');
    if (consume('0')) {
      // A leading zero stands alone.
    } else if (p_ != end_ && *p_ >= '1' && *p_ <= '9') {
      digits();
    } else {
      fail("expected a digit");
    }
    bool integral = true;
    if (consume('.')) {
      integral = false;
      if (!digits()) fail("expected a digit after the decimal point");
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      if (!consume('+')) consume('-');
      if (!digits()) fail("expected a digit in the exponent");
    }
    if (!out) return;
    if (integral) {
      std::int64_t i;
      if (std::from_chars(start, p_, i).ec == std::errc()) {
        *out = JsonValue(i);
        return;
      }
    }
    double d = 0;
    if (std::from_chars(start, p_, d).ec == std::errc::result_out_of_range) {
      // Valid JSON beyond double's range: a negative exponent made it too small, anything
      // else too large.
      const std::string_view text(start, static_cast<std::size_t>(p_ - start));
      const std::size_t e = text.find_first_of("eE");
      const bool tiny = e != std::string_view::npos && text[e + 1] == '-';
      d = std::copysign(tiny ? 0.0 : HUGE_VAL, *start == '-' ? -1.0 : 1.0);
    }
    *out = JsonValue(d);
  }

  bool digits() {
    const char* start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
};

[[noreturn]] void wrong_type(JsonValue::Type want, JsonValue::Type got) {
  throw Error("expected a JSON " + std::string(json_type_name(want)) + ", got " +
              std::string(json_type_name(got)));
}

}  // namespace

JsonValue::Type JsonValue::type() const noexcept {
  switch (v_.index()) {
    case 0: return Type::kNull;
    case 1: return Type::kBool;
    case 2:
    case 3: return Type::kNumber;
    case 4: return Type::kString;
    case 5: return Type::kArray;
    default: return Type::kObject;
  }
}

bool JsonValue::as_bool() const {
  if (const bool* b = std::get_if<bool>(&v_)) return *b;
  wrong_type(Type::kBool, type());
}

double JsonValue::as_double() const {
  if (const auto* i = std::get_if<std::int64_t>(&v_)) return static_cast<double>(*i);
  if (const double* d = std::get_if<double>(&v_)) return *d;
  wrong_type(Type::kNumber, type());
}

std::int64_t JsonValue::as_int() const {
  if (const auto* i = std::get_if<std::int64_t>(&v_)) return *i;
  if (const double* d = std::get_if<double>(&v_)) {
    // 2^63 is exact as a double; anything in [-2^63, 2^63) with no fraction converts exactly.
    if (std::trunc(*d) == *d && *d >= -9223372036854775808.0 && *d < 9223372036854775808.0) {
      return static_cast<std::int64_t>(*d);
    }
    throw Error("expected an integer, got " + std::to_string(*d));
  }
  wrong_type(Type::kNumber, type());
}

const std::string& JsonValue::as_string() const {
  if (const auto* s = std::get_if<std::string>(&v_)) return *s;
  wrong_type(Type::kString, type());
}

const JsonValue::Array& JsonValue::as_array() const {
  if (const auto* a = std::get_if<Array>(&v_)) return *a;
  wrong_type(Type::kArray, type());
}

const JsonValue::Object& JsonValue::as_object() const {
  if (const auto* o = std::get_if<Object>(&v_)) return *o;
  wrong_type(Type::kObject, type());
}

const JsonValue* JsonValue::find(std::string_view key) const noexcept {
  const auto* o = std::get_if<Object>(&v_);
  if (o == nullptr) return nullptr;
  for (const auto& [k, v] : *o) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string_view json_type_name(JsonValue::Type type) noexcept {
  switch (type) {
    case JsonValue::Type::kNull: return "null";
    case JsonValue::Type::kBool: return "boolean";
    case JsonValue::Type::kNumber: return "number";
    case JsonValue::Type::kString: return "string";
    case JsonValue::Type::kArray: return "array";
    case JsonValue::Type::kObject: return "object";
  }
  return "value";
}

namespace {
std::string describe_parse_error(const ParseError& e) {
  return "invalid JSON at byte " + std::to_string(e.offset) + ": " + e.what;
}
}  // namespace

JsonValue parse_json(std::string_view text) {
  JsonValue out;
  try {
    Parser(text).document(&out);
  } catch (const ParseError& e) {
    throw Error(describe_parse_error(e));
  }
  return out;
}

bool json_error_at(std::string_view text, std::size_t& offset, std::string& what) {
  try {
    Parser(text).document(nullptr);
  } catch (const ParseError& e) {
    offset = e.offset;
    what = e.what;
    return true;
  }
  return false;
}

}  // namespace opscope::internal

namespace opscope {

bool is_valid_json(std::string_view text, std::string* error) {
  try {
    internal::Parser(text).document(nullptr);
  } catch (const internal::ParseError& e) {
    if (error != nullptr) *error = internal::describe_parse_error(e);
    return false;
  }
  if (error != nullptr) error->clear();
  return true;
}

}  // namespace opscope
