// opscope/result.h: what a finished recording window holds.
//
// When a Profiler stops recording, the per-thread buffers are drained once into a
// ProfilerResult: events by thread with their nesting, thread names, metadata and drop counts.
// It is immutable; analysis (key_averages, table) and every exporter read it, nothing re-reads
// the live buffers.
//
//   const opscope::ProfilerResult& r = profiler.result();
//   for (std::size_t i = 0; i < r.events().size(); ++i) {
//     const opscope::Event& e = r.events()[i];
//     for (std::int32_t c : r.children(i)) { ... }
//   }
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "opscope/lenses.h"
#include "opscope/types.h"
#include "opscope/value.h"

namespace opscope {

namespace util {
class FreshPages;  // the Builder's fresh events, mapped on a second core (src/util)
}

// What an event describes. Values reach files: never reuse one.
enum class EventKind : std::uint8_t {
  kRange = 0,       // began and ended on the same thread
  kAsyncRange = 1,  // ended on another thread; shown on the thread that began it, not nested
  kInstant = 2,     // a mark
  kMemory = 3,      // an allocation report (profile_memory): an instant with EventDetail::memory
  // GPU activity and the host calls that drive it, as Kineto's traces carry them (read from a
  // trace by read_trace(), later recorded by a GPU backend). They sit on their own threads:
  // GPU work on a stream's (ThreadInfo::stream), runtime and driver calls on the CPU thread
  // that made them. EventDetail::gpu holds their ids and launch parameters.
  kKernel = 4,         // "kernel"
  kMemcpy = 5,         // "gpu_memcpy"
  kMemset = 6,         // "gpu_memset"
  kRuntime = 7,        // "cuda_runtime" (also ROCm's "hip_runtime" via category)
  kDriver = 8,         // "cuda_driver"
  kGpuAnnotation = 9,  // "gpu_user_annotation": a user range as the GPU ran it
  // Anything else a trace held ("python_function", "cuda_sync", "ac2g" targets, ...): a
  // complete event kept with its category (ProfilerResult::category()) and args.
  kOther = 10,
};

// The trace category an event of this kind and scope has unless Event::category names
// another: "cpu_op", "user_annotation", "kernel", "gpu_memcpy", ...; "" for kOther.
std::string_view implied_category(EventKind kind, RecordScope scope);

// True for the kinds that run on a GPU (on a stream's thread).
inline bool is_gpu_kind(EventKind k) {
  return k == EventKind::kKernel || k == EventKind::kMemcpy || k == EventKind::kMemset ||
         k == EventKind::kGpuAnnotation;
}

// One allocation report.
struct MemoryUse {
  std::uint64_t address = 0;
  std::int64_t bytes = 0;  // negative on free
  std::int64_t total_allocated = 0;
  std::int64_t total_reserved = 0;
  Device device;
  MemoryCategory category = MemoryCategory::kUnknown;
  MemoryAction action = MemoryAction::kAllocate;
};

// One frame of a call stack: a native return address, or a labelled frame (a module
// "nn.Module: Linear_0", later a Python "file.py(12): fn") that needs no symbolizing.
struct StackFrame {
  std::uint64_t pc = 0;    // native frames
  std::string_view label;  // labelled frames (pc == 0)

  bool is_native() const { return label.empty(); }
  friend bool operator==(const StackFrame&, const StackFrame&) = default;
};

// The GPU side of an event: what Kineto's args say about a kernel, a copy, a memset, or the
// runtime call that launched one. -1 (or 0 for sizes) where the trace did not say.
struct GpuInfo {
  std::int64_t stream = -1;
  std::int64_t correlation = -1;    // the runtime call and the GPU work it launched share it
  std::int64_t external_id = -1;    // the CPU op the launch ran under ("External id")
  std::int64_t shared_memory = -1;  // bytes
  std::int64_t bytes = -1;          // copies and memsets
  std::int32_t device = -1;
  std::int32_t grid[3] = {0, 0, 0};
  std::int32_t block[3] = {0, 0, 0};
  std::int32_t registers_per_thread = -1;
};

// What lenses recorded about one event. Only events that have some carry one.
struct EventDetail {
  std::vector<RecordedValue> inputs;  // record_shapes / with_flops; empty: none given
  bool has_inputs = false;            // the range was given inputs (maybe zero of them)
  std::int32_t stack = -1;            // index into ProfilerResult::stacks(); -1: none
  std::string_view module_path;       // with_modules: "Model.Linear_0"; empty: none
  std::int64_t flops = -1;            // stated by the caller (RecordFunction::set_flops)
  MemoryUse memory;                   // for EventKind::kMemory
  GpuInfo gpu;                        // GPU kinds and kRuntime / kDriver
};

struct ThreadInfo {
  std::uint64_t tid = 0;  // OS thread id (gettid); for a GPU stream, the stream id
  std::string name;       // the thread's name when it first recorded
  // The process the thread belongs to; -1: the result's own (ProfilerResult::pid()). A GPU's
  // streams belong to a process per device, as in Kineto's traces (pid = device index).
  std::int64_t pid = -1;
  std::int32_t device = -1;  // GPU streams: the device; -1 for CPU threads
  std::int64_t stream = -1;  // GPU streams: the stream; -1 for CPU threads
};

// A process of a result that is not the recording one (GPU devices, other ranks' processes
// in a merged trace), named as the trace named it.
struct ProcessInfo {
  std::int64_t pid = 0;
  std::string name;
  std::string labels;  // "process_labels", e.g. "GPU 0"
  std::int64_t sort_index = -1;
};

// A flow arrow between two events (Kineto's "ac2g" launch arrows, "fwdbwd" autograd links).
struct Flow {
  std::string_view category;  // "ac2g", "fwdbwd", ...; stable for the result's lifetime
  std::int64_t id = 0;
  std::int32_t from = -1;  // event index (ProfilerResult::events()) of the start, -1: unmatched
  std::int32_t to = -1;    // of the end
};

// One recorded event. Times are nanoseconds since the Unix epoch (wall clock), converted from
// the hardware counter at stop.
struct Event {
  std::string_view name;           // stable for the result's lifetime
  const CallSite* site = nullptr;  // the macro's call site; nullptr for dynamic names
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t self_ns = 0;             // duration minus the durations of its children
  std::uint64_t handle = 0;             // record function id, also the correlation ("External id")
  std::int64_t sequence_nr = -1;        // -1 when not set
  std::uint64_t forward_thread_id = 0;  // 0 when not set
  std::int32_t thread = 0;              // index into ProfilerResult::threads()
  // The enclosing range on the same thread, or -1. Instants and memory events get the
  // innermost range open on their thread at that time, but are not linked as its children.
  std::int32_t parent = -1;
  std::int32_t first_child = -1;
  std::int32_t next_sibling = -1;
  std::int32_t detail = -1;      // index into ProfilerResult::details(); -1: none
  std::int32_t end_thread = -1;  // kAsyncRange: the thread that ended it; -1 otherwise
  // The args a trace gave the event that no field holds: an index for
  // ProfilerResult::other_args(); -1: none. Kept beside the event rather than in an
  // EventDetail, which most imported events would then need for this alone (168 bytes).
  std::int32_t other_args = -1;
  EventKind kind = EventKind::kRange;
  RecordScope scope = RecordScope::kFunction;
  // The trace category when it is not the one kind and scope imply: an index into
  // ProfilerResult::categories(); 0 means implied ("cpu_op", "kernel", ...).
  std::uint16_t category = 0;

  std::int64_t duration_ns() const { return end_ns - start_ns; }
};

// How much the window recorded and what it could not.
struct SessionStats {
  std::uint64_t events_recorded = 0;
  std::uint64_t events_dropped = 0;  // lost to the buffer limit
  // GPU activity records dropped as Kineto drops them: unfinished ones (a zero time) that a
  // forced flush handed over, and those that began outside the window.
  std::uint64_t gpu_records_discarded = 0;
  // Ranges begun in the window that had not ended when it stopped: still open, ended after
  // stop(), or ended in a later window. They appear in no window's events.
  std::uint64_t ranges_open_at_stop = 0;
  std::uint64_t buffer_bytes = 0;        // buffer memory the window used
  std::uint64_t buffer_limit_bytes = 0;  // ExperimentalConfig::buffer_limit_bytes
  // Options that were asked for but that this build does not record ("cuda" without a GPU
  // backend).
  std::vector<std::string> not_recorded;
};

class ProfilerResult {
 public:
  class Builder;

  // Events ordered by thread, then by start time, enclosing events before the ones they hold.
  const std::vector<Event>& events() const { return events_; }
  const std::vector<ThreadInfo>& threads() const { return threads_; }

  // The children of event `index` (or of the roots, index -1 is not allowed), in time order.
  class ChildRange;
  ChildRange children(std::size_t index) const;

  std::int64_t pid() const { return pid_; }
  // Start and end of the recording window, ns since the Unix epoch.
  std::int64_t start_time_ns() const { return start_time_ns_; }
  std::int64_t end_time_ns() const { return end_time_ns_; }
  // Metadata as (key, JSON text) pairs in the order they were added.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  const SessionStats& stats() const { return stats_; }
  const LensSet& lenses() const { return lenses_; }
  // Whether the Chrome trace gives ranges their "Call stack" (ExperimentalConfig::verbose);
  // the stacks stay in the result for tables and export_stacks either way.
  bool trace_call_stacks() const { return trace_call_stacks_; }

  // Lens data of an event, or nullptr when it has none.
  const EventDetail* detail(const Event& e) const {
    return e.detail < 0 ? nullptr : &details_[static_cast<std::size_t>(e.detail)];
  }
  const std::vector<EventDetail>& details() const { return details_; }
  // The args of an event read from a trace that no field of the model holds, as the JSON text
  // of an object ({"Ev Idx":3,...}); empty when there were none. The Chrome export writes
  // them back into the event's args, so what a trace carried is not lost.
  std::string_view other_args(const Event& e) const {
    return e.other_args < 0 ? std::string_view()
                            : other_args_[static_cast<std::size_t>(e.other_args)];
  }
  // Distinct call stacks, each innermost frame first.
  const std::vector<std::vector<StackFrame>>& stacks() const { return stacks_; }

  // Category names of Event::category; [0] is "" (implied by kind and scope).
  const std::vector<std::string>& categories() const { return categories_; }
  // The trace category of an event: its own, or the one its kind and scope imply.
  std::string_view category(const Event& e) const;
  // Processes other than the recording one (GPU devices, ...), for ThreadInfo::pid.
  const std::vector<ProcessInfo>& processes() const { return processes_; }
  const std::vector<Flow>& flows() const { return flows_; }
  // The rank of a distributed job (the trace's distributedInfo.rank); -1 when unknown.
  std::int64_t rank() const { return rank_; }
  // The trace's "deviceProperties" (a JSON array, one object per GPU), or empty.
  const std::string& device_properties() const { return device_properties_; }
  // The process of a thread (ThreadInfo::pid, or pid() when it has none).
  std::int64_t pid_of(const ThreadInfo& t) const { return t.pid >= 0 ? t.pid : pid_; }

 private:
  std::vector<Event> events_;
  std::vector<EventDetail> details_;
  std::vector<std::string_view> other_args_;  // texts in text_blocks_
  std::vector<std::vector<StackFrame>> stacks_;
  std::vector<std::string> categories_{""};
  std::vector<ProcessInfo> processes_;
  std::vector<Flow> flows_;
  std::int64_t rank_ = -1;
  std::string device_properties_;
  LensSet lenses_;
  bool trace_call_stacks_ = true;
  std::vector<ThreadInfo> threads_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  SessionStats stats_;
  std::deque<std::string> names_;  // storage for names the result owns
  // Storage for texts the result owns (keep_text): blocks filled one after the other, so that
  // a million short texts cost their bytes and not a string object and an allocation each.
  std::vector<std::unique_ptr<char[]>> text_blocks_;
  char* text_tail_ = nullptr;
  std::size_t text_left_ = 0;
  std::int64_t pid_ = 0;
  std::int64_t start_time_ns_ = 0;
  std::int64_t end_time_ns_ = 0;
};

class ProfilerResult::ChildRange {
 public:
  class Iterator {
   public:
    Iterator(const std::vector<Event>* events, std::int32_t i) : events_(events), i_(i) {}
    std::int32_t operator*() const { return i_; }
    Iterator& operator++() {
      i_ = (*events_)[static_cast<std::size_t>(i_)].next_sibling;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }

   private:
    const std::vector<Event>* events_;
    std::int32_t i_;
  };
  ChildRange(const std::vector<Event>* events, std::int32_t first)
      : events_(events), first_(first) {}
  Iterator begin() const { return {events_, first_}; }
  Iterator end() const { return {events_, -1}; }

 private:
  const std::vector<Event>* events_;
  std::int32_t first_;
};

inline ProfilerResult::ChildRange ProfilerResult::children(std::size_t index) const {
  return {&events_, events_[index].first_child};
}

// Assembles a ProfilerResult: the session uses it after draining the buffers, tests and
// importers use it to build results by hand. Events may be added in any order; finish() sorts
// them and computes parents, children and self times per thread.
class ProfilerResult::Builder {
 public:
  Builder();

  // Adds a thread and returns its index for Event::thread.
  std::int32_t add_thread(ThreadInfo info);
  // The index of the thread added with this OS tid and pid (-1: the result's own process), or
  // -1 when none was: a later backend finds the threads an earlier one added (the CUPTI
  // backend's runtime calls go on the threads whose ranges launched them).
  std::int32_t find_thread(std::uint64_t tid, std::int64_t pid = -1) const;
  // Copies a name into the result and returns a view that lives as long as the result.
  std::string_view keep(std::string_view name);
  // Adds an event. Its name must outlive the result (a string literal, an interned name, or a
  // view returned by keep()). parent/children/self_ns are computed by finish().
  void add_event(const Event& event);
  void reserve(std::size_t events);
  // Room for about `events` events and as many details, not yet touched (a trace reader's
  // estimate from the file's size).
  void reserve_for_import(std::size_t events);
  // Calls `fn` on every event added so far (for attaching side data before finish(); it must
  // not change an event's thread).
  template <typename Fn>
  void apply_links(Fn&& fn) {
    for (Event& e : result_->events_) fn(e);
  }
  // Copies `text` into the result and returns the copy, stable for the result's lifetime.
  std::string_view keep_text(std::string_view text);
  // Adds lens data and returns its index for Event::detail.
  std::int32_t add_detail(EventDetail detail);
  // Keeps the JSON text of an args object (see ProfilerResult::other_args) and returns its
  // index for Event::other_args; -1 for an empty text.
  std::int32_t add_other_args(std::string_view json_object);
  // Adds a distinct stack (innermost first) and returns its index for EventDetail::stack.
  std::int32_t add_stack(std::vector<StackFrame> frames);
  void set_lenses(const LensSet& lenses);
  void set_trace_call_stacks(bool on);
  void add_metadata(std::string key, std::string json_value);
  void set_window(std::int64_t start_ns, std::int64_t end_ns);
  void set_pid(std::int64_t pid);
  void set_rank(std::int64_t rank);
  // JSON text of an array of device objects, written as the trace's "deviceProperties".
  void set_device_properties(std::string json_array);
  // The index of a category name for Event::category (added once).
  std::uint16_t category(std::string_view name);
  void add_process(ProcessInfo process);
  // A flow between the events at two points: each end is the innermost event of `thread`
  // that holds `time_ns` (finish() resolves them; an end no event holds stays -1).
  struct FlowEnd {
    std::int32_t thread = -1;
    std::int64_t time_ns = 0;
  };
  void add_flow(std::string_view category, std::int64_t id, FlowEnd from, FlowEnd to);
  // Room for `flows` add_flow() calls (an importer knows how many it has).
  void reserve_flows(std::size_t flows);
  SessionStats& stats();

  // Sorts, nests, and hands over the result. The builder is empty afterwards.
  std::shared_ptr<const ProfilerResult> finish();

 private:
  void resolve_flows();
  struct PendingFlow {
    std::string_view category;
    std::int64_t id;
    FlowEnd from;
    FlowEnd to;
  };
  std::shared_ptr<ProfilerResult> result_;
  std::vector<PendingFlow> flows_;
  std::vector<std::string_view> flow_categories_;  // kept, one of each
  // The categories and flow categories by name, once there are more than a few (a search of a
  // few beats hashing; a hostile trace may have one per event): views kept by keep().
  std::unordered_map<std::string_view, std::uint16_t> category_index_;
  std::unordered_map<std::string_view, std::uint32_t> flow_category_index_;
  // Of the events added, for finish()'s sort: whether their threads never decreased, the
  // last one's thread and the largest.
  bool grouped_ = true;
  std::int32_t last_thread_ = 0;
  std::int32_t max_thread_ = 0;
  // While reserve()'s fresh events are written: their pages mapped from the far end on a
  // second thread, stopped before the events can move. Declared after result_, so destroyed
  // first.
  std::shared_ptr<util::FreshPages> fresh_;
};

}  // namespace opscope
