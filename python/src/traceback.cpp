// opscope.traceback: cheap captures of the Python stack, formatted only when asked.
//
//   tb = opscope.traceback.capture()      # ~ a frame walk and a reference per frame
//   ...
//   print("".join(tb.format()))           # traceback.format_list()'s lines
//   for f in tb.summary(): f.filename, f.lineno, f.name   # a traceback.StackSummary
//
// What a capture holds: for each frame, a strong reference to its code object and where the
// frame was in it (the instruction offset, or the line where the walk gives no offset); never
// the frame object. Frames own locals (and through them arbitrary objects); code objects own
// only constants and names, so a capture does not keep the caller's objects alive, and the
// line number and the names are worked out from the code object at format time
// (PyCode_Addr2Line). The walk is python_frames.cpp's: on its internal path a capture
// allocates nothing per frame beyond its own array.
//
// Garbage collector: a capture has a __dict__ (so a caller may hang context on it) and can
// therefore sit in a reference cycle; the type takes part in GC (traverse visits the dict
// and the code objects, clear drops them), as PyTorch's CapturedTraceback does.
#include <Python.h>

#include <cstddef>
#include <new>
#include <vector>

#include "bindings.h"
#include "py_compat.h"
#include "python_frames.h"
#include "python_stacks.h"

namespace opscope::python {
namespace {

struct CapturedFrame {
  PyCodeObject* code;  // strong reference
  int offset;          // as RawFrame's
  int line;
};

struct CapturedTracebackObject {
  PyObject_HEAD
  CapturedFrame* frames;  // innermost first; owned (PyMem)
  Py_ssize_t size;
  PyObject* dict;
  PyObject* weakrefs;
};

PyTypeObject g_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

int tb_traverse(PyObject* op, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<CapturedTracebackObject*>(op);
  Py_VISIT(self->dict);
  for (Py_ssize_t i = 0; i < self->size; ++i) {
    Py_VISIT(reinterpret_cast<PyObject*>(self->frames[i].code));
  }
  return 0;
}

int tb_clear(PyObject* op) {
  auto* self = reinterpret_cast<CapturedTracebackObject*>(op);
  Py_CLEAR(self->dict);
  CapturedFrame* frames = self->frames;
  const Py_ssize_t size = self->size;
  self->frames = nullptr;  // reentrancy: the object is consistent before any decref
  self->size = 0;
  for (Py_ssize_t i = 0; i < size; ++i) Py_DECREF(reinterpret_cast<PyObject*>(frames[i].code));
  PyMem_Free(frames);
  return 0;
}

void tb_dealloc(PyObject* op) {
  auto* self = reinterpret_cast<CapturedTracebackObject*>(op);
  PyObject_GC_UnTrack(op);
  if (self->weakrefs != nullptr) PyObject_ClearWeakRefs(op);
  tb_clear(op);
  PyObject_GC_Del(op);
}

Py_ssize_t tb_length(PyObject* op) {
  return reinterpret_cast<CapturedTracebackObject*>(op)->size;
}

// traceback.StackSummary of FrameSummary(filename, lineno, name), outermost first as
// traceback.extract_stack() gives them. Source lines are read lazily by FrameSummary.line.
PyObject* tb_summary(PyObject* op, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<CapturedTracebackObject*>(op);
  PyObject* traceback = PyImport_ImportModule("traceback");
  if (traceback == nullptr) return nullptr;
  PyObject* frame_summary = PyObject_GetAttrString(traceback, "FrameSummary");
  PyObject* stack_summary = PyObject_GetAttrString(traceback, "StackSummary");
  Py_DECREF(traceback);
  PyObject* list = nullptr;
  PyObject* kwargs = nullptr;
  PyObject* result = nullptr;
  if (frame_summary == nullptr || stack_summary == nullptr) goto done;
  list = PyList_New(0);
  kwargs = Py_BuildValue("{s:O}", "lookup_line", Py_False);
  if (list == nullptr || kwargs == nullptr) goto done;
  for (Py_ssize_t i = self->size - 1; i >= 0; --i) {
    const CapturedFrame& f = self->frames[i];
    const RawFrame raw{f.code, f.offset, f.line, nullptr};
    PyObject* args = Py_BuildValue("(OiO)", f.code->co_filename, line_of(raw), f.code->co_name);
    if (args == nullptr) goto done;
    PyObject* entry = PyObject_Call(frame_summary, args, kwargs);
    Py_DECREF(args);
    if (entry == nullptr) goto done;
    const int rc = PyList_Append(list, entry);
    Py_DECREF(entry);
    if (rc != 0) goto done;
  }
  result = PyObject_CallMethod(stack_summary, "from_list", "O", list);
done:
  Py_XDECREF(kwargs);
  Py_XDECREF(list);
  Py_XDECREF(frame_summary);
  Py_XDECREF(stack_summary);
  return result;
}

// traceback.format_list(summary()): one '  File "x.py", line 12, in f\n    source\n' string
// per frame, outermost first.
PyObject* tb_format(PyObject* op, PyObject* /*unused*/) {
  PyObject* summary = tb_summary(op, nullptr);
  if (summary == nullptr) return nullptr;
  PyObject* lines = PyObject_CallMethod(summary, "format", nullptr);
  Py_DECREF(summary);
  return lines;
}

PyObject* tb_repr(PyObject* op) {
  return PyUnicode_FromFormat("<opscope.traceback.CapturedTraceback with %zd frames>",
                              reinterpret_cast<CapturedTracebackObject*>(op)->size);
}

// capture(limit=None): the calling thread's Python frames, at most `limit` innermost ones.
PyObject* capture(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs,
                  PyObject* kwnames) {
  Py_ssize_t limit = -1;
  PyObject* limit_arg = nargs > 0 ? args[0] : nullptr;
  if (nargs > 1) {
    PyErr_SetString(PyExc_TypeError, "capture() takes at most 1 argument (limit)");
    return nullptr;
  }
  if (kwnames != nullptr) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      if (PyUnicode_CompareWithASCIIString(key, "limit") != 0 || limit_arg != nullptr) {
        PyErr_Format(PyExc_TypeError, "capture() got an unexpected keyword argument '%U'",
                     key);
        return nullptr;
      }
      limit_arg = args[nargs + k];
    }
  }
  if (limit_arg != nullptr && limit_arg != Py_None) {
    limit = PyLong_AsSsize_t(limit_arg);
    if (limit == -1 && PyErr_Occurred()) return nullptr;
    if (limit < 0) {
      PyErr_Format(PyExc_ValueError, "capture(): limit must be None or >= 0, got %zd", limit);
      return nullptr;
    }
  }

  // Walk into a buffer that grows for deep stacks (recursion), then copy the frames taken.
  RawFrame local[128];
  std::vector<RawFrame> deep;
  RawFrame* raw = local;
  std::size_t n = walk_python_frames(local, 128);
  if (n == 128 && limit != 128) {
    try {
      std::size_t room = 1024;
      for (;;) {
        deep.resize(room);
        n = walk_python_frames(deep.data(), room);
        if (n < room) break;
        room *= 4;
      }
    } catch (const std::bad_alloc&) {
      return PyErr_NoMemory();
    }
    raw = deep.data();
  }
  if (limit >= 0 && static_cast<std::size_t>(limit) < n) n = static_cast<std::size_t>(limit);

  auto* self = PyObject_GC_New(CapturedTracebackObject, &g_type);
  if (self == nullptr) return nullptr;
  self->frames = nullptr;
  self->size = 0;
  self->dict = nullptr;
  self->weakrefs = nullptr;
  if (n > 0) {
    self->frames = static_cast<CapturedFrame*>(PyMem_Malloc(n * sizeof(CapturedFrame)));
    if (self->frames == nullptr) {
      Py_DECREF(self);
      return PyErr_NoMemory();
    }
    for (std::size_t i = 0; i < n; ++i) {
      self->frames[i] = CapturedFrame{
          reinterpret_cast<PyCodeObject*>(Py_NewRef(reinterpret_cast<PyObject*>(raw[i].code))),
          raw[i].offset, raw[i].line};
    }
    self->size = static_cast<Py_ssize_t>(n);
  }
  PyObject_GC_Track(reinterpret_cast<PyObject*>(self));
  return reinterpret_cast<PyObject*>(self);
}

PyMethodDef g_methods[] = {
    {"summary", tb_summary, METH_NOARGS,
     "The frames as a traceback.StackSummary, outermost first (as traceback.extract_stack)."},
    {"format", tb_format, METH_NOARGS,
     "The frames as traceback.format_list() lines, outermost first."},
    {nullptr, nullptr, 0, nullptr},
};

PySequenceMethods g_sequence = {};

PyMethodDef g_capture_def = {
    "capture", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(capture)),
    METH_FASTCALL | METH_KEYWORDS,
    "capture(limit=None)\n--\n\n"
    "Captures the calling thread's Python stack (its innermost `limit` frames) cheaply:\n"
    "code objects and instruction offsets, not frame objects, so nothing the frames own is\n"
    "kept alive. Format it later with .format() or .summary()."};

}  // namespace

void bind_traceback(pybind11::module_& m) {
  g_type.tp_name = "opscope._C.CapturedTraceback";
  g_type.tp_basicsize = sizeof(CapturedTracebackObject);
  g_type.tp_dealloc = tb_dealloc;
  g_type.tp_repr = tb_repr;
  g_sequence.sq_length = tb_length;
  g_type.tp_as_sequence = &g_sequence;
  g_type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  g_type.tp_doc = PyDoc_STR(
      "A Python stack captured by opscope.traceback.capture(): code objects and instruction\n"
      "offsets, formatted on demand by format() and summary(). len() is its frame count.");
  g_type.tp_traverse = tb_traverse;
  g_type.tp_clear = tb_clear;
  g_type.tp_methods = g_methods;
  g_type.tp_dictoffset = offsetof(CapturedTracebackObject, dict);
  g_type.tp_weaklistoffset = offsetof(CapturedTracebackObject, weakrefs);
  // No tp_new: captures come from capture() only.
  if (PyType_Ready(&g_type) < 0) throw pybind11::error_already_set();
  Py_INCREF(&g_type);
  m.add_object("CapturedTraceback", reinterpret_cast<PyObject*>(&g_type));

  PyObject* fn = PyCFunction_NewEx(&g_capture_def, nullptr, m.attr("__name__").ptr());
  if (fn == nullptr) throw pybind11::error_already_set();
  m.add_object("capture_traceback", fn);

  // The stack provider and module scopes share the frame walk; set up here, once, so that
  // module.cpp needs no line for them.
  bind_python_stacks(m);
}

}  // namespace opscope::python
