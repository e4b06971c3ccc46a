// Python allocations for the profile_memory lens.
//
// While a window records memory, the interpreter's object and memory allocator domains
// (PYMEM_DOMAIN_OBJ: objects, PYMEM_DOMAIN_MEM: their buffers) are wrapped: each allocation
// and each free of a block allocated while wrapped is reported with report_memory_usage, so it
// becomes a "[memory]" event of the innermost range open on the thread, and reaches the memory
// columns and the memory timeline like a C++ allocator's reports. Both domains are used with
// the GIL held, which guards the table of block sizes here (a free does not give its size).
// The raw domain, used without the GIL by the interpreter's internals, is left alone.
//
// The wrappers are installed and removed by the Profiler binding with the GIL held, after each
// start(), step() and stop() (sync_python_memory_hooks), so outside windows that record memory
// Python's allocators are exactly what they were. Wrapping at run time is what the C API allows
// (PyMem_SetAllocator: a hook must call the allocator it replaces). If another hook (tracemalloc)
// was installed over ours meanwhile, ours stays, forwarding only, rather than remove theirs.
//
// numpy array data goes through numpy's own data-memory handler, not these domains: when numpy
// is loaded, its handler for the thread that starts the window is wrapped the same way (numpy
// keeps the handler per context, so arrays made by other threads are not seen).
#include <Python.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#if OPSCOPE_HAVE_NUMPY
// The C API table is this file's own: numpy is looked up at run time, and only when the
// program has already imported it.
#define PY_ARRAY_UNIQUE_SYMBOL opscope_numpy_api
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
// The data-memory handlers are numpy 1.22's API; numpy 2's headers declare only what the
// target version has (1.21 by default). numpy 1.x's headers ignore this and declare all.
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION
#include <numpy/ndarrayobject.h>
#endif

#include "bindings.h"
#include "opscope/memory.h"
#include "python_memory.h"

namespace opscope::python {
namespace {

// Sizes of the blocks allocated while wrapped, by address: open addressing with linear
// probing, at most half full. Guarded by the GIL.
class SizeTable {
 public:
  void put(const void* p, std::size_t size) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    std::size_t i = index(p);
    while (slots_[i].key != nullptr && slots_[i].key != p) i = (i + 1) & mask();
    if (slots_[i].key == nullptr) ++count_;
    slots_[i] = {p, size};
  }

  // The size of `p` and forgets it; 0 when unknown (allocated before the window).
  std::size_t take(const void* p) {
    if (count_ == 0) return 0;
    std::size_t i = index(p);
    while (slots_[i].key != nullptr) {
      if (slots_[i].key == p) {
        const std::size_t size = slots_[i].size;
        erase_at(i);
        return size;
      }
      i = (i + 1) & mask();
    }
    return 0;
  }

  void clear() {
    std::vector<Slot>().swap(slots_);
    count_ = 0;
  }

 private:
  struct Slot {
    const void* key = nullptr;
    std::size_t size = 0;
  };

  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t index(const void* p) const {
    auto h = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
    h = (h >> 4) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(h >> 20) & mask();
  }

  // Backward-shift deletion: no tombstones, lookups stay short.
  void erase_at(std::size_t i) {
    std::size_t j = i;
    for (;;) {
      j = (j + 1) & mask();
      if (slots_[j].key == nullptr) break;
      const std::size_t home = index(slots_[j].key);
      // Move slot j into the hole at i unless its home lies cyclically in (i, j].
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = {};
    --count_;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
    count_ = 0;
    for (const Slot& s : old) {
      if (s.key != nullptr) put(s.key, s.size);
    }
  }

  std::vector<Slot> slots_;
  std::size_t count_ = 0;
};

SizeTable g_sizes;
// Bytes allocated while wrapped and not freed yet: the interpreter's and numpy's; a report's
// total is their sum. Only GIL holders write the interpreter's (a load and a store, no locked
// instruction); numpy may allocate without the GIL, hence its read-modify-write. Both are
// atomics because each side reads the other's.
std::atomic<std::int64_t> g_live_python{0};
std::atomic<std::int64_t> g_live_numpy{0};

void report(const void* p, std::int64_t bytes) {
  const std::int64_t python = g_live_python.load(std::memory_order_relaxed) + bytes;
  g_live_python.store(python, std::memory_order_relaxed);
  const std::int64_t live = python + g_live_numpy.load(std::memory_order_relaxed);
  report_memory_usage(p, bytes, live, live);
}

void allocated(const void* p, std::size_t size) {
  if (p == nullptr || !memory_profiling_enabled()) return;
  try {
    g_sizes.put(p, size);
  } catch (...) {
    return;  // out of memory for the table: this block goes unreported
  }
  report(p, static_cast<std::int64_t>(size));
}

void freed(const void* p) {
  if (p == nullptr) return;
  const std::size_t size = g_sizes.take(p);
  if (size != 0) report(p, -static_cast<std::int64_t>(size));
}

// One wrapped domain: the allocator it had, which the wrappers call.
struct Domain {
  PyMemAllocatorDomain domain;
  PyMemAllocatorEx original{};
  bool wrapped = false;
};
Domain g_domains[] = {{PYMEM_DOMAIN_MEM}, {PYMEM_DOMAIN_OBJ}};

void* wrap_malloc(void* ctx, std::size_t size) {
  auto* d = static_cast<Domain*>(ctx);
  void* p = d->original.malloc(d->original.ctx, size);
  allocated(p, size);
  return p;
}

void* wrap_calloc(void* ctx, std::size_t nelem, std::size_t elsize) {
  auto* d = static_cast<Domain*>(ctx);
  void* p = d->original.calloc(d->original.ctx, nelem, elsize);
  allocated(p, nelem * elsize);
  return p;
}

void* wrap_realloc(void* ctx, void* ptr, std::size_t size) {
  auto* d = static_cast<Domain*>(ctx);
  void* p = d->original.realloc(d->original.ctx, ptr, size);
  if (p != nullptr || size == 0) {
    freed(ptr);  // the old block is gone (or, realloc in place, replaced by the new size)
    allocated(p, size);
  }
  return p;
}

void wrap_free(void* ctx, void* ptr) {
  auto* d = static_cast<Domain*>(ctx);
  freed(ptr);
  d->original.free(d->original.ctx, ptr);
}

bool ours(const PyMemAllocatorEx& a) { return a.malloc == wrap_malloc; }

void install() {
  for (Domain& d : g_domains) {
    if (d.wrapped) continue;
    PyMem_GetAllocator(d.domain, &d.original);
    PyMemAllocatorEx hook{&d, wrap_malloc, wrap_calloc, wrap_realloc, wrap_free};
    PyMem_SetAllocator(d.domain, &hook);
    d.wrapped = true;
  }
}

void remove() {
  bool all_removed = true;
  for (Domain& d : g_domains) {
    if (!d.wrapped) continue;
    PyMemAllocatorEx current{};
    PyMem_GetAllocator(d.domain, &current);
    if (ours(current) && current.ctx == &d) {
      PyMem_SetAllocator(d.domain, &d.original);
      d.wrapped = false;
    } else {
      all_removed = false;  // another hook sits on ours: ours stays, and only forwards
    }
  }
  if (all_removed) g_sizes.clear();
}

// ---------------------------------------------------------------------------------------------
// numpy's data-memory handler (numpy >= 1.22). Its free gives the size; its realloc does not,
// so numpy's blocks have their own table, under a mutex (numpy may call it without the GIL).

#if OPSCOPE_HAVE_NUMPY
void report_numpy(const void* p, std::int64_t bytes) {
  const std::int64_t numpy = g_live_numpy.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  const std::int64_t live = numpy + g_live_python.load(std::memory_order_relaxed);
  report_memory_usage(p, bytes, live, live);
}

std::mutex g_numpy_mu;
std::unordered_map<const void*, std::size_t> g_numpy_sizes;
PyObject* g_numpy_original = nullptr;  // the handler capsule ours wraps (a reference)
const PyDataMem_Handler* g_numpy_inner = nullptr;
bool g_numpy_api = false;

void numpy_allocated(const void* p, std::size_t size) {
  if (p == nullptr || !memory_profiling_enabled()) return;
  {
    std::lock_guard<std::mutex> lock(g_numpy_mu);
    try {
      g_numpy_sizes[p] = size;
    } catch (...) {
      return;
    }
  }
  report_numpy(p, static_cast<std::int64_t>(size));
}

void numpy_freed(const void* p) {
  if (p == nullptr) return;
  std::size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(g_numpy_mu);
    auto it = g_numpy_sizes.find(p);
    if (it == g_numpy_sizes.end()) return;
    size = it->second;
    g_numpy_sizes.erase(it);
  }
  report_numpy(p, -static_cast<std::int64_t>(size));
}

const PyDataMemAllocator& inner() { return g_numpy_inner->allocator; }

void* numpy_malloc(void*, std::size_t size) {
  void* p = inner().malloc(inner().ctx, size);
  numpy_allocated(p, size);
  return p;
}
void* numpy_calloc(void*, std::size_t nelem, std::size_t elsize) {
  void* p = inner().calloc(inner().ctx, nelem, elsize);
  numpy_allocated(p, nelem * elsize);
  return p;
}
void* numpy_realloc(void*, void* ptr, std::size_t size) {
  void* p = inner().realloc(inner().ctx, ptr, size);
  if (p != nullptr) {
    numpy_freed(ptr);
    numpy_allocated(p, size);
  }
  return p;
}
void numpy_free(void*, void* ptr, std::size_t size) {
  numpy_freed(ptr);
  inner().free(inner().ctx, ptr, size);
}

PyDataMem_Handler g_numpy_handler = {
    "opscope", 1, {nullptr, numpy_malloc, numpy_calloc, numpy_realloc, numpy_free}};

bool is_ours(PyObject* capsule) {
  return capsule != nullptr && PyCapsule_IsValid(capsule, "mem_handler") &&
         PyCapsule_GetPointer(capsule, "mem_handler") == &g_numpy_handler;
}

// numpy's C API, once the program has imported numpy; false otherwise (numpy is never imported
// here: a program without it pays nothing).
bool numpy_ready() {
  if (g_numpy_api) return true;
  PyObject* name = PyUnicode_FromString("numpy");
  if (name == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* numpy = PyImport_GetModule(name);  // only if already imported
  Py_DECREF(name);
  if (numpy == nullptr) {
    PyErr_Clear();
    return false;
  }
  Py_DECREF(numpy);
  // Fails (and numpy arrays go unseen) when the loaded numpy is older than these headers.
  if (_import_array() < 0) {
    PyErr_Clear();
    return false;
  }
  // Data-memory handlers exist from numpy 1.22 (C API feature version 15).
  if (PyArray_GetNDArrayCFeatureVersion() < 0xf) return false;
  g_numpy_api = true;
  return true;
}

void install_numpy() {
  if (!numpy_ready()) return;
  PyObject* current = PyDataMem_GetHandler();
  if (current == nullptr) {
    PyErr_Clear();
    return;
  }
  if (is_ours(current)) {
    Py_DECREF(current);
    return;
  }
  auto* handler =
      static_cast<const PyDataMem_Handler*>(PyCapsule_GetPointer(current, "mem_handler"));
  if (handler == nullptr || handler->version != 1) {
    PyErr_Clear();
    Py_DECREF(current);
    return;
  }
  PyObject* ours = PyCapsule_New(&g_numpy_handler, "mem_handler", nullptr);
  if (ours == nullptr) {
    PyErr_Clear();
    Py_DECREF(current);
    return;
  }
  Py_XSETREF(g_numpy_original, current);  // keeps the wrapped handler alive
  g_numpy_inner = handler;
  PyObject* previous = PyDataMem_SetHandler(ours);
  Py_DECREF(ours);
  if (previous == nullptr) {
    PyErr_Clear();
    return;
  }
  Py_DECREF(previous);
}

void remove_numpy() {
  if (!g_numpy_api || g_numpy_original == nullptr) return;
  PyObject* current = PyDataMem_GetHandler();
  if (current == nullptr) {
    PyErr_Clear();
    return;
  }
  const bool ours_on_top = is_ours(current);
  Py_DECREF(current);
  // Another handler set over ours (or another context's): ours stays, and only forwards. The
  // wrapped handler stays referenced: arrays made through ours free through it.
  if (!ours_on_top) return;
  PyObject* previous = PyDataMem_SetHandler(g_numpy_original);
  if (previous == nullptr) {
    PyErr_Clear();
    return;
  }
  Py_DECREF(previous);
}
#else
void install_numpy() {}
void remove_numpy() {}
#endif

}  // namespace

void sync_python_memory_hooks() {
  if (memory_profiling_enabled()) {
    install();
    install_numpy();
  } else {
    remove();
    remove_numpy();
  }
}

bool python_memory_hooked() {
  for (const Domain& d : g_domains) {
    PyMemAllocatorEx current{};
    PyMem_GetAllocator(d.domain, &current);
    if (ours(current)) return true;
  }
  return false;
}

}  // namespace opscope::python
