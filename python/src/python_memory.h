// Python allocations for profile_memory (python_memory.cpp).
#pragma once

namespace opscope::python {

// Wraps the interpreter's object and memory allocators while a window records memory, and
// removes the wrappers otherwise. Called with the GIL held, after each Profiler start(), step()
// and stop().
void sync_python_memory_hooks();

// Whether a wrapper of ours is installed (for the tests).
bool python_memory_hooked();

}  // namespace opscope::python
