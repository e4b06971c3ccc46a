// The CUDA probe against real libraries: a missing driver, a library that is not a driver,
// and the toolkit's stub libcuda (which loads but refuses cuInit), as on a machine without a GPU.
#include "backend/cuda_probe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "opscope/profiler.h"

namespace opscope::backend {
namespace {

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

TEST(CudaProbe, DefaultsLookForCuptiUnderItsSonameThenTheToolkit) {
  const CudaLibraries libs = default_cuda_libraries();
  EXPECT_EQ(libs.driver, "libcuda.so.1");
  ASSERT_FALSE(libs.cupti.empty());
  if (std::getenv("OPSCOPE_CUPTI_LIBRARY") == nullptr) {
    EXPECT_EQ(libs.cupti.front(), "libcupti.so.13");
    EXPECT_TRUE(has(libs.cupti.back(), "libcupti.so"));
  }
}

TEST(CudaProbe, TheProfilerSaysWhyCudaIsNotRecorded) {
  // No GPU backend yet: whatever this machine has, CUDA is not recordable, and the reason is
  // the probe's.
  EXPECT_FALSE(cuda_probe().recordable);
  EXPECT_FALSE(cuda_probe().reason.empty());
  EXPECT_EQ(activity_unavailable_reason(ActivityType::kCUDA), cuda_probe().reason);
  EXPECT_EQ(activity_unavailable_reason(ActivityType::kCPU), "");
  const auto supported = supported_activities();
  EXPECT_EQ(supported.size(), 1u);
  EXPECT_EQ(supported.front(), ActivityType::kCPU);
}

}  // namespace
}  // namespace opscope::backend
