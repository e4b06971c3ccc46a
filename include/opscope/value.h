// opscope/value.h: the inputs of a range, passed as a small non-owning value type.
//
// A Value describes one input of an operator the way PyTorch's IValue does for the profiler:
// tensor metadata (sizes, strides, dtype name, device), a scalar, a string, or a list of
// values. It only points at what the caller owns; a recording range copies what it needs
// before returning, so temporaries are fine:
//
//   opscope::RecordFunction rf(opscope::RecordScope::kFunction);
//   if (rf.wants_inputs()) {
//     rf.before(site, {opscope::Value::tensor({32, 64}), opscope::Value::tensor({64, 128}),
//                      opscope::Value(1.0)});
//   } else {
//     rf.before(site);
//   }
//
// OPSCOPE_RECORD_FUNCTION_WITH_INPUTS (opscope/record_function.h) writes that for you and
// evaluates the inputs only when someone records them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace opscope {

// What a Value holds. Values reach no file (files carry names), but keep them stable.
enum class ValueKind : std::uint8_t {
  kNone = 0,
  kTensor = 1,
  kInt = 2,
  kDouble = 3,
  kBool = 4,
  kString = 5,
  kList = 6,
};

class Value {
 public:
  Value() = default;  // None
  Value(bool v) : kind_(ValueKind::kBool) { u_.b = v; }
  template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  Value(T v) : kind_(ValueKind::kInt) {
    u_.i = static_cast<std::int64_t>(v);
  }
  Value(double v) : kind_(ValueKind::kDouble) { u_.d = v; }
  Value(float v) : Value(static_cast<double>(v)) {}
  Value(const char* s) : Value(std::string_view(s)) {}
  Value(std::string_view s) : kind_(ValueKind::kString), text_(s) {}
  Value(const std::string& s) : Value(std::string_view(s)) {}

  // Tensor metadata. `strides` may be empty (unknown); `dtype` is the element type's name as
  // PyTorch prints it ("float", "double", "long int", "c10::Half", ...).
  static Value tensor(std::span<const std::int64_t> sizes, std::string_view dtype = "float",
                      std::span<const std::int64_t> strides = {},
                      std::string_view device = "cpu") {
    Value v;
    v.kind_ = ValueKind::kTensor;
    v.text_ = dtype;
    v.u_.tensor = {sizes, strides, device};
    return v;
  }
  static Value tensor(std::initializer_list<std::int64_t> sizes,
                      std::string_view dtype = "float",
                      std::initializer_list<std::int64_t> strides = {},
                      std::string_view device = "cpu") {
    return tensor(std::span<const std::int64_t>(sizes.begin(), sizes.size()), dtype,
                  std::span<const std::int64_t>(strides.begin(), strides.size()), device);
  }
  // A list (of tensors, scalars, or mixed).
  static Value list(std::span<const Value> items) {
    Value v;
    v.kind_ = ValueKind::kList;
    v.u_.items = items;
    return v;
  }
  static Value list(std::initializer_list<Value> items) {
    return list(std::span<const Value>(items.begin(), items.size()));
  }

  // Each accessor answers for its own kind and is empty (or 0) for the others.
  ValueKind kind() const { return kind_; }
  std::span<const std::int64_t> sizes() const { return is_tensor() ? u_.tensor.sizes : Ints(); }
  std::span<const std::int64_t> strides() const {
    return is_tensor() ? u_.tensor.strides : Ints();
  }
  std::string_view dtype() const { return is_tensor() ? text_ : std::string_view(); }
  std::string_view device() const { return is_tensor() ? u_.tensor.device : std::string_view(); }
  std::int64_t to_int() const { return kind_ == ValueKind::kInt ? u_.i : 0; }
  double to_double() const { return kind_ == ValueKind::kDouble ? u_.d : 0.0; }
  bool to_bool() const { return kind_ == ValueKind::kBool && u_.b; }
  std::string_view to_string() const {
    return kind_ == ValueKind::kString ? text_ : std::string_view();
  }
  std::span<const Value> items() const {
    return kind_ == ValueKind::kList ? u_.items : std::span<const Value>();
  }

 private:
  using Ints = std::span<const std::int64_t>;
  bool is_tensor() const { return kind_ == ValueKind::kTensor; }

  // The parts of each kind share storage: a Value is built on the caller's stack for every
  // recorded range, so its size is stores on the hot path (72 bytes, not 96).
  struct TensorParts {
    Ints sizes;
    Ints strides;
    std::string_view device;
  };
  union Parts {
    std::int64_t i;
    double d;
    bool b;
    TensorParts tensor;
    std::span<const Value> items;
  };

  ValueKind kind_ = ValueKind::kNone;
  std::string_view text_;  // dtype of a tensor, or the string
  Parts u_{.i = 0};
};
static_assert(sizeof(Value) == 72, "Value is built per recorded input: keep it small");

// A Value as a finished window keeps it (owning).
struct RecordedValue {
  ValueKind kind = ValueKind::kNone;
  std::vector<std::int64_t> sizes;    // tensor
  std::vector<std::int64_t> strides;  // tensor; empty when not given
  std::string text;                   // tensor dtype, or the string value
  std::string device;                 // tensor
  std::int64_t i = 0;
  double d = 0.0;
  bool b = false;
  std::vector<RecordedValue> items;  // list
  // Elements of a long list beyond what was kept (see kMaxRecordedListItems).
  std::uint32_t items_dropped = 0;
};

// Lists longer than this keep their first kMaxRecordedListItems elements (PyTorch cuts
// execution traces at 4096 too).
inline constexpr std::size_t kMaxRecordedListItems = 4096;

}  // namespace opscope
