// How an allocation report sits in a thread's buffer: a kMemory blob whose header carries the
// tick (start), the address (name), the category (scope) and the MemoryAction (flags), and
// whose payload is one MemoryPayload. Written by src/record/memory.cpp, read by the session's
// recorder.
#pragma once

#include <cstdint>

#include "opscope/internal/collector.h"

namespace opscope::record {

struct MemoryPayload {
  std::int64_t bytes;
  std::int64_t total_allocated;
  std::int64_t total_reserved;
  std::int8_t device_type;
  std::int8_t device_index;
  std::uint8_t pad[6];
};
static_assert(sizeof(MemoryPayload) % sizeof(internal::Slot) == 0);

}  // namespace opscope::record
