// The CUPTI backend against the real libcupti of the CUDA 13 toolkit, on a machine without a
// GPU: its entry points resolve, buffers as CUPTI fills them are read by CUPTI's own record
// walker and named by CUPTI's own callback names, and enabling activity without a driver fails
// with CUPTI's reason instead of recording nothing.
#include "backend/cupti_tracer.h"

#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "backend/cuda_probe.h"
#include "clock/clock.h"
#include "opscope/error.h"

namespace opscope::backend {
namespace cupti_backend_test {

// The toolkit's libcupti, when this machine has one.
std::string toolkit_cupti() {
  for (const CuptiCandidate& c : default_cuda_libraries().cupti) {
    if (c.path.front() == '/' && std::filesystem::exists(c.path)) return c.path;
  }
  return "";
}

TEST(CuptiBackend, ResolvesCuptisEntryPointsAndNamesCalls) {
  const std::string path = toolkit_cupti();
  if (path.empty()) GTEST_SKIP() << "no CUPTI library from a CUDA toolkit here";
  const CuptiApi api = CuptiApi::load(path);
  EXPECT_EQ(
      api.api_name(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000),
      "cudaLaunchKernel");
  EXPECT_NE(api.error(CUPTI_ERROR_NOT_INITIALIZED).find("(15)"), std::string::npos)
      << api.error(CUPTI_ERROR_NOT_INITIALIZED);
}

TEST(CuptiBackend, AMissingLibraryIsNamed) {
  try {
    CuptiApi::load("/nonexistent/libcupti.so");
    FAIL() << "loaded a library that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUPTI /nonexistent/libcupti.so could not be loaded"),
              std::string::npos)
        << e.what();
  }
}

TEST(CuptiBackend, BuffersAsCuptiFillsThemBecomeEvents) {
  const std::string path = toolkit_cupti();
  if (path.empty()) GTEST_SKIP() << "no CUPTI library from a CUDA toolkit here";
  CuptiBackend backend(path, std::uint64_t{64} << 20);
  backend.load_library();  // prepare() would also subscribe, which needs a driver
  std::size_t size = 0;
  std::uint8_t* buffer = backend.new_buffer(size);
  ASSERT_NE(buffer, nullptr);
  ASSERT_GE(size, 2 * sizeof(CUpti_ActivityAPI));
  CUpti_ActivityAPI call{};
  call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  call.start = 1'700'000'000'000'000'000;
  call.end = call.start + 3'000;
  call.threadId = 77;
  call.correlationId = 5;
  std::memcpy(buffer, &call, sizeof call);
  call.correlationId = 6;
  call.start += 10'000;
  call.end += 10'000;
  std::memcpy(buffer + sizeof call, &call, sizeof call);
  backend.take_buffer(buffer, 2 * sizeof call);

  ProfilerResult::Builder builder;
  const auto conv = clock::TickConverter::calibrate(clock::process_anchor());
  backend.collect(builder, conv);
  const auto r = builder.finish();
  ASSERT_EQ(r->events().size(), 2u);
  for (const Event& e : r->events()) {
    EXPECT_EQ(e.name, "cudaLaunchKernel");  // CUPTI's own name, version suffix dropped
    EXPECT_EQ(e.kind, EventKind::kRuntime);
    EXPECT_EQ(r->threads()[static_cast<std::size_t>(e.thread)].tid, 77u);
  }
  bool clock_stated = false;
  for (const auto& [key, value] : r->metadata()) {
    if (key == "opscope_gpu_clock") clock_stated = value.find("\"error_ns\":") != std::string::npos;
  }
  EXPECT_TRUE(clock_stated);
}

TEST(CuptiBackend, WithoutADriverStartFailsWithCuptisReason) {
  const std::string path = toolkit_cupti();
  if (path.empty()) GTEST_SKIP() << "no CUPTI library from a CUDA toolkit here";
  if (cuda_probe().devices > 0) GTEST_SKIP() << "this machine has a GPU";
  CuptiBackend backend(path, std::uint64_t{64} << 20);
  try {
    backend.start();
    backend.stop();
    GTEST_SKIP() << "CUPTI enabled activity without a driver: nothing to refuse";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot record CUDA activity"), std::string::npos)
        << e.what();
  }
}

}  // namespace cupti_backend_test
}  // namespace opscope::backend
