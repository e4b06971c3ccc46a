// json_reader.h: a strict RFC 8259 parser into a small DOM.
//
// For what opscope reads rather than writes: metadata values to check, daemon requests,
// config files. Not for large documents (every value is a node).
//
//   JsonValue req = parse_json(R"({"fn":"setKinetOnDemandRequest","pids":[12]})");
//   if (const JsonValue* fn = req.find("fn")) use(fn->as_string());
//
// Strict: exactly one value with optional whitespace around it, no comments, no trailing
// commas, strings must be valid UTF-8 without raw control characters. Nesting is limited to
// kMaxJsonDepth so hostile input cannot overflow the stack. Errors throw opscope::Error with
// the byte offset of the first problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace opscope::internal {

inline constexpr int kMaxJsonDepth = 512;

class JsonValue {
 public:
  enum class Type : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<JsonValue>;
  // Members in document order; duplicate keys are kept (find() returns the first).
  using Object = std::vector<std::pair<std::string, JsonValue>>;

  JsonValue() = default;
  explicit JsonValue(bool b) : v_(b) {}
  explicit JsonValue(std::int64_t i) : v_(i) {}
  explicit JsonValue(double d) : v_(d) {}
  explicit JsonValue(std::string s) : v_(std::move(s)) {}
  explicit JsonValue(Array a) : v_(std::move(a)) {}
  explicit JsonValue(Object o) : v_(std::move(o)) {}

  Type type() const noexcept;
  bool is_null() const noexcept { return v_.index() == 0; }
  // True for numbers written without fraction or exponent that fit in an int64.
  bool is_integer() const noexcept { return std::holds_alternative<std::int64_t>(v_); }

  // Accessors throw opscope::Error naming the expected and the actual type.
  bool as_bool() const;
  double as_double() const;
  std::int64_t as_int() const;  // also accepts a double with an exact integer value
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // The member named `key` of an object; nullptr when absent or when this is no object.
  const JsonValue* find(std::string_view key) const noexcept;

 private:
  std::variant<std::monostate, bool, std::int64_t, double, std::string, Array, Object> v_;
};

// Parses one JSON document. Throws opscope::Error("invalid JSON at byte N: ...").
JsonValue parse_json(std::string_view text);

// Where the strict parser finds `text` not to be one JSON value: false when it is; else true,
// the byte offset of the first problem in `offset` and what it is in `what` ("expected ':'
// after an object key"). For readers that report the byte in terms of a larger text.
bool json_error_at(std::string_view text, std::size_t& offset, std::string& what);

// The name of a type, for messages ("object", "string", ...).
std::string_view json_type_name(JsonValue::Type type) noexcept;

}  // namespace opscope::internal

namespace opscope {

// Whether `text` is one complete JSON value, else false and, when `error` is given, why.
// Public API, documented (with its default argument) in opscope/export.h; declared here too so
// that this layer, below export, defines it without including an export-layer header.
bool is_valid_json(std::string_view text, std::string* error);

}  // namespace opscope
