#include "util/program_name.h"

#include <cstdio>

namespace opscope::util {

std::string program_name() {
  std::string name;
  if (std::FILE* f = std::fopen("/proc/self/comm", "r")) {
    char buf[64];
    const std::size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    name.assign(buf, n);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\0')) name.pop_back();
  }
  return name;
}

}  // namespace opscope::util
