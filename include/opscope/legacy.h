// opscope/legacy.h: the legacy profiler, the thread-local API PyTorch's autograd profiler had
// before torch.profiler, on the same collector as opscope::Profiler.
//
// Enable on a thread, run work, disable on the same thread to get the events as per-thread
// lists of push/pop/mark/memory events:
//
//   opscope::enable_profiler_legacy({.state = opscope::LegacyProfilerState::kCPU});
//   run_model();                     // ranges on this thread, and on threads given its
//                                    // ThreadLocalState (opscope::wrap), are recorded
//   opscope::ThreadEventLists lists = opscope::disable_profiler_legacy();
//
// or let RecordProfile do both and write the legacy JSON trace:
//
//   { opscope::RecordProfile guard("trace.json"); run_model(); }
//
// Events recorded by another process or machine travel as bytes (serialize_legacy_events) and
// join the running profiler with add_event_list; legacy_result() turns the lists into a
// ProfilerResult for key_averages() tables and Chrome traces.
//
// One recording session runs per process at a time: a legacy profiler and a started
// opscope::Profiler exclude each other (the second one to start gets an opscope::Error).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "opscope/result.h"
#include "opscope/value.h"

namespace opscope {

// How the legacy profiler records. Values reach serialized events: never reuse one.
enum class LegacyProfilerState : std::uint8_t {
  kDisabled = 0,
  kCPU = 1,   // CPU ranges, marks and (with profile_memory) allocation reports
  kCUDA = 2,  // as kCPU, and each range is also timed on the GPU with CUDA events (has_cuda);
              // refused with an opscope::Error where that cannot be done (no driver or device)
  kNVTX = 3,  // every range is forwarded to NVTX (nvtxRangePush/Pop) for Nsight; nothing is
              // recorded here. Needs a CUDA device: refused with an opscope::Error otherwise.
};

struct LegacyProfilerConfig {
  LegacyProfilerState state = LegacyProfilerState::kCPU;
  // record_shapes fills LegacyEvent::shapes() of ranges given inputs (PyTorch's
  // report_input_shapes); profile_memory adds MemoryAlloc events from report_memory_usage;
  // with_stack fills LegacyEvent::stack(); with_flops LegacyEvent::flops(); with_modules puts
  // module frames in stacks.
  LensSet lenses = {};
};

// Values reach serialized events: never reuse one.
enum class LegacyEventKind : std::uint8_t {
  kMark = 0,
  kPushRange = 1,
  kPopRange = 2,
  kMemoryAlloc = 3,
};

// One event of the legacy profiler: a mark, one end of a range, or an allocation report.
// A range is a PushRange and a PopRange with the same (handle, node id); both are in the list
// of the thread that began the range, the PopRange's thread_id() is the thread that ended it.
class LegacyEvent {
 public:
  LegacyEvent(LegacyEventKind kind, std::string name, std::uint64_t thread_id, std::int64_t cpu_ns,
              std::uint64_t handle = 0, std::vector<std::vector<std::int64_t>> shapes = {},
              std::int64_t node_id = -1)
      : kind_(kind),
        name_(std::move(name)),
        thread_id_(thread_id),
        handle_(handle),
        node_id_(node_id),
        cpu_ns_(cpu_ns),
        shapes_(std::move(shapes)) {}

  LegacyEventKind kind() const { return kind_; }
  // "mark", "push", "pop" or "memory_alloc".
  std::string_view kind_str() const;
  const std::string& name() const { return name_; }
  std::uint64_t thread_id() const { return thread_id_; }
  std::uint64_t handle() const { return handle_; }
  // The node (process, machine) that recorded the event; -1 unless set_default_node_id().
  std::int64_t node_id() const { return node_id_; }
  void set_node_id(std::int64_t id) { node_id_ = id; }
  // Wall-clock time of the event, ns since the Unix epoch, on the recording node's clock.
  std::int64_t cpu_ns() const { return cpu_ns_; }
  // Microseconds from this event to `end`.
  double cpu_elapsed_us(const LegacyEvent& end) const {
    return static_cast<double>(end.cpu_ns_ - cpu_ns_) / 1000.0;
  }
  // MemoryAlloc: the bytes reported (negative when freed), on the CPU or a CUDA device.
  std::int64_t cpu_memory_usage() const { return cpu_memory_usage_; }
  std::int64_t cuda_memory_usage() const { return cuda_memory_usage_; }
  void set_memory_usage(std::int64_t bytes, Device device);
  // kCUDA: when the GPU reached the CUDA event recorded at this end of the range, on the CPU
  // clock, and its device. has_cuda() is false for ranges not timed (kCPU, or a thread with no
  // current CUDA context) and for marks and memory events.
  bool has_cuda() const { return cuda_recorded_; }
  std::int32_t device() const { return device_; }
  std::int64_t cuda_us() const { return cuda_ns_ < 0 ? -1 : cuda_ns_ / 1000; }
  std::int64_t cuda_ns() const { return cuda_ns_; }  // -1 when not timed
  void set_cuda(std::int32_t device, std::int64_t cuda_ns) {
    cuda_recorded_ = true;
    device_ = device;
    cuda_ns_ = cuda_ns;
  }
  // Microseconds the GPU took from this event to `end` (PyTorch's cudaElapsedUs). Throws
  // opscope::Error when either was not timed, or they were timed on different devices.
  double cuda_elapsed_us(const LegacyEvent& end) const;

  const std::vector<std::vector<std::int64_t>>& shapes() const { return shapes_; }
  std::int64_t sequence_nr() const { return sequence_nr_; }
  void set_sequence_nr(std::int64_t n) { sequence_nr_ = n; }
  std::uint64_t fwd_thread_id() const { return fwd_thread_id_; }
  void set_fwd_thread_id(std::uint64_t tid) { fwd_thread_id_ = tid; }
  RecordScope scope() const { return scope_; }
  void set_scope(RecordScope s) { scope_ = s; }
  // FLOPs of a PushRange (with_flops); -1 when unknown.
  std::int64_t flops() const { return flops_; }
  void set_flops(std::int64_t f) { flops_ = f; }
  // Call stack of a PushRange (with_stack), innermost frame first, as "file(line): function".
  const std::vector<std::string>& stack() const { return stack_; }
  void set_stack(std::vector<std::string> frames) { stack_ = std::move(frames); }
  bool is_async() const { return is_async_; }
  void set_async(bool a) { is_async_ = a; }
  // True for events that arrived through from_value (another process or machine).
  bool is_remote() const { return is_remote_; }

  // The portable form: a list of the twelve fields PyTorch's LegacyEvent::toIValue has, in
  // its order (kind, name, thread id, handle, node id, CPU memory, CPU ns, CUDA recorded,
  // CUDA memory, CUDA device, CUDA us, shapes). Other fields stay on this node.
  RecordedValue to_value() const;
  // The inverse. Throws opscope::Error naming the field when `value` is not such a list.
  static LegacyEvent from_value(const RecordedValue& value);

 private:
  LegacyEventKind kind_;
  std::string name_;
  std::uint64_t thread_id_ = 0;
  std::uint64_t handle_ = 0;
  std::int64_t node_id_ = -1;
  std::int64_t cpu_ns_ = 0;
  std::int64_t cpu_memory_usage_ = 0;
  std::int64_t cuda_memory_usage_ = 0;
  std::int32_t device_ = -1;
  bool cuda_recorded_ = false;
  std::int64_t cuda_ns_ = -1;
  std::vector<std::vector<std::int64_t>> shapes_;
  std::int64_t sequence_nr_ = -1;
  std::uint64_t fwd_thread_id_ = 0;
  RecordScope scope_ = RecordScope::kFunction;
  std::int64_t flops_ = -1;
  std::vector<std::string> stack_;
  bool is_async_ = false;
  bool is_remote_ = false;
};

// Events by thread: one list per recording thread, in time order, then one list per
// (node id, thread) of remote events added with add_event_list.
using ThreadEventLists = std::vector<std::vector<LegacyEvent>>;

struct ProfilerDisableOptions {
  // Remove the profiler from the calling thread. False leaves it installed (for a
  // ThreadLocalStateGuard that restores the thread later); recording stops either way.
  bool cleanup_tls_state = true;
  // Return the events. False discards them and returns no lists.
  bool consolidate = true;
};

// Starts the legacy profiler on the calling thread, which records from now on, as do the
// threads that install its ThreadLocalState. Records a "__start_profile" mark.
// Throws opscope::Error: "Profiler is already enabled on this thread"; when another session
// records in this process; for kDisabled; for kNVTX without CUDA (naming the reason).
void enable_profiler_legacy(const LegacyProfilerConfig& config = {});
// Stops it: records a "__stop_profile" mark and returns the events (none in NVTX mode).
// Throws opscope::Error "Can't disable profiler when it's not running" when the calling
// thread has no legacy profiler.
ThreadEventLists disable_profiler_legacy(ProfilerDisableOptions options = {});
// Whether the calling thread records into a legacy profiler.
bool profiler_legacy_enabled();

// Merges events recorded elsewhere into the calling thread's legacy profiler; disable returns
// them, one list per (node id, thread). Throws when no legacy profiler is enabled here.
void add_event_list(std::vector<LegacyEvent> events);
// The node id given to events recorded by this process (-1 by default). Set it on each
// process of a distributed job so merged events say where they come from.
void set_default_node_id(std::int64_t id);
std::int64_t default_node_id();

// Remote events as bytes: a versioned, self-describing encoding of their portable values.
std::string serialize_legacy_events(std::span<const LegacyEvent> events);
// The inverse. Throws opscope::Error on malformed or truncated input, naming the event and
// the field.
std::vector<LegacyEvent> deserialize_legacy_events(std::string_view bytes);

// The events as a ProfilerResult: every matched push/pop becomes a range (async when its pop
// came from another thread), marks become instants, MemoryAlloc events memory events. Each
// list becomes a thread, remote ones named "node <id> thread <tid>". Unmatched pops are left
// out and counted in SessionStats::events_dropped.
std::shared_ptr<const ProfilerResult> legacy_result(const ThreadEventLists& lists);

// Writes the legacy JSON trace: a JSON array with one complete ("ph": "X") event per matched
// push/pop, "ts" and "dur" in microseconds from the "__start_profile" mark, "pid" the string
// "CPU Functions" (as PyTorch's RecordProfile writes it). Throws opscope::Error, before
// writing anything, when there is no "__start_profile" mark or a pop matches no push.
void write_legacy_trace(std::ostream& out, const ThreadEventLists& lists);

// Enables the legacy profiler (kCPU) for its lifetime and writes the legacy JSON trace when
// destroyed: to the stream, or to the file (written under a temporary name and renamed, so a
// failure leaves no half-written file). The destructor never throws: failures go to the
// warning handler (opscope/error.h) with the reason.
class RecordProfile {
 public:
  explicit RecordProfile(std::ostream& out);
  // Throws opscope::Error when the file's directory does not exist or is not writable.
  explicit RecordProfile(const std::string& filename);
  // Throws like enable_profiler_legacy (a profiler already running here, ...).
  ~RecordProfile();
  RecordProfile(const RecordProfile&) = delete;
  RecordProfile& operator=(const RecordProfile&) = delete;

 private:
  struct Output;  // the stream, or the file's sink
  std::unique_ptr<Output> output_;
};

}  // namespace opscope
