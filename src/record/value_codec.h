// The inputs of a range as they sit in a thread's buffer: a compact byte encoding written at
// range begin (kInputs blob) and decoded once, when the window is built.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "opscope/value.h"

namespace opscope::record {

// Encodings larger than this are cut (later inputs are left out and the list is marked).
inline constexpr std::size_t kMaxEncodedInputBytes = 32 * 1024;

// Appends the encoding of `inputs` to `out` (cleared first).
void encode_inputs(std::span<const Value> inputs, std::string& out);

// Decodes what encode_inputs wrote. Malformed or cut input yields the values decoded so far.
std::vector<RecordedValue> decode_inputs(std::span<const std::byte> bytes);

}  // namespace opscope::record
