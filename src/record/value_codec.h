// The inputs of a range as they sit in a thread's buffer: a compact byte encoding written at
// range begin (kInputs blob) and decoded once, when the window is built.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "opscope/value.h"

namespace opscope::record {

// Encodings larger than this are cut: the input that crosses it and all later ones are left
// out (a list keeps the items before it and counts the rest as dropped).
inline constexpr std::size_t kMaxEncodedInputBytes = 32 * 1024;
// What one tensor keeps: its first 64 dimensions and strides, dtype and device names of at
// most 255 bytes. With strings cut at 4096 bytes, this bounds how far past the budget a value
// can reach before the encoder sees it crossed the line and takes it back.
inline constexpr std::size_t kMaxRecordedTensorDims = 64;
inline constexpr std::size_t kMaxRecordedTypeName = 255;
// The most encode_inputs_to ever writes, for any inputs (the budget plus one worst-case
// value, nested as deep as lists are kept). A blob must fit the smallest chunk (64 KiB).
inline constexpr std::size_t kMaxEncodeBytes = kMaxEncodedInputBytes + 8 * 1024;

// Writes the encoding of `inputs` to `out`, which must have room for kMaxEncodeBytes, or for
// encoded_size(inputs) when that is within the budget. Returns the bytes of the encoding
// (at most the budget). Allocates nothing.
std::size_t encode_inputs_to(std::span<const Value> inputs, std::byte* out) noexcept;

// The size of the encoding when it is within the budget; more than kMaxEncodedInputBytes
// when it is not (then encode_inputs_to cuts, and needs kMaxEncodeBytes of room).
std::size_t encoded_size(std::span<const Value> inputs) noexcept;

// Decodes what encode_inputs_to wrote. Malformed or cut input yields the values decoded so far.
std::vector<RecordedValue> decode_inputs(std::span<const std::byte> bytes);

}  // namespace opscope::record
