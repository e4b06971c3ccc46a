// The CUDA probe against real libraries: a missing driver, a library that is not a driver,
// and the toolkit's stub libcuda (which loads but refuses cuInit), as on a machine without a GPU;
// the CUPTI search (which needs no driver) against the toolkit's real libcupti.so.13, copied
// into the places a torch process and a pip install keep theirs.
#include "backend/cuda_probe.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "opscope/profiler.h"
#include "support/test_support.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

namespace opscope::backend {
namespace cuda_probe_test {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CudaProbe, AMissingDriverIsNamedWithTheLoadersError) {
  CudaLibraries libs;
  libs.driver = "libopscope-no-such-cuda-driver.so.1";
  const CudaProbe p = probe_cuda(libs);
  EXPECT_FALSE(p.recordable);
  EXPECT_TRUE(has(p.reason,
                  "no CUDA driver: libopscope-no-such-cuda-driver.so.1 could not be "
                  "loaded ("))
      << p.reason;
  EXPECT_TRUE(has(p.reason, "cannot open shared object file")) << p.reason;
  EXPECT_EQ(p.devices, 0);
}

TEST(CudaProbe, ALibraryThatIsNotADriverIsRefused) {
  CudaLibraries libs;
  libs.driver = "libz.so.1";  // loads, has no cuInit
  const CudaProbe p = probe_cuda(libs);
  EXPECT_FALSE(p.recordable);
  EXPECT_TRUE(has(p.reason, "libz.so.1 lacks cuInit")) << p.reason;
}

TEST(CudaProbe, TheToolkitsStubDriverLoadsButDoesNotInitialize) {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  CudaLibraries libs;
  libs.driver = stub;
  const CudaProbe p = probe_cuda(libs);
  EXPECT_FALSE(p.recordable);
  EXPECT_TRUE(has(p.reason, "the CUDA driver (" + stub + ") did not initialize: cuInit returned"))
      << p.reason;
  // CUDA_ERROR_STUB_LIBRARY is 34 in every CUDA since 11.1.
  EXPECT_TRUE(has(p.reason, "CUDA_ERROR_STUB_LIBRARY (34)")) << p.reason;
  EXPECT_EQ(p.devices, 0);
}

// The candidates' paths and hows, one "path (how)" a line, for readable failures.
std::string listing(const std::vector<CuptiCandidate>& candidates) {
  std::string out;
  for (const CuptiCandidate& c : candidates) {
    out += c.path + " (" + std::string(cupti_source_name(c.source)) + ")\n";
  }
  return out;
}

// The position of `path` among the candidates, or -1.
int position(const std::vector<CuptiCandidate>& candidates, const std::string& path) {
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].path == path) return static_cast<int>(i);
  }
  return -1;
}

// A copy of the toolkit's CUPTI 13 (not a link: the loader takes a link to a loaded file for
// that file, and a copy is a library of its own) at `to`; false when this machine has none.
bool copy_toolkit_cupti(const std::filesystem::path& to) {
  const std::filesystem::path from = "/usr/local/cuda/lib64/libcupti.so.13";
  if (!std::filesystem::exists(from)) return false;
  std::filesystem::create_directories(to.parent_path());
  std::filesystem::copy_file(from, to);
  return true;
}

TEST(CudaProbe, DefaultsLookForTheDriverUnderItsSoname) {
  const CudaLibraries libs = default_cuda_libraries();
  EXPECT_EQ(libs.driver, "libcuda.so.1");
  ASSERT_FALSE(libs.cupti.empty());
  if (std::getenv("OPSCOPE_CUPTI_LIBRARY") == nullptr) {
    EXPECT_TRUE(libs.reuse_loaded_cupti);
    EXPECT_NE(position(libs.cupti, "/usr/local/cuda/lib64/libcupti.so.13"), -1)
        << listing(libs.cupti);
  }
}

TEST(CudaProbe, CuptiOf13IsTriedEverywhereBeforeAny12AndToolkitsBefore12) {
  // A toolkit's extras/CUPTI/lib64 and lib64 under the versioned name (the unversioned
  // libcupti.so is a dev symlink that may be missing), CUDA 13 in every place before CUDA 12
  // anywhere, and the toolkits' own unversioned copy before any other major's.
  CuptiSearchInputs in;
  in.toolkits = {"/opt/cuda-home/", "/usr/local/cuda"};
  const std::vector<CuptiCandidate> expected = {
      {"libcupti.so.13", CuptiSource::kSoname},
      {"/opt/cuda-home/extras/CUPTI/lib64/libcupti.so.13", CuptiSource::kToolkit},
      {"/opt/cuda-home/lib64/libcupti.so.13", CuptiSource::kToolkit},
      {"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", CuptiSource::kToolkit},
      {"/usr/local/cuda/lib64/libcupti.so.13", CuptiSource::kToolkit},
      {"/opt/cuda-home/extras/CUPTI/lib64/libcupti.so", CuptiSource::kToolkit},
      {"/opt/cuda-home/lib64/libcupti.so", CuptiSource::kToolkit},
      {"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", CuptiSource::kToolkit},
      {"/usr/local/cuda/lib64/libcupti.so", CuptiSource::kToolkit},
      {"libcupti.so.12", CuptiSource::kSoname},
      {"/opt/cuda-home/extras/CUPTI/lib64/libcupti.so.12", CuptiSource::kToolkit},
      {"/opt/cuda-home/lib64/libcupti.so.12", CuptiSource::kToolkit},
      {"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.12", CuptiSource::kToolkit},
      {"/usr/local/cuda/lib64/libcupti.so.12", CuptiSource::kToolkit},
      {"libcupti.so", CuptiSource::kSoname},
  };
  const std::vector<CuptiCandidate> got = cupti_candidates(in);
  EXPECT_EQ(got, expected) << listing(got);
}

TEST(CudaProbe, TheLoadedPythonEnvironmentsWheelsComeFirst) {
  // A torch process: libtorch and CUDA 13's runtime from the wheels (nvidia/cu13/lib).
  const std::string site = "/venv/lib/python3.12/site-packages";
  CuptiSearchInputs in;
  in.loaded_objects = {"/usr/lib/x86_64-linux-gnu/libz.so.1", site + "/torch/lib/libtorch_cuda.so",
                       site + "/nvidia/cu13/lib/libcudart.so.13"};
  in.toolkits = {"/usr/local/cuda"};
  const std::vector<CuptiCandidate> got = cupti_candidates(in);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front(),
            (CuptiCandidate{site + "/nvidia/cu13/lib/libcupti.so.13", CuptiSource::kPipLayout}))
      << listing(got);
  EXPECT_LT(position(got, site + "/nvidia/cu13/lib/libcupti.so.13"),
            position(got, "libcupti.so.13"))
      << listing(got);
  // Its CUDA 12 place too, after every 13.
  EXPECT_GT(position(got, site + "/nvidia/cuda_cupti/lib/libcupti.so.12"),
            position(got, "/usr/local/cuda/lib64/libcupti.so.13"))
      << listing(got);
}

TEST(CudaProbe, ALoadedCuda12RuntimeTriesCupti12First) {
  // A CUDA 12 torch: one wheel per library (nvidia/cuda_runtime/lib, nvidia/cuda_cupti/lib).
  const std::string site = "/env/lib/python3.11/site-packages";
  CuptiSearchInputs in;
  in.loaded_objects = {site + "/nvidia/cuda_runtime/lib/libcudart.so.12"};
  in.toolkits = {"/usr/local/cuda"};
  const std::vector<CuptiCandidate> got = cupti_candidates(in);
  ASSERT_GE(got.size(), 3u) << listing(got);
  EXPECT_EQ(got[0].path, site + "/nvidia/cuda_runtime/lib/libcupti.so.12") << listing(got);
  EXPECT_EQ(got[1], (CuptiCandidate{site + "/nvidia/cuda_cupti/lib/libcupti.so.12",
                                    CuptiSource::kPipLayout}))
      << listing(got);
  EXPECT_LT(position(got, "libcupti.so.12"), position(got, "libcupti.so.13")) << listing(got);
}

// These tests load a copy of the toolkit's libcupti and unload it again, so that later lookups
// of the same process do not find it loaded; libcupti does not free what its initialisation
// allocated when it is unloaded. LeakSanitizer is told to ignore what is allocated meanwhile.
struct CuptiCopyLeaksIgnored {
#ifdef __SANITIZE_ADDRESS__
  CuptiCopyLeaksIgnored() { __lsan_disable(); }
  ~CuptiCopyLeaksIgnored() { __lsan_enable(); }
#endif
};

TEST(CudaProbe, APipLayoutUnderAPythonPrefixIsFoundAndLoaded) {
  const CuptiCopyLeaksIgnored ignored;
  // What PyTorch's wheels and the GPU machine's venv hold: <venv>/lib/python3.12/
  // site-packages/nvidia/cu13/lib/libcupti.so.13, the venv named by $VIRTUAL_ENV.
  const testing::TempDir tmp;
  const std::filesystem::path venv = tmp.path() / "venv";
  const std::filesystem::path lib =
      venv / "lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13";
  if (!copy_toolkit_cupti(lib)) GTEST_SKIP() << "no CUPTI 13 from a CUDA toolkit here";
  CuptiSearchInputs in;
  in.python_prefixes = {venv.string()};
  CudaLibraries libs;
  libs.cupti = cupti_candidates(in);
  EXPECT_EQ(libs.cupti.front(), (CuptiCandidate{lib.string(), CuptiSource::kPipLayout}))
      << listing(libs.cupti);
  // Loaded ahead of the loader's own libcupti.so.13 (this machine's ldconfig knows one).
  libs.reuse_loaded_cupti = false;
  const CuptiLookup found = find_cupti(libs);
  EXPECT_EQ(found.path, lib.string());
  EXPECT_EQ(found.source, CuptiSource::kPipLayout);
  EXPECT_TRUE(found.tried.empty());
  if (void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(h);
    ::dlclose(h);  // and find_cupti's reference
  }
}

TEST(CudaProbe, ACuptiTheProcessLoadedIsPreferredOverTheList) {
  const CuptiCopyLeaksIgnored ignored;
  // A torch process has loaded its own CUPTI: the probe takes that one, not the toolkit's,
  // so that one process never holds two.
  const std::vector<std::string> before = loaded_cupti_libraries();
  const testing::TempDir tmp;
  const std::filesystem::path copy = tmp.path() / "torch-env/libcupti.so.13";
  if (!copy_toolkit_cupti(copy)) GTEST_SKIP() << "no CUPTI 13 from a CUDA toolkit here";
  void* loaded = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(loaded, nullptr) << ::dlerror();
  const std::vector<std::string> now = loaded_cupti_libraries();
  EXPECT_NE(std::find(now.begin(), now.end(), copy.string()), now.end());

  CudaLibraries libs;
  libs.cupti = {{"/usr/local/cuda/lib64/libcupti.so.13", CuptiSource::kToolkit}};
  const CuptiLookup found = find_cupti(libs);
  EXPECT_EQ(found.source, CuptiSource::kAlreadyLoaded);
  EXPECT_TRUE(found.tried.empty());
  // The first one loaded: this copy, unless an earlier test of this process loaded another.
  EXPECT_EQ(found.path, before.empty() ? copy.string() : before.front());
  // What the probe would load by default: the copy too (nothing loaded it from the toolkit).
  if (before.empty()) {
    EXPECT_EQ(find_cupti(default_cuda_libraries()).path, copy.string());
  }
  // Ours and, when it found the copy, each find_cupti's reference: the copy is unloaded.
  for (int i = 0; i < (before.empty() ? 3 : 1); ++i) ::dlclose(loaded);
}

TEST(CudaProbe, WhenNoCuptiLoadsEverythingTriedIsSaid) {
  CudaLibraries libs;
  libs.reuse_loaded_cupti = false;
  libs.cupti = {{"/nonexistent/extras/CUPTI/lib64/libcupti.so.13", CuptiSource::kToolkit},
                {"libopscope-no-such-cupti.so.13", CuptiSource::kSoname}};
  const CuptiLookup found = find_cupti(libs);
  EXPECT_TRUE(found.path.empty());
  EXPECT_EQ(found.source, CuptiSource::kNone);
  ASSERT_EQ(found.tried.size(), 2u);
  EXPECT_EQ(found.tried[0],
            "/nonexistent/extras/CUPTI/lib64/libcupti.so.13 (toolkit): cannot open shared object "
            "file: No such file or directory");
  EXPECT_EQ(found.tried[1],
            "libopscope-no-such-cupti.so.13 (soname): cannot open shared object file: No such "
            "file or directory");
}

TEST(CudaProbe, OpscopeCuptiLibraryIsTheOnlyOneTried) {
  const char* previous = std::getenv("OPSCOPE_CUPTI_LIBRARY");
  const std::string saved = previous != nullptr ? previous : "";
  ::setenv("OPSCOPE_CUPTI_LIBRARY", "/opt/mine/libcupti.so", 1);
  const CudaLibraries libs = default_cuda_libraries();
  if (previous != nullptr) {
    ::setenv("OPSCOPE_CUPTI_LIBRARY", saved.c_str(), 1);
  } else {
    ::unsetenv("OPSCOPE_CUPTI_LIBRARY");
  }
  EXPECT_EQ(libs.cupti,
            (std::vector<CuptiCandidate>{{"/opt/mine/libcupti.so", CuptiSource::kExplicit}}));
  EXPECT_FALSE(libs.reuse_loaded_cupti);
}

TEST(CudaProbe, TheProfilerSaysWhyCudaIsNotRecorded) {
  // No GPU backend yet: whatever this machine has, CUDA is not recordable, and the reason is
  // the probe's.
  EXPECT_FALSE(cuda_probe().recordable);
  EXPECT_FALSE(cuda_probe().reason.empty());
  EXPECT_EQ(backend::activity_unavailable_reason(ActivityType::kCUDA), cuda_probe().reason);
  EXPECT_EQ(backend::activity_unavailable_reason(ActivityType::kCPU), "");
  const auto supported = supported_activities();
  EXPECT_EQ(supported.size(), 1u);
  EXPECT_EQ(supported.front(), ActivityType::kCPU);
}

}  // namespace cuda_probe_test
}  // namespace opscope::backend
