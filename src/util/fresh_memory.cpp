#include "util/fresh_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace opscope::util {

void populate_for_writing(void* begin, std::size_t bytes) noexcept {
  constexpr std::size_t kWorthIt = 1 << 20;
  if (bytes < kWorthIt) return;
#ifdef MADV_POPULATE_WRITE
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Whole pages inside the range only: the partial ones at its ends may belong to other data.
  const auto first = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) & ~(page - 1);
  const auto last = (reinterpret_cast<std::uintptr_t>(begin) + bytes) & ~(page - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
#else
  (void)begin;
#endif
}

}  // namespace opscope::util
