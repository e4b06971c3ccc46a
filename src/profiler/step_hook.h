// One hook that Profiler::step() calls, so that a layer above the profiler (on-demand tracing
// counts steps for iteration-based captures) learns of steps without the profiler knowing it.
#pragma once

namespace opscope::internal {

using StepHook = void (*)() noexcept;

// Installs `hook` (nullptr: none). Any thread; the hook must be cheap and must not throw.
void set_step_hook(StepHook hook) noexcept;

}  // namespace opscope::internal
