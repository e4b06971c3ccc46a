// The observer registry behind add_global_callback / add_thread_local_callback, shared by
// RecordFunction's slow path and ThreadLocalState.
#pragma once

#include <memory>
#include <vector>

#include "opscope/record_function.h"

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

// The observers attached to one running range.
struct ObserverFrame {
  struct Active {
    std::shared_ptr<const CallbackEntry> entry;
    std::unique_ptr<ObserverContext> context;
  };
  std::vector<Active> active;
};

}  // namespace opscope::internal
