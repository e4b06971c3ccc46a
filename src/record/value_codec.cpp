// Byte layout: the values one after another, up to the end of the blob (its length is in the
// blob's header, so there is no count). Per value, one tag byte (ValueKind), then
//   tensor: varint ndim, ndim x varint sizes, varint nstrides, nstrides x varint strides,
//           name dtype, name device
//   int: i64    double: f64    bool: u8    string: text (cut at 4096 bytes)
//   list: u32 kept, u32 dropped, then `kept` values
// where a varint is LEB128 of the value's 64 bits, a text is a varint length then the bytes,
// and a name is one byte: the 1-based index of a common dtype or device name in kNames, or 0
// followed by a text. Native byte order: the bytes never leave the process.
//
// Why this compact: the encoding is written at every range begin while record_shapes is on,
// and the buffer memory it fills is most of what that costs (fresh pages are cleared by the
// kernel), and copying short strings is a library call each. Two small float tensors on the
// CPU take 14 bytes, one 32-byte payload record; with fixed-width fields and texts they took
// 78 bytes, three records (bench/RESULTS.md).
//
// One encoder serves two outputs: a pointer into the thread's buffer, written in one pass
// when the chunk has room for the worst case, and a counter that sizes the encoding first
// when it has not (near a chunk's end), so that the chunk's tail is still used.
#include "record/value_codec.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string_view>

namespace opscope::record {
namespace {

constexpr std::size_t kMaxString = 4096;  // string inputs longer than this are cut
constexpr std::size_t kMaxListDepth = 8;  // lists nested deeper keep no items

// The largest value that can start within the budget, and how far nested lists add to it.
constexpr std::size_t kMaxVarint = 10;
constexpr std::size_t kMaxTensorBytes =
    1 + 2 * (kMaxVarint + kMaxRecordedTensorDims * kMaxVarint) + 2 * (1 + 2 + kMaxRecordedTypeName);

// Dtype names as PyTorch prints them, and devices, that are written as one byte.
constexpr std::string_view kNames[] = {"float",
                                       "double",
                                       "c10::Half",
                                       "c10::BFloat16",
                                       "long int",
                                       "int",
                                       "short int",
                                       "signed char",
                                       "unsigned char",
                                       "bool",
                                       "c10::complex<float>",
                                       "c10::complex<double>",
                                       "cpu",
                                       "cuda",
                                       "cuda:0",
                                       "cuda:1",
                                       "meta"};

constexpr std::size_t kMaxLeafBytes = std::max(kMaxTensorBytes, 1 + 2 + kMaxString);
constexpr std::size_t kListHeaderBytes = 1 + 2 * sizeof(std::uint32_t);
static_assert(kMaxEncodedInputBytes + kMaxLeafBytes + (kMaxListDepth + 1) * kListHeaderBytes <=
                  kMaxEncodeBytes,
              "encode_inputs_to could write past kMaxEncodeBytes");

std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Counts bytes.
class SizeOut {
 public:
  void bytes(const void*, std::size_t n) { size_ += n; }
  void varint(std::uint64_t v) { size_ += varint_size(v); }
  void patch(std::size_t, const void*, std::size_t) {}
  void resize(std::size_t n) { size_ = n; }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_ = 0;
};

// LEB128 of `v` at `p`; returns the end.
[[gnu::always_inline]] inline std::byte* put_varint(std::byte* p, std::uint64_t v) {
  if (v < 0x80) [[likely]] {  // tensor dims and counts, mostly
    *p++ = static_cast<std::byte>(v);
    return p;
  }
  while (v >= 0x80) {
    *p++ = static_cast<std::byte>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::byte>(v);
  return p;
}

// Writes to memory the caller sized with SizeOut.
class PointerOut {
 public:
  explicit PointerOut(std::byte* out) : begin_(out), cur_(out) {}
  void bytes(const void* p, std::size_t n) {
    if (n != 0) std::memcpy(cur_, p, n);
    cur_ += n;
  }
  void varint(std::uint64_t v) { cur_ = put_varint(cur_, v); }
  void patch(std::size_t at, const void* p, std::size_t n) { std::memcpy(begin_ + at, p, n); }
  void resize(std::size_t n) { cur_ = begin_ + n; }
  std::size_t size() const { return static_cast<std::size_t>(cur_ - begin_); }

 private:
  std::byte* begin_;
  std::byte* cur_;
};

template <typename T, typename Out>
[[gnu::always_inline]] inline void put(Out& out, T v) {
  out.bytes(&v, sizeof v);
}

template <typename Out>
[[gnu::always_inline]] inline void put_text(Out& out, std::string_view s, std::size_t max) {
  // Lengths are at most 4096: two varint bytes.
  const std::size_t n = std::min(s.size(), max);
  out.varint(n);
  out.bytes(s.data(), n);
}

// The byte a name in kNames is written as; a compile error for any other.
consteval std::uint8_t code(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kNames); ++i) {
    if (kNames[i] == name) return static_cast<std::uint8_t>(i + 1);
  }
  throw "not in kNames";
}

// Whether `s` is the literal `name`; the length is a constant, so no call to memcmp.
template <std::size_t N>
bool is(std::string_view s, const char (&name)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), name, N - 1) == 0;
}

// The 1-based index of `s` in kNames, or 0. A branch on the length first: this runs twice
// per tensor input on the hot path, and a loop of string compares cost more than the rest of
// the encoding together.
[[gnu::always_inline]] inline std::uint8_t name_code(std::string_view s) {
  switch (s.size()) {
    case 3:
      return is(s, "cpu") ? code("cpu") : is(s, "int") ? code("int") : 0;
    case 4:
      return is(s, "cuda")   ? code("cuda")
             : is(s, "bool") ? code("bool")
             : is(s, "meta") ? code("meta")
                             : 0;
    case 5:
      return is(s, "float") ? code("float") : 0;
    case 6:
      return is(s, "double")   ? code("double")
             : is(s, "cuda:0") ? code("cuda:0")
             : is(s, "cuda:1") ? code("cuda:1")
                               : 0;
    case 8:
      return is(s, "long int") ? code("long int") : 0;
    case 9:
      return is(s, "c10::Half") ? code("c10::Half") : is(s, "short int") ? code("short int") : 0;
    case 11:
      return is(s, "signed char") ? code("signed char") : 0;
    case 13:
      return is(s, "c10::BFloat16")   ? code("c10::BFloat16")
             : is(s, "unsigned char") ? code("unsigned char")
                                      : 0;
    case 19:
      return is(s, "c10::complex<float>") ? code("c10::complex<float>") : 0;
    case 20:
      return is(s, "c10::complex<double>") ? code("c10::complex<double>") : 0;
    default:
      return 0;
  }
}

template <typename Out>
[[gnu::always_inline]] inline void put_name(Out& out, std::string_view s) {
  const std::uint8_t code = name_code(s);
  put<std::uint8_t>(out, code);
  if (code == 0) put_text(out, s, kMaxRecordedTypeName);
}

template <typename Out>
[[gnu::always_inline]] inline void put_ints(Out& out, std::span<const std::int64_t> v) {
  const std::size_t n = std::min(v.size(), kMaxRecordedTensorDims);
  out.varint(n);
  for (std::size_t i = 0; i < n; ++i) out.varint(static_cast<std::uint64_t>(v[i]));
}

template <typename Out>
bool encode(Out& out, const Value& v, int depth);

// Writes `v` at list depth `depth`. Every kind but a list is written inline: this is the hot
// path of record_shapes, and out-of-line helpers per field cost more than the writes.
template <typename Out>
[[gnu::always_inline]] inline void encode_value(Out& out, const Value& v, int depth) {
  put<std::uint8_t>(out, static_cast<std::uint8_t>(v.kind()));
  switch (v.kind()) {
    case ValueKind::kNone:
      break;
    case ValueKind::kTensor:
      put_ints(out, v.sizes());
      put_ints(out, v.strides());
      put_name(out, v.dtype());
      put_name(out, v.device());
      break;
    case ValueKind::kInt:
      put<std::int64_t>(out, v.to_int());
      break;
    case ValueKind::kDouble:
      put<double>(out, v.to_double());
      break;
    case ValueKind::kBool:
      put<std::uint8_t>(out, v.to_bool() ? 1 : 0);
      break;
    case ValueKind::kString:
      put_text(out, v.to_string(), kMaxString);
      break;
    case ValueKind::kList: {
      const auto items = v.items();
      const std::size_t want = depth >= static_cast<int>(kMaxListDepth)
                                   ? 0
                                   : std::min(items.size(), kMaxRecordedListItems);
      const std::size_t counts_at = out.size();
      put<std::uint32_t>(out, 0);  // kept and dropped, patched below
      put<std::uint32_t>(out, 0);
      std::uint32_t kept = 0;
      for (std::size_t i = 0; i < want; ++i) {
        const std::size_t before = out.size();
        if (!encode(out, items[i], depth + 1)) {
          out.resize(before);
          break;
        }
        ++kept;
      }
      const std::uint32_t counts[2] = {kept, static_cast<std::uint32_t>(items.size() - kept)};
      out.patch(counts_at, counts, sizeof counts);
      break;
    }
  }
}

// Writes `v`. Returns false when the budget ran out: the caller drops what this value wrote
// and stops. The budget is checked before each value, so a value may run past it by at most
// its own size, which the caps above bound (kMaxEncodeBytes).
template <typename Out>
bool encode(Out& out, const Value& v, int depth) {
  if (out.size() > kMaxEncodedInputBytes) return false;
  encode_value(out, v, depth);
  return out.size() <= kMaxEncodedInputBytes;
}

template <typename Out>
void encode_all(Out& out, std::span<const Value> inputs) {
  for (const Value& v : inputs) {
    const std::size_t before = out.size();
    if (before > kMaxEncodedInputBytes) break;
    encode_value(out, v, 0);
    if (out.size() > kMaxEncodedInputBytes) {
      out.resize(before);
      break;
    }
  }
}

class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : b_(b) {}
  bool done() const { return pos_ == b_.size(); }
  template <typename T>
  bool get(T& v) {
    if (b_.size() - pos_ < sizeof v) return false;
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool varint(std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ == b_.size()) return false;
      const auto byte = static_cast<std::uint8_t>(b_[pos_++]);
      v |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  bool text(std::string& s) {
    std::uint64_t n = 0;
    if (!varint(n) || b_.size() - pos_ < n) return false;
    s.assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool name(std::string& s) {
    std::uint8_t code = 0;
    if (!get(code) || code > std::size(kNames)) return false;
    if (code == 0) return text(s);
    s = kNames[code - 1];
    return true;
  }
  bool ints(std::vector<std::int64_t>& v) {
    std::uint64_t n = 0;
    if (!varint(n) || n > b_.size() - pos_) return false;  // each takes at least a byte
    v.resize(n);
    for (std::int64_t& x : v) {
      std::uint64_t u = 0;
      if (!varint(u)) return false;
      x = static_cast<std::int64_t>(u);
    }
    return true;
  }

 private:
  std::span<const std::byte> b_;
  std::size_t pos_ = 0;
};

bool decode(Reader& r, RecordedValue& v) {
  std::uint8_t tag = 0;
  if (!r.get(tag) || tag > static_cast<std::uint8_t>(ValueKind::kList)) return false;
  v.kind = static_cast<ValueKind>(tag);
  switch (v.kind) {
    case ValueKind::kNone:
      return true;
    case ValueKind::kTensor:
      return r.ints(v.sizes) && r.ints(v.strides) && r.name(v.text) && r.name(v.device);
    case ValueKind::kInt:
      return r.get(v.i);
    case ValueKind::kDouble:
      return r.get(v.d);
    case ValueKind::kBool: {
      std::uint8_t b = 0;
      if (!r.get(b)) return false;
      v.b = b != 0;
      return true;
    }
    case ValueKind::kString:
      return r.text(v.text);
    case ValueKind::kList: {
      std::uint32_t kept = 0;
      if (!r.get(kept) || !r.get(v.items_dropped)) return false;
      for (std::uint32_t i = 0; i < kept; ++i) {
        RecordedValue item;
        if (!decode(r, item)) return false;
        v.items.push_back(std::move(item));
      }
      return true;
    }
  }
  return false;
}

// What record_shapes sees at most ranges: a few tensors, no strides given, dtype and device
// in kNames. Written as encode_all would write them, but through a pointer in a register:
// PointerOut's writes through std::byte may alias its own cursor, so the generic encoder
// reloads and stores the cursor around every byte, which made it a quarter of a
// record_shapes range (bench/lens_bench.cpp). Returns the bytes written, or 0 when some input
// is not of that shape (then the caller encodes them all again with encode_all).
constexpr std::size_t kMaxFastInputs = 16;
constexpr std::size_t kMaxFastDims = 8;
static_assert(kMaxFastInputs * (4 + kMaxFastDims * kMaxVarint) <= kMaxEncodedInputBytes,
              "the fast path must stay within the budget encode_all enforces");

std::size_t encode_plain_tensors(std::span<const Value> inputs, std::byte* out) noexcept {
  if (inputs.empty() || inputs.size() > kMaxFastInputs) return 0;
  std::byte* p = out;
  for (const Value& v : inputs) {
    if (v.kind() != ValueKind::kTensor) return 0;
    const std::span<const std::int64_t> sizes = v.sizes();
    if (sizes.size() > kMaxFastDims || !v.strides().empty()) return 0;
    const std::uint8_t dtype = name_code(v.dtype());
    const std::uint8_t device = name_code(v.device());
    if (dtype == 0 || device == 0) return 0;
    *p++ = static_cast<std::byte>(ValueKind::kTensor);
    *p++ = static_cast<std::byte>(sizes.size());
    for (const std::int64_t size : sizes) p = put_varint(p, static_cast<std::uint64_t>(size));
    *p++ = std::byte{0};  // no strides
    *p++ = static_cast<std::byte>(dtype);
    *p++ = static_cast<std::byte>(device);
  }
  return static_cast<std::size_t>(p - out);
}

}  // namespace

std::size_t encode_inputs_to(std::span<const Value> inputs, std::byte* out) noexcept {
  if (const std::size_t n = encode_plain_tensors(inputs, out)) return n;
  PointerOut o(out);
  encode_all(o, inputs);
  return o.size();
}

std::size_t encoded_size(std::span<const Value> inputs) noexcept {
  SizeOut o;
  for (const Value& v : inputs) {
    if (!encode(o, v, 0)) return std::max(o.size(), kMaxEncodedInputBytes + 1);
  }
  return o.size();
}

std::vector<RecordedValue> decode_inputs(std::span<const std::byte> bytes) {
  Reader r(bytes);
  std::vector<RecordedValue> out;
  while (!r.done()) {
    RecordedValue v;
    if (!decode(r, v)) break;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace opscope::record
