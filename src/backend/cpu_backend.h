// The CPU backend: the ranges, instants, memory reports and lens side records that threads
// write into their collector buffers during a window, decoded into the window's result. Its
// row in the backend registry (registry.h) is cpu_backend_entry(), at the end of cpu_backend.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/activity_backend.h"
#include "collect/collector.h"
#include "opscope/result.h"

namespace opscope::backend {

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
  // Decodes the drained records: threads, ranges (async ones on the thread that began them),
  // instants, memory events, and the lens records joined to their ranges as EventDetails
  // (inputs, stacks, module paths, FLOPs) and links (sequence numbers, forward threads); the
  // buffer's drops and the ranges still open at stop go to builder.stats().
  void collect(ProfilerResult::Builder& builder, const clock::TickConverter& conv) override;

 private:
  collect::EpochOptions epoch_options_;
  std::uint32_t epoch_ = 0;  // 0 until started
  std::uint32_t previous_membership_ = 0;
  collect::Drained drained_;
};

}  // namespace opscope::backend
