#include "analysis/inputs_text.h"

#include <fmt/format.h>

namespace opscope::analysis {

std::string shape_text(const RecordedValue& v) {
  std::string out = "[";
  if (v.kind == ValueKind::kTensor) {
    for (std::size_t i = 0; i < v.sizes.size(); ++i) {
      if (i != 0) out += ", ";
      out += std::to_string(v.sizes[i]);
    }
  } else if (v.kind == ValueKind::kList && !v.items.empty() &&
             v.items.front().kind == ValueKind::kTensor) {
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      if (i != 0) out += ", ";
      out += shape_text(v.items[i]);
    }
  }
  return out + "]";
}

std::string shapes_text(std::span<const RecordedValue> inputs) {
  std::string out = "[";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (i != 0) out += ", ";
    out += shape_text(inputs[i]);
  }
  return out + "]";
}

std::string type_text(const RecordedValue& v) {
  switch (v.kind) {
    case ValueKind::kNone: return "";
    case ValueKind::kTensor: return v.text;
    case ValueKind::kInt:
    case ValueKind::kDouble:
    case ValueKind::kBool: return "Scalar";
    case ValueKind::kString: return "String";
    case ValueKind::kList: {
      if (v.items.empty()) return "GenericList";
      const ValueKind k = v.items.front().kind;
      for (const RecordedValue& item : v.items) {
        if (item.kind != k) return "GenericList";
      }
      if (k == ValueKind::kTensor) return "TensorList";
      if (k == ValueKind::kInt || k == ValueKind::kDouble || k == ValueKind::kBool) {
        return "ScalarList";
      }
      return "GenericList";
    }
  }
  return "";
}

std::string concrete_text(const RecordedValue& v) {
  switch (v.kind) {
    case ValueKind::kInt: return std::to_string(v.i);
    case ValueKind::kDouble: return fmt::format("{}", v.d);
    case ValueKind::kBool: return v.b ? "True" : "False";
    case ValueKind::kString: return v.text;
    default: return "";
  }
}

}  // namespace opscope::analysis
