// Byte layout, per value: one tag byte (ValueKind), then
//   tensor: u32 ndim, ndim x i64 sizes, u32 nstrides, nstrides x i64, u16+bytes dtype,
//           u16+bytes device
//   int: i64    double: f64    bool: u8    string: u16+bytes (cut at 4096)
//   list: u32 kept, u32 dropped, then `kept` values
// The top level is a u32 count followed by the values. Native byte order: the bytes never
// leave the process.
#include "record/value_codec.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace opscope::record {
namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Texts are cut at `max` bytes (<= 0xFFFF: the length is a u16).
void put_text(std::string& out, std::string_view s, std::size_t max) {
  const std::size_t n = s.size() < max ? s.size() : max;
  put<std::uint16_t>(out, static_cast<std::uint16_t>(n));
  out.append(s.data(), n);
}

void put_ints(std::string& out, std::span<const std::int64_t> v) {
  put<std::uint32_t>(out, static_cast<std::uint32_t>(v.size()));
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::int64_t));
}

constexpr std::size_t kMaxText = 0xFFFF;
constexpr std::size_t kMaxString = 4096;  // string inputs longer than this are cut

// Returns false when the budget ran out (the caller stops encoding).
bool encode(const Value& v, std::string& out, int depth) {
  if (out.size() > kMaxEncodedInputBytes) return false;
  put<std::uint8_t>(out, static_cast<std::uint8_t>(v.kind()));
  switch (v.kind()) {
    case ValueKind::kNone: break;
    case ValueKind::kTensor:
      put_ints(out, v.sizes());
      put_ints(out, v.strides());
      put_text(out, v.dtype(), kMaxText);
      put_text(out, v.device(), kMaxText);
      break;
    case ValueKind::kInt: put<std::int64_t>(out, v.to_int()); break;
    case ValueKind::kDouble: put<double>(out, v.to_double()); break;
    case ValueKind::kBool: put<std::uint8_t>(out, v.to_bool() ? 1 : 0); break;
    case ValueKind::kString: put_text(out, v.to_string(), kMaxString); break;
    case ValueKind::kList: {
      const auto items = v.items();
      // Nesting deeper than this is not an operator input anyone reads; keep it bounded.
      const std::size_t want = depth > 8 ? 0 : std::min(items.size(), kMaxRecordedListItems);
      const std::size_t count_at = out.size();
      put<std::uint32_t>(out, 0);
      put<std::uint32_t>(out, 0);
      std::uint32_t kept = 0;
      for (std::size_t i = 0; i < want; ++i) {
        const std::size_t before = out.size();
        if (!encode(items[i], out, depth + 1)) {
          out.resize(before);
          break;
        }
        ++kept;
      }
      const std::uint32_t dropped = static_cast<std::uint32_t>(items.size() - kept);
      std::memcpy(out.data() + count_at, &kept, sizeof kept);
      std::memcpy(out.data() + count_at + 4, &dropped, sizeof dropped);
      break;
    }
  }
  return out.size() <= kMaxEncodedInputBytes;
}

class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : b_(b) {}
  template <typename T>
  bool get(T& v) {
    if (b_.size() - pos_ < sizeof v) return false;
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool text(std::string& s) {
    std::uint16_t n = 0;
    if (!get(n)) return false;
    if (b_.size() - pos_ < n) return false;
    s.assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool ints(std::vector<std::int64_t>& v) {
    std::uint32_t n = 0;
    if (!get(n) || (b_.size() - pos_) / sizeof(std::int64_t) < n) return false;
    v.resize(n);
    std::memcpy(v.data(), b_.data() + pos_, n * sizeof(std::int64_t));
    pos_ += n * sizeof(std::int64_t);
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
    case ValueKind::kNone: return true;
    case ValueKind::kTensor:
      return r.ints(v.sizes) && r.ints(v.strides) && r.text(v.text) && r.text(v.device);
    case ValueKind::kInt: return r.get(v.i);
    case ValueKind::kDouble: return r.get(v.d);
    case ValueKind::kBool: {
      std::uint8_t b = 0;
      if (!r.get(b)) return false;
      v.b = b != 0;
      return true;
    }
    case ValueKind::kString: return r.text(v.text);
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

}  // namespace

void encode_inputs(std::span<const Value> inputs, std::string& out) {
  out.clear();
  put<std::uint32_t>(out, 0);
  std::uint32_t kept = 0;
  for (const Value& v : inputs) {
    const std::size_t before = out.size();
    if (!encode(v, out, 0)) {
      out.resize(before);
      break;
    }
    ++kept;
  }
  std::memcpy(out.data(), &kept, sizeof kept);
}

std::vector<RecordedValue> decode_inputs(std::span<const std::byte> bytes) {
  Reader r(bytes);
  std::uint32_t n = 0;
  std::vector<RecordedValue> out;
  if (!r.get(n)) return out;
  for (std::uint32_t i = 0; i < n; ++i) {
    RecordedValue v;
    if (!decode(r, v)) break;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace opscope::record
