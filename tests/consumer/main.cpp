// The package consumer: records a few ranges through an installed opscope, checks that they
// were recorded, and exports a Chrome trace. Exits non-zero on any failure.
//
//   consumer [TRACE_PATH]     (default: a file in the system's temp directory, removed after)
#include <opscope/opscope.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

volatile int g_sink = 0;  // keeps the work from being optimized away

void work(int n) {
  OPSCOPE_RECORD_FUNCTION("consumer::work");
  for (int i = 0; i < n * 1000; ++i) g_sink = g_sink + i % 7;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "consumer: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool keep = argc > 1;
  const std::filesystem::path trace =
      keep ? std::filesystem::path(argv[1])
           : std::filesystem::temp_directory_path() /
                 ("opscope_consumer_" + std::to_string(getpid()) + ".json");
  try {
    opscope::Profiler profiler;
    profiler.start();
    {
      OPSCOPE_USER_SCOPE("consumer::outer");
      for (int i = 1; i <= 3; ++i) work(i);
    }
    profiler.stop();

    const auto& events = profiler.result().events();
    if (events.empty()) return fail("the session recorded no events");
    int works = 0;
    for (const opscope::Event& e : events) works += e.name == "consumer::work" ? 1 : 0;
    if (works != 3) return fail("expected 3 consumer::work ranges, got " + std::to_string(works));

    profiler.export_chrome_trace(trace.string());
    std::ifstream in(trace);
    std::stringstream text;
    text << in.rdbuf();
    if (!keep) std::filesystem::remove(trace);
    std::string error;
    if (!opscope::is_valid_json(text.str(), &error)) return fail("invalid trace JSON: " + error);
    if (text.str().find("consumer::outer") == std::string::npos) {
      return fail("the trace lacks the consumer::outer range");
    }
    std::printf("%s", profiler.key_averages().table({.sort_by = "cpu_time_total"}).c_str());
    std::printf("consumer: ok (%zu events, trace %zu bytes)\n", events.size(), text.str().size());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return 0;
}
