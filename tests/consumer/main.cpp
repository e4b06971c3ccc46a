// The package consumer: a program built against an installed opscope the way a user builds
// one (tests/consumer/run_consumer.py builds it three ways: find_package, pkg-config, and a
// plain `g++ -lopscope`). Exits non-zero on any failure.
//
//   consumer TRACE_PATH [--memhook] [--steps N]
//
// 1. Says whether on-demand tracing started by itself ("ondemand enabled=1" when the program
//    runs with KINETO_USE_DAEMON=1): the autostart must work however the program was linked.
// 2. Records a session with profile_memory; each range allocates. With --memhook (the
//    allocator hook is linked) the allocations must appear as [memory] events, without it none.
// 3. Writes the session's Chrome trace to TRACE_PATH and checks it.
// 4. With --steps N: prints "stepping", then runs N steps of 20 ms (a range and
//    ondemand::step() each), so that a daemon can trace it meanwhile.
#include <opscope/opscope.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

volatile int g_sink = 0;  // keeps the work from being optimized away

void work(int n) {
  OPSCOPE_RECORD_FUNCTION("consumer::work");
  // An allocation the memory hook sees (operator new), freed inside the range.
  auto block = std::make_unique<std::vector<int>>(static_cast<std::size_t>(n) * 1000);
  for (int i = 0; i < n * 1000; ++i)
    g_sink = g_sink + (*block)[static_cast<std::size_t>(i)] + i % 7;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "consumer: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("usage: consumer TRACE_PATH [--memhook] [--steps N]");
  const std::string trace = argv[1];
  bool memhook = false;
  long steps = 0;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--memhook") == 0) {
      memhook = true;
    } else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atol(argv[++i]);
    } else {
      return fail(std::string("unknown argument ") + argv[i]);
    }
  }
  std::printf("ondemand enabled=%d\n", opscope::ondemand::is_enabled() ? 1 : 0);
  try {
    opscope::Profiler profiler({.lenses = {.profile_memory = true}});
    profiler.start();
    {
      OPSCOPE_USER_SCOPE("consumer::outer");
      for (int i = 1; i <= 3; ++i) work(i);
    }
    profiler.stop();

    const auto& events = profiler.result().events();
    int works = 0;
    int memory = 0;
    for (const opscope::Event& e : events) {
      works += e.name == "consumer::work" ? 1 : 0;
      memory += e.kind == opscope::EventKind::kMemory ? 1 : 0;
    }
    if (works != 3) return fail("expected 3 consumer::work ranges, got " + std::to_string(works));
    if (memhook && memory == 0) return fail("the memory hook is linked but reported nothing");
    if (!memhook && memory != 0) {
      return fail(std::to_string(memory) + " memory events without the memory hook");
    }

    profiler.export_chrome_trace(trace);
    std::ifstream in(trace);
    std::stringstream text;
    text << in.rdbuf();
    std::string error;
    if (!opscope::is_valid_json(text.str(), &error)) return fail("invalid trace JSON: " + error);
    if (text.str().find("consumer::outer") == std::string::npos) {
      return fail("the trace lacks the consumer::outer range");
    }
    std::printf("%s", profiler.key_averages().table({.sort_by = "cpu_time_total"}).c_str());
    std::printf("consumer: ok (%zu events, %d memory events, trace %zu bytes)\n", events.size(),
                memory, text.str().size());
  } catch (const std::exception& e) {
    return fail(e.what());
  }

  if (steps > 0) {
    std::printf("stepping\n");
    std::fflush(stdout);
    for (long s = 0; s < steps; ++s) {
      {
        OPSCOPE_USER_SCOPE("consumer::step");
        work(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      opscope::ondemand::step();
    }
  }
  return 0;
}
