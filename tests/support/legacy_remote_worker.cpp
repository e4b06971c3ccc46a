// A process that profiles some work with the legacy profiler and writes its events, serialized,
// to stdout: the remote side of the remote-events test (tests/unit/legacy_test.cpp).
//
//   opscope_legacy_worker NODE_ID RANGES
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "opscope/legacy.h"
#include "opscope/record_function.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s NODE_ID RANGES\n", argv[0]);
    return 2;
  }
  opscope::set_default_node_id(std::atoll(argv[1]));
  const int ranges = std::atoi(argv[2]);
  opscope::enable_profiler_legacy({.state = opscope::LegacyProfilerState::kCPU});
  for (int i = 0; i < ranges; ++i) {
    OPSCOPE_RECORD_FUNCTION("remote::forward");
    OPSCOPE_RECORD_FUNCTION("remote::mm");
  }
  const opscope::ThreadEventLists lists = opscope::disable_profiler_legacy();
  std::vector<opscope::LegacyEvent> events;
  for (const auto& list : lists) events.insert(events.end(), list.begin(), list.end());
  const std::string bytes = opscope::serialize_legacy_events(events);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(1, bytes.data() + done, bytes.size() - done);
    if (n <= 0) return 1;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}
