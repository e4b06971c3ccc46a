// A traced process for the on-demand tests: a loop of steps, each a USER_SCOPE "step_<n>"
// with two nested ranges (the inner one reports a 4 KiB allocation and its free, as an
// allocator would), then ondemand::step(). It opts in to on-demand tracing only through
// the environment (KINETO_USE_DAEMON=1, OPSCOPE_DAEMON_ENDPOINT=...), as a real job would.
//
//   opscope_ondemand_target STEPS SLEEP_MS [linger]
//
// Prints "ready <pid>" once started, and "done" at the end. With "linger" it then stays, inside
// a USER_SCOPE "target::linger" still open, until it is killed: the flight recorder tests dump
// it there, so that the last ranges are known (step_<STEPS-1> and its nested ranges) and one
// range is open.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "opscope/memory.h"
#include "opscope/ondemand.h"
#include "opscope/record_function.h"

int main(int argc, char** argv) {
  const bool linger = argc == 4 && std::string(argv[3]) == "linger";
  if (argc != 3 && !linger) {
    std::fprintf(stderr, "usage: %s STEPS SLEEP_MS [linger]\n", argv[0]);
    return 2;
  }
  const long steps = std::atol(argv[1]);
  const long sleep_ms = std::atol(argv[2]);
  std::printf("ready %d enabled=%d\n", static_cast<int>(::getpid()),
              opscope::ondemand::is_enabled() ? 1 : 0);
  std::fflush(stdout);
  for (long n = 0; n < steps; ++n) {
    {
      opscope::RecordFunction step("step_" + std::to_string(n), opscope::RecordScope::kUserScope);
      {
        OPSCOPE_RECORD_FUNCTION("target::forward");
        OPSCOPE_RECORD_FUNCTION("target::mm");
        static char block[4096];
        opscope::report_memory_usage(block, sizeof block, sizeof block, sizeof block);
        opscope::report_memory_usage(block, -static_cast<std::int64_t>(sizeof block), 0,
                                     sizeof block);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    }
    opscope::ondemand::step();
  }
  if (linger) {
    opscope::RecordFunction waiting("target::linger", opscope::RecordScope::kUserScope);
    std::printf("done\n");
    std::fflush(stdout);
    for (;;) ::pause();  // a signal handler's return (SIGUSR2's) only wakes it
  }
  std::printf("done\n");
  return 0;
}
