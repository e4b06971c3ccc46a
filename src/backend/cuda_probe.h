// Whether this process can record CUDA activity, and if not, why: the CUDA driver and CUPTI
// are loaded at run time (dlopen), so that one build runs everywhere and a machine without a
// GPU pays nothing until CUDA activity is asked for.
//
// CUPTI is looked for where it is installed: a copy the process has loaded already (a torch
// process loads its own: a second copy in one process would be a second profiler attached to the
// same driver), then beside the CUDA runtime the process uses, the pip wheels' layout
// (site-packages/nvidia/cu13/lib), the loader's search, a toolkit's folders:
//
//   const CudaLibraries libs = default_cuda_libraries();
//   const CuptiLookup cupti = find_cupti(libs);  // cupti.path, cupti.source, or cupti.tried
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::backend {

// How the CUPTI library in use was found.
enum class CuptiSource : std::uint8_t {
  kNone = 0,           // none was loaded
  kAlreadyLoaded = 1,  // the process had loaded it before opscope looked
  kExplicit = 2,       // OPSCOPE_CUPTI_LIBRARY named it
  kPipLayout = 3,      // a pip wheel's folder (site-packages/nvidia/cu13/lib, .../cuda_cupti/lib)
  kSoname = 4,         // the loader's search for its soname (LD_LIBRARY_PATH, ldconfig's cache)
  kToolkit = 5,        // a CUDA toolkit's folder ($CUDA_HOME, /usr/local/cuda)
};

// "already loaded", "OPSCOPE_CUPTI_LIBRARY", "pip layout", "soname", "toolkit", "none".
std::string_view cupti_source_name(CuptiSource source);

// One library to try: what dlopen is given (a soname or a path) and where that came from.
struct CuptiCandidate {
  std::string path;
  CuptiSource source = CuptiSource::kNone;
  bool operator==(const CuptiCandidate&) const = default;
};

// What the CUPTI search derives its folders from besides the fixed names. cupti_search_inputs()
// reads them from this process; tests give their own.
struct CuptiSearchInputs {
  // The paths of the shared objects the process has loaded (dl_iterate_phdr): a loaded
  // libcudart.so.N names the CUDA the process runs, and anything under a site-packages folder
  // (libtorch, the nvidia wheels, opscope's own module) names the Python environment.
  std::vector<std::string> loaded_objects;
  // Python environments' prefixes ($VIRTUAL_ENV, $CONDA_PREFIX): <prefix>/lib/python3.*/
  // site-packages is searched for the nvidia wheels.
  std::vector<std::string> python_prefixes;
  // CUDA toolkits' roots ($CUDA_HOME, /usr/local/cuda).
  std::vector<std::string> toolkits;
};
CuptiSearchInputs cupti_search_inputs();

// The CUPTI libraries to try, in order, without duplicates. Every name of the CUDA major the
// process runs (a loaded libcudart.so.N's N, else 13, the CUDA opscope's CUPTI backend is
// built against) comes before any of the other (12 or 13), as a CUPTI must match its runtime
// and driver. Within a major: beside the loaded runtime, in the pip layout of the loaded
// Python environment, in the pip layout of $VIRTUAL_ENV and $CONDA_PREFIX, the soname, then
// the toolkits' extras/CUPTI/lib64 and lib64. Between the two majors: the toolkits'
// unversioned libcupti.so (their own copy, whatever its major; a dev symlink that may be
// missing). Last: the unversioned soname.
std::vector<CuptiCandidate> cupti_candidates(const CuptiSearchInputs& inputs);

// Where to look: the names and paths dlopen is given, in order. The defaults are the driver's
// soname and cupti_candidates(cupti_search_inputs()); OPSCOPE_CUPTI_LIBRARY, when set, is the
// only CUPTI tried, and then a CUPTI already loaded is not reused.
struct CudaLibraries {
  std::string driver = "libcuda.so.1";
  std::vector<CuptiCandidate> cupti;
  // Whether a libcupti the process has loaded already is used before `cupti` is tried.
  bool reuse_loaded_cupti = true;
};
CudaLibraries default_cuda_libraries();

// The libcupti objects this process has loaded, by the path the loader opened, in load order.
std::vector<std::string> loaded_cupti_libraries();

// The outcome of the CUPTI search.
struct CuptiLookup {
  // The library that loaded, by the path the loader opened (absolute when the loader searched
  // for a soname); empty when none did.
  std::string path;
  CuptiSource source = CuptiSource::kNone;
  // What was tried and did not load, in order: "<name> (<how>): <the loader's error>"; first,
  // with reuse_loaded_cupti, "already loaded: none".
  std::vector<std::string> tried;
};

// Loads CUPTI: a libcupti already loaded (with libs.reuse_loaded_cupti), else the first of
// libs.cupti that dlopen loads. The library found stays loaded. Needs no driver. Never throws.
CuptiLookup find_cupti(const CudaLibraries& libs);

struct CudaProbe {
  bool recordable = false;
  // When not recordable: why, in a sentence that names what is missing ("no CUDA driver:
  // libcuda.so.1 could not be loaded (...)", "no CUDA device", "no CUPTI: ..."). Empty when
  // recordable.
  std::string reason;
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000; 0 when no driver initialized
  int devices = 0;
  // CUPTI is looked for only once a driver and a device are found: until then all three are
  // empty. Then: the library that loaded (empty when none did), how it was found, and what
  // was tried before it or, when none loaded, everything tried.
  std::string cupti_path;
  CuptiSource cupti_source = CuptiSource::kNone;
  std::vector<std::string> cupti_tried;
};

// Probes with `libs`: loads the driver, initializes it (cuInit), counts the devices, loads
// CUPTI (find_cupti). Loaded libraries stay loaded. Never throws.
CudaProbe probe_cuda(const CudaLibraries& libs);

// probe_cuda(default_cuda_libraries()), done once per process; later calls return the first
// answer.
const CudaProbe& cuda_probe();

}  // namespace opscope::backend
