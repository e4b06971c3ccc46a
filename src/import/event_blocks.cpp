#include "import/event_blocks.h"

#include <bit>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OPSCOPE_EVENT_BLOCKS_X86 1
#endif

namespace opscope::import {
namespace {

// The walk over blocks, for the masks of one instruction set (`Of`); inlined into a function
// compiled for that set, so that the masks and std::popcount are its instructions.
template <BlockMasks (*Of)(const char*)>
[[gnu::always_inline]] inline std::size_t skip(const char* text, std::size_t i, std::size_t end,
                                               BlockWalk& walk) {
  bool in_string = walk.in_string;
  int depth = walk.depth;
  for (; i + 64 <= end; i += 64) {
    const BlockMasks m = Of(text + i);
    if (m.backslash != 0) break;  // an escaped quote would not toggle the string
    const std::uint64_t inside = prefix_xor(m.quote) ^ (in_string ? ~std::uint64_t{0} : 0);
    const int closes = std::popcount(m.close & ~inside);
    // Before the k-th closing bracket the depth is at least depth - (k - 1): a ']' can take
    // it to 1 only when depth - closes <= 1.
    if ((m.square & ~inside) != 0 && depth - closes <= 1) break;
    depth += std::popcount(m.open & ~inside) - closes;
    in_string = (inside >> 63) != 0;
  }
  walk.in_string = in_string;
  walk.depth = depth;
  return i;
}

// '[' and ']' are '{' and '}' less 0x20, and no other byte is: one comparison of the bytes
// with 0x20 set finds both brackets of a kind.
#if defined(OPSCOPE_EVENT_BLOCKS_X86)

BlockMasks masks_sse2(const char* p, bool commas) {
  BlockMasks m{};
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const __m128i folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
    const auto bits = [k](__m128i x, char c) {
      return static_cast<std::uint64_t>(
                 static_cast<std::uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(c)))))
             << (16 * k);
    };
    m.quote |= bits(v, '"');
    m.backslash |= bits(v, '\\');
    m.open |= bits(folded, '{');
    m.close |= bits(folded, '}');
    m.square |= bits(v, ']');
    if (commas) m.comma |= bits(v, ',');
  }
  return m;
}

BlockMasks masks_sse2_no_commas(const char* p) { return masks_sse2(p, false); }

[[gnu::target("avx2")]] inline std::uint64_t bits_avx2(__m256i x, char c, int half) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(
             _mm256_movemask_epi8(_mm256_cmpeq_epi8(x, _mm256_set1_epi8(c)))))
         << (32 * half);
}

[[gnu::target("avx2")]] inline BlockMasks masks_avx2(const char* p) {
  BlockMasks m{};
  for (int k = 0; k < 2; ++k) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k));
    const __m256i folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
    m.quote |= bits_avx2(v, '"', k);
    m.backslash |= bits_avx2(v, '\\', k);
    m.open |= bits_avx2(folded, '{', k);
    m.close |= bits_avx2(folded, '}', k);
    m.square |= bits_avx2(v, ']', k);
  }
  return m;
}

[[gnu::target("avx512bw")]] inline BlockMasks masks_avx512(const char* p) {
  const __m512i v = _mm512_loadu_si512(p);
  const __m512i folded = _mm512_or_si512(v, _mm512_set1_epi8(0x20));
  return BlockMasks{
      _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('"')),
      _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\\')),
      _mm512_cmpeq_epi8_mask(folded, _mm512_set1_epi8('{')),
      _mm512_cmpeq_epi8_mask(folded, _mm512_set1_epi8('}')),
      _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(']')),
      0,  // commas: the skip does not stop for them
  };
}

std::size_t skip_sse2(const char* text, std::size_t i, std::size_t end, BlockWalk& walk) {
  return skip<masks_sse2_no_commas>(text, i, end, walk);
}

[[gnu::target("avx2,popcnt")]] std::size_t skip_avx2(const char* text, std::size_t i,
                                                     std::size_t end, BlockWalk& walk) {
  return skip<masks_avx2>(text, i, end, walk);
}

[[gnu::target("avx512bw,popcnt")]] std::size_t skip_avx512(const char* text, std::size_t i,
                                                           std::size_t end, BlockWalk& walk) {
  return skip<masks_avx512>(text, i, end, walk);
}

using Skip = std::size_t (*)(const char*, std::size_t, std::size_t, BlockWalk&);

// The widest vectors the CPU has (with popcnt, which every CPU with AVX2 has).
Skip widest_skip() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("popcnt")) return skip_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")) return skip_avx2;
  return skip_sse2;
}

#endif

// Byte by byte: for CPUs other than x86, and to check the others against.
BlockMasks masks_bytes(const char* p, bool commas) {
  BlockMasks m{};
  for (int k = 0; k < 64; ++k) {
    const std::uint64_t bit = std::uint64_t{1} << k;
    const char c = p[k];
    m.quote |= c == '"' ? bit : 0;
    m.backslash |= c == '\\' ? bit : 0;
    m.open |= (c == '{' || c == '[') ? bit : 0;
    m.close |= (c == '}' || c == ']') ? bit : 0;
    m.square |= c == ']' ? bit : 0;
    m.comma |= (commas && c == ',') ? bit : 0;
  }
  return m;
}

BlockMasks masks_bytes_no_commas(const char* p) { return masks_bytes(p, false); }

std::size_t skip_bytes(const char* text, std::size_t i, std::size_t end, BlockWalk& walk) {
  return skip<masks_bytes_no_commas>(text, i, end, walk);
}

}  // namespace

BlockMasks block_masks(const char* p, bool commas) {
#if defined(OPSCOPE_EVENT_BLOCKS_X86)
  return masks_sse2(p, commas);
#else
  return masks_bytes(p, commas);
#endif
}

std::size_t skip_event_blocks(const char* text, std::size_t i, std::size_t end, BlockWalk& walk) {
#if defined(OPSCOPE_EVENT_BLOCKS_X86)
  static const Skip chosen = widest_skip();
  return chosen(text, i, end, walk);
#else
  return skip_bytes(text, i, end, walk);
#endif
}

bool block_isa_runs(BlockIsa isa) {
  switch (isa) {
    case BlockIsa::kWidest:
    case BlockIsa::kBytes:
      return true;
#if defined(OPSCOPE_EVENT_BLOCKS_X86)
    case BlockIsa::kSse2:
      return true;
    case BlockIsa::kAvx2:
      return widest_skip() != skip_sse2;
    case BlockIsa::kAvx512:
      return widest_skip() == skip_avx512;
#else
    default:
      return false;
#endif
  }
  return false;
}

std::size_t skip_event_blocks(const char* text, std::size_t i, std::size_t end, BlockWalk& walk,
                              BlockIsa isa) {
  switch (isa) {
    case BlockIsa::kWidest:
      return skip_event_blocks(text, i, end, walk);
    case BlockIsa::kBytes:
      return skip_bytes(text, i, end, walk);
#if defined(OPSCOPE_EVENT_BLOCKS_X86)
    case BlockIsa::kSse2:
      return skip_sse2(text, i, end, walk);
    case BlockIsa::kAvx2:
      return skip_avx2(text, i, end, walk);
    case BlockIsa::kAvx512:
      return skip_avx512(text, i, end, walk);
#else
    default:
      break;
#endif
  }
  return i;
}

}  // namespace opscope::import
