// The observer registry behind add_global_callback / add_thread_local_callback, shared by
// RecordFunction's slow path and ThreadLocalState.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "opscope/observer.h"
#include "opscope/record_function.h"
#include "opscope/value.h"

namespace opscope::internal {

struct CallbackEntry {
  CallbackHandle handle;
  RecordFunctionCallback callback;
};
using CallbackList = std::vector<std::shared_ptr<const CallbackEntry>>;

// Immutable snapshots: readers hold one while they run callbacks, writers swap in a new one.
std::shared_ptr<const CallbackList> global_callbacks();
std::shared_ptr<const CallbackList> thread_callbacks();
// Replaces the calling thread's list (ThreadLocalStateGuard); keeps kStateCallbacks right.
void set_thread_callbacks(std::shared_ptr<const CallbackList> list);

// A deep copy of Values, which only point at what their caller owns: the copies point into
// this object and stay valid as long as it lives (so it neither copies nor moves).
class OwnedValues {
 public:
  explicit OwnedValues(std::span<const Value> values);
  OwnedValues(const OwnedValues&) = delete;
  OwnedValues& operator=(const OwnedValues&) = delete;

  std::span<const Value> values() const { return values_; }

 private:
  Value copy(const Value& v);

  std::vector<Value> values_;
  // Deques: adding an element leaves the earlier ones where they are.
  std::deque<std::string> texts_;
  std::deque<std::vector<std::int64_t>> ints_;
  std::deque<std::vector<Value>> lists_;
};

// The observers attached to one running range.
struct ObserverFrame {
  struct Active {
    std::shared_ptr<const CallbackEntry> entry;
    std::unique_ptr<ObserverContext> context;
  };
  std::vector<Active> active;
  bool needs_outputs = false;            // some attached observer reads outputs()
  std::unique_ptr<OwnedValues> outputs;  // set_outputs(), for the end callbacks
};

}  // namespace opscope::internal
