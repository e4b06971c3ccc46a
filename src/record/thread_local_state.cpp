#include "opscope/thread_local_state.h"

#include "collect/collector.h"
#include "record/observers.h"

namespace opscope {
namespace internal {

struct ThreadStateSnapshot {
  std::shared_ptr<const CallbackList> callbacks;
  std::uint32_t member_epoch = 0;
};

namespace {
std::shared_ptr<const ThreadStateSnapshot> capture() {
  auto s = std::make_shared<ThreadStateSnapshot>();
  s->callbacks = thread_callbacks();
  s->member_epoch = collect::thread_membership();
  return s;
}

void install(const ThreadStateSnapshot& s) {
  set_thread_callbacks(s.callbacks);
  collect::set_thread_membership(s.member_epoch);
}
}  // namespace
}  // namespace internal

ThreadLocalState::ThreadLocalState() : snapshot_(internal::capture()) {}

ThreadLocalStateGuard::ThreadLocalStateGuard(const ThreadLocalState& state)
    : previous_(internal::capture()) {
  internal::install(*state.snapshot_);
}

ThreadLocalStateGuard::~ThreadLocalStateGuard() { internal::install(*previous_); }

}  // namespace opscope
