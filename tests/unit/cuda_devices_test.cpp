// The trace's "deviceProperties" as Kineto writes them: the A100s of a real job
// (../shared/peers/kineto-traces/nccl_parser_config), formatted from their values, come out
// key for key and value for value as Kineto wrote them; and without a driver there is nothing
// to ask.
#include "backend/cuda_devices.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cuda_probe.h"
#include "support/test_support.h"

namespace opscope::backend {
namespace cuda_devices_test {

using nlohmann::ordered_json;

TEST(CudaDevices, PropertiesHaveKinetosKeysInKinetosOrder) {
  const ordered_json trace = ordered_json::parse(testing::read_gzip_file(
      std::string(OPSCOPE_PEERS_DIR) + "/kineto-traces/nccl_parser_config/nccl_data.json.gz"));
  const ordered_json& theirs = trace["deviceProperties"];
  ASSERT_GE(theirs.size(), 1u);
  std::vector<DeviceProperties> devices;
  for (const ordered_json& k : theirs) {
    DeviceProperties d;
    d.id = k["id"];
    d.name = k["name"];
    d.total_global_mem = k["totalGlobalMem"];
    d.compute_major = k["computeMajor"];
    d.compute_minor = k["computeMinor"];
    d.max_threads_per_block = k["maxThreadsPerBlock"];
    d.max_threads_per_multiprocessor = k["maxThreadsPerMultiprocessor"];
    d.regs_per_block = k["regsPerBlock"];
    d.warp_size = k["warpSize"];
    d.shared_mem_per_block = k["sharedMemPerBlock"];
    d.num_sms = k["numSms"];
    d.regs_per_multiprocessor = k["regsPerMultiprocessor"];
    d.shared_mem_per_block_optin = k["sharedMemPerBlockOptin"];
    d.shared_mem_per_multiprocessor = k["sharedMemPerMultiprocessor"];
    devices.push_back(d);
  }
  const ordered_json ours = ordered_json::parse(device_properties_json(devices));
  EXPECT_EQ(ours, theirs);  // ordered: the keys' order too
  EXPECT_EQ(ours.dump(), theirs.dump());
}

TEST(CudaDevices, AMachineWithoutADeviceListsNone) {
  // The probe loads libcuda.so.1 where there is one (or the toolkit's stub, in this process,
  // when the stub's test ran first: it answers every question with an error).
  const std::vector<DeviceProperties> devices = query_cuda_devices();
  if (cuda_probe().devices > 0) {
    ASSERT_EQ(static_cast<int>(devices.size()), cuda_probe().devices);
    for (const DeviceProperties& d : devices) EXPECT_GT(d.num_sms, 0) << d.name;
  } else {
    EXPECT_TRUE(devices.empty());
  }
}

}  // namespace cuda_devices_test
}  // namespace opscope::backend
