#include "util/thread_start.h"

#include <pthread.h>
#include <sched.h>

namespace opscope::util::thread_start_detail {

// Who of the two came first decides who gives the thread its affinity back: the creator
// restricts it, then says so; the thread, once running, says it runs. Whichever says second
// restores the creator's affinity, so that it is never left restricted.
struct Placement {
  cpu_set_t allowed;  // the creator's affinity, which the thread gets back
  cpu_set_t away;     // the same without the creator's core
  std::atomic<int> said{0};
  static constexpr int kPlaced = 1;
  static constexpr int kRunning = 2;
};

std::shared_ptr<Placement> away_from_this_core() {
  auto p = std::make_shared<Placement>();
  CPU_ZERO(&p->allowed);
  if (sched_getaffinity(0, sizeof(p->allowed), &p->allowed) != 0) return nullptr;
  const int here = sched_getcpu();
  if (here < 0 || here >= CPU_SETSIZE || CPU_COUNT(&p->allowed) < 2 ||
      !CPU_ISSET(here, &p->allowed)) {
    return nullptr;
  }
  p->away = p->allowed;
  CPU_CLR(here, &p->away);
  return p;
}

void place(Placement& placement, std::thread& thread) noexcept {
  const pthread_t handle = thread.native_handle();
  // Fails only for a thread that already ended: nothing to move then.
  pthread_setaffinity_np(handle, sizeof(placement.away), &placement.away);
  if (placement.said.exchange(Placement::kPlaced) == Placement::kRunning) {
    pthread_setaffinity_np(handle, sizeof(placement.allowed), &placement.allowed);
  }
}

void started(Placement& placement) noexcept {
  if (placement.said.exchange(Placement::kRunning) == Placement::kPlaced) {
    pthread_setaffinity_np(pthread_self(), sizeof(placement.allowed), &placement.allowed);
  }
}

}  // namespace opscope::util::thread_start_detail
