// The legacy profiler: a thread-limited recording window of the session layer, turned into
// per-thread push/pop/mark/memory lists when it stops.
#include "opscope/legacy.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <unordered_map>

#include "analysis/flops.h"
#include "analysis/stacks.h"
#include "analysis/symbolizer.h"
#include "collect/collector.h"
#include "export/sink.h"
#include "json/json_writer.h"
#include "opscope/error.h"
#include "opscope/key_averages.h"
#include "opscope/mark.h"
#include "opscope/observer.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "profiler/nvtx.h"
#include "record/session_token.h"
#include "session/recorder.h"

namespace opscope {
namespace {

struct LegacySession {
  LegacyProfilerConfig config;
  session::Recorder recorder;        // kCPU, kCUDA
  CallbackHandle nvtx_callback = 0;  // kNVTX
  std::uint64_t enabled_on_tid = 0;
  std::atomic<bool> running{true};
  std::mutex remote_mu;
  std::vector<std::vector<LegacyEvent>> remote;  // as add_event_list received them
};

std::mutex g_mu;                           // guards g_session
std::shared_ptr<LegacySession> g_session;  // the process's running legacy profiler
std::atomic<std::int64_t> g_node_id{-1};

// The legacy profiler the calling thread records into, or nullptr. This file is the only
// writer of thread session tokens (record/session_token.h), so a token is a LegacySession.
LegacySession* thread_session() {
  const auto& token = record::thread_session();
  auto* s = static_cast<LegacySession*>(const_cast<void*>(token.get()));
  return s != nullptr && s->running.load() ? s : nullptr;
}

bool records_on_cpu(LegacyProfilerState s) {
  return s == LegacyProfilerState::kCPU || s == LegacyProfilerState::kCUDA;
}

// ---------------------------------------------------------------------------------------------
// A window's result as per-thread event lists.

std::vector<std::vector<std::int64_t>> shapes_of(const EventDetail* d) {
  std::vector<std::vector<std::int64_t>> shapes;
  if (d == nullptr || !d->has_inputs) return shapes;
  shapes.reserve(d->inputs.size());
  for (const RecordedValue& v : d->inputs) shapes.push_back(v.sizes);  // non-tensors: []
  return shapes;
}

class ListBuilder {
 public:
  ListBuilder(const ProfilerResult& result, const LegacyProfilerConfig& config)
      : result_(result), config_(config), node_(g_node_id.load()) {
    // kCUDA: each timed range's span on its GPU (the same matching that gives tables their
    // CUDA time).
    if (const GpuAttribution a = gpu_attribution(result); a.spans) {
      for (const auto& [range, span] : a.links) span_of_.emplace(range, span);
    }
  }

  ThreadEventLists build() {
    // Ordered first as small keys, then each event is built once, in its final place: the
    // events are large (names, shapes, stacks), and building them in a scratch list to sort
    // them doubled the memory a disable writes.
    const auto& events = result_.events();
    std::vector<std::vector<Key>> per_thread(result_.threads().size());
    for (std::size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      auto& keys = per_thread[static_cast<std::size_t>(e.thread)];
      const auto index = static_cast<std::uint32_t>(i);
      switch (e.kind) {
        case EventKind::kRange:
          // Nested ranges are emitted from their roots, depth first, so that a child's push
          // and pop fall between its parent's even when the times are equal.
          if (e.parent < 0) emit_range_tree(index, keys);
          break;
        case EventKind::kAsyncRange:
          keys.push_back({e.start_ns, index, What::kPush});
          keys.push_back({e.end_ns, index, What::kPop});
          break;
        case EventKind::kInstant:
        case EventKind::kMemory:
          keys.push_back({e.start_ns, index, What::kPoint});
          break;
        case EventKind::kKernel:
        case EventKind::kMemcpy:
        case EventKind::kMemset:
        case EventKind::kRuntime:
        case EventKind::kDriver:
        case EventKind::kGpuAnnotation:
        case EventKind::kOther:
          // Not the legacy profiler's: its windows record CPU ranges, marks and memory only
          // (the seed's per-thread lists hold nothing else).
          break;
      }
    }
    ThreadEventLists lists;
    for (auto& keys : per_thread) {
      if (keys.empty()) continue;
      // Range trees come first and in order; the rest joins them by time, after range
      // events of the same nanosecond.
      std::stable_sort(keys.begin(), keys.end(),
                       [](const Key& a, const Key& b) { return a.ns < b.ns; });
      std::vector<LegacyEvent>& list = lists.emplace_back();
      list.reserve(keys.size());
      for (const Key& k : keys) {
        const Event& e = events[k.event];
        switch (k.what) {
          case What::kPush:
            list.push_back(push(e));
            break;
          case What::kPop:
            list.push_back(pop(e));
            break;
          case What::kPoint:
            list.push_back(point(e));
            break;
        }
      }
    }
    return lists;
  }

 private:
  enum class What : std::uint8_t { kPush, kPop, kPoint };
  struct Key {
    std::int64_t ns;
    std::uint32_t event;
    What what;
  };

  std::uint64_t tid(std::int32_t thread) const {
    return thread < 0 ? 0 : result_.threads()[static_cast<std::size_t>(thread)].tid;
  }

  void emit_range_tree(std::uint32_t root, std::vector<Key>& keys) {
    const Event& e = result_.events()[root];
    keys.push_back({e.start_ns, root, What::kPush});
    for (std::int32_t c : result_.children(root)) {
      emit_range_tree(static_cast<std::uint32_t>(c), keys);
    }
    keys.push_back({e.end_ns, root, What::kPop});
  }

  // A mark or an allocation report.
  LegacyEvent point(const Event& e) const {
    if (e.kind == EventKind::kInstant) {
      return LegacyEvent(LegacyEventKind::kMark, std::string(e.name), tid(e.thread), e.start_ns, 0,
                         {}, node_);
    }
    LegacyEvent m(LegacyEventKind::kMemoryAlloc, "", tid(e.thread), e.start_ns, 0, {}, node_);
    if (const EventDetail* d = result_.detail(e)) {
      m.set_memory_usage(d->memory.bytes, d->memory.device);
    }
    return m;
  }

  LegacyEvent push(const Event& e) {
    const EventDetail* d = result_.detail(e);
    LegacyEvent p(LegacyEventKind::kPushRange, std::string(e.name), tid(e.thread), e.start_ns,
                  e.handle, config_.lenses.record_shapes ? shapes_of(d) : decltype(shapes_of(d)){},
                  node_);
    if (const Event* span = gpu_span(e)) set_cuda(p, *span, span->start_ns);
    p.set_sequence_nr(e.sequence_nr);
    p.set_fwd_thread_id(e.forward_thread_id);
    p.set_scope(e.scope);
    p.set_async(e.kind == EventKind::kAsyncRange);
    if (config_.lenses.with_flops) p.set_flops(analysis::flops_of(result_, e));
    if (config_.lenses.with_stack && d != nullptr && d->stack >= 0) {
      p.set_stack(analysis::stack_text(result_, e, symbolizer_));
    }
    return p;
  }

  LegacyEvent pop(const Event& e) {
    const std::int32_t ended_on = e.kind == EventKind::kAsyncRange ? e.end_thread : e.thread;
    LegacyEvent p(LegacyEventKind::kPopRange, "", tid(ended_on), e.end_ns, e.handle, {}, node_);
    p.set_async(e.kind == EventKind::kAsyncRange);
    if (const Event* span = gpu_span(e)) set_cuda(p, *span, span->end_ns);
    return p;
  }

  const Event* gpu_span(const Event& range) const {
    if (span_of_.empty()) return nullptr;
    const auto& events = result_.events();
    const auto it = span_of_.find(static_cast<std::int32_t>(&range - events.data()));
    return it != span_of_.end() ? &events[static_cast<std::size_t>(it->second)] : nullptr;
  }
  void set_cuda(LegacyEvent& p, const Event& span, std::int64_t ns) const {
    p.set_cuda(result_.detail(span)->gpu.device, ns);
  }

  const ProfilerResult& result_;
  const LegacyProfilerConfig& config_;
  std::int64_t node_;
  analysis::Symbolizer symbolizer_;
  std::unordered_map<std::int32_t, std::int32_t> span_of_;  // range index -> span index
};

// Remote events, one list per (node id, thread) in the order they arrived.
void append_remote(std::vector<std::vector<LegacyEvent>> received, ThreadEventLists& out) {
  std::map<std::pair<std::int64_t, std::uint64_t>, std::size_t> list_of;
  for (auto& batch : received) {
    for (LegacyEvent& e : batch) {
      auto [it, added] = list_of.try_emplace({e.node_id(), e.thread_id()}, out.size());
      if (added) out.emplace_back();
      out[it->second].push_back(std::move(e));
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void enable_profiler_legacy(const LegacyProfilerConfig& config) {
  if (config.state == LegacyProfilerState::kDisabled) {
    throw Error(
        "enable_profiler_legacy: state kDisabled records nothing; use kCPU, kCUDA or kNVTX");
  }
  if (config.state == LegacyProfilerState::kNVTX) {
    std::string why;
    if (!nvtx::available(&why)) throw Error("Can't use NVTX profiler: " + why);
  }
  if (config.state == LegacyProfilerState::kCUDA) {
    if (const std::string why = cuda_event_timing_unavailable_reason(); !why.empty()) {
      throw Error("Can't use CUDA profiler: kCUDA times each range with CUDA events, and " + why +
                  "; use kCPU to record without CUDA timings");
    }
  }
  if (thread_session() != nullptr) throw Error("Profiler is already enabled on this thread");

  auto s = std::make_shared<LegacySession>();
  s->config = config;
  s->enabled_on_tid = collect::current_tid();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_session) {
      throw Error("enable_profiler_legacy: the legacy profiler is already enabled on thread " +
                  std::to_string(g_session->enabled_on_tid) +
                  " of this process, and opscope records one session at a time; disable it "
                  "there first");
    }
    if (records_on_cpu(config.state)) {
      session::Recorder::claim(s.get(), "the legacy profiler");
      try {
        session::WindowOptions w;
        w.request.epoch.record_all_threads = false;
        w.request.lenses = config.lenses;
        if (config.state == LegacyProfilerState::kCUDA) {
          // Timed on the GPU: the ranges of the threads that record into this profiler (the
          // pointer is only compared).
          w.request.timed_range_threads = [session = s.get()] {
            return thread_session() == session;
          };
        }
        s->recorder.start_window(w);
      } catch (...) {
        session::Recorder::release(s.get());
        throw;
      }
    } else {
      s->nvtx_callback = nvtx::add_range_forwarding(config.lenses.record_shapes);
    }
    g_session = s;
  }
  record::set_thread_session(s);
  if (records_on_cpu(config.state)) {
    opscope::mark("__start_profile");
  } else {
    nvtx::mark("__start_profile");
  }
}

ThreadEventLists disable_profiler_legacy(ProfilerDisableOptions options) {
  const std::shared_ptr<const void> token = record::thread_session();
  LegacySession* s = thread_session();
  if (s == nullptr) {
    if (token && options.cleanup_tls_state) record::set_thread_session(nullptr);
    throw Error("Can't disable profiler when it's not running");
  }
  std::shared_ptr<const ProfilerResult> result;
  if (records_on_cpu(s->config.state)) {
    opscope::mark("__stop_profile");
    try {
      result = s->recorder.stop_window({});
    } catch (...) {
      session::Recorder::release(s);
      throw;
    }
    session::Recorder::release(s);
  } else {
    remove_callback(s->nvtx_callback);
  }
  s->running = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_session.get() == s) g_session.reset();
  }
  if (options.cleanup_tls_state) record::set_thread_session(nullptr);
  if (!options.consolidate || result == nullptr) return {};

  ThreadEventLists lists = ListBuilder(*result, s->config).build();
  std::vector<std::vector<LegacyEvent>> remote;
  {
    std::lock_guard<std::mutex> lock(s->remote_mu);
    remote = std::move(s->remote);
  }
  append_remote(std::move(remote), lists);
  return lists;
}

bool profiler_legacy_enabled() { return thread_session() != nullptr; }

void add_event_list(std::vector<LegacyEvent> events) {
  LegacySession* s = thread_session();
  if (s == nullptr) {
    throw Error(
        "add_event_list: Profiler must be enabled: no legacy profiler is enabled on this "
        "thread (call enable_profiler_legacy first)");
  }
  std::lock_guard<std::mutex> lock(s->remote_mu);
  s->remote.push_back(std::move(events));
}

void set_default_node_id(std::int64_t id) { g_node_id.store(id); }
std::int64_t default_node_id() { return g_node_id.load(); }

// ---------------------------------------------------------------------------------------------
// RecordProfile

struct RecordProfile::Output {
  std::ostream* stream = nullptr;
  std::unique_ptr<internal::Sink> file;
  std::string path;
};

RecordProfile::RecordProfile(std::ostream& out) : output_(std::make_unique<Output>()) {
  output_->stream = &out;
  enable_profiler_legacy({.state = LegacyProfilerState::kCPU});
}

RecordProfile::RecordProfile(const std::string& filename) : output_(std::make_unique<Output>()) {
  output_->path = filename;
  // Opened now, so that an unwritable path fails here rather than after the work ran.
  output_->file = internal::open_file_sink(filename, {.what = "legacy trace"});
  enable_profiler_legacy({.state = LegacyProfilerState::kCPU});
}

RecordProfile::~RecordProfile() {
  try {
    const ThreadEventLists lists = disable_profiler_legacy();
    if (output_->file) {
      std::ostringstream text;
      write_legacy_trace(text, lists);
      output_->file->write(text.view());
      output_->file->commit();
    } else {
      write_legacy_trace(*output_->stream, lists);
    }
  } catch (const std::exception& e) {
    warn(std::string("RecordProfile: no legacy trace written") +
         (output_->path.empty() ? "" : " to '" + output_->path + "'") + ": " + e.what());
  } catch (...) {
    warn("RecordProfile: no legacy trace written: unknown error");
  }
}

}  // namespace opscope
