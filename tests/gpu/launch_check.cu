// The GPU check of the CUPTI backend, for a machine with an NVIDIA GPU (tests/gpu/device_check.sh
// builds the bundle that carries it and runs it; tests/gpu/run.sh builds and runs it against a
// build tree; CI has no GPU and never builds it).
//
// Two recording windows of CPU and CUDA activity, each over the same work: kernels on two
// streams, a host-to-device copy per stream, a memset, a device-to-host copy, a CUDA event
// recorded and waited for, a synchronize, each inside an opscope range. Checks, from each
// window's result: every launched kernel appears exactly once, on its stream, with the runtime
// call that launched it (an ac2g flow from a launch call on the launching thread, and the same
// correlation) and the range it was launched in ("External id" = the range's handle); every
// kernel starts after its launch call, and every launch call lies inside its range (2 us
// slack); the copies carry their kind, bytes and bandwidth; the memset and the event sync are
// there; deviceProperties is filled; nothing was dropped. A cudaMalloc inside a range is that
// range's CUDA memory in key_averages(); the legacy profiler's kCUDA times a range around
// kernels with CUDA events. Then times a launch unprofiled and with CUDA activity recorded,
// inside and outside a range (medians of many), for the "at most 1 us more" target.
//
//   launch_check TRACE.json[.gz] [LAUNCH_JSON]
//
// The launch costs are measured in windows of their own, after the two. Writes the first window's
// trace to TRACE and the launch costs to LAUNCH_JSON; exits 0 when every check passes, 1 otherwise
// (each failure printed).
#include <cuda_runtime.h>
#include <execinfo.h>
#include <opscope/key_averages.h>
#include <opscope/legacy.h>
#include <opscope/profiler.h>
#include <opscope/record_function.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

__global__ void scale(float* x, int n, float by) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= by;
}

__global__ void shift(float* x, int n, float by) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += by;
}

namespace {

int failures = 0;

// A crash on the device machine (no gdb there) prints where it happened.
void on_fatal_signal(int sig) {
  const char head[] = "\nlaunch_check: fatal signal, backtrace:\n";
  (void)!::write(STDERR_FILENO, head, sizeof head - 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++failures;
  }
}

void cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::printf("CUDA error in %s: %s\n", what, cudaGetErrorString(rc));
    std::exit(2);
  }
}

constexpr int kN = 1 << 20;
constexpr int kKernelsPerStream = 8;
constexpr std::int64_t kSlackNs = 2000;

// nvcc 13 compiles <<<>>> to __cudaLaunchKernel; older toolkits, and the C API, to
// cudaLaunchKernel (either with _ptsz under per-thread default streams).
bool is_launch_call(std::string_view name) {
  return name.find("LaunchKernel") != std::string_view::npos;
}

// Median ns of one launch of a small kernel, over `rounds` batches of 64, launched inside a
// range of its own when `in_range`.
double launch_ns(cudaStream_t s, float* d, int rounds, bool in_range) {
  std::vector<double> per_launch;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 64; ++i) {
      if (in_range) {
        OPSCOPE_RECORD_FUNCTION("tiny_launch");
        scale<<<1, 32, 0, s>>>(d, 32, 1.0f);
      } else {
        scale<<<1, 32, 0, s>>>(d, 32, 1.0f);
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    cuda(cudaStreamSynchronize(s), "sync");
    per_launch.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 64);
  }
  std::sort(per_launch.begin(), per_launch.end());
  return per_launch[per_launch.size() / 2];
}

struct Buffers {
  std::vector<float> host = std::vector<float>(kN, 1.0f);
  float* d[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {};
  cudaEvent_t event = nullptr;
};

// The work of one window, each piece in a range.
void work(Buffers& b, float** scratch) {
  {
    OPSCOPE_RECORD_FUNCTION("copy_in");
    for (int s = 0; s < 2; ++s) {
      cuda(cudaMemcpyAsync(b.d[s], b.host.data(), kN * sizeof(float), cudaMemcpyHostToDevice,
                           b.streams[s]),
           "copy in");
    }
  }
  for (int k = 0; k < kKernelsPerStream; ++k) {
    OPSCOPE_RECORD_FUNCTION("step");
    const auto launch = [&](int s) {
      if (k % 2 == 0) {
        scale<<<(kN + 255) / 256, 256, 0, b.streams[s]>>>(b.d[s], kN, 1.001f);
      } else {
        shift<<<(kN + 255) / 256, 256, 0, b.streams[s]>>>(b.d[s], kN, 0.5f);
      }
      cuda(cudaGetLastError(), "launch");
    };
    {
      OPSCOPE_RECORD_FUNCTION("launch_on_stream_a");
      launch(0);
    }
    {
      OPSCOPE_RECORD_FUNCTION("launch_on_stream_b");
      launch(1);
    }
  }
  {
    OPSCOPE_RECORD_FUNCTION("alloc");
    cuda(cudaMalloc(scratch, kN * sizeof(float)), "cudaMalloc in the window");
  }
  {
    OPSCOPE_RECORD_FUNCTION("clear");
    cuda(cudaMemsetAsync(b.d[1], 0, kN * sizeof(float), b.streams[1]), "memset");
  }
  {
    OPSCOPE_RECORD_FUNCTION("event");
    cuda(cudaEventRecord(b.event, b.streams[1]), "cudaEventRecord");
    cuda(cudaEventSynchronize(b.event), "cudaEventSynchronize");
  }
  {
    OPSCOPE_RECORD_FUNCTION("copy_out");
    cuda(cudaMemcpyAsync(b.host.data(), b.d[0], kN * sizeof(float), cudaMemcpyDeviceToHost,
                         b.streams[0]),
         "copy out");
  }
  {
    OPSCOPE_RECORD_FUNCTION("synchronize");
    cuda(cudaDeviceSynchronize(), "synchronize");
  }
}

// Every check of one window's result; `w` names the window in failures.
void check_window(const opscope::ProfilerResult& r, int w) {
  const std::string in = " (window " + std::to_string(w) + ")";
  const auto& events = r.events();
  std::map<std::uint64_t, const opscope::Event*> range_of_handle;
  for (const opscope::Event& e : events) {
    if (e.kind == opscope::EventKind::kRange) range_of_handle[e.handle] = &e;
  }
  // The launch call of each correlation, and the flows ending on kernels.
  std::map<std::int64_t, const opscope::Event*> call_of;
  int launches = 0;
  for (const opscope::Event& e : events) {
    const opscope::EventDetail* det = r.detail(e);
    if (e.kind == opscope::EventKind::kRuntime && is_launch_call(e.name)) {
      ++launches;
      if (det != nullptr && det->gpu.correlation >= 0) call_of[det->gpu.correlation] = &e;
    }
  }
  std::map<std::int32_t, std::int32_t> flow_from;  // kernel event index -> call event index
  for (const opscope::Flow& f : r.flows()) {
    if (f.category == "ac2g" && f.from >= 0 && f.to >= 0) flow_from[f.to] = f.from;
  }
  int kernels = 0, copies_in = 0, copies_out = 0, memsets = 0, event_syncs = 0;
  std::map<std::int64_t, int> per_stream;
  std::map<std::int64_t, int> per_correlation;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const opscope::Event& e = events[i];
    const opscope::EventDetail* det = r.detail(e);
    if (r.category(e) == "cuda_sync" && e.name == "Event Sync") ++event_syncs;
    // Kineto keeps the driver calls that launch kernels only.
    if (e.kind == opscope::EventKind::kDriver) {
      check(is_launch_call(e.name),
            "a driver call that launches nothing: " + std::string(e.name) + in);
    }
    if (det == nullptr) continue;
    const std::string_view args = r.other_args(e);
    if (e.kind == opscope::EventKind::kKernel &&
        (e.name.find("scale") != std::string_view::npos ||
         e.name.find("shift") != std::string_view::npos) &&
        det->gpu.grid[0] == (kN + 255) / 256) {
      ++kernels;
      ++per_stream[det->gpu.stream];
      ++per_correlation[det->gpu.correlation];
      const std::string name(e.name);
      check(args.find("\"blocks per SM\"") != std::string_view::npos &&
                args.find("\"warps per SM\"") != std::string_view::npos,
            "kernel " + name + " has no blocks/warps per SM: " + std::string(args) + in);
      const auto range = range_of_handle.find(static_cast<std::uint64_t>(det->gpu.external_id));
      check(
          range != range_of_handle.end() && range->second->name.rfind("launch_on_stream_", 0) == 0,
          "kernel " + name + "'s External id " + std::to_string(det->gpu.external_id) +
              " is not a launch_on_stream_* range" + in);
      const auto call = call_of.find(det->gpu.correlation);
      check(call != call_of.end(), "no launch call with kernel " + name + "'s correlation " +
                                       std::to_string(det->gpu.correlation) + in);
      const auto flow = flow_from.find(static_cast<std::int32_t>(i));
      check(flow != flow_from.end() && call != call_of.end() &&
                &events[static_cast<std::size_t>(flow->second)] == call->second,
            "kernel " + name + " has no ac2g flow from its launch call" + in);
      if (call != call_of.end()) {
        check(e.start_ns + kSlackNs >= call->second->start_ns,
              "kernel " + name + " starts " + std::to_string(call->second->start_ns - e.start_ns) +
                  " ns before its launch call" + in);
        if (range != range_of_handle.end()) {
          const opscope::Event& rg = *range->second;
          check(call->second->start_ns + kSlackNs >= rg.start_ns &&
                    call->second->end_ns <= rg.end_ns + kSlackNs,
                "the launch call of " + name + " [" + std::to_string(call->second->start_ns) +
                    ", " + std::to_string(call->second->end_ns) + "] is outside its range [" +
                    std::to_string(rg.start_ns) + ", " + std::to_string(rg.end_ns) + "]" + in);
        }
      }
    }
    if (e.kind == opscope::EventKind::kMemcpy && det->gpu.bytes == kN * 4) {
      if (e.name.find("HtoD") != std::string_view::npos) ++copies_in;
      if (e.name.find("DtoH") != std::string_view::npos) ++copies_out;
      check(args.find("memory bandwidth (GB/s)") != std::string_view::npos,
            "copy " + std::string(e.name) + " has no bandwidth" + in);
    }
    if (e.kind == opscope::EventKind::kMemset && det->gpu.bytes == kN * 4) ++memsets;
  }
  for (const auto& [correlation, n] : per_correlation) {
    check(n == 1, "correlation " + std::to_string(correlation) + " has " + std::to_string(n) +
                      " kernels" + in);
  }
  check(kernels == 2 * kKernelsPerStream, "kernels of the steps: " + std::to_string(kernels) +
                                              ", want " + std::to_string(2 * kKernelsPerStream) +
                                              in);
  check(per_stream.size() == 2, "streams with kernels: " + std::to_string(per_stream.size()) + in);
  check(copies_in == 2, "host-to-device copies: " + std::to_string(copies_in) + in);
  check(copies_out == 1, "device-to-host copies: " + std::to_string(copies_out) + in);
  check(memsets == 1, "memsets: " + std::to_string(memsets) + in);
  check(event_syncs >= 1, "Event Sync events: " + std::to_string(event_syncs) + in);
  check(launches >= 2 * kKernelsPerStream, "launch calls: " + std::to_string(launches) + in);
  check(r.device_properties().find("\"name\"") != std::string::npos,
        "deviceProperties is empty" + in);
  check(r.stats().events_dropped == 0,
        "events dropped: " + std::to_string(r.stats().events_dropped) + in);
  std::printf(
      "window %d: %zu events, %zu flows, %d kernels, %d launch calls, dropped %llu, "
      "GPU records discarded %llu\n",
      w, events.size(), r.flows().size(), kernels, launches,
      static_cast<unsigned long long>(r.stats().events_dropped),
      static_cast<unsigned long long>(r.stats().gpu_records_discarded));
  for (const auto& [key, value] : r.metadata()) {
    if (key.rfind("opscope_gpu", 0) == 0) std::printf("  %s: %s\n", key.c_str(), value.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    std::signal(sig, on_fatal_signal);
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string trace = argc > 1 ? argv[1] : "gpu_trace.json";
  const std::string launch_json = argc > 2 ? argv[2] : "";
  const std::string why = opscope::activity_unavailable_reason(opscope::ActivityType::kCUDA);
  std::printf("CUDA: %s\n", why.empty() ? "recordable" : why.c_str());
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", why.c_str());
    return 0;
  }
  Buffers b;
  for (int s = 0; s < 2; ++s) {
    cuda(cudaMalloc(&b.d[s], kN * sizeof(float)), "cudaMalloc");
    cuda(cudaStreamCreate(&b.streams[s]), "cudaStreamCreate");
  }
  cuda(cudaEventCreate(&b.event), "cudaEventCreate");

  opscope::ProfilerConfig config;
  config.activities = {opscope::ActivityType::kCPU, opscope::ActivityType::kCUDA};
  config.lenses.profile_memory = true;
  std::shared_ptr<const opscope::ProfilerResult> first;
  for (int w = 1; w <= 2; ++w) {
    opscope::Profiler profiler(config);
    profiler.start();
    float* scratch = nullptr;  // freed after the window
    work(b, &scratch);
    cuda(cudaDeviceSynchronize(), "synchronize");
    profiler.stop();
    cuda(cudaFree(scratch), "cudaFree");
    check_window(profiler.result(), w);
    if (w == 1) {
      profiler.export_chrome_trace(trace);
      const opscope::ProfilerResult& r = profiler.result();
      const opscope::KeyAverages averages = opscope::key_averages(r);
      std::printf("%s",
                  averages.table({.sort_by = "self_cuda_time_total", .row_limit = 25}).c_str());
      std::int64_t allocated = 0;
      bool launch_has_cuda_time = false;
      for (const opscope::FunctionEventAvg& row : averages.rows()) {
        if (row.key == "alloc") allocated = row.self_cuda_memory_usage;
        if (row.key == "launch_on_stream_a") launch_has_cuda_time = row.self_cuda_time_total_ns > 0;
      }
      check(allocated == kN * 4, "self CUDA memory of alloc: " + std::to_string(allocated) +
                                     ", want " + std::to_string(kN * 4));
      check(launch_has_cuda_time, "launch_on_stream_a has no self CUDA time");
    }
  }

  // The legacy profiler, kCUDA: the range's CUDA-event time holds its kernels.
  opscope::enable_profiler_legacy({.state = opscope::LegacyProfilerState::kCUDA});
  const auto t0 = std::chrono::steady_clock::now();
  {
    OPSCOPE_RECORD_FUNCTION("legacy_timed");
    for (int i = 0; i < 4; ++i) scale<<<(kN + 255) / 256, 256>>>(b.d[0], kN, 1.0f);
    cuda(cudaDeviceSynchronize(), "synchronize");
  }
  const double wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  const opscope::ThreadEventLists lists = opscope::disable_profiler_legacy();
  double legacy_us = -1;
  for (const auto& list : lists) {
    for (const opscope::LegacyEvent& push : list) {
      if (push.name() != "legacy_timed") continue;
      for (const opscope::LegacyEvent& pop : list) {
        if (pop.kind() == opscope::LegacyEventKind::kPopRange && pop.handle() == push.handle() &&
            push.has_cuda() && pop.has_cuda()) {
          legacy_us = push.cuda_elapsed_us(pop);
        }
      }
    }
  }
  std::printf("legacy kCUDA: legacy_timed took %.1f us on the GPU, %.1f us on the wall clock\n",
              legacy_us, wall_us);
  check(legacy_us > 0, "the legacy profiler's kCUDA did not time legacy_timed");

  // Launch costs: unprofiled and in a window of CPU and CUDA activity, alternated five times so
  // that a drift of the machine (clocks, a neighbour) falls on both sides; medians of the five.
  std::vector<double> u, ur, p, pr;
  for (int rep = 0; rep < 5; ++rep) {
    u.push_back(launch_ns(b.streams[0], b.d[0], 100, false));
    ur.push_back(launch_ns(b.streams[0], b.d[0], 100, true));
    opscope::Profiler profiler(config);
    profiler.start();
    p.push_back(launch_ns(b.streams[0], b.d[0], 100, false));
    pr.push_back(launch_ns(b.streams[0], b.d[0], 100, true));
    cuda(cudaDeviceSynchronize(), "synchronize");
    profiler.stop();
    std::printf(
        "launch costs, rep %d: %.0f / %.0f ns unprofiled, %.0f / %.0f ns recorded "
        "(outside / inside a range)\n",
        rep, u.back(), ur.back(), p.back(), pr.back());
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double unprofiled_ns = median(u), unprofiled_range_ns = median(ur);
  const double profiled_ns = median(p), profiled_range_ns = median(pr);
  std::printf("launch: %.0f ns unprofiled, %.0f ns with CUDA activity recorded (+%.0f ns)\n",
              unprofiled_ns, profiled_ns, profiled_ns - unprofiled_ns);
  std::printf("launch in a range: %.0f ns unprofiled, %.0f ns recorded (+%.0f ns)\n",
              unprofiled_range_ns, profiled_range_ns, profiled_range_ns - unprofiled_range_ns);
  if (!launch_json.empty()) {
    if (FILE* f = std::fopen(launch_json.c_str(), "w")) {
      std::fprintf(f,
                   "{\"unprofiled_ns\": %.1f, \"profiled_ns\": %.1f, \"unprofiled_in_range_ns\": "
                   "%.1f, \"profiled_in_range_ns\": %.1f}\n",
                   unprofiled_ns, profiled_ns, unprofiled_range_ns, profiled_range_ns);
      std::fclose(f);
    }
  }
  std::printf("trace %s\n%s\n", trace.c_str(), failures == 0 ? "PASS" : "FAILED");
  return failures == 0 ? 0 : 1;
}
