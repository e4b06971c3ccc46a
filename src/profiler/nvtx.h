// NVTX forwarding for the legacy profiler's NVTX mode.
//
// NVTX calls cost nothing until a tool (Nsight Systems, or any NVTX injection library named by
// NVTX_INJECTION64_PATH) attaches; the mode is refused unless the machine has a CUDA device,
// as PyTorch refuses it in a build without CUDA.
#pragma once

#include <string>

namespace opscope::nvtx {

// True when NVTX mode can run here; otherwise `why` says what is missing (no NVTX headers in
// this build, no CUDA driver, no device).
bool available(std::string* why);

void range_push(const char* message) noexcept;
void range_pop() noexcept;
void mark(const char* message) noexcept;

}  // namespace opscope::nvtx
