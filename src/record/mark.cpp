// opscope::mark: an instant record with an interned name.
#include "opscope/mark.h"

#include "collect/collector.h"
#include "collect/string_table.h"
#include "opscope/record_function.h"

namespace opscope::internal {

void mark_slow(std::uint32_t state, std::string_view name) noexcept {
  ThreadContext& c = t_ctx;
  const std::uint32_t epoch = epoch_of(state);
  if (epoch == 0) return;  // only observers listen: marks are not observed
  const bool recorded = (state & kStateRecordAllThreads) ||
                        ((state & kStateRecordSomeThreads) && c.member_epoch == epoch);
  if (!recorded || !(c.epoch == epoch || prepare_thread(epoch))) return;
  std::uint32_t id;
  try {
    id = collect::intern(name);
  } catch (...) {
    return;  // out of memory while interning: a mark is not worth an exception
  }
  const std::uint64_t now = ticks();
  append(make_record(now, now, id, take_other_id(c), c.slot,
                     static_cast<std::uint8_t>(RecordScope::kUserScope), RecordKind::kInstant,
                     kNameInterned),
         epoch);
}

}  // namespace opscope::internal
