#include "backend/cuda_probe.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

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

// The paths of the loaded shared objects, in load order; the program itself (named "") and
// the vDSO (no path) are left out.
std::vector<std::string> loaded_objects() {
  std::vector<std::string> out;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        if (info->dlpi_name != nullptr && std::strchr(info->dlpi_name, '/') != nullptr) {
          static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
        }
        return 0;
      },
      &out);
  return out;
}

std::string file_name_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string folder_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string without_trailing_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// N for a loaded libcudart.so.N[.x.y] of a major opscope's backend can use (12, 13); else 0.
int runtime_major(const std::string& path) {
  const std::string name = file_name_of(path);
  for (const int major : {13, 12}) {
    const std::string soname = "libcudart.so." + std::to_string(major);
    if (name == soname || name.rfind(soname + ".", 0) == 0) return major;
  }
  return 0;
}

// ".../site-packages" (or Debian's dist-packages) holding `path`, or "" when none does. A
// loaded libpython3.X.so in <prefix>/lib names <prefix>/lib/python3.X/site-packages (a
// Python built with a shared library: conda's, pyenv's).
std::string site_packages_of(const std::string& path) {
  for (const std::string_view folder : {"/site-packages/", "/dist-packages/"}) {
    if (const std::size_t at = path.find(folder); at != std::string::npos) {
      return path.substr(0, at + folder.size() - 1);
    }
  }
  const std::string name = file_name_of(path);
  if (name.rfind("libpython3.", 0) == 0) {
    if (const std::size_t so = name.find(".so"); so != std::string::npos) {
      return folder_of(path) + "/" + name.substr(3, so - 3) + "/site-packages";
    }
  }
  return "";
}

// <prefix>/lib/python3.*/site-packages that exist, sorted.
std::vector<std::string> site_packages_under(const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path lib = std::filesystem::path(prefix) / "lib";
  for (std::filesystem::directory_iterator it(lib, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code dir_ec;
    if (name.rfind("python3", 0) == 0 &&
        std::filesystem::is_directory(it->path() / "site-packages", dir_ec)) {
      out.push_back((it->path() / "site-packages").string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Where the nvidia wheels put libcupti.so.N under site-packages: CUDA 13's wheels share one
// folder per major (nvidia/cu13/lib, beside libcudart.so.13); CUDA 12's had one per library
// (nvidia/cuda_cupti/lib).
std::string pip_folder(int major) {
  return major >= 13 ? "/nvidia/cu" + std::to_string(major) + "/lib/"
                     : std::string("/nvidia/cuda_cupti/lib/");
}

// The path the loader opened for `lib` (absolute when it searched for a soname), else `name`.
std::string loaded_path(void* lib, const std::string& name) {
  link_map* map = nullptr;
  if (::dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      *map->l_name != '\0') {
    return map->l_name;
  }
  return name;
}

}  // namespace

std::string_view cupti_source_name(CuptiSource source) {
  switch (source) {
    case CuptiSource::kNone:
      return "none";
    case CuptiSource::kAlreadyLoaded:
      return "already loaded";
    case CuptiSource::kExplicit:
      return "OPSCOPE_CUPTI_LIBRARY";
    case CuptiSource::kPipLayout:
      return "pip layout";
    case CuptiSource::kSoname:
      return "soname";
    case CuptiSource::kToolkit:
      return "toolkit";
  }
  return "unknown";
}

CuptiSearchInputs cupti_search_inputs() {
  CuptiSearchInputs in;
  in.loaded_objects = loaded_objects();
  // sys.prefix is not known to C++: these are the variables an activated environment sets
  // (venv's and conda's activate). A process that loaded Python's libraries names its
  // environment through loaded_objects already.
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
      in.python_prefixes.emplace_back(v);
    }
  }
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    in.toolkits.emplace_back(home);
  }
  in.toolkits.emplace_back("/usr/local/cuda");
  return in;
}

std::vector<CuptiCandidate> cupti_candidates(const CuptiSearchInputs& inputs) {
  // The CUDA majors whose CUPTI is looked for: 13, whose headers the backend is built
  // against, and 12, kept from the search before this one as the last resort (the backend
  // reads CUDA 13's record layouts: whether CUPTI 12's agree has not been checked). The major
  // of a loaded runtime goes first: that is the CUDA the process runs.
  std::vector<int> majors = {13, 12};
  for (const std::string& object : inputs.loaded_objects) {
    const int major = runtime_major(object);
    if (major == 12) std::swap(majors[0], majors[1]);
    if (major != 0) break;
  }
  // Site-packages folders, those of loaded objects first (libtorch's, the wheels' own
  // libraries', opscope's module's: the environment this process runs), then the prefixes'.
  std::vector<std::string> loaded_sites;
  std::vector<std::string> prefix_sites;
  for (const std::string& object : inputs.loaded_objects) {
    if (std::string site = site_packages_of(object); !site.empty()) loaded_sites.push_back(site);
  }
  for (const std::string& prefix : inputs.python_prefixes) {
    for (std::string& site : site_packages_under(prefix)) prefix_sites.push_back(std::move(site));
  }
  std::vector<std::string> toolkits;
  for (const std::string& root : inputs.toolkits) toolkits.push_back(without_trailing_slash(root));

  std::vector<CuptiCandidate> out;
  const auto add = [&out](std::string path, CuptiSource source) {
    for (const CuptiCandidate& c : out) {
      if (c.path == path) return;
    }
    out.push_back({std::move(path), source});
  };
  const auto add_major = [&](int major) {
    const std::string name = "libcupti.so." + std::to_string(major);
    // Beside the loaded runtime of that major: the pip wheels of CUDA 13 (nvidia/cu13/lib)
    // and a toolkit's lib64 hold both.
    for (const std::string& object : inputs.loaded_objects) {
      if (runtime_major(object) != major) continue;
      add(folder_of(object) + "/" + name,
          site_packages_of(object).empty() ? CuptiSource::kToolkit : CuptiSource::kPipLayout);
    }
    for (const auto* sites : {&loaded_sites, &prefix_sites}) {
      for (const std::string& site : *sites)
        add(site + pip_folder(major) + name, CuptiSource::kPipLayout);
    }
    add(name, CuptiSource::kSoname);
    for (const std::string& root : toolkits) {
      add(root + "/extras/CUPTI/lib64/" + name, CuptiSource::kToolkit);
      add(root + "/lib64/" + name, CuptiSource::kToolkit);
    }
  };
  add_major(majors[0]);
  for (const std::string& root : toolkits) {
    add(root + "/extras/CUPTI/lib64/libcupti.so", CuptiSource::kToolkit);
    add(root + "/lib64/libcupti.so", CuptiSource::kToolkit);
  }
  add_major(majors[1]);
  add("libcupti.so", CuptiSource::kSoname);
  return out;
}

CudaLibraries default_cuda_libraries() {
  CudaLibraries libs;
  if (const char* explicit_path = std::getenv("OPSCOPE_CUPTI_LIBRARY");
      explicit_path != nullptr && *explicit_path != '\0') {
    // The user's choice, even where the process has loaded another copy.
    libs.cupti = {{explicit_path, CuptiSource::kExplicit}};
    libs.reuse_loaded_cupti = false;
    return libs;
  }
  libs.cupti = cupti_candidates(cupti_search_inputs());
  return libs;
}

std::vector<std::string> loaded_cupti_libraries() {
  std::vector<std::string> out;
  for (std::string& object : loaded_objects()) {
    if (file_name_of(object).rfind("libcupti.so", 0) == 0) out.push_back(std::move(object));
  }
  return out;
}

CuptiLookup find_cupti(const CudaLibraries& libs) {
  CuptiLookup found;
  if (libs.reuse_loaded_cupti) {
    // Loading another copy beside one already there would put two CUPTIs, each with its own
    // subscriber and buffers, on one driver. The walk finds it under any file name starting
    // with libcupti.so; the sonames find one loaded under another file name (a renamed copy).
    // RTLD_NOLOAD loads nothing: it only takes a reference, so that it stays loaded.
    std::vector<std::string> names = loaded_cupti_libraries();
    for (const char* soname : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) {
      names.emplace_back(soname);
    }
    for (const std::string& name : names) {
      if (void* lib = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
        found.path = loaded_path(lib, name);
        found.source = CuptiSource::kAlreadyLoaded;
        return found;
      }
    }
    found.tried.emplace_back("already loaded: none");
  }
  for (const CuptiCandidate& c : libs.cupti) {
    if (void* lib = ::dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      found.path = loaded_path(lib, c.path);
      found.source = c.source;
      return found;
    }
    std::string why = dl_error();
    // dlerror() starts with the name it was given: said once.
    if (why.rfind(c.path + ": ", 0) == 0) why.erase(0, c.path.size() + 2);
    found.tried.push_back(c.path + " (" + std::string(cupti_source_name(c.source)) + "): " + why);
  }
  return found;
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
  CuptiLookup cupti = find_cupti(libs);
  p.cupti_path = std::move(cupti.path);
  p.cupti_source = cupti.source;
  p.cupti_tried = std::move(cupti.tried);
  if (p.cupti_path.empty()) {
    std::string tried;
    for (const std::string& t : p.cupti_tried) tried += (tried.empty() ? "" : "; ") + t;
    p.reason = "no CUPTI: none of these could be loaded (" + tried +
               "); set OPSCOPE_CUPTI_LIBRARY to libcupti.so's path";
    return p;
  }
  const std::string found = "driver " + std::to_string(p.driver_version) + ", " +
                            std::to_string(p.devices) + " device(s) and CUPTI " + p.cupti_path +
                            " (" + std::string(cupti_source_name(p.cupti_source)) + ") were found";
#ifndef OPSCOPE_HAVE_CUPTI
  p.reason =
      "this build of opscope has no CUPTI backend (it was built without CUPTI's headers; "
      "set CUDA_HOME when building) although " +
      found;
#else
  p.recordable = true;
  p.reason.clear();
#endif
  return p;
}

const CudaProbe& cuda_probe() {
  static const CudaProbe probe = probe_cuda(default_cuda_libraries());
  return probe;
}

}  // namespace opscope::backend
