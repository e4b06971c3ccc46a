// FLOP estimates for the with_flops lens, from an operator's name and recorded inputs.
//
// The formulas are PyTorch's (DESIGN.md): mm/addmm 2·M·K·N (addmm from inputs 1 and 2),
// bmm/baddbmm 2·B·M·K·N (baddbmm from inputs 1 and 2), conv2d 2·N·Hout·Wout·kh·kw·Cin·Cout /
// groups, mul/add the number of elements of the first input. Names match with or without the
// "aten::" prefix.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "opscope/result.h"

namespace opscope::analysis {

// True when `name` has a formula.
bool has_flop_formula(std::string_view name);

// The FLOPs of one call, or 0 when `name` has no formula or the inputs do not fit it (wrong
// count, rank or mismatched sizes). A misfit warns once per operator name per process.
std::int64_t estimate_flops(std::string_view name, std::span<const RecordedValue> inputs);

// The FLOPs of an event: what the caller stated (RecordFunction::set_flops), else the
// estimate from its inputs, else 0.
std::int64_t flops_of(const ProfilerResult& result, const Event& event);

}  // namespace opscope::analysis
