// Walking Python frames through CPython's internal frame list.
//
// Why internals: the public API reaches a frame's caller through PyFrame_GetBack, which in
// CPython 3.11 creates a frame object (an allocation, and a reference to drop) for every
// frame not yet materialized; in a loop most are new each time. The with_stack lens walks the
// stack at every recorded range, so it reads the interpreter's own _PyInterpreterFrame chain
// instead (tstate->cframe->current_frame, frame->previous, frame->f_code, frame->prev_instr):
// a pointer walk, no allocation, no reference counting. This ties the file to CPython 3.11's
// layout (the Debian 12 interpreter the package targets); PyTorch's python tracer does the
// same for 3.11. Other versions fail to compile here, not at run time.
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "python_frames.cpp reads CPython 3.11's frame layout; port it for this version"
#endif

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "python_frames.h"

namespace opscope::python {
namespace {

// The frames that are really running: the interpreter pushes a frame before its first
// instruction ("incomplete") and, for generators, keeps suspended ones out of the chain.
_PyInterpreterFrame* skip_incomplete(_PyInterpreterFrame* f) noexcept {
  while (f != nullptr && _PyFrame_IsIncomplete(f)) f = f->previous;
  return f;
}

_PyInterpreterFrame* innermost() noexcept {
  PyThreadState* tstate = _PyThreadState_UncheckedGet();
  if (tstate == nullptr || tstate->cframe == nullptr) return nullptr;
  return skip_incomplete(tstate->cframe->current_frame);
}

}  // namespace

bool thread_holds_gil() noexcept {
  if (!Py_IsInitialized()) return false;
  // PyGILState_Check alone answers 1 when its check is disabled (sub-interpreters), so also
  // compare this thread's state with the one that holds the GIL.
  PyThreadState* mine = PyGILState_GetThisThreadState();
  return mine != nullptr && mine == _PyThreadState_UncheckedGet() && PyGILState_Check();
}

std::size_t walk_python_frames(RawFrame* out, std::size_t max) noexcept {
  std::size_t n = 0;
  for (_PyInterpreterFrame* f = innermost(); f != nullptr && n < max;
       f = skip_incomplete(f->previous)) {
    out[n++] = RawFrame{f->f_code, _PyInterpreterFrame_LASTI(f), f};
  }
  return n;
}

const void* current_python_frame() noexcept { return innermost(); }

int line_of(const RawFrame& frame) noexcept {
  return PyCode_Addr2Line(frame.code, frame.lasti * static_cast<int>(sizeof(_Py_CODEUNIT)));
}

}  // namespace opscope::python
