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

InfoHandler& info_handler() {
  static InfoHandler h;
  return h;
}

// Calls the handler `slot` holds, outside the lock (so that a handler may itself warn or
// change a handler), or writes "<prefix><message>" to stderr when none is set.
void deliver(std::function<void(std::string_view)>& slot, std::string_view message,
             const char* prefix) {
  std::function<void(std::string_view)> h;
  {
    std::lock_guard<std::mutex> lock(handler_mutex());
    h = slot;
  }
  if (h) {
    h(message);
    return;
  }
  std::string line = prefix;
  line.append(message);
  line.push_back('\n');
  std::fputs(line.c_str(), stderr);
}

}  // namespace

WarningHandler set_warning_handler(WarningHandler h) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  WarningHandler previous = std::move(handler());
  handler() = std::move(h);
  return previous;
}

void warn(std::string_view message) { deliver(handler(), message, "opscope warning: "); }

InfoHandler set_info_handler(InfoHandler h) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  InfoHandler previous = std::move(info_handler());
  info_handler() = std::move(h);
  return previous;
}

void inform(std::string_view message) { deliver(info_handler(), message, "opscope: "); }

}  // namespace opscope
