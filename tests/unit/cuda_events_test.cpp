// Ranges timed with CUDA events (backend/cuda_events.h), the legacy profiler's kCUDA and
// torch's use_cuda fallback: the observer, the spans it makes, and what key_averages() shows.
//
// Without a GPU the driver is a double: its "events" take the time of a clock the test moves,
// so that each range's GPU time is known exactly; the real driver's entry points and the
// refusal without one are checked against the libraries this machine has. The real thing runs
// in tests/gpu/launch_check.cu on a GPU machine.
#include "backend/cuda_events.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "backend/cuda_probe.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/legacy.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "opscope/trace_reader.h"
#include "session/recorder.h"

namespace opscope {
namespace cuda_events_test {

// The double: a context per thread (set by the test), events stamped with gpu_ns when
// recorded.
struct FakeEvent {
  std::int64_t ns = -1;
};
std::atomic<std::int64_t> gpu_ns{0};
std::atomic<int> created{0};
std::atomic<int> destroyed{0};
thread_local int t_device = -1;  // -1: no current context

int ctx_get_current(void** context) {
  *context = t_device >= 0 ? reinterpret_cast<void*>(0x1000 + t_device) : nullptr;
  return 0;
}
int ctx_get_device(int* device) {
  *device = t_device;
  return t_device >= 0 ? 0 : 201;  // CUDA_ERROR_INVALID_CONTEXT
}
int event_create(void** event, unsigned) {
  *event = new FakeEvent;
  ++created;
  return 0;
}
int event_record(void* event, void*) {
  static_cast<FakeEvent*>(event)->ns = gpu_ns.load();
  return 0;
}
int event_synchronize(void*) { return 0; }
int event_elapsed_ms(float* ms, void* from, void* to) {
  *ms = static_cast<float>(
      static_cast<double>(static_cast<FakeEvent*>(to)->ns - static_cast<FakeEvent*>(from)->ns) /
      1e6);
  return 0;
}
int event_destroy(void* event) {
  delete static_cast<FakeEvent*>(event);
  ++destroyed;
  return 0;
}

backend::CudaEventApi fake_api() {
  backend::CudaEventApi api;
  api.ctx_get_current = ctx_get_current;
  api.ctx_get_device = ctx_get_device;
  api.event_create = event_create;
  api.event_record = event_record;
  api.event_synchronize = event_synchronize;
  api.event_elapsed_ms = event_elapsed_ms;
  api.event_destroy = event_destroy;
  return api;
}

thread_local bool t_selected = false;

// A window of CPU ranges with the selected threads' ranges timed by the double.
std::shared_ptr<const ProfilerResult> record(const std::function<void()>& work) {
  static const backend::CudaEventApi api = fake_api();
  static int owner;
  session::Recorder::claim(&owner, "the test");
  session::Recorder recorder;
  backend::set_cuda_event_api_for_testing(&api);
  session::WindowOptions w;
  w.request.timed_range_threads = [] { return t_selected; };
  recorder.start_window(w);
  work();
  auto result = recorder.stop_window({});
  backend::set_cuda_event_api_for_testing(nullptr);
  session::Recorder::release(&owner);
  return result;
}

const Event* find(const ProfilerResult& r, std::string_view name, EventKind kind) {
  for (const Event& e : r.events()) {
    if (e.name == name && e.kind == kind) return &e;
  }
  return nullptr;
}

TEST(CudaEvents, EachSelectedRangeBecomesItsSpanOnItsDevice) {
  created = destroyed = 0;
  gpu_ns = 1'000'000;
  const auto result = record([] {
    t_selected = true;
    t_device = 1;
    {
      OPSCOPE_RECORD_FUNCTION("outer");
      gpu_ns += 2'000;  // the GPU reaches outer's start event, then inner's 2 us later
      {
        OPSCOPE_RECORD_FUNCTION("inner");
        gpu_ns += 30'000;
      }
      gpu_ns += 5'000;
    }
    {
      t_device = -1;  // no current context: not timed, counted
      OPSCOPE_RECORD_FUNCTION("no_context");
    }
    t_device = 1;
    std::thread([] {  // not selected: not timed, not counted
      t_device = 1;
      OPSCOPE_RECORD_FUNCTION("other_thread");
    })
        .join();
    t_selected = false;
    t_device = -1;
  });
  const ProfilerResult& r = *result;
  const Event* outer = find(r, "outer", EventKind::kRange);
  const Event* inner = find(r, "inner", EventKind::kRange);
  const Event* outer_gpu = find(r, "outer", EventKind::kGpuAnnotation);
  const Event* inner_gpu = find(r, "inner", EventKind::kGpuAnnotation);
  ASSERT_TRUE(outer && inner && outer_gpu && inner_gpu);
  EXPECT_EQ(outer_gpu->duration_ns(), 37'000);
  EXPECT_EQ(inner_gpu->duration_ns(), 30'000);
  // outer's start is the device's first event: placed at the CPU time it was recorded, in the
  // start observer, which runs inside the window and before the range stamps its own start
  // (an ordering, not a tolerance: under ASan the first call took 2.4 ms); inner's is placed
  // 2 us of GPU time after it.
  EXPECT_GE(outer_gpu->start_ns, r.start_time_ns());
  EXPECT_LE(outer_gpu->start_ns, outer->start_ns);
  EXPECT_EQ(inner_gpu->start_ns - outer_gpu->start_ns, 2'000);
  EXPECT_EQ(r.detail(*outer_gpu)->gpu.external_id, static_cast<std::int64_t>(outer->handle));
  EXPECT_EQ(r.detail(*inner_gpu)->gpu.device, 1);
  const ThreadInfo& lane = r.threads()[static_cast<std::size_t>(outer_gpu->thread)];
  EXPECT_EQ(lane.name, "CUDA events");
  EXPECT_EQ(lane.pid, 1);
  EXPECT_EQ(find(r, "no_context", EventKind::kGpuAnnotation), nullptr);
  EXPECT_EQ(find(r, "other_thread", EventKind::kGpuAnnotation), nullptr);
  ASSERT_NE(find(r, "other_thread", EventKind::kRange), nullptr);  // recorded on the CPU
  bool stated = false;
  for (const auto& [key, value] : r.metadata()) {
    if (key == "opscope_cuda_events") {
      stated = true;
      EXPECT_NE(value.find("\"untimed_ranges\": 1"), std::string::npos) << value;
    }
  }
  EXPECT_TRUE(stated);
  EXPECT_EQ(created.load(), 4);
  EXPECT_EQ(destroyed.load(), 4);

  // In the trace: a GPU user annotation on the device's "CUDA events" row, read back as one.
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace_json(r));
  int spans = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "gpu_user_annotation") continue;
    ++spans;
    EXPECT_EQ(e["pid"], 1);
    if (e["name"] == "inner") EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 30.0);
  }
  EXPECT_EQ(spans, 2);
  const std::string path = ::testing::TempDir() + "cuda_events_trace.json";
  export_chrome_trace(r, path);
  const auto back = read_trace(path);
  const Event* read_back = find(*back, "inner", EventKind::kGpuAnnotation);
  ASSERT_NE(read_back, nullptr);
  EXPECT_EQ(read_back->duration_ns(), 30'000);
  std::remove(path.c_str());

  // As torch's legacy profiler: CUDA total the span, self what the children leave of it.
  const KeyAverages k = key_averages(r);
  std::map<std::string, const FunctionEventAvg*> row;
  for (const FunctionEventAvg& a : k.rows()) row[a.key] = &a;
  ASSERT_TRUE(row.count("outer") && row.count("inner"));
  EXPECT_EQ(row["outer"]->cuda_time_total_ns, 37'000);
  EXPECT_EQ(row["outer"]->self_cuda_time_total_ns, 7'000);
  EXPECT_EQ(row["inner"]->self_cuda_time_total_ns, 30'000);
  EXPECT_EQ(row.count("no_context") ? row["no_context"]->cuda_time_total_ns : -1, 0);
  for (const FunctionEventAvg& a : k.rows()) EXPECT_FALSE(a.is_device) << a.key;
  const std::string table = k.table();
  EXPECT_NE(table.find("Self CUDA"), std::string::npos) << table;
  // The share and the total are of the operators' own CUDA time: 37 us in all.
  EXPECT_NE(table.find("Self CUDA time total: 37.000us"), std::string::npos) << table;
  EXPECT_NE(table.find("81.08%"), std::string::npos) << table;  // inner: 30 of 37
}

TEST(CudaEvents, ARangeOpenAtStopIsNotTimedAndLeaksNoEvent) {
  created = destroyed = 0;
  std::atomic<bool> started{false}, stopped{false};
  std::thread late;
  const auto result = record([&] {
    late = std::thread([&] {
      t_selected = true;
      t_device = 0;
      OPSCOPE_RECORD_FUNCTION("spans_the_stop");
      started = true;
      while (!stopped) std::this_thread::yield();
    });
    while (!started) std::this_thread::yield();
  });
  stopped = true;
  late.join();
  EXPECT_EQ(find(*result, "spans_the_stop", EventKind::kGpuAnnotation), nullptr);
  EXPECT_EQ(created.load(), destroyed.load());
}

TEST(CudaEvents, LegacyEventsCarryTheirCudaTimes) {
  LegacyEvent push(LegacyEventKind::kPushRange, "op", 7, 1'000'000, 42);
  LegacyEvent pop(LegacyEventKind::kPopRange, "", 7, 1'090'000, 42);
  LegacyEvent mark(LegacyEventKind::kMark, "m", 7, 1'000'000);
  EXPECT_THROW(push.cuda_elapsed_us(pop), Error);  // not timed
  push.set_cuda(0, 5'000'000);
  pop.set_cuda(0, 5'061'500);
  EXPECT_DOUBLE_EQ(push.cuda_elapsed_us(pop), 61.5);
  LegacyEvent elsewhere = pop;
  elsewhere.set_cuda(1, 5'061'500);
  try {
    push.cuda_elapsed_us(elsewhere);
    ADD_FAILURE() << "events of two devices were compared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not on the same device: 0 vs 1"), std::string::npos);
  }
  // Across processes, as PyTorch's: microseconds.
  const LegacyEvent back = LegacyEvent::from_value(pop.to_value());
  EXPECT_TRUE(back.has_cuda());
  EXPECT_EQ(back.cuda_us(), 5061);
  EXPECT_EQ(back.device(), 0);

  // Lists with CUDA times become a result whose table shows them.
  const ThreadEventLists lists = {{mark, push, pop}};
  const auto result = legacy_result(lists);
  const Event* span = find(*result, "op", EventKind::kGpuAnnotation);
  ASSERT_NE(span, nullptr);
  EXPECT_EQ(span->duration_ns(), 61'500);
  const KeyAverages k = key_averages(*result);
  ASSERT_EQ(k.rows().size(), 1u);
  EXPECT_EQ(k.rows()[0].self_cuda_time_total_ns, 61'500);
  EXPECT_EQ(k.rows()[0].count, 1);
}

TEST(CudaEvents, KCudaIsRefusedWithTheReasonWhereRangesCannotBeTimed) {
  const std::string why = backend::cuda_event_timing_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "this machine can time ranges with CUDA events";
  try {
    enable_profiler_legacy({.state = LegacyProfilerState::kCUDA});
    disable_profiler_legacy();
    ADD_FAILURE() << "kCUDA was enabled although: " << why;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("Can't use CUDA profiler"), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
    EXPECT_NE(message.find("use kCPU"), std::string::npos) << message;
  }
  EXPECT_FALSE(profiler_legacy_enabled());
  // Nothing is left claimed: kCPU starts.
  enable_profiler_legacy({.state = LegacyProfilerState::kCPU});
  EXPECT_FALSE(disable_profiler_legacy().empty());
}

TEST(CudaEvents, ASessionAskingForThemWhereTheyCannotBeTakenSaysWhy) {
  const std::string why = cuda_event_timing_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "this machine can time ranges with CUDA events";
  std::vector<std::string> warnings;
  const WarningHandler previous =
      set_warning_handler([&](std::string_view w) { warnings.emplace_back(w); });
  ProfilerConfig config;
  config.experimental.cuda_event_timing = true;
  Profiler p(config);
  p.start();
  { OPSCOPE_RECORD_FUNCTION("op"); }
  p.stop();
  set_warning_handler(previous);
  const auto& not_recorded = p.result().stats().not_recorded;
  EXPECT_NE(std::find(not_recorded.begin(), not_recorded.end(), "cuda events"), not_recorded.end());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cuda events (" + why + ")"), std::string::npos) << warnings[0];
  EXPECT_NE(find(p.result(), "op", EventKind::kRange), nullptr);  // the CPU is recorded
}

TEST(CudaEvents, TheDriversEntryPointsAreResolvedOrNamed) {
  // The CUDA 13 toolkit's link-time libcuda has every entry point (and no driver behind it).
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (::access(stub.c_str(), R_OK) == 0) {
    const backend::CudaEventApi api = backend::CudaEventApi::load(stub);
    EXPECT_NE(api.event_elapsed_ms, nullptr);
    EXPECT_NE(api.event_record, nullptr);
  }
  try {
    backend::CudaEventApi::load("libopscope_no_such_driver.so");
    ADD_FAILURE() << "a missing driver loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("libopscope_no_such_driver.so could not be loaded"),
              std::string::npos)
        << e.what();
  }
  try {
    backend::CudaEventApi::load("libc.so.6");  // loads, and is no driver
    ADD_FAILURE() << "libc was taken for a CUDA driver";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no cuCtxGetCurrent"), std::string::npos) << e.what();
  }
}

}  // namespace cuda_events_test
}  // namespace opscope
