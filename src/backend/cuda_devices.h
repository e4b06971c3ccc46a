// The GPUs' properties, as Kineto writes them in a trace's "deviceProperties" (and as HTA reads
// them): queried from the CUDA driver loaded at run time, formatted here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace opscope::backend {

struct DeviceProperties {
  int id = 0;
  std::string name;
  std::int64_t total_global_mem = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int max_threads_per_block = 0;
  int max_threads_per_multiprocessor = 0;
  int regs_per_block = 0;
  int warp_size = 0;
  int shared_mem_per_block = 0;
  int num_sms = 0;
  int regs_per_multiprocessor = 0;
  int shared_mem_per_block_optin = 0;
  int shared_mem_per_multiprocessor = 0;
};

// The JSON array of the trace's "deviceProperties", with Kineto's keys in Kineto's order.
std::string device_properties_json(std::span<const DeviceProperties> devices);

// Every device the CUDA driver (libcuda.so.1, initialized by the probe) sees; empty when none
// or when the driver cannot be asked.
std::vector<DeviceProperties> query_cuda_devices();

}  // namespace opscope::backend
