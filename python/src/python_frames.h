// The calling thread's Python frames, read from the interpreter.
//
// Shared by the with_stack provider (python_stacks.cpp) and opscope.traceback
// (traceback.cpp). Only python_frames.cpp knows how the frames are reached: through CPython's
// public frame API on every version, or, on the versions where a test proves it (CPython
// 3.11), through the interpreter's own frame list, which is faster (bench/python_bench.py).
#pragma once

#include <Python.h>

#include <cstddef>

namespace opscope::python {

// One Python frame: its code object (borrowed: valid while the frame runs), where in it the
// frame is, and the frame's identity. `offset` is the byte offset of the running instruction
// (PyFrame_GetLasti's unit) or -1 where the walk cannot read it (the public API before 3.11);
// `line` is the source line when the walk read it, else 0 and line_of works it out from
// `offset`. `frame` identifies the running frame while it runs (never dereference it).
struct RawFrame {
  PyCodeObject* code;
  int offset;
  int line;
  const void* frame;
};

// Writes up to `max` of the calling thread's Python frames into `out`, innermost first, and
// returns how many. The caller must hold the GIL. No Python code runs, no reference is kept
// and a pending exception stays as it was. The internal walk allocates nothing; the public one
// may create the frame objects of frames that have none yet (3.11 and later).
std::size_t walk_python_frames(RawFrame* out, std::size_t max) noexcept;

// The innermost running Python frame of the calling thread, as RawFrame::frame names it;
// nullptr when none. The caller must hold the GIL.
const void* current_python_frame() noexcept;

// True when the calling thread holds the GIL, so that it may read Python's state. False on
// threads Python does not know and while the interpreter is not running. Never blocks.
bool thread_holds_gil() noexcept;

// The source line of a frame.
int line_of(const RawFrame& frame) noexcept;

// Which walk walk_python_frames uses: "internal" or "public". The internal walk is the
// default where it is built (CPython 3.11); OPSCOPE_PYTHON_FRAMES=public in the environment
// when the module loads, or use_public_frame_api(true), selects the public one (tests and
// bench/python_bench.py run both).
const char* frame_walk_name() noexcept;
bool internal_frame_walk_available() noexcept;
void use_public_frame_api(bool use) noexcept;

}  // namespace opscope::python
