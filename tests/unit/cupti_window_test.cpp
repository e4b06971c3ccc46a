// The CUPTI backend's window around CUPTI, against a stand-in libcupti
// (tests/support/fake_cupti.cpp) so that it runs without a GPU: a range still open when the
// window stops ends without touching the destroyed backend; CUPTI's callbacks are registered
// once per process, and a second window records; times are placed by CUPTI's own clock, not
// CLOCK_REALTIME; unfinished records and those from outside the window are dropped and
// counted; a buffer that cannot be allocated does not spend the budget.
#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "backend/cupti_tracer.h"
#include "clock/clock.h"
#include "opscope/record_function.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OPSCOPE_TEST_SANITIZED 1
#endif

#ifndef OPSCOPE_TEST_SANITIZED
namespace cupti_window_test {
// When set, the next aligned nothrow allocation fails (the CUPTI buffers' kind), as it may
// when memory runs out. Replaces the global operator; not under the sanitizers, which own it.
thread_local bool t_fail_aligned_nothrow = false;
}  // namespace cupti_window_test

void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  if (cupti_window_test::t_fail_aligned_nothrow) {
    cupti_window_test::t_fail_aligned_nothrow = false;
    return nullptr;
  }
  const auto a = static_cast<std::size_t>(align);
  return std::aligned_alloc(a, (size + a - 1) / a * a);
}
#endif

namespace opscope::backend {
namespace cupti_window_test {

struct FakeCuptiCounts {
  int registrations;
  int thread_id_type_calls;
  int pushes;
  int pops;
  int enabled;
  int driver_apis;
  int all_driver;
};

// The stand-in's test side, from the same handle the backend loads.
struct FakeCupti {
  void (*queue)(const void*, std::size_t) = nullptr;
  FakeCuptiCounts (*counts)() = nullptr;
  void (*set_clock_shift_ns)(std::int64_t) = nullptr;

  FakeCupti() {
    void* lib = ::dlopen(OPSCOPE_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    queue = reinterpret_cast<decltype(queue)>(::dlsym(lib, "fake_cupti_queue"));
    counts = reinterpret_cast<decltype(counts)>(::dlsym(lib, "fake_cupti_counts"));
    set_clock_shift_ns = reinterpret_cast<decltype(set_clock_shift_ns)>(
        ::dlsym(lib, "fake_cupti_set_clock_shift_ns"));
  }
  bool loaded() const { return queue != nullptr && counts != nullptr; }

  // A runtime call of `duration_ns` that began `ago_ns` before CUPTI's clock now.
  void queue_call(std::uint32_t correlation, std::int64_t ago_ns = 0,
                  std::int64_t duration_ns = 500) const {
    CUpti_ActivityAPI call{};
    call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    call.start = static_cast<std::uint64_t>(cupti_now_ns() - ago_ns);
    call.end = call.start + static_cast<std::uint64_t>(duration_ns);
    call.threadId = 42;
    call.correlationId = correlation;
    queue(&call, sizeof call);
  }
  void queue_call_at(std::uint64_t start, std::uint64_t end) const {
    CUpti_ActivityAPI call{};
    call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    call.start = start;
    call.end = end;
    call.threadId = 42;
    call.correlationId = 9;
    queue(&call, sizeof call);
  }
};

std::shared_ptr<const ProfilerResult> collect(CuptiBackend& backend) {
  ProfilerResult::Builder builder;
  backend.collect(builder, clock::TickConverter::calibrate(clock::process_anchor()));
  return builder.finish();
}

std::string metadata(const ProfilerResult& r, const std::string& key) {
  for (const auto& [k, v] : r.metadata()) {
    if (k == key) return v;
  }
  return "";
}

class CuptiWindow : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake_.loaded()) GTEST_SKIP() << "the stand-in libcupti did not load";
    fake_.set_clock_shift_ns(0);
  }
  FakeCupti fake_;
};

TEST_F(CuptiWindow, ARangeOpenAtStopEndsAfterTheBackendIsGone) {
  const FakeCuptiCounts before = fake_.counts();
  auto backend = std::make_unique<CuptiBackend>(OPSCOPE_FAKE_CUPTI, std::uint64_t{64} << 20);
  backend->start();
  {
    OPSCOPE_RECORD_FUNCTION("open_at_stop");
    backend->stop();
    collect(*backend);
    backend.reset();
  }  // its end callback pops CUPTI's external id now (ASan: no use of the freed backend)
  const FakeCuptiCounts after = fake_.counts();
  EXPECT_EQ(after.pushes - before.pushes, 1);
  EXPECT_EQ(after.pops - before.pops, 1);
  EXPECT_EQ(after.enabled, before.enabled);  // every kind enabled was disabled again
  EXPECT_EQ(after.driver_apis, before.driver_apis);
}

TEST_F(CuptiWindow, OfTheDriverCallsOnlyTheLaunchesAreAskedFor) {
  CuptiBackend backend(OPSCOPE_FAKE_CUPTI, std::uint64_t{64} << 20);
  backend.start();
  const FakeCuptiCounts during = fake_.counts();
  backend.stop();
  // cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel, each with its _ptsz: not
  // every driver call (nvcc 13's launches each make a cuKernelGetName).
  EXPECT_EQ(during.driver_apis, 6);
  EXPECT_EQ(during.all_driver, 0);
  EXPECT_EQ(fake_.counts().driver_apis, 0);
}

TEST_F(CuptiWindow, CallbacksAreRegisteredOnceAndASecondWindowRecords) {
  for (int window = 0; window < 2; ++window) {
    CuptiBackend backend(OPSCOPE_FAKE_CUPTI, std::uint64_t{64} << 20);
    backend.start();
    fake_.queue_call(static_cast<std::uint32_t>(window + 1));
    backend.stop();
    const auto r = collect(backend);
    ASSERT_EQ(r->events().size(), 1u) << "window " << window;
    EXPECT_EQ(r->events()[0].name, "cudaLaunchKernel");
  }
  // CUPTI keeps one pair of buffer callbacks per process: registered by the first window only
  // (whichever test of this process opened it).
  EXPECT_EQ(fake_.counts().registrations, 1);
  EXPECT_EQ(fake_.counts().thread_id_type_calls, 1);
}

TEST_F(CuptiWindow, TimesArePlacedByCuptisClockNotTheWallClock) {
  // CUPTI's clock an hour off CLOCK_REALTIME, as when Kineto's timestamp callback (a TSC
  // clock) replaced it.
  constexpr std::int64_t kHour = std::int64_t{3600} * 1'000'000'000;
  fake_.set_clock_shift_ns(kHour);
  CuptiBackend backend(OPSCOPE_FAKE_CUPTI, std::uint64_t{64} << 20);
  backend.start();
  fake_.queue_call(3);
  const std::int64_t wall_now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
  backend.stop();
  const auto r = collect(backend);
  ASSERT_EQ(r->events().size(), 1u);
  // The call began at "now" on CUPTI's clock: on the ranges' clock, about now.
  EXPECT_LT(std::llabs(r->events()[0].start_ns - wall_now), std::int64_t{50'000'000})
      << "the call landed " << (r->events()[0].start_ns - wall_now) / 1'000'000 << " ms off";
  EXPECT_NE(metadata(*r, "opscope_gpu_clock").find("cuptiGetTimestamp"), std::string::npos)
      << metadata(*r, "opscope_gpu_clock");
  EXPECT_EQ(metadata(*r, "cupti_version"), "130001");  // as Kineto states it
}

TEST_F(CuptiWindow, IncompleteRecordsAndThoseFromOutsideTheWindowAreDroppedAndCounted) {
  CuptiBackend backend(OPSCOPE_FAKE_CUPTI, std::uint64_t{64} << 20);
  const auto before = static_cast<std::uint64_t>(cupti_now_ns() - 10'000'000);
  backend.start();
  fake_.queue_call(1);  // kept
  const auto now = static_cast<std::uint64_t>(cupti_now_ns());
  fake_.queue_call_at(0, now);                                    // no start: incomplete
  fake_.queue_call_at(now, 0);                                    // no end: incomplete
  fake_.queue_call_at(before, before + 1000);                     // began before the window
  fake_.queue_call_at(now + 1'000'000'000, now + 1'000'001'000);  // began after it
  backend.stop();
  const auto r = collect(backend);
  ASSERT_EQ(r->events().size(), 1u);
  EXPECT_EQ(r->stats().gpu_records_discarded, 4u);
  EXPECT_EQ(metadata(*r, "opscope_gpu_records_discarded"),
            "{\"incomplete\":2,\"outside_window\":2}");
}

TEST_F(CuptiWindow, ABufferThatCannotBeAllocatedDoesNotSpendTheBudget) {
#ifdef OPSCOPE_TEST_SANITIZED
  GTEST_SKIP() << "the sanitizers own operator new: the failing allocation is not simulated";
#else
  // A budget of one 4 MiB buffer: after a failed allocation, the next must still get it.
  CuptiBackend backend(OPSCOPE_FAKE_CUPTI, std::uint64_t{4} << 20);
  backend.load_library();
  std::size_t size = 0;
  ::cupti_window_test::t_fail_aligned_nothrow = true;
  EXPECT_EQ(backend.new_buffer(size), nullptr);
  std::uint8_t* buffer = backend.new_buffer(size);
  ASSERT_NE(buffer, nullptr) << "the failed allocation spent the window's only buffer";
  backend.take_buffer(buffer, 0);
#endif
}

}  // namespace cupti_window_test
}  // namespace opscope::backend
