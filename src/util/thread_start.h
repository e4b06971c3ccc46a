// Starting a thread that is to work beside its creator at once, on another core.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <utility>

namespace opscope::util {

namespace thread_start_detail {
struct Placement;
// What a new thread needs to be started away from the calling thread's core; nullptr where
// there is nothing to do (one core allowed, or the affinity cannot be read).
std::shared_ptr<Placement> away_from_this_core();
// The creator's side, right after the thread was made: moves it off the creator's core.
void place(Placement& placement, std::thread& thread) noexcept;
// The new thread's side, first thing: the affinity it was started with is given back.
void started(Placement& placement) noexcept;
}  // namespace thread_start_detail

// std::thread(body), for a helper its creator is about to wait on or share work with.
//
// Linux queued a new thread on its creator's core here; while the creator kept that core
// busy, the thread waited until a scheduler tick (every 4 ms) moved it to the idle one. On the
// project's VM a helper first ran 1.8 ms after it was made, on average, and 3.8 ms in most
// starts (bench/thread_start_bench.cpp, bench/RESULTS.md): a third of the time a 10 MB trace
// takes to read on two cores, all of it done by the creator alone. Moved off the creator's
// core as soon as it exists, it ran after 0.14 ms. Once it runs, it gets the affinity its
// creator had, so that the scheduler may place it anywhere again. Throws what std::thread
// throws.
template <typename Body>
std::thread start_thread_beside(Body&& body) {
  std::shared_ptr<thread_start_detail::Placement> placement =
      thread_start_detail::away_from_this_core();
  std::thread thread([placement, body = std::forward<Body>(body)]() mutable {
    if (placement != nullptr) thread_start_detail::started(*placement);
    body();
  });
  if (placement != nullptr) thread_start_detail::place(*placement, thread);
  return thread;
}

}  // namespace opscope::util
