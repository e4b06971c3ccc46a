#include "profiler/nvtx.h"

#include <dlfcn.h>

#include "opscope/value.h"

#if OPSCOPE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace opscope::nvtx {
namespace {

#if OPSCOPE_HAVE_NVTX
// Asks the CUDA driver (loaded at run time, so that opscope needs no CUDA to build or run)
// how many devices there are. Only asked where NVTX ranges could be emitted at all.
bool cuda_device_present(std::string* why) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    *why = "the CUDA driver (libcuda.so.1) cannot be loaded: " +
           std::string(err != nullptr ? err : "unknown error");
    return false;
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "cuDeviceGetCount"));
  int devices = 0;
  bool ok = false;
  if (init == nullptr || count == nullptr) {
    *why = "the CUDA driver lacks cuInit/cuDeviceGetCount";
  } else if (const int rc = init(0); rc != 0) {
    *why = "cuInit failed with CUDA error " + std::to_string(rc) + " (no usable GPU?)";
  } else if (const int rc2 = count(&devices); rc2 != 0 || devices == 0) {
    *why = "the CUDA driver reports no device";
  } else {
    ok = true;
  }
  // The driver stays loaded: unloading it after cuInit is not supported.
  return ok;
}
#endif

// PyTorch's NVTX range text: "aten::mm, seq = 4, sizes = [[2, 3], [3, 4]]".
std::string range_text(const RecordFunction& rf) {
  std::string text(rf.name());
  if (rf.sequence_nr() >= 0) text += ", seq = " + std::to_string(rf.sequence_nr());
  if (!rf.inputs().empty()) {
    text += ", sizes = [";
    bool first = true;
    for (const Value& v : rf.inputs()) {
      text += first ? "[" : ", [";
      first = false;
      bool first_dim = true;
      for (std::int64_t d : v.sizes()) {
        text += (first_dim ? "" : ", ") + std::to_string(d);
        first_dim = false;
      }
      text += "]";
    }
    text += "]";
  }
  return text;
}

}  // namespace

CallbackHandle add_range_forwarding(bool with_shapes) {
  return add_thread_local_callback(
      RecordFunctionCallback(
          [](const RecordFunction& rf) -> std::unique_ptr<ObserverContext> {
            range_push(range_text(rf).c_str());
            return nullptr;
          },
          [](const RecordFunction&, ObserverContext*) { range_pop(); })
          .needs_inputs(with_shapes));
}

bool available(std::string* why) {
#if OPSCOPE_HAVE_NVTX
  return cuda_device_present(why);
#else
  *why = "opscope was built without the NVTX headers (nvtx3/nvToolsExt.h from the CUDA toolkit)";
  return false;
#endif
}

#if OPSCOPE_HAVE_NVTX
void range_push(const char* message) noexcept { nvtxRangePushA(message); }
void range_pop() noexcept { nvtxRangePop(); }
void mark(const char* message) noexcept { nvtxMarkA(message); }
#else
void range_push(const char*) noexcept {}
void range_pop() noexcept {}
void mark(const char*) noexcept {}
#endif

}  // namespace opscope::nvtx
