#include "backend/cuda_probe.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace opscope::backend {
namespace {

// The driver API's entry points the probe calls; CUresult is an int-sized enum.
using CuInit = int (*)(unsigned int);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuGetErrorName = int (*)(int, const char**);

std::string dl_error() {
  const char* e = ::dlerror();
  return e != nullptr ? e : "unknown error";
}

template <typename F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(::dlsym(lib, name));
}

// "CUDA_ERROR_NO_DEVICE (100)": the driver's name for the code, else the name of the codes a
// probe meets (the toolkit's link-time libcuda in lib64/stubs names none), else the number.
std::string cu_error(void* driver, int code) {
  const char* name = nullptr;
  if (auto get_name = symbol<CuGetErrorName>(driver, "cuGetErrorName");
      get_name == nullptr || get_name(code, &name) != 0 || name == nullptr) {
    switch (code) {
      case 34:
        name = "CUDA_ERROR_STUB_LIBRARY";
        break;
      case 35:
        name = "CUDA_ERROR_INSUFFICIENT_DRIVER";
        break;
      case 100:
        name = "CUDA_ERROR_NO_DEVICE";
        break;
      default:
        return "error " + std::to_string(code);
    }
  }
  return std::string(name) + " (" + std::to_string(code) + ")";
}

}  // namespace

CudaLibraries default_cuda_libraries() {
  CudaLibraries libs;
  if (const char* explicit_path = std::getenv("OPSCOPE_CUPTI_LIBRARY");
      explicit_path != nullptr && *explicit_path != '\0') {
    libs.cupti = {explicit_path};
    return libs;
  }
  libs.cupti = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
  std::vector<std::string> roots;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    roots.emplace_back(home);
  }
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    libs.cupti.push_back(root + "/extras/CUPTI/lib64/libcupti.so");
    libs.cupti.push_back(root + "/lib64/libcupti.so");
  }
  return libs;
}

CudaProbe probe_cuda(const CudaLibraries& libs) {
  CudaProbe p;
  void* driver = ::dlopen(libs.driver.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    p.reason = "no CUDA driver: " + libs.driver + " could not be loaded (" + dl_error() + ")";
    return p;
  }
  const auto init = symbol<CuInit>(driver, "cuInit");
  const auto version = symbol<CuDriverGetVersion>(driver, "cuDriverGetVersion");
  const auto count = symbol<CuDeviceGetCount>(driver, "cuDeviceGetCount");
  if (init == nullptr || version == nullptr || count == nullptr) {
    p.reason = "no CUDA driver: " + libs.driver + " lacks cuInit, cuDriverGetVersion or " +
               "cuDeviceGetCount (not a CUDA driver library?)";
    return p;
  }
  if (const int rc = init(0); rc != 0) {
    // Without a GPU: CUDA_ERROR_NO_DEVICE; the toolkit's link-time libcuda (lib64/stubs), which
    // is no driver: CUDA_ERROR_STUB_LIBRARY.
    p.reason = "the CUDA driver (" + libs.driver + ") did not initialize: cuInit returned " +
               cu_error(driver, rc);
    return p;
  }
  version(&p.driver_version);
  if (const int rc = count(&p.devices); rc != 0 || p.devices <= 0) {
    p.devices = 0;
    p.reason = rc != 0 ? "no CUDA device: cuDeviceGetCount returned " + cu_error(driver, rc)
                       : std::string("no CUDA device: the driver sees none");
    return p;
  }
  std::string tried;
  for (const std::string& path : libs.cupti) {
    if (::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
      p.cupti_path = path;
      break;
    }
    tried += (tried.empty() ? "" : "; ") + path + ": " + dl_error();
  }
  if (p.cupti_path.empty()) {
    p.reason = "no CUPTI: none of these could be loaded (" + tried +
               "); set OPSCOPE_CUPTI_LIBRARY to libcupti.so's path";
    return p;
  }
  const std::string found = "driver " + std::to_string(p.driver_version) + ", " +
                            std::to_string(p.devices) + " device(s) and CUPTI " + p.cupti_path +
                            " were found";
#ifndef OPSCOPE_HAVE_CUPTI
  p.reason =
      "this build of opscope has no CUPTI backend (it was built without CUPTI's headers; "
      "set CUDA_HOME when building) although " +
      found;
#else
  if (!cuda_experimental_opt_in()) {
    p.reason =
        "opscope's CUPTI backend has not been run on a GPU yet; set "
        "OPSCOPE_EXPERIMENTAL_CUPTI=1 to record CUDA activity with it (" +
        found + ")";
    return p;
  }
  p.recordable = true;
  p.reason.clear();
#endif
  return p;
}

bool cuda_experimental_opt_in() {
  const char* opt_in = std::getenv("OPSCOPE_EXPERIMENTAL_CUPTI");
  return opt_in != nullptr && std::string(opt_in) == "1";
}

const CudaProbe& cuda_probe() {
  static const CudaProbe probe = probe_cuda(default_cuda_libraries());
  return probe;
}

}  // namespace opscope::backend
