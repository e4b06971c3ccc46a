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
#include <utility>
#include <vector>

#include "opscope/lenses.h"
#include "opscope/memory.h"
#include "opscope/record_function.h"
#include "opscope/value.h"

namespace opscope {

// What an event describes. Values reach files: never reuse one.
enum class EventKind : std::uint8_t {
  kRange = 0,       // began and ended on the same thread
  kAsyncRange = 1,  // ended on another thread; shown on the thread that began it, not nested
  kInstant = 2,     // a mark
  kMemory = 3,      // an allocation report (profile_memory): an instant with EventDetail::memory
};

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

// What lenses recorded about one event. Only events that have some carry one.
struct EventDetail {
  std::vector<RecordedValue> inputs;  // record_shapes / with_flops; empty: none given
  bool has_inputs = false;            // the range was given inputs (maybe zero of them)
  std::int32_t stack = -1;            // index into ProfilerResult::stacks(); -1: none
  std::string_view module_path;       // with_modules: "Model.Linear_0"; empty: none
  std::int64_t flops = -1;            // stated by the caller (RecordFunction::set_flops)
  MemoryUse memory;                   // for EventKind::kMemory
};

struct ThreadInfo {
  std::uint64_t tid = 0;  // OS thread id (gettid)
  std::string name;       // the thread's name when it first recorded
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
  EventKind kind = EventKind::kRange;
  RecordScope scope = RecordScope::kFunction;

  std::int64_t duration_ns() const { return end_ns - start_ns; }
};

// How much the window recorded and what it could not.
struct SessionStats {
  std::uint64_t events_recorded = 0;
  std::uint64_t events_dropped = 0;      // lost to the buffer limit
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
  // Distinct call stacks, each innermost frame first.
  const std::vector<std::vector<StackFrame>>& stacks() const { return stacks_; }

 private:
  std::vector<Event> events_;
  std::vector<EventDetail> details_;
  std::vector<std::vector<StackFrame>> stacks_;
  LensSet lenses_;
  bool trace_call_stacks_ = true;
  std::vector<ThreadInfo> threads_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  SessionStats stats_;
  std::deque<std::string> names_;  // storage for names the result owns
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
  // Copies a name into the result and returns a view that lives as long as the result.
  std::string_view keep(std::string_view name);
  // Adds an event. Its name must outlive the result (a string literal, an interned name, or a
  // view returned by keep()). parent/children/self_ns are computed by finish().
  void add_event(const Event& event);
  void reserve(std::size_t events);
  // Calls `fn` on every event added so far (for attaching side data before finish()).
  template <typename Fn>
  void apply_links(Fn&& fn) {
    for (Event& e : result_->events_) fn(e);
  }
  // Adds lens data and returns its index for Event::detail.
  std::int32_t add_detail(EventDetail detail);
  // Adds a distinct stack (innermost first) and returns its index for EventDetail::stack.
  std::int32_t add_stack(std::vector<StackFrame> frames);
  void set_lenses(const LensSet& lenses);
  void set_trace_call_stacks(bool on);
  void add_metadata(std::string key, std::string json_value);
  void set_window(std::int64_t start_ns, std::int64_t end_ns);
  void set_pid(std::int64_t pid);
  SessionStats& stats();

  // Sorts, nests, and hands over the result. The builder is empty afterwards.
  std::shared_ptr<const ProfilerResult> finish();

 private:
  std::shared_ptr<ProfilerResult> result_;
};

}  // namespace opscope
