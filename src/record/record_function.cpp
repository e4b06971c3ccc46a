// RecordFunction's slow paths: dynamic names, observers, thread-limited sessions.
#include <random>

#include "collect/collector.h"
#include "collect/string_table.h"
#include "opscope/record_function.h"
#include "record/observers.h"

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
    needs_inputs = needs_inputs || cb.needs_inputs();
  }
}

}  // namespace

std::string_view scope_name(RecordScope scope) noexcept {
  switch (scope) {
    case RecordScope::kFunction: return "FUNCTION";
    case RecordScope::kBackwardFunction: return "BACKWARD_FUNCTION";
    case RecordScope::kTorchScriptFunction: return "TORCHSCRIPT_FUNCTION";
    case RecordScope::kKernelFunctionDtype: return "KERNEL_FUNCTION_DTYPE";
    case RecordScope::kCustomClass: return "CUSTOM_CLASS";
    case RecordScope::kBuildFeature: return "BUILD_FEATURE";
    case RecordScope::kLiteInterpreter: return "LITE_INTERPRETER";
    case RecordScope::kUserScope: return "USER_SCOPE";
    case RecordScope::kStaticRuntimeOp: return "STATIC_RUNTIME_OP";
    case RecordScope::kStaticRuntimeModel: return "STATIC_RUNTIME_MODEL";
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

void RecordFunction::begin_dynamic(std::uint32_t state, std::string_view name) noexcept {
  std::uint32_t id;
  try {
    id = collect::intern(name);
  } catch (...) {
    state_ = kInactive;  // out of memory while interning: do not record rather than throw
    return;
  }
  begin(state, id, internal::kNameInterned);
}

void RecordFunction::begin_slow(std::uint32_t state, std::uintptr_t name,
                                std::uint8_t name_flags) noexcept {
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
  // Handles must be unique across threads, which needs a registered slot.
  thread_ = c.registered ? c.slot : collect::ensure_registered();
  id_ = c.next_id++;
  // Observers see an active range: mark it so name() and handle() work in start callbacks.
  state_ = kObserved;

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
  if (!record && observers_ == nullptr) {
    state_ = kInactive;
    return;
  }
  state_ = observers_ != nullptr ? kObserved : kRecording;
  start_ = internal::ticks();
}

void RecordFunction::end_observed() noexcept {
  const std::uint64_t end = internal::ticks();
  if (epoch_ != 0) {
    internal::append({start_, end, name_, id_, thread_, static_cast<std::uint8_t>(scope_),
                      static_cast<std::uint8_t>(internal::RecordKind::kRange), name_flags_},
                     epoch_);
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
  internal::append({static_cast<std::uint64_t>(sequence_nr_), forward_thread_id_, 0, id_, thread_,
                    static_cast<std::uint8_t>(scope_),
                    static_cast<std::uint8_t>(internal::RecordKind::kLink), 0},
                   epoch_);
}

}  // namespace opscope
