#include "opscope/thread_local_state.h"

#include "collect/collector.h"
#include "record/observers.h"
#include "record/session_token.h"

namespace opscope {
namespace internal {

struct ThreadStateSnapshot {
  std::shared_ptr<const CallbackList> callbacks;
  std::uint32_t member_epoch = 0;
  std::shared_ptr<const void> session;
};

namespace {
thread_local std::shared_ptr<const void> t_session;

std::shared_ptr<const ThreadStateSnapshot> capture() {
  auto s = std::make_shared<ThreadStateSnapshot>();
  s->callbacks = thread_callbacks();
  s->member_epoch = collect::thread_membership();
  s->session = t_session;
  return s;
}

void install(const ThreadStateSnapshot& s) {
  set_thread_callbacks(s.callbacks);
  collect::set_thread_membership(s.member_epoch);
  t_session = s.session;
}
}  // namespace
}  // namespace internal

namespace record {
void set_thread_session(std::shared_ptr<const void> token) {
  internal::t_session = std::move(token);
}
const std::shared_ptr<const void>& thread_session() { return internal::t_session; }
}  // namespace record

ThreadLocalState::ThreadLocalState() : snapshot_(internal::capture()) {}

ThreadLocalStateGuard::ThreadLocalStateGuard(const ThreadLocalState& state)
    : previous_(internal::capture()) {
  internal::install(*state.snapshot_);
}

ThreadLocalStateGuard::~ThreadLocalStateGuard() { internal::install(*previous_); }

}  // namespace opscope
