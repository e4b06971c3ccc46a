// Deterministic mutation of test inputs, for the fuzz tests (ondemand_fuzz_test,
// trace_fuzz_test). g++ has no libFuzzer, so the suite fuzzes the way those files say: a fixed
// seed and a bounded count, so that a failure reproduces and the suite's time stays put; the
// ASan+UBSan and TSan stages run the same tests, so undefined behaviour on any input fails there.
#pragma once

#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>

namespace opscope::testing {

// One to four edits of `s`: flipped bits, changed, inserted or removed bytes, a cut, a
// duplicated stretch, or a boundary value written over a 4- or 8-byte field.
inline std::string mutate_bytes(std::string s, std::mt19937_64& rng) {
  const auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 7) {
      case 0:
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
        break;
      case 2:
        s.insert(pick(s.size() + 1), 1, static_cast<char>(rng()));
        break;
      case 3:
        if (!s.empty()) s.erase(pick(s.size()), 1 + pick(8));
        break;
      case 4:
        s.resize(pick(s.size() + 1));
        break;
      case 5: {
        if (s.empty()) break;
        const std::size_t at = pick(s.size());
        s.insert(pick(s.size() + 1), s.substr(at, 1 + pick(16)));
        break;
      }
      default: {
        // Boundary values where lengths and counts live.
        static const std::int64_t kValues[] = {0, -1, 1, INT32_MAX, INT32_MIN, INT64_MAX, 64, 65};
        const std::int64_t v = kValues[rng() % std::size(kValues)];
        const std::size_t width = rng() % 2 == 0 ? 4 : 8;
        if (s.size() >= width) std::memcpy(s.data() + pick(s.size() - width + 1), &v, width);
        break;
      }
    }
  }
  return s;
}

}  // namespace opscope::testing
