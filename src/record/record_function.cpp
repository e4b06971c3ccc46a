// RecordFunction's slow paths: dynamic names, observers, thread-limited sessions.
#include "opscope/record_function.h"

#include <cstring>
#include <random>

#include "collect/collector.h"
#include "collect/string_table.h"
#include "opscope/module.h"
#include "opscope/observer.h"
#include "record/observers.h"
#include "record/stack_capture.h"
#include "record/value_codec.h"

namespace opscope {
namespace {

// A cheap per-thread generator for sampling observers; quality needs are low.
double next_uniform() noexcept {
  thread_local std::uint64_t s = 0x9E3779B97F4A7C15ull ^ collect::current_tid();
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return static_cast<double>(s >> 11) * 0x1.0p-53;
}

void attach(internal::ObserverFrame*& frame, const internal::CallbackList& list,
            const RecordFunction& rf, bool& needs_inputs) {
  for (const auto& entry : list) {
    const RecordFunctionCallback& cb = entry->callback;
    if (!cb.selects(rf.scope())) continue;
    if (cb.sampling_prob() < 1.0 && next_uniform() >= cb.sampling_prob()) continue;
    if (frame == nullptr) frame = new internal::ObserverFrame;
    frame->active.push_back({entry, nullptr});
    frame->needs_outputs = frame->needs_outputs || cb.needs_outputs();
    needs_inputs = needs_inputs || cb.needs_inputs();
  }
}

}  // namespace

std::string_view scope_name(RecordScope scope) noexcept {
  switch (scope) {
    case RecordScope::kFunction:
      return "FUNCTION";
    case RecordScope::kBackwardFunction:
      return "BACKWARD_FUNCTION";
    case RecordScope::kTorchScriptFunction:
      return "TORCHSCRIPT_FUNCTION";
    case RecordScope::kKernelFunctionDtype:
      return "KERNEL_FUNCTION_DTYPE";
    case RecordScope::kCustomClass:
      return "CUSTOM_CLASS";
    case RecordScope::kBuildFeature:
      return "BUILD_FEATURE";
    case RecordScope::kLiteInterpreter:
      return "LITE_INTERPRETER";
    case RecordScope::kUserScope:
      return "USER_SCOPE";
    case RecordScope::kStaticRuntimeOp:
      return "STATIC_RUNTIME_OP";
    case RecordScope::kStaticRuntimeModel:
      return "STATIC_RUNTIME_MODEL";
  }
  return "UNKNOWN";
}

std::string_view RecordFunction::name() const noexcept {
  if (!is_active()) return {};
  if (name_flags_ & internal::kNameInterned) {
    return collect::interned(static_cast<std::uint32_t>(name_));
  }
  return reinterpret_cast<const CallSite*>(name_)->name;
}

std::uint64_t RecordFunction::thread_id() const noexcept {
  return is_active() ? collect::tid_of_slot(thread_) : 0;
}

void RecordFunction::begin_dynamic(std::uint32_t state, std::string_view name,
                                   std::span<const Value> inputs) noexcept {
  std::uint32_t id;
  try {
    id = collect::intern(name);
  } catch (...) {
    state_ = kInactive;  // out of memory while interning: do not record rather than throw
    return;
  }
  begin(state, id, internal::kNameInterned, inputs);
}

bool RecordFunction::wants_inputs_slow() const noexcept {
  // The session's lenses were asked inline (wants_inputs); this is for the observers.
  try {
    for (const auto& list : {internal::global_callbacks(), internal::thread_callbacks()}) {
      if (!list) continue;
      for (const auto& entry : *list) {
        if (entry->callback.needs_inputs() && entry->callback.selects(scope_)) return true;
      }
    }
  } catch (...) {
  }
  return false;
}

bool RecordFunction::wants_outputs_slow() const noexcept {
  return observers_ != nullptr && observers_->needs_outputs;
}

void RecordFunction::set_outputs_observed(std::span<const Value> outputs) noexcept {
  if (observers_ == nullptr || !observers_->needs_outputs) return;
  try {
    observers_->outputs = std::make_unique<internal::OwnedValues>(outputs);
  } catch (...) {
    observers_->outputs.reset();  // out of memory: the end callbacks see no outputs
  }
}

std::span<const Value> RecordFunction::outputs() const noexcept {
  if (state_ != kObserved || observers_ == nullptr || !observers_->outputs) return {};
  return observers_->outputs->values();
}

namespace {

// Fills what every side record of a range has, in the header blob_header() points at. Each
// field is stored straight into the buffer: a Record built on the stack and copied in would
// stall the copy's wide loads on the narrow stores (store forwarding fails).
void set_side_header(internal::Record* h, internal::RecordKind kind, std::uint32_t id,
                     std::uint16_t thread, std::uint8_t scope) noexcept {
  h->id = id;
  h->thread = thread;
  h->scope = scope;
  h->kind = static_cast<std::uint8_t>(kind);
  h->flags = 0;
}

// The inputs' side record(s), in the room reserved at the calling thread's buffer end.
// Encoded where the header goes: at most 16 bytes stay there, in its start and end words
// (kInputsInline: one record instead of two, for an mm's two small tensors), more move up
// behind it as a kInputs blob's payload.
void write_inputs_at_end(std::span<const Value> inputs, std::uint32_t id, std::uint16_t thread,
                         std::uint8_t scope) noexcept {
  internal::Record* h = internal::blob_header();
  auto* bytes = reinterpret_cast<std::byte*>(h);
  const std::size_t n = record::encode_inputs_to(inputs, bytes);
  constexpr std::size_t kInline = 2 * sizeof(std::uint64_t);
  if (n <= kInline) {
    // The bytes are in start and end: the second word moves to `end`, past the header's
    // fields, which follow `start`.
    std::memcpy(&h->end, bytes + sizeof h->start, sizeof h->end);
    h->name = n;
    set_side_header(h, internal::RecordKind::kInputsInline, id, thread, scope);
    internal::publish_blob(0);
    return;
  }
  std::memmove(bytes + sizeof(internal::Record), bytes, n);
  h->start = 0;
  h->end = n;
  h->name = 0;
  set_side_header(h, internal::RecordKind::kInputs, id, thread, scope);
  internal::publish_blob(n);
}

}  // namespace

void RecordFunction::record_lenses(std::span<const Value> inputs, int skip_callers) noexcept {
  const std::uint32_t lenses = internal::g_lenses.load(std::memory_order_relaxed);
  const auto scope = static_cast<std::uint8_t>(scope_);
  if ((lenses & (internal::kLensShapes | internal::kLensFlops)) && !inputs.empty()) {
    // Written straight into the buffer, in one pass with room for the worst case; near a
    // chunk's end sized first instead, so that the chunk's tail is still used. This is most
    // of what record_shapes costs per range (bench/lens_bench.cpp).
    const auto sized = [&] {
      const std::size_t exact = record::encoded_size(inputs);
      return exact <= record::kMaxEncodedInputBytes ? exact : record::kMaxEncodeBytes;
    };
    if (internal::blob_room(epoch_) >= record::kMaxEncodeBytes ||
        internal::reserve_blob_slow(sized(), epoch_) != nullptr) {
      write_inputs_at_end(inputs, id_, thread_, scope);
    }
  }
  if (lenses & internal::kLensStack) {
    // Captured straight into the buffer. Skip this function's frame and its callers' in
    // opscope (begin_slow; none when the range's inline begin called it): the innermost frame
    // kept is the function holding the range (or, for dynamic names, begin_dynamic, which
    // export leaves out).
    constexpr std::size_t kRoom = record::kMaxStackFrames * sizeof(std::uint64_t);
    if (std::byte* out = internal::reserve_blob(kRoom, epoch_)) {
      auto* words = reinterpret_cast<std::uint64_t*>(out);
      std::size_t n = record::capture_stack(words, record::kMaxStackFrames,
                                            static_cast<std::size_t>(skip_callers),
                                            (lenses & internal::kLensModules) != 0);
      // Python frames, when the extension installed its provider (stack_capture.h).
      if (const record::ForeignStackProvider foreign = record::foreign_stack_provider()) {
        n = foreign(words, n, record::kMaxStackFrames);
      }
      internal::Record* h = internal::blob_header();
      h->start = 0;
      h->end = n * sizeof(std::uint64_t);
      h->name = 0;
      set_side_header(h, internal::RecordKind::kStack, id_, thread_, scope);
      internal::publish_blob(n * sizeof(std::uint64_t));
    }
  }
  if ((lenses & internal::kLensModules) && internal::t_module != nullptr) {
    internal::append(internal::make_record(0, 0, internal::t_module->path_id, id_, thread_, scope,
                                           internal::RecordKind::kModule, 0),
                     epoch_);
  }
}

void RecordFunction::append_flops(std::int64_t flops) noexcept {
  internal::append(
      internal::make_record(static_cast<std::uint64_t>(flops), 0, 0, id_, thread_,
                            static_cast<std::uint8_t>(scope_), internal::RecordKind::kFlops, 0),
      epoch_);
}

void RecordFunction::begin_slow(std::uint32_t state, std::uintptr_t name, std::uint8_t name_flags,
                                std::span<const Value> inputs) noexcept {
  internal::ThreadContext& c = internal::t_ctx;
  const std::uint32_t epoch = internal::epoch_of(state);
  const bool session_wants =
      (state & internal::kStateRecordAllThreads) ||
      ((state & internal::kStateRecordSomeThreads) && c.member_epoch == epoch && epoch != 0);
  const bool record = session_wants && (c.epoch == epoch || internal::prepare_thread(epoch));

  name_ = name;
  name_flags_ = name_flags;
  sequence_nr_ = -1;
  forward_thread_id_ = 0;
  needs_inputs_ = false;
  observers_ = nullptr;
  epoch_ = record ? epoch : 0;
  compact_tag_ = record ? compact_tag_of(name, name_flags, scope_) : 0;
  // Handles must be unique across threads, which needs a registered slot.
  thread_ = c.registered ? c.slot : collect::ensure_registered();
  id_ = record ? internal::take_range_id(c) : internal::take_other_id(c);
  if (record && (state & internal::kStateLenses)) record_lenses(inputs, 2);
  // Observers see an active range: mark it so name() and handle() work in start callbacks.
  state_ = kObserved;
  inputs_ = inputs;

  if (state & internal::kStateCallbacks) {
    try {
      const auto global = internal::global_callbacks();
      attach(observers_, *global, *this, needs_inputs_);
      if (const auto local = internal::thread_callbacks()) {
        attach(observers_, *local, *this, needs_inputs_);
      }
      if (observers_ != nullptr) {
        for (auto& a : observers_->active) {
          if (a.entry->callback.start()) a.context = a.entry->callback.start()(*this);
        }
      }
    } catch (...) {
      // An observer threw: a range must never throw into the code it measures. The observers
      // attached so far still get their end call.
    }
  }
  inputs_ = {};  // the caller's inputs do not outlive begin
  if (!record && observers_ == nullptr) {
    state_ = kInactive;
    return;
  }
  state_ = observers_ != nullptr ? kObserved : kRecording;
  start_ = internal::ticks();
  if (record && state_ == kRecording && (state & internal::kStateRing)) {
    internal::push_open_range(c, start_, name, id_, static_cast<std::uint8_t>(scope_), name_flags);
    state_ = kRecordingOpen;
  }
}

void RecordFunction::end_observed() noexcept {
  const std::uint64_t end = internal::ticks();
  if (epoch_ != 0) {
    internal::append_range(start_, end, id_, thread_, compact_tag_, epoch_, [&] {
      return internal::make_record(start_, end, name_, id_, thread_,
                                   static_cast<std::uint8_t>(scope_), internal::RecordKind::kRange,
                                   name_flags_);
    });
    if (sequence_nr_ >= 0 || forward_thread_id_ != 0) append_link();
  }
  if (observers_ != nullptr) {
    // End callbacks run in reverse order of start, like nested scopes.
    for (auto it = observers_->active.rbegin(); it != observers_->active.rend(); ++it) {
      if (!it->entry->callback.end()) continue;
      try {
        it->entry->callback.end()(*this, it->context.get());
      } catch (...) {
      }
    }
    delete observers_;
    observers_ = nullptr;
  }
  state_ = kEnded;
}

void RecordFunction::append_link() noexcept {
  internal::append(internal::make_record(
                       static_cast<std::uint64_t>(sequence_nr_), forward_thread_id_, 0, id_,
                       thread_, static_cast<std::uint8_t>(scope_), internal::RecordKind::kLink, 0),
                   epoch_);
}

}  // namespace opscope
