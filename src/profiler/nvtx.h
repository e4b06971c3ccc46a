// NVTX forwarding for the legacy profiler's NVTX mode.
//
// NVTX calls cost nothing until a tool (Nsight Systems, or any NVTX injection library named by
// NVTX_INJECTION64_PATH) attaches; the mode is refused unless the machine has a CUDA device,
// as PyTorch refuses it in a build without CUDA.
#pragma once

#include <string>

#include "opscope/record_function.h"
#include "opscope/observer.h"

namespace opscope::nvtx {

// True when NVTX mode can run here; otherwise `why` says what is missing (no NVTX headers in
// this build, no CUDA driver, no device).
bool available(std::string* why);

void range_push(const char* message) noexcept;
void range_pop() noexcept;
void mark(const char* message) noexcept;

// Registers a thread-local observer (carried by ThreadLocalState like the legacy profiler's
// state) that pushes an NVTX range at each range's begin and pops it at its end. The range's
// text is PyTorch's: "aten::mm, seq = 4, sizes = [[2, 3], [3, 4]]" (sizes with `with_shapes`).
// Works without a GPU (NVTX calls reach whatever tool is attached); the legacy profiler
// asks available() first, as PyTorch does.
CallbackHandle add_range_forwarding(bool with_shapes);

}  // namespace opscope::nvtx
