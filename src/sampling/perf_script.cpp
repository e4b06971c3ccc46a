#include "sampling/perf_script.h"

#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "opscope/error.h"

namespace opscope::sampling {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Splits off the next run of non-space characters.
std::string_view next_token(std::string_view& rest) {
  rest = trim(rest);
  std::size_t end = 0;
  while (end < rest.size() && !is_space(rest[end])) ++end;
  std::string_view token = rest.substr(0, end);
  rest.remove_prefix(end);
  return token;
}

template <class T>
bool parse_number(std::string_view s, T& out, int base = 10) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

// "12703.804876195" → ns. perf prints nine decimals with --ns; fewer are scaled.
bool parse_time_ns(std::string_view s, std::uint64_t& out) {
  std::size_t dot = s.find('.');
  std::uint64_t seconds = 0;
  std::uint64_t fraction = 0;
  if (!parse_number(s.substr(0, dot), seconds)) return false;
  if (dot != std::string_view::npos) {
    std::string_view digits = s.substr(dot + 1);
    if (digits.empty() || digits.size() > 9 || !parse_number(digits, fraction)) return false;
    for (std::size_t i = digits.size(); i < 9; ++i) fraction *= 10;
  }
  out = seconds * 1'000'000'000ull + fraction;
  return true;
}

// "cpu-clock:ppp" → "cpu-clock": perf appends the event's modifiers after a colon.
std::string_view without_modifiers(std::string_view event) {
  std::size_t colon = event.rfind(':');
  if (colon == std::string_view::npos) return event;
  std::string_view mods = event.substr(colon + 1);
  if (mods.empty()) return event.substr(0, colon);
  for (char c : mods) {
    if (std::string_view("ukhIGHpPSDeW").find(c) == std::string_view::npos) return event;
  }
  return event.substr(0, colon);
}

// "  1462a handle_amd (/usr/lib/ld.so)" → symbol and object file.
bool parse_frame(std::string_view line, std::string& frame) {
  std::string_view rest = line;
  std::string_view address = next_token(rest);
  std::uint64_t ip = 0;
  if (!parse_number(address, ip, 16)) return false;
  rest = trim(rest);
  std::string_view symbol = rest;
  std::string_view dso;
  if (!rest.empty() && rest.back() == ')') {
    std::size_t open = rest.rfind(" (");
    if (open == std::string_view::npos && rest.front() == '(') open = 0;
    if (open != std::string_view::npos) {
      std::size_t start = rest[open] == '(' ? open + 1 : open + 2;
      dso = rest.substr(start, rest.size() - 1 - start);
      symbol = trim(rest.substr(0, open));
    }
  }
  frame = frame_name(symbol, dso);
  return true;
}

[[noreturn]] void malformed(std::size_t line_number, std::string_view line, std::string_view what) {
  throw Error(fmt::format("perf script output, line {}: {} in '{}'", line_number, what,
                          line.substr(0, 200)));
}

}  // namespace

std::string frame_name(std::string_view symbol, std::string_view dso) {
  if (!symbol.empty() && symbol != "[unknown]") return std::string(symbol);
  if (dso.empty() || dso == "[unknown]") return "[unknown]";
  std::size_t slash = dso.rfind('/');
  std::string_view base = slash == std::string_view::npos ? dso : dso.substr(slash + 1);
  if (base.size() >= 2 && base.front() == '[' && base.back() == ']') return std::string(base);
  return fmt::format("[{}]", base);
}

void parse_perf_script(std::string_view text, std::size_t max_frames, SampleBatch& batch) {
  Sample* current = nullptr;
  std::size_t line_number = 0;
  while (!text.empty()) {
    std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (trim(line).empty()) {
      current = nullptr;  // a blank line ends a sample
      continue;
    }
    // Frames are indented with a tab; headers may start with spaces (the thread id is
    // right-aligned).
    if (line.front() == '\t') {  // a frame of the current sample
      if (current == nullptr) malformed(line_number, line, "a frame line outside a sample");
      std::string frame;
      if (!parse_frame(line, frame)) malformed(line_number, line, "no frame address");
      if (current->frames.size() < max_frames) current->frames.push_back(std::move(frame));
      continue;
    }
    // A sample's header: "tid time: period event: [ip sym (dso)]".
    std::string_view rest = line;
    Sample sample;
    std::string_view tid = next_token(rest);
    std::string_view time = next_token(rest);
    std::string_view period = next_token(rest);
    std::string_view event = next_token(rest);
    if (!parse_number(tid, sample.tid)) malformed(line_number, line, "no thread id");
    if (time.size() < 2 || time.back() != ':' ||
        !parse_time_ns(time.substr(0, time.size() - 1), sample.time_ns)) {
      malformed(line_number, line, "no time");
    }
    if (!parse_number(period, sample.weight)) malformed(line_number, line, "no period");
    if (event.size() < 2 || event.back() != ':') malformed(line_number, line, "no event");
    if (batch.event.empty()) {
      batch.event = std::string(without_modifiers(event.substr(0, event.size() - 1)));
    }
    batch.samples.push_back(std::move(sample));
    current = &batch.samples.back();
    // Without call chains the one frame follows on the header line.
    if (!trim(rest).empty()) {
      std::string frame;
      if (!parse_frame(rest, frame)) malformed(line_number, line, "no frame address");
      if (max_frames > 0) current->frames.push_back(std::move(frame));
    }
  }
}

}  // namespace opscope::sampling
