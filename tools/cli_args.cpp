#include "cli_args.h"

#include <exception>
#include <string>

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

bool wants_help(const std::vector<std::string>& args, std::size_t start, std::size_t end) {
  for (std::size_t i = start; i < args.size() && i < end; ++i) {
    if (args[i] == "--help" || args[i] == "-h") return true;
  }
  return false;
}

}  // namespace opscope::cli
