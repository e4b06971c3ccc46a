// The calling thread's Python frames, read straight from the interpreter's frame stack.
//
// Shared by the with_stack provider (python_stacks.cpp) and opscope.traceback
// (traceback.cpp). Only python_frames.cpp sees CPython's internal frame layout.
#pragma once

#include <Python.h>

#include <cstddef>

namespace opscope::python {

// One Python frame: its code object (borrowed: valid while the frame runs) and the offset of
// its current instruction in code units (PyCode_Addr2Line takes it times 2). `frame`
// identifies the running frame (its address in the thread's frame stack) while it runs.
struct RawFrame {
  PyCodeObject* code;
  int lasti;
  const void* frame;
};

// Writes up to `max` of the calling thread's Python frames into `out`, innermost first, and
// returns how many. The caller must hold the GIL. No allocation, no reference taken, no
// Python code run: a pointer walk over the interpreter's frames (CPython 3.11's
// _PyInterpreterFrame list), so it is cheap enough for every recorded range.
std::size_t walk_python_frames(RawFrame* out, std::size_t max) noexcept;

// The innermost running Python frame of the calling thread, as RawFrame::frame names it;
// nullptr when none. The caller must hold the GIL.
const void* current_python_frame() noexcept;

// True when the calling thread holds the GIL, so that it may read Python's state. False on
// threads Python does not know and while the interpreter is not running. Never blocks.
bool thread_holds_gil() noexcept;

// The source line of a frame (PyCode_Addr2Line).
int line_of(const RawFrame& frame) noexcept;

}  // namespace opscope::python
