// How recorded inputs read in tables and traces.
#pragma once

#include <span>
#include <string>

#include "opscope/value.h"

namespace opscope::analysis {

// The shape of one input as PyTorch prints it: "[32, 64]" for a tensor, a list of those for a
// list of tensors, "[]" for anything else.
std::string shape_text(const RecordedValue& v);
// The "Input Shapes" column: "[[32, 64], [128, 64], [128]]".
std::string shapes_text(std::span<const RecordedValue> inputs);
// "Input type": the dtype of a tensor, "Scalar", "ScalarList", "TensorList", "GenericList",
// "String", or "" for None.
std::string type_text(const RecordedValue& v);
// "Concrete Inputs": the value of a scalar or string ("3", "0.5", "True"), else "".
std::string concrete_text(const RecordedValue& v);

}  // namespace opscope::analysis
