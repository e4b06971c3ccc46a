// Whether this process can record CUDA activity, and if not, why: the CUDA driver and CUPTI
// are loaded at run time (dlopen), so that one build runs everywhere and a machine without a
// GPU pays nothing until CUDA activity is asked for.
#pragma once

#include <string>
#include <vector>

namespace opscope::backend {

struct CudaProbe {
  bool recordable = false;
  // When not recordable: why, in a sentence that names what is missing ("no CUDA driver:
  // libcuda.so.1 could not be loaded (...)", "no CUDA device", "no CUPTI: ..."). Empty when
  // recordable.
  std::string reason;
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000; 0 when no driver initialized
  int devices = 0;
  std::string cupti_path;  // the CUPTI library that loaded; empty when none did
};

// Where to look: the names and paths dlopen is given, in order. The defaults are the driver's
// soname and CUPTI's under its soname, then the toolkit's folders ($CUDA_HOME,
// /usr/local/cuda); OPSCOPE_CUPTI_LIBRARY, when set, is the only CUPTI tried.
struct CudaLibraries {
  std::string driver = "libcuda.so.1";
  std::vector<std::string> cupti;
};
CudaLibraries default_cuda_libraries();

// Probes with `libs`: loads the driver, initializes it (cuInit), counts the devices, loads
// CUPTI. Loaded libraries stay loaded. Never throws.
CudaProbe probe_cuda(const CudaLibraries& libs);

// Whether OPSCOPE_EXPERIMENTAL_CUPTI=1 is set: until opscope's CUDA recording (the CUPTI
// backend, CUDA-event timing) has run on a GPU, it records only when asked to.
bool cuda_experimental_opt_in();

// probe_cuda(default_cuda_libraries()), done once per process; later calls return the first
// answer.
const CudaProbe& cuda_probe();

}  // namespace opscope::backend
