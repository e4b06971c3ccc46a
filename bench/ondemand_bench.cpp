// What an idle on-demand client costs the application: a step loop (three ranges, no session
// recording, then ondemand::step()) with no client, and with a registered client polling a
// daemon that never answers every 10 ms (100 times libkineto's rate, to make the background
// thread's share visible). Run with --benchmark_repetitions and compare the medians of the
// same run; figures go to bench/RESULTS.md.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "ondemand/ipc.h"
#include "opscope/ondemand.h"
#include "opscope/record_function.h"

namespace {

constexpr std::int64_t kIterations = 20'000'000;
std::unique_ptr<opscope::ondemand::Endpoint> g_daemon;

[[gnu::noinline]] void one_step() {
  {
    OPSCOPE_USER_SCOPE("bench::step");
    OPSCOPE_RECORD_FUNCTION("bench::forward");
    OPSCOPE_RECORD_FUNCTION("bench::mm");
    benchmark::ClobberMemory();
  }
  opscope::ondemand::step();
}

void start_client(const benchmark::State&) {
  const std::string name = "opscope-bench-daemon-" + std::to_string(::getpid());
  g_daemon = std::make_unique<opscope::ondemand::Endpoint>(name);  // never reads
  opscope::ondemand::ClientOptions o;
  o.daemon_endpoint = name;
  o.poll_interval = std::chrono::milliseconds(10);
  opscope::ondemand::enable(o);
}

void stop_client(const benchmark::State&) {
  opscope::ondemand::disable();
  g_daemon.reset();
}

// The reference: the same loop in a process without a client.
void BM_StepLoopNoClient(benchmark::State& state) {
  for (auto _ : state) one_step();
}
BENCHMARK(BM_StepLoopNoClient)->Iterations(kIterations);

void BM_StepLoopIdleClient(benchmark::State& state) {
  for (auto _ : state) one_step();
}
BENCHMARK(BM_StepLoopIdleClient)
    ->Setup(start_client)
    ->Teardown(stop_client)
    ->Iterations(kIterations);

}  // namespace

BENCHMARK_MAIN();
