// The quick part of cutting a trace's events array between events (StreamSplitter in
// stream_splitter.h): skipping 64-byte blocks of text in which there is nothing to stop for.
#pragma once

#include <cstddef>
#include <cstdint>

namespace opscope::import {

// Bit b of each: whether byte b of a 64-byte block is that character.
struct BlockMasks {
  std::uint64_t quote;
  std::uint64_t backslash;
  std::uint64_t open;    // '{' or '['
  std::uint64_t close;   // '}' or ']'
  std::uint64_t square;  // ']'
  std::uint64_t comma;   // only when asked for
};

// The masks of the 64 bytes from p on (SSE2 on x86, the baseline).
BlockMasks block_masks(const char* p, bool commas);

// Bit b set when an odd number of bits at or below b are: with BlockMasks::quote, the bytes from
// an opening quote up to (not including) its closing one.
inline std::uint64_t prefix_xor(std::uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

// Where a walk through JSON text stands between two bytes: inside a string or not, and how
// deep in brackets ('{' and '[' one deeper, '}' and ']' one less).
struct BlockWalk {
  bool in_string = false;
  int depth = 0;
};

// Walks the 64-byte blocks of text that start at text[i], text[i + 64], ... and end by `end`,
// while a block has no backslash and no ']' outside strings that could take the depth to 1 (a
// ']' that could close the events array, which stands at depth 2 as StreamSplitter counts).
// Updates `walk` past the blocks walked and returns where the first block it did not walk
// starts (i when none): a byte-by-byte walk from there on finds what this one does.
//
// Such blocks are nearly all of a Kineto trace (99 % of the 9.8 MB trace of
// bench/analyze_bench.py), and a block's depth is then the count of its brackets: no bracket is
// visited one by one. Uses the widest vectors the CPU has (AVX-512BW, AVX2, else SSE2), chosen
// on the first call.
std::size_t skip_event_blocks(const char* text, std::size_t i, std::size_t end, BlockWalk& walk);

// The ways skip_event_blocks() finds the characters of a block: kWidest is the one it uses.
enum class BlockIsa { kWidest, kBytes, kSse2, kAvx2, kAvx512 };

// Whether this CPU, and this build, can run `isa`.
bool block_isa_runs(BlockIsa isa);

// skip_event_blocks() the way `isa` says, which must run here (the tests compare them all).
std::size_t skip_event_blocks(const char* text, std::size_t i, std::size_t end, BlockWalk& walk,
                              BlockIsa isa);

}  // namespace opscope::import
