// Command-line parsing shared by the `opscope` subcommands (tools/*_command.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"

namespace opscope::cli {

inline constexpr std::int64_t kMaxInt = INT32_MAX;

// An integer from `lo` to `hi`; otherwise a UsageError "<flag> expects <allowed>, got '<text>'".
std::int64_t parse_int(const std::string& flag, const std::string& text, std::int64_t lo,
                       std::int64_t hi, const std::string& allowed);

// Seconds with an optional fraction ("0.5"), strictly above zero and at most `hi`.
double parse_seconds(const std::string& flag, const std::string& text, double hi,
                     const std::string& allowed);

// Walks the arguments; "--flag value" and "--flag=value" are both accepted, and a command that
// takes paths among its flags asks for them with positional().
class Args {
 public:
  Args(const std::vector<std::string>& args, std::size_t start) : args_(args), i_(start) {}
  bool done() const { return i_ >= args_.size(); }
  // The next argument when it is not a flag (a path), consumed; nullopt, consuming nothing,
  // when it is one.
  std::optional<std::string> positional() {
    if (done() || args_[i_].rfind("--", 0) == 0) return std::nullopt;
    return args_[i_++];
  }
  // The next flag; its inline value, if any, is kept for value().
  std::string next_flag() {
    std::string a = args_[i_++];
    inline_.reset();
    if (a.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + a + "'");
    if (const auto eq = a.find('='); eq != std::string::npos) {
      inline_ = a.substr(eq + 1);
      a.resize(eq);
    }
    return a;
  }
  std::string value(const std::string& flag) {
    if (inline_) return *std::exchange(inline_, std::nullopt);
    if (i_ >= args_.size()) throw UsageError(flag + " needs a value");
    return args_[i_++];
  }
  void no_value(const std::string& flag) {
    if (inline_) throw UsageError(flag + " takes no value, got '" + *inline_ + "'");
  }

 private:
  const std::vector<std::string>& args_;
  std::size_t i_;
  std::optional<std::string> inline_;
};

// The subcommands' parsers (tools/<name>_command.cpp). Throw UsageError.
DaemonArgs parse_daemon(Args& a);
TraceArgs parse_trace(Args& a);
// `flags` are the arguments between "sample" and "--"; `command` is everything after "--".
SampleArgs parse_sample(const std::vector<std::string>& flags, std::vector<std::string> command);

// The one of `candidates` nearest to `typed` by edit distance (insertions, deletions,
// substitutions and swaps of two neighbours each count one), when it is near enough to be a
// slip of the keyboard: at most 2 edits, and fewer than half of the typed name's letters.
// Empty when none is, or when two are equally near.
std::string nearest_name(const std::string& typed, const std::vector<std::string>& candidates);

// " (did you mean 'NAME'?)" for nearest_name(), or "" when there is none.
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates);

// True when --help or -h is among args[start, end).
bool wants_help(const std::vector<std::string>& args, std::size_t start,
                std::size_t end = std::string::npos);

}  // namespace opscope::cli
