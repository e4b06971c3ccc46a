// opscope/record_function.h: named ranges and the observers that watch them.
//
// A range marks a span of work on a thread. The macros cover the common case and cost one
// relaxed load and a branch when nothing listens:
//
//   void forward(Tensor& x) {
//     OPSCOPE_RECORD_FUNCTION("aten::addmm");   // scope kFunction, ends with the block
//     ...
//   }
//   { OPSCOPE_USER_SCOPE("data_loading"); load(); }   // scope kUserScope
//
// RecordFunction is the object behind them, for dynamic names, backward ranges that point at
// their forward op, and ranges that end on another thread:
//
//   auto rf = std::make_unique<opscope::RecordFunction>(name_string,
//                                                       opscope::RecordScope::kUserScope);
//   pool.submit([rf = std::move(rf)] { work(); rf->end(); });   // async range
//
// Observers (callbacks on every range) are declared in opscope/observer.h, and the values a
// range's inputs are made of in opscope/value.h: this header is what every file with a range
// includes, so it carries only the range itself (see bench/RESULTS.md for its size).
//
// Building with -DOPSCOPE_DISABLE turns every range macro into nothing (its arguments are not
// evaluated); RecordFunction and the rest of the API stay, for code that uses them directly.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>
#include <type_traits>

#include "opscope/internal/clock.h"
#include "opscope/internal/collector.h"
#include "opscope/internal/requires_cxx20.h"
#include "opscope/types.h"

namespace opscope {

class Value;  // opscope/value.h: include it to build inputs and outputs

namespace internal {
// Gives `site` its compact_index (CallSite) and returns it; 0 when the process's table of
// sites is full (ranges of the site then take a 32-byte record). Out of line: once per site.
[[gnu::noinline]] std::uint32_t register_call_site(const CallSite& site) noexcept;
}  // namespace internal

namespace internal {
struct ObserverFrame;  // observers active on one range; defined in src/record
}

// A named range. Begins at construction (or at before()), ends at end() or destruction,
// whichever comes first.
//
// Cost: with no session and no observer, construction is one relaxed load and a branch and
// destruction one branch. With a session recording all threads and no observer, a range is
// two counter reads and one 16-byte append to the thread's own buffer (32 bytes when it ends
// on another thread or lasts over a second): no lock, no allocation once the buffer exists.
// Observers take an out-of-line path.
//
// Not copyable or movable: observers may hold its address. end() may be called on another
// thread than the one that began the range (an async range); end() at most once.
class RecordFunction {
 public:
  // Two-phase form, as in PyTorch: decide activity now, name the range with before().
  explicit RecordFunction(RecordScope scope = RecordScope::kFunction) noexcept : scope_(scope) {
    const std::uint32_t state = internal::g_state.load(std::memory_order_relaxed);
    state_ = state == 0 ? kInactive : kPending;
  }

  // Begins a range named by a static call site (what the macros use).
  RecordFunction(const CallSite& site, RecordScope scope) noexcept : scope_(scope) {
    const std::uint32_t state = internal::g_state.load(std::memory_order_relaxed);
    if (state == 0) [[likely]] {
      state_ = kInactive;
      return;
    }
    begin(state, reinterpret_cast<std::uintptr_t>(&site), internal::kNameSite);
  }

  // Begins a range with a dynamic name; the name is copied (interned) only when recorded.
  explicit RecordFunction(std::string_view name,
                          RecordScope scope = RecordScope::kFunction) noexcept
      : scope_(scope) {
    const std::uint32_t state = internal::g_state.load(std::memory_order_relaxed);
    if (state == 0) [[likely]] {
      state_ = kInactive;
      return;
    }
    begin_dynamic(state, name, {});
  }

  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

  ~RecordFunction() {
    if (state_ >= kRecording) {
      end();
    }
  }

  // Second phase of the two-phase form. Does nothing unless the constructor found a listener.
  void before(const CallSite& site) noexcept {
    if (state_ == kPending) {
      begin(internal::g_state.load(std::memory_order_relaxed),
            reinterpret_cast<std::uintptr_t>(&site), internal::kNameSite);
    }
  }
  void before(std::string_view name, std::int64_t sequence_nr = -1) noexcept {
    if (state_ == kPending) {
      begin_dynamic(internal::g_state.load(std::memory_order_relaxed), name, {});
      set_sequence_nr(sequence_nr);
    }
  }
  // With inputs (see opscope/value.h). They are copied before before() returns.
  void before(const CallSite& site, std::span<const Value> inputs) noexcept {
    if (state_ == kPending) {
      begin(internal::g_state.load(std::memory_order_relaxed),
            reinterpret_cast<std::uintptr_t>(&site), internal::kNameSite, inputs);
    }
  }
  // (A template only so that its body is compiled where Value is complete: V is always Value.)
  template <typename V = Value>
  void before(const CallSite& site,
              std::type_identity_t<std::initializer_list<V>> inputs) noexcept {
    before(site, std::span<const V>(inputs.begin(), inputs.size()));
  }
  void before(std::string_view name, std::span<const Value> inputs,
              std::int64_t sequence_nr = -1) noexcept {
    if (state_ == kPending) {
      begin_dynamic(internal::g_state.load(std::memory_order_relaxed), name, inputs);
      set_sequence_nr(sequence_nr);
    }
  }

  // Two-phase form: true when someone would record the inputs given to before() (a session
  // with record_shapes or with_flops, or an observer with needs_inputs). False otherwise, so
  // the caller can skip building them.
  bool wants_inputs() const noexcept {
    if (state_ != kPending) return false;
    const std::uint32_t state = internal::g_state.load(std::memory_order_relaxed);
    // A session's record_shapes or with_flops answers inline; only observers need the call.
    if ((state & internal::kStateLenses) && (internal::g_lenses.load(std::memory_order_relaxed) &
                                             (internal::kLensShapes | internal::kLensFlops))) {
      return true;
    }
    return (state & internal::kStateCallbacks) != 0 && wants_inputs_slow();
  }

  // Ends the range. Safe on any thread; later calls and the destructor do nothing.
  void end() noexcept {
    if ((state_ & kRecording) == kRecording) [[likely]] {  // kRecording or kRecordingOpen
      if (state_ == kRecordingOpen) internal::pop_open_range(id_, thread_);
      state_ = kEnded;
      const std::uint64_t end_ticks = internal::ticks();
      internal::append_range(start_, end_ticks, id_, thread_, compact_tag_, epoch_, [&] {
        return internal::make_record(start_, end_ticks, name_, id_, thread_,
                                     static_cast<std::uint8_t>(scope_),
                                     internal::RecordKind::kRange, name_flags_);
      });
      if (sequence_nr_ >= 0 || forward_thread_id_ != 0) [[unlikely]] {
        append_link();
      }
      return;
    }
    if (state_ == kObserved) {
      end_observed();
    }
  }

  // True while the range is being recorded or observed.
  bool is_active() const noexcept {
    return state_ == kRecording || state_ == kRecordingOpen || state_ == kObserved;
  }

  RecordScope scope() const noexcept { return scope_; }
  // The name; empty when the range is not active.
  std::string_view name() const noexcept;
  // A process-unique id of an active range (0 when inactive); doubles as the correlation id
  // ("External id") that GPU activity and flows point at.
  std::uint64_t handle() const noexcept {
    return is_active() ? (static_cast<std::uint64_t>(thread_) << 32) | id_ : 0;
  }
  // Autograd-style links: a backward range carries the sequence number and thread of the
  // forward op that produced it.
  // Setting them on an inactive range does nothing.
  std::int64_t sequence_nr() const noexcept { return is_active() ? sequence_nr_ : -1; }
  void set_sequence_nr(std::int64_t n) noexcept {
    if (is_active()) sequence_nr_ = n;
  }
  std::uint64_t forward_thread_id() const noexcept { return is_active() ? forward_thread_id_ : 0; }
  void set_forward_thread_id(std::uint64_t tid) noexcept {
    if (is_active()) forward_thread_id_ = tid;
  }
  // OS thread id of the thread that began the range.
  std::uint64_t thread_id() const noexcept;
  // Start of the range in raw ticks (see opscope/internal/clock.h).
  std::uint64_t start_ticks() const noexcept { return start_; }
  // True when some observer registered with needs_inputs() selects this range; the caller
  // then knows inputs would be consumed.
  bool needs_inputs() const noexcept { return is_active() && needs_inputs_; }
  // The inputs given at begin. Valid only inside observers' start callbacks (the caller owns
  // them); empty elsewhere.
  std::span<const Value> inputs() const noexcept {
    return state_ == kObserved ? inputs_ : std::span<const Value>();
  }

  // Gives the range's outputs to the observers that asked for them (needs_outputs); they read
  // them with outputs() in their end callbacks. The values are copied, and only when such an
  // observer watches this range, so temporaries are fine. On a range no observer watches this
  // is one branch; it never touches the session's record.
  void set_outputs(std::span<const Value> outputs) noexcept {
    if (state_ == kObserved) set_outputs_observed(outputs);
  }
  template <typename V = Value>  // as before(): V is always Value
  void set_outputs(std::type_identity_t<std::initializer_list<V>> outputs) noexcept {
    set_outputs(std::span<const V>(outputs.begin(), outputs.size()));
  }
  // True when an observer with needs_outputs watches this range, so the caller can skip
  // building outputs nobody reads.
  bool wants_outputs() const noexcept { return state_ == kObserved && wants_outputs_slow(); }
  // The outputs given to set_outputs(), owned by the range until its end callbacks have run;
  // empty when none were given or no observer asked for them.
  std::span<const Value> outputs() const noexcept;

  // States the floating-point operations this range performs, for the with_flops lens (it
  // replaces the estimate from the inputs). Does nothing unless a with_flops session records
  // the range.
  void set_flops(std::int64_t flops) noexcept {
    if (is_active() && epoch_ != 0 &&
        (internal::g_lenses.load(std::memory_order_relaxed) & internal::kLensFlops)) {
      append_flops(flops);
    }
  }

 private:
  enum : std::uint8_t {
    kInactive = 0,  // nobody listened at construction
    kPending = 1,   // two-phase form: someone listened, before() not called yet
    kEnded = 2,
    kRecording = 3,  // recorded into the session buffer only
    kObserved = 4,   // observers are attached (maybe recorded too)
    // Recorded, and noted in the thread's open ranges for the flight recorder (the bits of
    // kRecording and one more, so that end() tests both with one mask).
    kRecordingOpen = 7,
  };

  void begin(std::uint32_t state, std::uintptr_t name, std::uint8_t name_flags,
             std::span<const Value> inputs = {}) noexcept {
    // A session recording every thread, with or without lenses, and no observer.
    constexpr std::uint32_t kFlagsBesideLenses =
        internal::kStateFlagMask & ~(internal::kStateLenses | internal::kStateRing);
    if ((state & kFlagsBesideLenses) == internal::kStateRecordAllThreads) [[likely]] {
      internal::ThreadContext& c = internal::t_ctx;
      const std::uint32_t epoch = internal::epoch_of(state);
      if (c.epoch == epoch || internal::prepare_thread(epoch)) [[likely]] {
        name_ = name;
        name_flags_ = name_flags;
        compact_tag_ = compact_tag_of(name, name_flags, scope_);
        epoch_ = epoch;
        id_ = internal::take_range_id(c);
        thread_ = c.slot;
        sequence_nr_ = -1;
        forward_thread_id_ = 0;
        needs_inputs_ = false;
        state_ = kRecording;  // observers_ is read only in kObserved: not set here
        if (state & internal::kStateLenses) [[unlikely]] {
          record_lenses(inputs, 1);  // before the start: the range does not include them
        }
        start_ = internal::ticks();
        if (state & internal::kStateRing) {
          internal::push_open_range(c, start_, name, id_, static_cast<std::uint8_t>(scope_),
                                    name_flags);
          state_ = kRecordingOpen;
        }
        return;
      }
      state_ = kInactive;
      return;
    }
    begin_slow(state, name, name_flags, inputs);
  }

  // The compact_tag() of a range's name and scope (see opscope/internal/collector.h), or 0
  // when the name has no compact index. One load for a registered call site.
  static std::uint32_t compact_tag_of(std::uintptr_t name, std::uint8_t name_flags,
                                      RecordScope scope) noexcept {
    std::uint32_t index;
    if (name_flags & internal::kNameInterned) {
      if (name >= internal::kCompactNameLimit) return 0;
      index = static_cast<std::uint32_t>(name);
    } else {
      const auto& site = *reinterpret_cast<const CallSite*>(name);
      index = std::atomic_ref<std::uint32_t>(site.compact_index).load(std::memory_order_acquire);
      if (index == 0) [[unlikely]] {
        index = internal::register_call_site(site);
        if (index == 0) return 0;
      }
    }
    return internal::compact_tag(index, (name_flags & internal::kNameInterned) != 0,
                                 static_cast<std::uint8_t>(scope));
  }

  [[gnu::noinline]] void begin_dynamic(std::uint32_t state, std::string_view name,
                                       std::span<const Value> inputs) noexcept;
  [[gnu::noinline]] void begin_slow(std::uint32_t state, std::uintptr_t name,
                                    std::uint8_t name_flags,
                                    std::span<const Value> inputs) noexcept;
  // Records what the session's lenses ask for at begin: inputs, call stack, module path. A
  // captured stack leaves out record_lenses and `skip_callers` - 1 frames above it.
  [[gnu::noinline]] void record_lenses(std::span<const Value> inputs, int skip_callers) noexcept;
  [[gnu::noinline]] bool wants_inputs_slow() const noexcept;
  [[gnu::noinline]] bool wants_outputs_slow() const noexcept;
  [[gnu::noinline]] void set_outputs_observed(std::span<const Value> outputs) noexcept;
  [[gnu::noinline]] void append_flops(std::int64_t flops) noexcept;
  [[gnu::noinline]] void end_observed() noexcept;
  [[gnu::noinline]] void append_link() noexcept;

  // Only scope_ and state_ are written when nothing listens (so that an inactive range costs
  // a load and a branch); every other member is valid only while is_active().
  std::uint64_t start_;
  std::uintptr_t name_;
  std::int64_t sequence_nr_;
  std::uint64_t forward_thread_id_;
  internal::ObserverFrame* observers_;  // owned; set only in the kObserved state
  std::span<const Value> inputs_;       // set only in the kObserved state, for start callbacks
  std::uint32_t epoch_;                 // session epoch recorded into; 0 = not recorded
  std::uint32_t id_;
  std::uint32_t compact_tag_;  // compact_tag_of() the name, 0: always a Record
  std::uint16_t thread_;
  RecordScope scope_;
  std::uint8_t state_;
  std::uint8_t name_flags_;
  bool needs_inputs_;
};

}  // namespace opscope

#define OPSCOPE_CONCAT_INNER_(a, b) a##b
#define OPSCOPE_CONCAT_(a, b) OPSCOPE_CONCAT_INNER_(a, b)

#ifdef OPSCOPE_DISABLE

// Compiled out: the macros expand to nothing and evaluate none of their arguments.
#define OPSCOPE_RECORD_FUNCTION(name) static_cast<void>(0)
#define OPSCOPE_USER_SCOPE(name) static_cast<void>(0)
#define OPSCOPE_BACKWARD_FUNCTION(name) static_cast<void>(0)
#define OPSCOPE_RECORD_FUNCTION_WITH_INPUTS(name, ...) static_cast<void>(0)

#else

// A range over the rest of the enclosing block. `name` must be a string literal (or another
// constant expression of static storage): only a pointer to it is stored.
#define OPSCOPE_RECORD_SCOPE_(name, scope)                                       \
  static constexpr ::opscope::CallSite OPSCOPE_CONCAT_(opscope_site_, __LINE__){ \
      name, __func__, __FILE__, __LINE__};                                       \
  ::opscope::RecordFunction OPSCOPE_CONCAT_(opscope_range_, __LINE__)(           \
      OPSCOPE_CONCAT_(opscope_site_, __LINE__), scope)

#define OPSCOPE_RECORD_FUNCTION(name) OPSCOPE_RECORD_SCOPE_(name, ::opscope::RecordScope::kFunction)
#define OPSCOPE_USER_SCOPE(name) OPSCOPE_RECORD_SCOPE_(name, ::opscope::RecordScope::kUserScope)
#define OPSCOPE_BACKWARD_FUNCTION(name) \
  OPSCOPE_RECORD_SCOPE_(name, ::opscope::RecordScope::kBackwardFunction)

// A kFunction range with inputs (opscope/value.h). The inputs are evaluated only when someone
// records them (record_shapes, with_flops, an observer with needs_inputs):
//   OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", opscope::Value::tensor({m, k}),
//                                        opscope::Value::tensor({k, n}));
#define OPSCOPE_RECORD_FUNCTION_WITH_INPUTS(name, ...)                                    \
  static constexpr ::opscope::CallSite OPSCOPE_CONCAT_(opscope_site_, __LINE__){          \
      name, __func__, __FILE__, __LINE__};                                                \
  ::opscope::RecordFunction OPSCOPE_CONCAT_(opscope_range_,                               \
                                            __LINE__)(::opscope::RecordScope::kFunction); \
  if (OPSCOPE_CONCAT_(opscope_range_, __LINE__).wants_inputs())                           \
    OPSCOPE_CONCAT_(opscope_range_, __LINE__)                                             \
        .before(OPSCOPE_CONCAT_(opscope_site_, __LINE__), {__VA_ARGS__});                 \
  else                                                                                    \
    OPSCOPE_CONCAT_(opscope_range_, __LINE__).before(OPSCOPE_CONCAT_(opscope_site_, __LINE__))

#endif  // OPSCOPE_DISABLE
