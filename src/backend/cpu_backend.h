// The CPU backend: the ranges, instants, memory reports and lens side records that threads
// write into their collector buffers during a window, decoded into the window's result. Its
// row in the backend registry (registry.h) is cpu_backend_entry(), at the end of cpu_backend.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "backend/activity_backend.h"
#include "collect/collector.h"
#include "opscope/result.h"

namespace opscope::backend {

// How records of another process name things (a crash dump decoded later): the texts its
// call sites and interned names had. The views must outlive the result.
// The lenses as the collector's bits (internal::kLens*), and back.
std::uint32_t lens_bits(const LensSet& lenses);
LensSet lenses_of_bits(std::uint32_t bits);

class RecordNames {
 public:
  virtual ~RecordNames() = default;
  virtual std::string_view interned(std::uint32_t id) const = 0;
  virtual std::string_view site(std::uint32_t compact_index) const = 0;
  virtual std::string_view site_at(std::uint64_t address) const = 0;  // a 32-byte record's
};

// What decode_records leaves out, how it names, and how much it read.
struct DecodeOptions {
  // Records that ended (ranges), were made (memory reports) or happened (instants) before this
  // tick are left out; 0 keeps everything. The flight recorder's `keep`.
  std::uint64_t min_end_ticks = 0;
  // Names from another process (nullptr: this process's call sites and interned names);
  // native stack frames then become address labels, which this process cannot symbolize.
  const RecordNames* names = nullptr;
};
struct DecodedCounts {
  std::uint64_t ranges_ended = 0;  // ranges decoded, wherever they ended
  std::uint64_t left_out = 0;      // records before DecodeOptions::min_end_ticks
};

// Decodes collector records into `builder`: threads, ranges (async ones on the thread that
// began them), instants, memory events, and the lens records joined to their ranges as
// EventDetails (inputs, stacks, module paths, FLOPs) and links (sequence numbers, forward
// threads). Names resolve through this process's call sites and interned strings.
DecodedCounts decode_records(std::span<const collect::ThreadRecords> threads,
                             ProfilerResult::Builder& builder, const clock::TickConverter& conv,
                             const DecodeOptions& options = {});

class CpuBackend final : public ActivityBackend {
 public:
  // `epoch`: the collector's options for the window (buffer limit, threads); its lens mask is
  // set from `lenses`.
  CpuBackend(const collect::EpochOptions& epoch, const LensSet& lenses);

  std::string_view name() const override { return "cpu"; }
  // Opens a collector epoch; the calling thread becomes a member of a thread-limited one.
  void start() override;
  // Ends the epoch and drains every thread's buffer; the calling thread's membership is what
  // it was before start().
  void stop() override;
  // Decodes the drained records (decode_records); the buffer's drops and the ranges still open
  // at stop go to builder.stats().
  void collect(ProfilerResult::Builder& builder, const clock::TickConverter& conv) override;

 private:
  collect::EpochOptions epoch_options_;
  std::uint32_t epoch_ = 0;  // 0 until started
  std::uint32_t previous_membership_ = 0;
  collect::Drained drained_;
};

}  // namespace opscope::backend
