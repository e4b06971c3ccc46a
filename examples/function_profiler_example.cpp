// The README's FunctionProfiler example: one call of a function under perf, with the ranges it
// opens as frames. Run: build/examples/function_profiler_example [stacks.folded]
#include <opscope/opscope.h>

#include <cstdint>
#include <iostream>

[[gnu::noinline]] std::uint64_t matmul_like(std::uint64_t n) {
  volatile std::uint64_t x = 0;
  for (std::uint64_t i = 0; i < n; ++i) x = x + i * i;
  return x;
}

std::uint64_t train_step(std::uint64_t n) {
  OPSCOPE_RECORD_FUNCTION("train_step");
  std::uint64_t sum = 0;
  {
    OPSCOPE_RECORD_FUNCTION("aten::mm");
    sum += matmul_like(3 * n);
  }
  {
    OPSCOPE_RECORD_FUNCTION("aten::relu");
    sum += matmul_like(n);
  }
  return sum;
}

int main(int argc, char** argv) {
  opscope::FunctionProfiler profiler({.frequency_hz = 1999});
  std::uint64_t result = profiler.profile(train_step, 100'000'000);  // returns train_step's result
  std::cout << "train_step returned " << result << "\n";

  const opscope::FunctionProfileResult& run = profiler.last_result();
  if (!run.profile) {  // perf missing or not allowed: train_step still ran, unprofiled
    std::cout << "not profiled: " << run.error << "\n";
    return 0;
  }
  std::cout << run.profile->summary(5);
  run.profile->write_collapsed_stacks(argc > 1 ? argv[1] : "train_step.folded");
}
