// Walking the calling thread's Python frames.
//
// The public walk (every version from 3.9): PyThreadState_GetFrame, then PyFrame_GetBack,
// PyFrame_GetCode and PyFrame_GetLasti (3.11+) or PyFrame_GetLineNumber (before) per frame.
// From 3.11 the interpreter keeps frames in its own list and makes a frame object only when
// one is asked for, so this walk creates (allocates) the frame objects of frames that have
// none yet; a frame keeps its object until it returns, so a loop pays it for its new frames.
//
// The internal walk (CPython 3.11 only, where the suite runs it): the interpreter's own
// _PyInterpreterFrame chain (tstate->cframe->current_frame, frame->previous, frame->f_code,
// the frame's last instruction), a pointer walk with no allocation and no reference counting.
// It ties this file to 3.11's layout, so it is built only for 3.11, and a test on 3.11 runs
// the stack tests through both walks (python/tests/test_python_versions.py). Another
// version's layout goes here only with a test on that version.
#include "python_frames.h"

#include <cstdlib>
#include <cstring>
#include <optional>

#include "py_compat.h"

#include "opscope/extension.h"
#include "opscope/memory.h"

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define OPSCOPE_INTERNAL_FRAME_WALK 1
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#else
#define OPSCOPE_INTERNAL_FRAME_WALK 0
#endif

namespace opscope::python {
namespace {

// ---------------------------------------------------------------------------------------------
// The public walk.

// The frame objects the public calls make are opscope's allocations, not the user's; and a
// stack's walk runs while its blob is written in place, where a report of profile_memory must
// not land (one did, on 3.13: its record read back as frame words, a crash in stop()). Only a
// session that profiles memory reports them, so only then is the scope (two calls) taken.
class OwnWorkWhileProfilingMemory {
 public:
  OwnWorkWhileProfilingMemory() noexcept {
    if (memory_profiling_enabled()) scope_.emplace();
  }

 private:
  std::optional<extension::OwnWorkScope> scope_;
};

int offset_public(PyFrameObject* frame) noexcept {
#if PY_VERSION_HEX >= 0x030B0000
  return PyFrame_GetLasti(frame);
#else
  (void)frame;
  return -1;
#endif
}

int line_public(PyFrameObject* frame) noexcept {
#if PY_VERSION_HEX >= 0x030B0000
  (void)frame;
  return 0;  // line_of works it out from the offset, once per cached label
#else
  return PyFrame_GetLineNumber(frame);
#endif
}

std::size_t walk_public(RawFrame* out, std::size_t max) noexcept {
  PyThreadState* tstate = thread_state_or_null();
  if (tstate == nullptr || max == 0) return 0;
  const OwnWorkWhileProfilingMemory own_work;
  // Making a frame object can fail (no memory); the walk then ends there, and the caller's
  // pending exception, if any, is what remains.
  const PendingErrorKept kept;
  std::size_t n = 0;
  PyFrameObject* frame = PyThreadState_GetFrame(tstate);  // strong, or nullptr
  while (frame != nullptr && n < max) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // strong; the running frame holds it too
    Py_DECREF(reinterpret_cast<PyObject*>(code));
    out[n++] = RawFrame{code, offset_public(frame), line_public(frame), frame};
    PyFrameObject* back = PyFrame_GetBack(frame);
    // The running frame holds its frame object too, so the address stays its identity.
    Py_DECREF(reinterpret_cast<PyObject*>(frame));
    frame = back;
  }
  Py_XDECREF(reinterpret_cast<PyObject*>(frame));
  return n;
}

const void* current_public() noexcept {
  PyThreadState* tstate = thread_state_or_null();
  if (tstate == nullptr) return nullptr;
  const PendingErrorKept kept;
  const OwnWorkWhileProfilingMemory own_work;
  PyFrameObject* frame = PyThreadState_GetFrame(tstate);
  Py_XDECREF(reinterpret_cast<PyObject*>(frame));
  return frame;
}

// ---------------------------------------------------------------------------------------------
// The internal walk.

#if OPSCOPE_INTERNAL_FRAME_WALK
// The frames that are really running: the interpreter pushes a frame before its first
// instruction ("incomplete") and, for generators, keeps suspended ones out of the chain.
_PyInterpreterFrame* skip_incomplete(_PyInterpreterFrame* f) noexcept {
  while (f != nullptr && _PyFrame_IsIncomplete(f)) f = f->previous;
  return f;
}

_PyInterpreterFrame* innermost() noexcept {
  PyThreadState* tstate = thread_state_or_null();
  if (tstate == nullptr || tstate->cframe == nullptr) return nullptr;
  return skip_incomplete(tstate->cframe->current_frame);
}

std::size_t walk_internal(RawFrame* out, std::size_t max) noexcept {
  std::size_t n = 0;
  for (_PyInterpreterFrame* f = innermost(); f != nullptr && n < max;
       f = skip_incomplete(f->previous)) {
    const int offset = _PyInterpreterFrame_LASTI(f) * static_cast<int>(sizeof(_Py_CODEUNIT));
    out[n++] = RawFrame{f->f_code, offset, 0, f};
  }
  return n;
}

bool initial_public_choice() noexcept {
  const char* choice = std::getenv("OPSCOPE_PYTHON_FRAMES");
  return choice != nullptr && std::strcmp(choice, "public") == 0;
}

// Read by threads holding the GIL only; changed with the GIL held.
bool g_public = initial_public_choice();
#endif

}  // namespace

bool thread_holds_gil() noexcept {
  if (!Py_IsInitialized()) return false;
  // PyGILState_Check alone answers 1 when its check is disabled (sub-interpreters), so also
  // compare this thread's state with the one that holds the GIL.
  PyThreadState* mine = PyGILState_GetThisThreadState();
  return mine != nullptr && mine == thread_state_or_null() && PyGILState_Check();
}

std::size_t walk_python_frames(RawFrame* out, std::size_t max) noexcept {
#if OPSCOPE_INTERNAL_FRAME_WALK
  if (!g_public) return walk_internal(out, max);
#endif
  return walk_public(out, max);
}

const void* current_python_frame() noexcept {
#if OPSCOPE_INTERNAL_FRAME_WALK
  if (!g_public) return innermost();
#endif
  return current_public();
}

int line_of(const RawFrame& frame) noexcept {
  if (frame.line > 0) return frame.line;
  return PyCode_Addr2Line(frame.code, frame.offset);
}

const char* frame_walk_name() noexcept {
#if OPSCOPE_INTERNAL_FRAME_WALK
  if (!g_public) return "internal";
#endif
  return "public";
}

bool internal_frame_walk_available() noexcept { return OPSCOPE_INTERNAL_FRAME_WALK != 0; }

void use_public_frame_api(bool use) noexcept {
#if OPSCOPE_INTERNAL_FRAME_WALK
  g_public = use;
#else
  (void)use;
#endif
}

}  // namespace opscope::python
