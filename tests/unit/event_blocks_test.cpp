// skip_event_blocks() walks 64-byte blocks of JSON text as a byte-by-byte walk would, and stops
// at the first block with a backslash or with a ']' that could close the events array: checked
// against such a walk written here, on random texts, for every instruction set the CPU runs.
#include "import/event_blocks.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

namespace opscope::import {
namespace event_blocks_test {

// The byte-by-byte walk: the state after text[from, to).
BlockWalk walk_bytes(const std::string& text, std::size_t from, std::size_t to, BlockWalk w) {
  for (std::size_t i = from; i < to; ++i) {
    const char c = text[i];
    if (c == '"') {
      w.in_string = !w.in_string;
    } else if (!w.in_string && (c == '{' || c == '[')) {
      ++w.depth;
    } else if (!w.in_string && (c == '}' || c == ']')) {
      --w.depth;
    }
  }
  return w;
}

// Whether the block at text[at] is one the skip stops at: a backslash, or a ']' outside strings
// while the depth less the block's closing brackets outside strings is 1 or less.
bool stops_at(const std::string& text, std::size_t at, BlockWalk w) {
  int closes = 0;
  bool square = false;
  for (std::size_t i = at; i < at + 64; ++i) {
    const char c = text[i];
    if (c == '\\') return true;
    if (c == '"') w.in_string = !w.in_string;
    if (w.in_string) continue;
    closes += (c == '}' || c == ']') ? 1 : 0;
    square = square || c == ']';
  }
  return square && w.depth - closes <= 1;
}

// Text made mostly of what a trace's events are made of, with `specials` (backslashes and
// square brackets) in one byte in `rarity`.
std::string random_text(std::mt19937& rng, std::size_t size, int rarity) {
  static const std::string common = "{}{}\"\"\"\",,:: abc0123";
  static const std::string special = "[]]\\";
  std::string text(size, ' ');
  for (char& c : text) {
    c = (static_cast<int>(rng() % rarity) == 0) ? special[rng() % special.size()]
                                                : common[rng() % common.size()];
  }
  return text;
}

std::vector<BlockIsa> runnable() {
  std::vector<BlockIsa> out;
  for (BlockIsa isa :
       {BlockIsa::kWidest, BlockIsa::kBytes, BlockIsa::kSse2, BlockIsa::kAvx2, BlockIsa::kAvx512}) {
    if (block_isa_runs(isa)) out.push_back(isa);
  }
  return out;
}

TEST(EventBlocks, WalksAsTheBytesDoAndStopsWhereItShould) {
  std::mt19937 rng(20261128);
  const std::vector<BlockIsa> isas = runnable();
  ASSERT_GE(isas.size(), 2u);  // at least the widest and the byte-by-byte one
  int stopped_early = 0;
  int walked_to_end = 0;
  for (int round = 0; round < 3000; ++round) {
    const std::string text = random_text(rng, 64 * (1 + rng() % 12) + rng() % 64, 8 + round % 400);
    const std::size_t start = rng() % 70;
    const std::size_t end = start + rng() % (text.size() - start + 1);
    const BlockWalk before{rng() % 2 == 0, static_cast<int>(rng() % 8)};
    std::size_t first_stop = std::string::npos;
    for (BlockIsa isa : isas) {
      SCOPED_TRACE("isa " + std::to_string(static_cast<int>(isa)) + ", round " +
                   std::to_string(round));
      BlockWalk w = before;
      const std::size_t stop = skip_event_blocks(text.data(), start, end, w, isa);
      ASSERT_GE(stop, start);
      ASSERT_LE(stop, end);
      ASSERT_EQ((stop - start) % 64, 0u);
      const BlockWalk want = walk_bytes(text, start, stop, before);
      EXPECT_EQ(w.in_string, want.in_string);
      EXPECT_EQ(w.depth, want.depth);
      // Every block walked is one it may walk; it stops at the end or at a block it must not.
      BlockWalk at = before;
      for (std::size_t b = start; b < stop; b += 64) {
        ASSERT_FALSE(stops_at(text, b, at)) << "walked the block at " << b;
        at = walk_bytes(text, b, b + 64, at);
      }
      if (end - stop >= 64) EXPECT_TRUE(stops_at(text, stop, at)) << "stopped at " << stop;
      if (first_stop == std::string::npos) first_stop = stop;
      EXPECT_EQ(stop, first_stop) << "the instruction sets disagree";
    }
    (end - first_stop >= 64 ? stopped_early : walked_to_end) += 1;
  }
  // Both ends of the walk were exercised.
  EXPECT_GT(stopped_early, 300);
  EXPECT_GT(walked_to_end, 300);
}

// A ']' outside strings that would take the depth to 1 stops the walk even with other closing
// brackets before it in the block; inside a string it does not.
TEST(EventBlocks, StopsBeforeTheBracketThatClosesTheArray) {
  for (BlockIsa isa : runnable()) {
    std::string text = std::string(64, ' ') + "{\"a\":1}" + std::string(56, ' ') + "]";
    text.resize(192, ' ');
    BlockWalk w{false, 2};
    EXPECT_EQ(skip_event_blocks(text.data(), 0, text.size(), w, isa), 64u);
    EXPECT_EQ(w.depth, 2);
    std::string quoted = text;
    quoted[120] = '"';  // the ']' at 127 now lies in a string that runs to the end
    w = BlockWalk{false, 2};
    EXPECT_EQ(skip_event_blocks(quoted.data(), 0, quoted.size(), w, isa), 192u);
    EXPECT_TRUE(w.in_string);
  }
}

}  // namespace event_blocks_test
}  // namespace opscope::import
