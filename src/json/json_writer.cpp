#include "json/json_writer.h"

#include <array>
#include <charconv>
#include <cmath>

namespace opscope::internal {
namespace {

// Per byte: 0 copies as is, 1 needs an escape, 2 starts a multi-byte UTF-8 sequence (or is
// invalid) and is checked by utf8_sequence_length.
constexpr std::array<std::uint8_t, 256> kByteClass = [] {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = 1;
  t['"'] = 1;
  t['\\'] = 1;
  for (int c = 0x80; c < 0x100; ++c) t[c] = 2;
  return t;
}();

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

std::size_t utf8_sequence_length(const unsigned char* p, const unsigned char* end) noexcept {
  const unsigned c = p[0];
  std::size_t n;
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode table 3-7)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (static_cast<std::size_t>(end - p) < n) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
  }
  return n;
}

char* put_escaped(char* p, std::string_view s) noexcept {
  const auto* in = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = in + s.size();
  *p++ = '"';
  while (in < end) {
    // Copy the run of plain bytes in one go: names are mostly plain ASCII.
    const auto* run = in;
    while (in < end && kByteClass[*in] == 0) ++in;
    if (in != run) {
      std::memcpy(p, run, static_cast<std::size_t>(in - run));
      p += in - run;
      if (in == end) break;
    }
    const unsigned c = *in;
    if (kByteClass[c] == 2) {
      const std::size_t n = utf8_sequence_length(in, end);
      if (n != 0) {
        std::memcpy(p, in, n);
        p += n;
        in += n;
      } else {
        // One U+FFFD per invalid byte keeps the file valid and shows where the damage was.
        p = put(p, "\xEF\xBF\xBD");
        ++in;
      }
      continue;
    }
    *p++ = '\\';
    switch (c) {
      case '"': *p++ = '"'; break;
      case '\\': *p++ = '\\'; break;
      case '\n': *p++ = 'n'; break;
      case '\t': *p++ = 't'; break;
      case '\r': *p++ = 'r'; break;
      case '\b': *p++ = 'b'; break;
      case '\f': *p++ = 'f'; break;
      default:
        p = put(p, "u00");
        *p++ = kHex[c >> 4];
        *p++ = kHex[c & 0xF];
    }
    ++in;
  }
  *p++ = '"';
  return p;
}

void JsonWriter::number(double v) {
  if (!std::isfinite(v)) {
    null();
    return;
  }
  char* p = value_start(32);
  commit(std::to_chars(p, p + 32, v).ptr);
}

}  // namespace opscope::internal
