// opscope/key_averages.h: operator tables, as torch.profiler's key_averages().table().
//
//   opscope::KeyAverages avg = opscope::key_averages(profiler.result());
//   std::cout << avg.table({.sort_by = "self_cpu_time_total", .row_limit = 10});
//
// Columns, units and layout follow PyTorch 1.13 (../shared/reference/pytorch-1.13/table_*.txt):
// times in us/ms/s with three decimals, percentages of the summed self CPU time, memory in
// b/Kb/Mb/Gb, FLOPs auto-scaled. Unlike PyTorch, "Source Location" and FLOPs values stay in
// their own columns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "opscope/result.h"

namespace opscope {

// The statistics of all events sharing a key (name, and input shapes / stack when grouped).
// Times are nanoseconds.
struct FunctionEventAvg {
  std::string key;
  std::int64_t count = 0;
  std::int64_t cpu_time_total_ns = 0;       // sum of durations
  std::int64_t self_cpu_time_total_ns = 0;  // sum of self times
  // Bytes of allocation reports (profile_memory lens) inside the events, children included or
  // not (self), on the CPU and on CUDA devices, as torch 1.13 splits them.
  std::int64_t cpu_memory_usage = 0;
  std::int64_t self_cpu_memory_usage = 0;
  std::int64_t cuda_memory_usage = 0;
  std::int64_t self_cuda_memory_usage = 0;
  std::int64_t flops = 0;  // with_flops lens
  // GPU time (kernels, copies, sets), as torch 1.13 counts it with Kineto: an operator's is the
  // GPU work launched inside it ("External id" = its handle), its children's included
  // (cuda_time_total) or not (self_cuda_time_total); a row of GPU work itself (is_device) has
  // its durations here and no CPU time.
  std::int64_t cuda_time_total_ns = 0;
  std::int64_t self_cuda_time_total_ns = 0;
  bool is_device = false;          // GPU work (torch's DeviceType.CUDA rows)
  std::string input_shapes;        // "[[32, 64], [128, 64]]" when grouped by shape
  std::vector<std::string> stack;  // innermost first, when grouped by stack
  std::int64_t node_id = -1;       // remote events; -1 for local
  // The table's "Self CPU %": this key's self time as a percentage of the self time of all
  // the keys averaged with it (key_averages sets it; 0 in rows built by hand).
  double self_cpu_percent_total = 0;
  bool is_async = false;  // some member ended on another thread
  // Some member had no enclosing event (Event::parent == -1). table()'s
  // top_level_events_only shows only these rows; rows built by hand are top level by default.
  bool top_level = true;

  // Adds the statistics of `other` to these (torch's FunctionEventAvg.add); an empty row takes
  // its key.
  void add(const FunctionEventAvg& other) {
    if (count == 0) key = other.key;
    count += other.count;
    cpu_time_total_ns += other.cpu_time_total_ns;
    self_cpu_time_total_ns += other.self_cpu_time_total_ns;
    cpu_memory_usage += other.cpu_memory_usage;
    self_cpu_memory_usage += other.self_cpu_memory_usage;
    cuda_memory_usage += other.cuda_memory_usage;
    self_cuda_memory_usage += other.self_cuda_memory_usage;
    flops += other.flops;
    cuda_time_total_ns += other.cuda_time_total_ns;
    self_cuda_time_total_ns += other.self_cuda_time_total_ns;
    is_async |= other.is_async;
    is_device |= other.is_device;
  }

  double cpu_time_avg_ns() const {
    return count == 0 ? 0.0 : static_cast<double>(cpu_time_total_ns) / static_cast<double>(count);
  }
  double cuda_time_avg_ns() const {
    return count == 0 ? 0.0 : static_cast<double>(cuda_time_total_ns) / static_cast<double>(count);
  }
};

struct TableOptions {
  // Descending sort key; empty keeps first-seen order. One of: cpu_time, cpu_time_total,
  // self_cpu_time_total, count, cpu_memory_usage, self_cpu_memory_usage, flops, cuda_time,
  // cuda_time_total, self_cuda_time_total, cuda_memory_usage, self_cuda_memory_usage.
  // Anything else throws opscope::Error listing these.
  std::string sort_by = {};
  int row_limit = 100;  // rows shown; negative shows all
  int max_name_column_width = 55;
  int max_src_column_width = 75;
  int max_shapes_column_width = 80;
  std::string header = {};  // printed above the table when not empty
  // "s", "ms" or "us": every time in that unit. Empty: each time picks its own (PyTorch 1.13).
  // Anything else throws opscope::Error.
  std::string time_unit = {};
  // Shows only rows whose FunctionEventAvg::top_level is set, under a banner saying so.
  bool top_level_events_only = false;
};

class KeyAverages {
 public:
  KeyAverages() = default;
  explicit KeyAverages(std::vector<FunctionEventAvg> rows) : rows_(std::move(rows)) {}

  const std::vector<FunctionEventAvg>& rows() const { return rows_; }
  std::vector<FunctionEventAvg>& rows() { return rows_; }

  // Renders the table. Throws opscope::Error for an unknown sort key or a non-positive width.
  std::string table(const TableOptions& options = {}) const;

  // Columns of lenses: shown when the window recorded them.
  bool profile_memory = false;
  bool with_flops = false;

 private:
  std::vector<FunctionEventAvg> rows_;
};

// Groups the result's events by name (and by input shapes and the innermost
// `group_by_stack_n` stack frames when asked), in order of first appearance. The steps'
// "ProfilerStep#N" ranges share the key "ProfilerStep*", as in PyTorch. Rows are made of
// ranges, runtime and driver calls, GPU work, and (with the memory lens) the allocation
// reports made outside any range, which share the row "[memory]" as in torch 1.13.
KeyAverages key_averages(const ProfilerResult& result, bool group_by_input_shape = false,
                         int group_by_stack_n = 0);
// The same over some of the events: those whose index into result.events() is listed.
KeyAverages key_averages(const ProfilerResult& result, std::span<const std::int32_t> events,
                         bool group_by_input_shape = false, int group_by_stack_n = 0);

// The key an event is averaged under: its name, or "ProfilerStep*" for a "ProfilerStep#N"
// (torch.autograd.profiler_util's _rewrite_name with the wildcard).
std::string_view row_name(std::string_view name);

// Bytes of allocation reports inside each event (indexed like result.events()), its children's
// included (`total`) and made directly in it (`self`), on the CPU and on CUDA devices; an
// allocation report's own bytes are both its total and its self. Empty without the memory lens.
struct EventMemory {
  struct Bytes {
    std::vector<std::int64_t> total;
    std::vector<std::int64_t> self;
  };
  Bytes cpu;
  Bytes cuda;
};
EventMemory event_memory(const ProfilerResult& result);

// GPU time of each event (indexed like result.events()): for an operator (a range), the
// durations of the kernels, copies and sets launched inside it (their "External id" is its
// handle), its children's included (`total`) or not (`self`); for GPU work, its own duration
// (both). Empty when the result holds no GPU work.
struct EventCuda {
  std::vector<std::int64_t> total;
  std::vector<std::int64_t> self;
};
EventCuda event_cuda(const ProfilerResult& result);

// Which GPU events make up each range's CUDA time in event_cuda(): the kernels, copies and sets
// whose "External id" is the range's handle; or, in a result without any (`spans`), the
// range's span from CUDA-event timing (ExperimentalConfig::cuda_event_timing), a
// kGpuAnnotation. Each link is (range index, GPU event index) into result.events(), in the
// order of the GPU events.
struct GpuAttribution {
  bool spans = false;
  std::vector<std::pair<std::int32_t, std::int32_t>> links;
};
GpuAttribution gpu_attribution(const ProfilerResult& result);

namespace analysis {
class Symbolizer;  // src/analysis/symbolizer.h
}

// Single events as text and as table rows, for a view that shows events one by one (torch's
// EventList and FunctionEvent; the Python package). Native stack frames are symbolized once per
// address and kept for the life of the object, which reads /proc when it first needs to. Not
// thread-safe: one per result, used under its owner's lock. `result` must outlive it.
class EventTexts {
 public:
  explicit EventTexts(const ProfilerResult& result);
  ~EventTexts();
  EventTexts(const EventTexts&) = delete;
  EventTexts& operator=(const EventTexts&) = delete;

  // The frames of `event`'s stack as text, innermost first, at most `max_frames` (0: all);
  // opscope's own recording frames and the outermost unnamed ones left out. Empty without a
  // stack.
  std::vector<std::string> stack(const Event& event, std::size_t max_frames = 0);
  // One row per listed event (count 1), in the given order, as events().table() shows them;
  // `memory` and `cuda` are the result's event_memory() and event_cuda(). Throws
  // opscope::Error for an index outside the result.
  std::vector<FunctionEventAvg> rows(std::span<const std::int32_t> events,
                                     const EventMemory& memory, const EventCuda& cuda);

 private:
  const ProfilerResult& result_;
  std::unique_ptr<analysis::Symbolizer> symbolizer_;
};

// "Input type" of a recorded input: the dtype of a tensor, "Scalar", "ScalarList",
// "TensorList", "GenericList", "String", or "" for None.
std::string input_type_text(const RecordedValue& v);
// "Concrete Inputs": the value of a scalar or string ("3", "0.5", "True"), else "".
std::string concrete_input_text(const RecordedValue& v);

// The table's time format: "8.840ms", "346.000us", "1.200s". Exposed for tools and tests.
std::string format_time_us(double time_us);
// The table's memory format: "17.25 Kb", "-12 b".
std::string format_memory(std::int64_t bytes);

}  // namespace opscope
