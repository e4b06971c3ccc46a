// The trace of a flight recorder's dump, made the same way from a live ring (flight_recorder.cpp)
// and from a crash's raw file read in another process (flight_decode.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "backend/cpu_backend.h"
#include "clock/clock.h"
#include "collect/collector.h"
#include "opscope/result.h"

namespace opscope::flight {

// A range open at the dump, its name already resolved by the caller (an empty name: the entry
// was read half written, and is left out). Its thread is found by `tid`, or added.
struct OpenEntry {
  std::uint64_t tid = 0;
  std::string thread_name;
  std::uint16_t slot = 0;
  internal::OpenRange range{};
  std::string_view name;
  const CallSite* site = nullptr;
};

// What the metadata says beside what the records show.
struct DumpFigures {
  std::string_view trigger;
  double keep_seconds = 0;
  collect::RingStats ring;
  std::optional<int> signal;          // a crash's
  std::optional<bool> names_written;  // a crash's: whether the name tables could be written
};

struct DumpResult {
  std::shared_ptr<const ProfilerResult> result;
  std::uint64_t open_ranges = 0;
};

// Decodes `threads` (what ended in the last keep_seconds before `dump_ticks`), adds the open
// ranges whose end the records do not hold, ending at the dump and marked {"open": true}, and
// the "flightRecorder" metadata. `names`: another process's (nullptr: this one's).
DumpResult build_dump_result(std::span<const collect::ThreadRecords> threads,
                             std::span<const OpenEntry> open, const clock::TickConverter& conv,
                             std::uint64_t dump_ticks, std::int64_t pid, const DumpFigures& figures,
                             const backend::RecordNames* names = nullptr);

}  // namespace opscope::flight
