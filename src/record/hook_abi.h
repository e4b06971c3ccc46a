// The record layer's entry for the allocator hook (libopscope_memhook.so, src/memhook/): what
// the hook calls in the program's copy of opscope.
// Not API: the hook and src/record/memory.cpp, which defines it, are built from one tree.
//
// The hook is a separate shared library that refers to this function weakly, so its name and
// signature are an ABI between the two: src/memhook/CMakeLists.txt passes its mangled name to
// the linker (-u), and tests/memhook/memhook_test.cpp fails if the two ever disagree.
#pragma once

#include <cstdint>

namespace opscope::internal {

// Records one allocation (bytes > 0) or free (bytes < 0) seen by the hook, as
// report_memory_usage does, with totals kept by opscope for the hook (see memory.cpp: the
// heap in use when the window's first report came, plus every change reported since).
// Nothing happens when the calling thread is already inside a report or inside one of the
// collector's slow paths: what opscope allocates for itself there is neither reported nor
// counted, and a report from there could not be recorded without re-entering the code that
// allocated. Never throws; allocates only to register the thread.
void report_hooked_memory(const void* ptr, std::int64_t bytes) noexcept;

}  // namespace opscope::internal
