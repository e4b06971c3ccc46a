// opscope/observer.h: observers, callbacks run at the start and end of every range they select
// (by scope and sampling probability), globally or on one thread only:
//
//   auto h = opscope::add_global_callback(opscope::RecordFunctionCallback(
//       [](const opscope::RecordFunction& rf) -> std::unique_ptr<opscope::ObserverContext> {
//         count(rf.name()); return nullptr; }));
//   ...
//   opscope::remove_callback(h);
//
// Apart from opscope/record_function.h so that the hot-path header stays light: this one
// needs <functional> and <memory>.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>

#include "opscope/record_function.h"

namespace opscope {

// What a start callback may hand to its end callback (optional).
class ObserverContext {
 public:
  virtual ~ObserverContext() = default;
};

// A start callback returns an optional context that is handed to the end callback.
using ObserverStartFn = std::function<std::unique_ptr<ObserverContext>(const RecordFunction&)>;
using ObserverEndFn = std::function<void(const RecordFunction&, ObserverContext*)>;

// One observer: start/end functions plus what it selects. Setters chain:
//   RecordFunctionCallback(start, end).scopes({RecordScope::kUserScope}).sampling_prob(0.01)
class RecordFunctionCallback {
 public:
  explicit RecordFunctionCallback(ObserverStartFn start, ObserverEndFn end = nullptr)
      : start_(std::move(start)), end_(std::move(end)) {}

  RecordFunctionCallback& needs_inputs(bool v) {
    needs_inputs_ = v;
    return *this;
  }
  RecordFunctionCallback& needs_ids(bool v) {
    needs_ids_ = v;
    return *this;
  }
  // The observer reads RecordFunction::outputs() in its end callback: ranges it watches keep
  // a copy of what set_outputs() gives them.
  RecordFunctionCallback& needs_outputs(bool v) {
    needs_outputs_ = v;
    return *this;
  }
  // Only ranges of these scopes are observed (all scopes by default).
  RecordFunctionCallback& scopes(std::initializer_list<RecordScope> scopes);
  // Each range is observed with this probability, in (0, 1]. Throws opscope::Error otherwise.
  RecordFunctionCallback& sampling_prob(double p);

  bool needs_inputs() const { return needs_inputs_; }
  bool needs_ids() const { return needs_ids_; }
  bool needs_outputs() const { return needs_outputs_; }
  double sampling_prob() const { return sampling_prob_; }
  bool selects(RecordScope s) const { return (scope_mask_ >> static_cast<unsigned>(s)) & 1u; }
  const ObserverStartFn& start() const { return start_; }
  const ObserverEndFn& end() const { return end_; }

 private:
  ObserverStartFn start_;
  ObserverEndFn end_;
  bool needs_inputs_ = false;
  bool needs_ids_ = false;
  bool needs_outputs_ = false;
  double sampling_prob_ = 1.0;
  std::uint32_t scope_mask_ = (1u << kNumRecordScopes) - 1;
};

// Identifies a registered observer; never 0 and never reused within a process.
using CallbackHandle = std::uint64_t;

// Registers an observer for ranges on every thread. Thread-safe; ranges already running are
// not observed.
CallbackHandle add_global_callback(RecordFunctionCallback callback);
// Registers an observer for ranges on the calling thread (and on threads that later install a
// ThreadLocalState captured here).
CallbackHandle add_thread_local_callback(RecordFunctionCallback callback);
// Removes an observer by handle. A global one may be removed from any thread, a thread-local
// one only from a thread that holds it. Returns false when the handle is unknown here.
bool remove_callback(CallbackHandle handle);
// Removes every global observer, and the calling thread's thread-local ones.
void clear_callbacks();

bool has_global_callbacks();
bool has_thread_local_callbacks();  // on the calling thread
bool has_callbacks();               // either of the above

}  // namespace opscope
