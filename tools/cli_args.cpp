#include "cli_args.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace opscope::cli {

std::int64_t parse_int(const std::string& flag, const std::string& text, std::int64_t lo,
                       std::int64_t hi, const std::string& allowed) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || v < lo || v > hi) {
    throw UsageError(flag + " expects " + allowed + ", got '" + text + "'");
  }
  return v;
}

double parse_seconds(const std::string& flag, const std::string& text, double hi,
                     const std::string& allowed) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // !(v > 0) also refuses NaN; "inf", hex floats and exponents are refused as not plain
  // decimals, so what is accepted is what the help says.
  const bool plain = text.find_first_not_of("0123456789.") == std::string::npos;
  if (text.empty() || !plain || used != text.size() || !(v > 0) || v > hi) {
    throw UsageError(flag + " expects " + allowed + ", got '" + text + "'");
  }
  return v;
}

namespace {

// Optimal string alignment distance: Levenshtein's with a swap of two neighbouring letters as
// one edit ("anlayze" is one slip, not two).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string nearest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = SIZE_MAX;
  bool tie = false;
  for (const std::string& c : candidates) {
    const std::size_t dist = edit_distance(typed, c);
    if (dist < best_distance) {
      best = c;
      best_distance = dist;
      tie = false;
    } else if (dist == best_distance && c != best) {
      tie = true;
    }
  }
  // "x" is not a slip of "sample": a suggestion needs most of the typed letters to be right.
  if (tie || best_distance == 0 || best_distance > 2 || best_distance * 2 >= typed.size()) {
    return {};
  }
  return best;
}

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates) {
  const std::string near = nearest_name(typed, candidates);
  return near.empty() ? std::string() : " (did you mean '" + near + "'?)";
}

bool wants_help(const std::vector<std::string>& args, std::size_t start, std::size_t end) {
  for (std::size_t i = start; i < args.size() && i < end; ++i) {
    if (args[i] == "--help" || args[i] == "-h") return true;
  }
  return false;
}

}  // namespace opscope::cli
