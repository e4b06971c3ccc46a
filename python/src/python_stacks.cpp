// Python call stacks for the with_stack lens, and Python module scopes for with_modules.
//
// The record layer captures native return addresses at the begin of each range recorded with
// with_stack; for code run by the interpreter those are CPython's eval loop and say nothing.
// This file installs the record layer's foreign stack provider (src/record/stack_capture.h):
// when the thread that begins a range holds the GIL, the native frames from the first one in
// the interpreter or in this extension outward are replaced by the thread's Python frames,
// "file.py(12): function" as PyTorch prints them (this extension's innermost frames, the
// entry point that began the range, are dropped too). Native frames of other code called from
// Python (a C++ extension that records its own ranges) stay, innermost, before the Python
// frames that called them: Python code is the outer caller of the native code it runs.
//
// Cost: each Python frame is a step of the frame walk (python_frames.cpp) and a lookup in a cache of
// interned labels keyed by (code object, instruction offset or line), so a frame's text is built and
// interned once; the cache holds a reference to each code object it names, so an address is
// never reused for another code object while cached. Threads that do not hold the GIL (C++
// threads, or Python threads inside a gil_scoped_release) keep their native frames only:
// another thread's Python frames cannot be read safely.
//
// Module scopes: opscope.module("Linear_0") (the type below) enters a module as C++'s
// ModuleScope does, for the ranges begun inside it (their module path) and for stacks
// ("nn.Module: Linear_0" frames). Its ModuleFrame has no stack address (opscope/module.h), so
// the native walk leaves it to the provider here, which places it as capture_stack places
// C++ modules: innermost first, right before the frame of the function that entered it.
// Scopes must nest like `with` blocks on one thread; one held across a `yield` that is resumed
// elsewhere is a misuse (its frame is then placed at the outer end).
#include "python_stacks.h"

#include <Python.h>
#include <dlfcn.h>
#include <link.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "bindings.h"
#include "opscope/extension.h"
#include "opscope/internal/collector.h"
#include "opscope/module.h"
#include "py_compat.h"
#include "python_frames.h"

namespace opscope::python {
namespace {

using extension::kLabelFrameBit;
using extension::kMaxStackFrames;

// The executable code of one loaded object: [lo, hi).
struct CodeRange {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  bool contains(std::uintptr_t pc) const { return pc > lo && pc <= hi; }  // return addresses
};

struct FindRange {
  std::uintptr_t address;
  CodeRange range;
};

int on_object(dl_phdr_info* info, std::size_t /*size*/, void* arg) {
  auto* find = static_cast<FindRange*>(arg);
  CodeRange code{UINTPTR_MAX, 0};
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    const std::uintptr_t hi = lo + ph.p_memsz;
    if (find->address >= lo && find->address < hi) holds = true;
    if (ph.p_flags & PF_X) {
      code.lo = std::min(code.lo, lo);
      code.hi = std::max(code.hi, hi);
    }
  }
  if (!holds) return 0;
  find->range = code;
  return 1;
}

// The executable segments of the object that holds `address`.
CodeRange code_range_of(const void* address) {
  FindRange find{reinterpret_cast<std::uintptr_t>(address), {}};
  dl_iterate_phdr(on_object, &find);
  return find.range;
}

// Set once at install; read by the provider (on any thread) after the release store of the
// provider itself.
CodeRange g_interpreter;  // the eval loop: the python3 executable, or libpython
CodeRange g_extension;    // this module
CodeRange g_library;      // libopscope.so, which this module links (the Profiler, ranges)

bool is_opscope_pc(std::uintptr_t pc) { return g_extension.contains(pc) || g_library.contains(pc); }

bool is_runtime_frame(std::uint64_t word) {
  if (word & kLabelFrameBit) return false;
  const auto pc = static_cast<std::uintptr_t>(word);
  return g_interpreter.contains(pc) || is_opscope_pc(pc);
}

bool is_extension_frame(std::uint64_t word) {
  return (word & kLabelFrameBit) == 0 && is_opscope_pc(static_cast<std::uintptr_t>(word));
}

// Code objects whose frames stacks leave out: opscope's own Python wrappers (the function
// @record_function wraps a function with), registered by opscope/profiler.py. Guarded by the
// GIL.
std::array<PyCodeObject*, 4> g_hidden_code{};

bool hidden(const PyCodeObject* code) {
  for (const PyCodeObject* h : g_hidden_code) {
    if (h == code) return true;
  }
  return false;
}

// The Python frames captured by a PythonStackSnapshot on this thread, as label words.
struct Snapshot {
  std::array<std::uint64_t, kMaxStackFrames> words{};
  std::size_t count = 0;
  bool active = false;
};
constinit thread_local Snapshot t_snapshot;

// ---------------------------------------------------------------------------------------------
// Labels of Python frames, cached per (code object, instruction offset or line). Guarded by the GIL:
// only threads that hold it read or write the cache.

struct CachedLabel {
  PyCodeObject* code = nullptr;  // strong reference; nullptr: empty slot
  int offset = -1;
  int line = 0;
  std::uint32_t label = 0;
};
// Direct-mapped: a program's hot call sites fit many times over; a collision costs one
// interned lookup.
std::array<CachedLabel, 4096> g_labels;

std::size_t slot_of(const RawFrame& f) {
  // One of offset and line says where the frame is (python_frames.h); the other is constant.
  const auto where = static_cast<std::uint32_t>(f.offset) ^ static_cast<std::uint32_t>(f.line);
  std::uint64_t h = reinterpret_cast<std::uintptr_t>(f.code) ^
                    (static_cast<std::uint64_t>(where) << 40);
  h *= 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>(h >> 52);  // top 12 bits: 4096 slots
}

// `filename` relative to the longest sys.path entry that contains it, as PyTorch's stacks
// show library files ("torch/nn/modules/linear.py"); unchanged when none does (a script run
// by a relative name is already short).
std::string_view short_file(std::string_view filename) {
  PyObject* path = PySys_GetObject("path");  // borrowed
  std::size_t best = 0;
  if (path != nullptr && PyList_Check(path)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(path); ++i) {
      PyObject* entry = PyList_GET_ITEM(path, i);
      if (!PyUnicode_Check(entry)) continue;
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(entry, &size);
      if (text == nullptr) {
        PyErr_Clear();
        continue;
      }
      std::string_view dir(text, static_cast<std::size_t>(size));
      while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
      if (dir.empty() || dir.size() + 1 >= filename.size()) continue;
      if (filename.starts_with(dir) && filename[dir.size()] == '/' && dir.size() + 1 > best) {
        best = dir.size() + 1;
      }
    }
  }
  return filename.substr(best);
}

std::string_view utf8(PyObject* s) {
  if (s == nullptr || !PyUnicode_Check(s)) return "?";
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(s, &size);
  if (text == nullptr) {
    PyErr_Clear();
    return "?";
  }
  return {text, static_cast<std::size_t>(size)};
}

// Builds and interns "file.py(12): function". Throws std::bad_alloc.
std::uint32_t intern_frame(const RawFrame& f) {
  const std::string_view file = short_file(utf8(f.code->co_filename));
  const std::string_view function = utf8(f.code->co_name);
  char line[16];
  const int len = std::snprintf(line, sizeof(line), "(%d): ", line_of(f));
  std::string text;
  text.reserve(file.size() + static_cast<std::size_t>(len) + function.size());
  text.append(file).append(line, static_cast<std::size_t>(len)).append(function);
  return extension::intern(text);
}

// A label cache miss: makes the label and caches it in `c`. Out of line, so that the hit path
// of label_of stays a few instructions inlined into the walk.
[[gnu::noinline, gnu::cold]] std::uint64_t label_miss(CachedLabel& c, const RawFrame& f) noexcept {
  // This may run while a stack blob is written in place, and it allocates (the label's text,
  // its UTF-8) and frees (the evicted code object): no report of profile_memory may land
  // inside the blob, and none of it is the user's.
  const extension::OwnWorkScope own_work;
  std::uint32_t label;
  try {
    label = intern_frame(f);
  } catch (...) {
    return 0;
  }
  // Dropping the evicted code object cannot run Python code that reaches this cache: code
  // objects hold no finalizer; a weakref callback on one would run here, with the GIL held.
  PyCodeObject* evicted = c.code;
  c.code = reinterpret_cast<PyCodeObject*>(Py_NewRef(reinterpret_cast<PyObject*>(f.code)));
  c.offset = f.offset;
  c.line = f.line;
  c.label = label;
  Py_XDECREF(reinterpret_cast<PyObject*>(evicted));
  return kLabelFrameBit | label;
}

// The label word of a frame; 0 when it could not be made (out of memory).
std::uint64_t label_of(const RawFrame& f) noexcept {
  CachedLabel& c = g_labels[slot_of(f)];
  if (c.code == f.code && c.offset == f.offset && c.line == f.line) [[likely]]
    return kLabelFrameBit | c.label;
  return label_miss(c, f);
}

// ---------------------------------------------------------------------------------------------
// Module scopes entered from Python.

struct ModuleScopeObject {
  PyObject_HEAD PyObject* name;  // str
  internal::ModuleFrame frame;   // stack_address nullptr: a foreign module
  const void* owner;             // the Python frame that entered it
  bool entered;
};
static_assert(std::is_standard_layout_v<ModuleScopeObject>);

// A foreign ModuleFrame lives in a ModuleScopeObject (only this file makes them).
const ModuleScopeObject* scope_of(const internal::ModuleFrame* f) {
  return reinterpret_cast<const ModuleScopeObject*>(reinterpret_cast<const char*>(f) -
                                                    offsetof(ModuleScopeObject, frame));
}

// ---------------------------------------------------------------------------------------------
// The provider.

// Keeps the native frames that are neither opscope's nor the interpreter's at the front of
// `words` (see python_stack) and returns how many.
std::size_t trim_native(std::uint64_t* words, std::size_t n) {
  std::size_t first = 0;
  while (first < n && is_extension_frame(words[first])) ++first;
  std::size_t end = first;
  while (end < n && !is_runtime_frame(words[end])) ++end;
  const std::size_t kept = end - first;
  if (first > 0 && kept > 0) std::memmove(words, words + first, kept * sizeof(words[0]));
  return kept;
}

std::size_t python_stack(std::uint64_t* words, std::size_t n, std::size_t max) noexcept {
  if (!thread_holds_gil()) {
    // A range begun by opscope itself with the GIL released (a step range): the Python
    // frames of the call that began it, captured just before.
    const Snapshot& snap = t_snapshot;
    if (!snap.active || snap.count == 0) return n;
    std::size_t kept = trim_native(words, n);
    for (std::size_t i = 0; i < snap.count && kept < max; ++i) words[kept++] = snap.words[i];
    return kept;
  }
  std::array<RawFrame, kMaxStackFrames> frames;
  const std::size_t count = walk_python_frames(frames.data(), std::min(max, frames.size()));
  if (count == 0) return n;  // Python is not running on this thread (a callback from C++)

  // Which native frames stay: this extension's innermost ones are the entry point that began
  // the range (RecordFunctionFast.__enter__, record_function, the C API capsule's
  // range_begin) and go; then the frames of the code that called it (another extension
  // recording through the capsule) stay, up to the first frame of the interpreter or of this
  // extension's bindings, where Python takes over: from there outward the Python frames
  // replace the native ones.
  std::size_t kept = trim_native(words, n);

  const bool modules =
      (internal::g_lenses.load(std::memory_order_relaxed) & internal::kLensModules) != 0;
  const internal::ModuleFrame* module = modules ? internal::t_module : nullptr;
  const auto next_foreign = [](const internal::ModuleFrame* m) {
    while (m != nullptr && m->stack_address != nullptr) m = m->parent;
    return m;
  };
  module = next_foreign(module);
  for (std::size_t i = 0; i < count && kept < max; ++i) {
    // Modules this frame entered come right before it, innermost first.
    while (module != nullptr && scope_of(module)->owner == frames[i].frame && kept < max) {
      words[kept++] = kLabelFrameBit | module->label_id;
      module = next_foreign(module->parent);
    }
    if (kept == max) break;
    if (hidden(frames[i].code)) continue;
    if (const std::uint64_t word = label_of(frames[i])) words[kept++] = word;
  }
  // Modules whose frame is not running (entered in a suspended generator): the outer end.
  for (; module != nullptr && kept < max; module = next_foreign(module->parent)) {
    words[kept++] = kLabelFrameBit | module->label_id;
  }
  return kept;
}

// ---------------------------------------------------------------------------------------------
// The ModuleScope type.

// Interns a + b + c.
std::uint32_t intern_joined(std::string_view a, std::string_view b, std::string_view c) {
  std::string joined;
  joined.reserve(a.size() + b.size() + c.size());
  joined.append(a).append(b).append(c);
  return extension::intern(joined);
}

PyObject* scope_enter(PyObject* op, PyObject* /*unused*/) {
  // Like C++'s ModuleScope: one relaxed load when no session records modules.
  if (!(internal::g_lenses.load(std::memory_order_relaxed) & internal::kLensModules)) [[likely]] {
    Py_RETURN_NONE;
  }
  auto* self = reinterpret_cast<ModuleScopeObject*>(op);
  if (self->entered) {
    PyErr_SetString(PyExc_RuntimeError,
                    "opscope.module: this module scope is already entered; use a new "
                    "opscope.module(name) for each with block");
    return nullptr;
  }
  const std::string_view name = utf8(self->name);
  const internal::ModuleFrame* parent = internal::t_module;
  try {
    const std::uint32_t path = parent != nullptr
                                   ? intern_joined(extension::interned(parent->path_id), ".", name)
                                   : extension::intern(name);
    const std::uint32_t label = intern_joined("nn.Module: ", name, {});
    self->frame = internal::ModuleFrame{parent, nullptr, path, label};
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  self->owner = current_python_frame();
  internal::t_module = &self->frame;
  self->entered = true;
  Py_RETURN_NONE;
}

// Leaves the module when it is the innermost one entered; a scope left out of order (a
// generator's) leaves the chain as it is rather than cut modules still entered.
void leave(ModuleScopeObject* self) {
  if (!self->entered) return;
  if (internal::t_module == &self->frame) internal::t_module = self->frame.parent;
  self->entered = false;
}

PyObject* scope_exit(PyObject* op, PyObject* const* /*args*/, Py_ssize_t /*nargs*/) {
  leave(reinterpret_cast<ModuleScopeObject*>(op));
  Py_RETURN_NONE;
}

int scope_init(PyObject* op, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"name", nullptr};
  PyObject* name = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U:module", const_cast<char**>(keywords), &name)) {
    return -1;
  }
  auto* self = reinterpret_cast<ModuleScopeObject*>(op);
  if (self->entered) {
    PyErr_SetString(PyExc_RuntimeError, "opscope.module: cannot re-initialize an entered scope");
    return -1;
  }
  Py_XSETREF(self->name, Py_NewRef(name));
  return 0;
}

void scope_dealloc(PyObject* op) {
  auto* self = reinterpret_cast<ModuleScopeObject*>(op);
  leave(self);
  if (internal::t_module != nullptr) {
    // Still in the chain (left out of order): a dangling frame must not stay reachable.
    for (const internal::ModuleFrame* f = internal::t_module; f != nullptr; f = f->parent) {
      if (f->parent == &self->frame) {
        const_cast<internal::ModuleFrame*>(f)->parent = self->frame.parent;
        break;
      }
    }
  }
  Py_CLEAR(self->name);
  Py_TYPE(op)->tp_free(op);
}

PyMethodDef g_scope_methods[] = {
    {"__enter__", scope_enter, METH_NOARGS, "Enters the module (when a session records modules)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(scope_exit)),
     METH_FASTCALL, "Leaves the module."},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject g_scope_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

}  // namespace

PythonStackSnapshot::PythonStackSnapshot(bool wanted) noexcept {
  if (!wanted || t_snapshot.active) return;  // nested: the outer one's frames stand
  std::array<RawFrame, kMaxStackFrames> frames;
  const std::size_t count = walk_python_frames(frames.data(), frames.size());
  Snapshot& snap = t_snapshot;
  snap.count = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (hidden(frames[i].code)) continue;
    if (const std::uint64_t word = label_of(frames[i])) snap.words[snap.count++] = word;
  }
  snap.active = true;
  active_ = true;
}

PythonStackSnapshot::~PythonStackSnapshot() {
  if (active_) t_snapshot = Snapshot{};
}

void bind_python_stacks(pybind11::module_& m) {
  g_scope_type.tp_name = "opscope._C.ModuleScope";
  g_scope_type.tp_basicsize = sizeof(ModuleScopeObject);
  g_scope_type.tp_dealloc = scope_dealloc;
  g_scope_type.tp_flags = Py_TPFLAGS_DEFAULT;
  g_scope_type.tp_doc = PyDoc_STR(
      "module(name)\n--\n\n"
      "A context manager that enters module `name` (PyTorch's nn.Module) for the ranges begun\n"
      "inside it: they carry the module path (\"Model.Linear_0\") with with_modules, and their\n"
      "call stacks show \"nn.Module: Linear_0\" with with_stack. One relaxed load when no\n"
      "session records modules. Use a new object for each with block.");
  g_scope_type.tp_methods = g_scope_methods;
  g_scope_type.tp_new = PyType_GenericNew;
  g_scope_type.tp_init = scope_init;
  if (PyType_Ready(&g_scope_type) < 0) throw pybind11::error_already_set();
  Py_INCREF(&g_scope_type);
  m.add_object("ModuleScope", reinterpret_cast<PyObject*>(&g_scope_type));

  m.def(
      "_hide_frames_of",
      [](const pybind11::object& code) {
        if (!PyCode_Check(code.ptr())) throw pybind11::type_error("expected a code object");
        for (PyCodeObject*& slot : g_hidden_code) {
          if (slot == reinterpret_cast<PyCodeObject*>(code.ptr())) return;
          if (slot == nullptr) {
            slot = reinterpret_cast<PyCodeObject*>(Py_NewRef(code.ptr()));
            return;
          }
        }
        throw pybind11::value_error("_hide_frames_of: no room for another code object");
      },
      pybind11::arg("code"),
      "Leaves the frames of this code object out of recorded stacks (opscope's own wrappers).");

  m.def(
      "_frame_walk",
      [](const pybind11::object& walk) -> std::string {
        if (!walk.is_none()) {
          const auto name = pybind11::cast<std::string>(pybind11::str(walk));
          if (name == "internal" && !internal_frame_walk_available()) {
            throw pybind11::value_error(
                "_frame_walk('internal'): this CPython's frame layout has no internal walk in "
                "opscope (only 3.11's); 'public' is the one available");
          }
          if (name != "internal" && name != "public") {
            throw pybind11::value_error("_frame_walk(): expected 'internal', 'public' or None, got '" +
                                        name + "'");
          }
          use_public_frame_api(name == "public");
        }
        return frame_walk_name();
      },
      pybind11::arg("walk") = pybind11::none(),
      "The walk stacks and opscope.traceback read Python frames with ('internal' or 'public'); "
      "with an argument, selects it first (tests and bench/python_bench.py).");

  g_interpreter = code_range_of(reinterpret_cast<const void*>(&PyEval_EvalCode));
  g_extension = code_range_of(reinterpret_cast<const void*>(&python_stack));
  g_library = code_range_of(reinterpret_cast<const void*>(&extension::set_foreign_stack_provider));
  extension::set_foreign_stack_provider(&python_stack);
}

}  // namespace opscope::python
