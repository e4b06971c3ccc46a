// opscope/thread_local_state.h: carry the profiler's view of a thread to another thread.
//
// A session records every thread by default, but thread-local observers (and sessions started
// with ExperimentalConfig::record_all_threads = false) only see threads that carry the state
// of the thread that set them up. Capture the state where work is created and install it
// where the work runs:
//
//   opscope::ThreadLocalState state;                  // on the submitting thread
//   pool.submit([state] {
//     opscope::ThreadLocalStateGuard guard(state);    // on the worker
//     run();
//   });
//
// or, shorter, pool.submit(opscope::wrap(run)).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace opscope {

namespace internal {
struct ThreadStateSnapshot;  // src/record/thread_local_state.cpp
}

// A snapshot of the calling thread's thread-local observers and session membership (a
// thread-limited session's, the legacy profiler's).
// Copyable and cheap to copy (shared, immutable). Capture costs one allocation.
class ThreadLocalState {
 public:
  ThreadLocalState();  // captures the calling thread's state

 private:
  friend class ThreadLocalStateGuard;
  std::shared_ptr<const internal::ThreadStateSnapshot> snapshot_;
};

// Installs a ThreadLocalState on the calling thread for its lifetime, then restores what the
// thread had before. Must be destroyed on the thread that created it.
class ThreadLocalStateGuard {
 public:
  explicit ThreadLocalStateGuard(const ThreadLocalState& state);
  ~ThreadLocalStateGuard();
  ThreadLocalStateGuard(const ThreadLocalStateGuard&) = delete;
  ThreadLocalStateGuard& operator=(const ThreadLocalStateGuard&) = delete;

 private:
  std::shared_ptr<const internal::ThreadStateSnapshot> previous_;
};

// Wraps a callable so that it runs with the state of the thread that called wrap().
template <typename Fn>
auto wrap(Fn fn) {
  return [state = ThreadLocalState(), fn = std::move(fn)](auto&&... args) mutable -> decltype(auto) {
    ThreadLocalStateGuard guard(state);
    return fn(std::forward<decltype(args)>(args)...);
  };
}

}  // namespace opscope
