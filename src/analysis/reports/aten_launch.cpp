// The "aten-launch" report: Holistic Trace Analysis's get_aten_op_kernels_and_delay
// (hta/analyzers/cuda_kernel_analysis.py). Per rank, each kernel launch (a runtime call HTA's
// KERNEL_LAUNCH_CATEGORY_PATTERN names) is given the ATen operator that wraps it with the
// latest start, on any thread, as HTA's find_deepest_aten_op does, and the GPU work of its
// correlation id. The launches of one operator instance (thread, name, start) make a kernel
// sequence; table "aten_launch" has, per operator name and kernel sequence, how often it
// occurred and the mean delays of its first launch: from the operator's start to the launch
// call's (avg_aten_op_launch_delay) and from the call's start to the kernel's
// (avg_runtime_delay), in us rounded to 3 decimals. HTA sorts by the caller's columns; the
// rows here are in (operator, sequence) order and the Python method sorts them.
//
// A launch whose GPU work is not in the trace (cut off at the end of the window, or left out
// with the last profiler step) makes HTA's method raise; here it is skipped.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/hta_events.h"
#include "analysis/report_catalog.h"
#include "analysis/report_rows.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::correlation_of;
using internal::Ranks;
using internal::stream_of;

// HTA's re.match(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)", name), with every
// CUDA kernel launch in any spelling (internal::is_kernel_launch_call) for its CUDA part: it
// holds the calls HTA's pattern matches and nvcc 13's __cudaLaunchKernel, the cooperative and
// per-thread-stream ones it misses.
bool is_kernel_launch(std::string_view name) {
  return internal::is_kernel_launch_call(name) || name.starts_with("runFunction");
}

double round3(double x) { return std::round(x * 1000.0) / 1000.0; }

Report aten_op_kernels(Ranks ranks, const ReportOptions& options) {
  return internal::per_rank_report(
      "aten_launch",
      {"rank", "aten_op_name", "kernel_sequence", "occurrence_count", "avg_aten_op_launch_delay",
       "avg_runtime_delay"},
      ranks, options, [](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
        const std::vector<Event>& events = r.events();
        std::vector<std::int32_t> ops, launches;
        std::unordered_map<std::int64_t, std::int32_t> work;  // correlation -> GPU work
        for (const std::int32_t k : internal::analyzed_events(r, drop_last)) {
          const Event& e = events[static_cast<std::size_t>(k)];
          if (!internal::in_hta_frame(r, e)) continue;
          if (e.name.starts_with("aten::")) ops.push_back(k);
          if (is_kernel_launch(e.name)) launches.push_back(k);
          if (stream_of(r, e) >= 0) {
            const std::int64_t c = correlation_of(r, e);
            if (c >= 0) work.emplace(c, k);  // HTA's .item() needs one; the first is kept
          }
        }
        const auto start_of = [&](std::int32_t k) {
          return events[static_cast<std::size_t>(k)].start_ns;
        };
        const auto by_start = [&](std::int32_t a, std::int32_t b) {
          return start_of(a) < start_of(b);
        };
        std::stable_sort(ops.begin(), ops.end(), by_start);
        std::stable_sort(launches.begin(), launches.end(), by_start);  // HTA's frame order
        // The latest end among ops[0..i]: the backward search for a wrapping operator stops
        // where no earlier operator ends late enough.
        std::vector<std::int64_t> max_end(ops.size());
        for (std::size_t i = 0; i < ops.size(); ++i) {
          const std::int64_t end = events[static_cast<std::size_t>(ops[i])].end_ns;
          max_end[i] = i == 0 ? end : std::max(max_end[i - 1], end);
        }
        // (thread, name, start) of the operator instance -> its launches' kernels and delays.
        struct Instance {
          std::vector<std::string_view> kernels;
          std::int64_t first_op_delay = 0, first_runtime_delay = 0;
        };
        std::map<std::tuple<std::int64_t, std::string_view, std::int64_t>, Instance> instances;
        for (const std::int32_t l : launches) {
          const Event& call = events[static_cast<std::size_t>(l)];
          const auto it = work.find(correlation_of(r, call));
          if (it == work.end()) continue;
          // The wrapping operator with the latest start: ts <= call start, end >= call end.
          auto i = static_cast<std::ptrdiff_t>(
              std::upper_bound(ops.begin(), ops.end(), call.start_ns,
                               [&](std::int64_t t, std::int32_t k) { return t < start_of(k); }) -
              ops.begin());
          std::int32_t op = -1;
          for (--i; i >= 0 && max_end[static_cast<std::size_t>(i)] >= call.end_ns; --i) {
            if (events[static_cast<std::size_t>(ops[static_cast<std::size_t>(i)])].end_ns >=
                call.end_ns) {
              op = ops[static_cast<std::size_t>(i)];
              break;
            }
          }
          if (op < 0) continue;
          const Event& o = events[static_cast<std::size_t>(op)];
          const Event& kernel = events[static_cast<std::size_t>(it->second)];
          const auto tid =
              static_cast<std::int64_t>(r.threads()[static_cast<std::size_t>(o.thread)].tid);
          Instance& inst = instances[{tid, o.name, o.start_ns}];
          if (inst.kernels.empty()) {
            inst.first_op_delay = call.start_ns - o.start_ns;
            inst.first_runtime_delay = kernel.start_ns - call.start_ns;
          }
          inst.kernels.push_back(kernel.name);
        }
        // (operator name, kernel sequence) -> count and the sums of the first delays.
        struct Sequence {
          std::int64_t count = 0;
          double op_delay = 0, runtime_delay = 0;
        };
        std::map<std::pair<std::string_view, std::string>, Sequence> sequences;
        for (const auto& [key, inst] : instances) {
          std::string seq;
          for (std::size_t j = 0; j < inst.kernels.size(); ++j) {
            if (j > 0) seq += " -> ";
            seq += inst.kernels[j];
          }
          Sequence& s = sequences[{std::get<1>(key), std::move(seq)}];
          ++s.count;
          s.op_delay += internal::us(inst.first_op_delay);
          s.runtime_delay += internal::us(inst.first_runtime_delay);
        }
        for (const auto& [key, s] : sequences) {
          const auto n = static_cast<double>(s.count);
          add({rank, std::string(key.first), key.second, s.count, round3(s.op_delay / n),
               round3(s.runtime_delay / n)});
        }
      });
}

}  // namespace
}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr ReportMethod kMethods[] = {
    {.name = "get_aten_op_kernels_and_delay", .table = "aten_launch"}};

}  // namespace

const ReportEntry& aten_launch_report_row() {
  static const ReportEntry row{
      .kind = {.name = "aten-launch",
               .hta = "get_aten_op_kernels_and_delay",
               .summary = "per rank, ATen operator and the kernel sequence its instances "
                          "launched: how often, and the mean delays of the first launch from the "
                          "operator's start and from the launch call to the kernel",
               .reads_cpu_ranges = true,
               .methods = kMethods},
      .order = 120,
      .run = one_table<aten_op_kernels>};
  return row;
}

}  // namespace opscope::internal
