#include "opscope/error.h"

#include <cstdio>
#include <mutex>
#include <string>

namespace opscope {
namespace {

std::mutex& handler_mutex() {
  static std::mutex m;
  return m;
}

WarningHandler& handler() {
  static WarningHandler h;
  return h;
}

}  // namespace

WarningHandler set_warning_handler(WarningHandler h) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  WarningHandler previous = std::move(handler());
  handler() = std::move(h);
  return previous;
}

void warn(std::string_view message) {
  WarningHandler h;
  {
    std::lock_guard<std::mutex> lock(handler_mutex());
    h = handler();
  }
  // Called outside the lock so that a handler may itself warn or change the handler.
  if (h) {
    h(message);
    return;
  }
  std::string line = "opscope warning: ";
  line.append(message);
  line.push_back('\n');
  std::fputs(line.c_str(), stderr);
}

}  // namespace opscope
