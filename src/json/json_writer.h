// json_writer.h: the one JSON writer every exporter uses.
//
// Appends to a growable buffer with no formatting library and no iostreams, so the Chrome
// trace exporter can write tens of millions of events a second. Two levels:
//
//   - structured calls (begin_object, key, string, integer, ...) that place commas themselves:
//
//       JsonWriter w;
//       w.begin_object();
//       w.key("name"); w.string("aten::mm");
//       w.key("ts");   w.micros(1234567);          // 1234.567
//       w.end_object();
//
//   - raw helpers (put_*) for hot loops that reserve room once and write through a pointer.
//
// Strings are escaped for RFC 8259: quote, backslash and control characters are escaped,
// valid UTF-8 passes through unchanged and every byte of an invalid UTF-8 sequence becomes
// U+FFFD, so whatever the names hold the output stays valid JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

namespace opscope::internal {

// Upper bound of the bytes put_escaped() writes for `n` input bytes ("\u001f" is 6 bytes and
// U+FFFD for one invalid byte is 3) plus the two quotes.
constexpr std::size_t escaped_bound(std::size_t n) { return 6 * n + 2; }

// The length of the well-formed UTF-8 sequence starting at `p` (a byte >= 0x80), or 0 when
// it is not one: overlong forms, surrogates and code points above U+10FFFF are rejected as
// RFC 3629 asks. Shared by the writer (which replaces such bytes) and the reader (which
// rejects them).
std::size_t utf8_sequence_length(const unsigned char* p, const unsigned char* end) noexcept;

// Writes `s` as a quoted JSON string at `p`; returns the end. Room for escaped_bound(s.size())
// bytes must be available.
char* put_escaped(char* p, std::string_view s) noexcept;

namespace json_detail {
// "00" "01" ... "99": two digits per division halves the divisions.
inline constexpr char kDigitPairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
// ".000" ... ".999": the fraction of a microsecond in one 4-byte copy.
struct Fractions {
  char text[1000][4];
  constexpr Fractions() : text() {
    for (int i = 0; i < 1000; ++i) {
      text[i][0] = '.';
      text[i][1] = static_cast<char>('0' + i / 100);
      text[i][2] = static_cast<char>('0' + i / 10 % 10);
      text[i][3] = static_cast<char>('0' + i % 10);
    }
  }
};
inline constexpr Fractions kFractions{};

inline int decimal_digits(std::uint32_t v) noexcept {
  int n = 1;
  for (;;) {
    if (v < 10) return n;
    if (v < 100) return n + 1;
    if (v < 1000) return n + 2;
    if (v < 10000) return n + 3;
    v /= 10000;
    n += 4;
  }
}

// Exactly 8 digits with leading zeros; the four pairs are independent, so they overlap.
inline char* put_8_digits(char* p, std::uint32_t v) noexcept {
  const std::uint32_t hi = v / 10000, lo = v % 10000;
  std::memcpy(p, kDigitPairs + hi / 100 * 2, 2);
  std::memcpy(p + 2, kDigitPairs + hi % 100 * 2, 2);
  std::memcpy(p + 4, kDigitPairs + lo / 100 * 2, 2);
  std::memcpy(p + 6, kDigitPairs + lo % 100 * 2, 2);
  return p + 8;
}

inline char* put_small_uint(char* p, std::uint32_t v) noexcept {
  char* const end = p + decimal_digits(v);
  char* q = end;
  while (v >= 100) {
    q -= 2;
    std::memcpy(q, kDigitPairs + v % 100 * 2, 2);
    v /= 100;
  }
  if (v >= 10) {
    std::memcpy(q - 2, kDigitPairs + v * 2, 2);
  } else {
    q[-1] = static_cast<char>('0' + v);
  }
  return end;
}
}  // namespace json_detail

// The decimal digits of `v` at `p`; returns the end (at most 20 bytes). Hand-rolled rather
// than std::to_chars so it inlines into the exporter's loop, in 32-bit pieces of eight
// digits: timestamps and ids are most of a trace's bytes.
inline char* put_uint(char* p, std::uint64_t v) noexcept {
  if (v < 100'000'000) return json_detail::put_small_uint(p, static_cast<std::uint32_t>(v));
  const std::uint64_t high = v / 100'000'000;
  const auto low = static_cast<std::uint32_t>(v % 100'000'000);
  if (high < 100'000'000) {
    p = json_detail::put_small_uint(p, static_cast<std::uint32_t>(high));
  } else {
    p = json_detail::put_small_uint(p, static_cast<std::uint32_t>(high / 100'000'000));
    p = json_detail::put_8_digits(p, static_cast<std::uint32_t>(high % 100'000'000));
  }
  return json_detail::put_8_digits(p, low);
}
inline char* put_int(char* p, std::int64_t v) noexcept {
  auto u = static_cast<std::uint64_t>(v);
  if (v < 0) {
    *p++ = '-';
    u = 0 - u;  // unsigned negation also covers INT64_MIN
  }
  return put_uint(p, u);
}

// Nanoseconds as microseconds with exactly three decimals (1234567 -> "1234.567",
// -1 -> "-0.001"), in integer arithmetic so no nanosecond is lost to rounding.
// At most 25 bytes.
inline char* put_micros(char* p, std::int64_t ns) noexcept {
  auto v = static_cast<std::uint64_t>(ns);
  if (ns < 0) {
    *p++ = '-';
    v = 0 - v;
  }
  p = put_uint(p, v / 1000);
  std::memcpy(p, json_detail::kFractions.text[v % 1000], 4);
  return p + 4;
}

inline char* put(char* p, std::string_view s) noexcept {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

class JsonWriter {
 public:
  JsonWriter() = default;
  explicit JsonWriter(std::size_t initial_capacity) { grow(initial_capacity); }
  ~JsonWriter() { std::free(data_); }
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // --- structured output; commas are placed automatically ---
  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  // A key inside an object; the next value call writes its value.
  void key(std::string_view k) {
    char* p = reserve(escaped_bound(k.size()) + 2);
    if (need_comma_) *p++ = ',';
    p = put_escaped(p, k);
    *p++ = ':';
    commit(p);
    need_comma_ = false;
  }
  void string(std::string_view s) {
    char* p = value_start(escaped_bound(s.size()));
    commit(put_escaped(p, s));
  }
  void integer(std::int64_t v) { commit(put_int(value_start(20), v)); }
  void uinteger(std::uint64_t v) { commit(put_uint(value_start(20), v)); }
  void micros(std::int64_t ns) { commit(put_micros(value_start(25), ns)); }
  // Shortest text that reads back to the same double; NaN and infinities, which JSON cannot
  // express, are written as null.
  void number(double v);
  void boolean(bool v) { raw(v ? "true" : "false"); }
  void null() { raw("null"); }
  // A value that is already JSON text (the caller vouches for it).
  void raw(std::string_view json) { commit(put(value_start(json.size()), json)); }

  // --- raw access for hot loops ---
  // Returns a pointer with room for `n` bytes; write, then commit() the end pointer.
  char* reserve(std::size_t n) {
    if (cap_ - size_ < n) [[unlikely]] grow(size_ + n);
    return data_ + size_;
  }
  void commit(char* end) noexcept { size_ = static_cast<std::size_t>(end - data_); }
  // Appends bytes verbatim; the comma state is left alone.
  void append(std::string_view s) { commit(put(reserve(s.size()), s)); }
  // Tells the structured calls whether the next value needs a comma before it, after the
  // caller wrote elements itself.
  void set_need_comma(bool need) noexcept { need_comma_ = need; }

  std::string_view view() const noexcept { return {data_, size_}; }
  std::size_t size() const noexcept { return size_; }
  // Forgets the bytes but keeps the memory and the comma state (after a flush to a sink).
  void clear() noexcept { size_ = 0; }
  std::string str() const { return std::string(view()); }

 private:
  char* value_start(std::size_t n) {
    char* p = reserve(n + 1);
    if (need_comma_) *p++ = ',';
    need_comma_ = true;
    return p;
  }
  void open(char c) {
    char* p = reserve(2);
    if (need_comma_) *p++ = ',';
    *p++ = c;
    commit(p);
    need_comma_ = false;
  }
  void close(char c) {
    *reserve(1) = c;
    ++size_;
    need_comma_ = true;
  }
  void grow(std::size_t need) {
    std::size_t cap = cap_ < 256 ? 256 : cap_ * 2;
    while (cap < need) cap *= 2;
    // realloc: large buffers grow by remapping pages instead of copying them.
    void* p = std::realloc(data_, cap);
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<char*>(p);
    cap_ = cap;
  }

  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t cap_ = 0;
  bool need_comma_ = false;
};

}  // namespace opscope::internal
