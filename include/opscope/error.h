// opscope/error.h: the error type of the control plane, and where warnings go.
//
// Every control-plane call (start/stop/step, schedules, export, metadata) reports a misuse or
// a failure by throwing opscope::Error, whose message names the value given and what is
// allowed. The hot path (ranges) never throws.
//
// Warnings (a schedule without warmup, a schedule that never fired, a lens that is accepted
// but not recorded yet) go to a process-wide handler, stderr by default; information (an
// on-demand trace written) to another:
//
//   opscope::set_warning_handler([](std::string_view msg) { my_log(msg); });
//   opscope::set_info_handler([](std::string_view msg) { my_log_info(msg); });
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace opscope {

// The one exception type opscope throws. The Python layer maps it to ValueError or
// RuntimeError with the same message.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // An error of the call `where` ("Profiler::start()"): what() is "<where>: <detail>". A
  // binding that knows the call by another name (the Python package's "profile.start()")
  // shows its own name with detail(), so the wording has one source in both languages.
  Error(std::string_view where, std::string_view detail)
      : std::runtime_error(std::string(where) + ": " + std::string(detail)),
        detail_at_(where.size() + 2) {}

  // what() without the "<where>: " prefix; what() itself when no `where` was given.
  // An offset into what(), not a second string, so that copying stays noexcept.
  const char* detail() const noexcept { return what() + detail_at_; }

 private:
  std::size_t detail_at_ = 0;
};

// Receives each warning as one line of text without a trailing newline.
using WarningHandler = std::function<void(std::string_view)>;

// Replaces the warning handler and returns the previous one; an empty handler restores the
// default (one line on stderr prefixed "opscope warning: "). Thread-safe.
WarningHandler set_warning_handler(WarningHandler handler);

// Sends one warning to the current handler. Thread-safe; not for the hot path.
void warn(std::string_view message);

// Information that is no problem but that a user may want to see (an on-demand trace was
// written, the daemon is reached again) goes to its own handler, not the warning one: stderr
// by default, one line prefixed "opscope: ". The Python package routes it to
// logging.getLogger("opscope") at INFO. Replaces the handler and returns the previous one;
// an empty handler restores the default. Thread-safe.
using InfoHandler = std::function<void(std::string_view)>;
InfoHandler set_info_handler(InfoHandler handler);

// Sends one line of information to the current info handler. Thread-safe; not for the hot
// path.
void inform(std::string_view message);

}  // namespace opscope
