#include "backend/cuda_devices.h"

#include <dlfcn.h>

#include <cstddef>

#include "json/json_writer.h"

namespace opscope::backend {
namespace {

// CUdevice_attribute values (cuda.h; stable since CUDA 2-8): the build needs no CUDA header.
enum Attribute : int {
  kMaxThreadsPerBlock = 1,
  kMaxSharedMemoryPerBlock = 8,
  kWarpSize = 10,
  kMaxRegistersPerBlock = 12,
  kMultiprocessorCount = 16,
  kMaxThreadsPerMultiprocessor = 39,
  kComputeCapabilityMajor = 75,
  kComputeCapabilityMinor = 76,
  kMaxSharedMemoryPerMultiprocessor = 81,
  kMaxRegistersPerMultiprocessor = 82,
  kMaxSharedMemoryPerBlockOptin = 97,
};

using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceTotalMem = int (*)(std::size_t*, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);

}  // namespace

std::string device_properties_json(std::span<const DeviceProperties> devices) {
  internal::JsonWriter w;
  w.begin_array();
  for (const DeviceProperties& d : devices) {
    w.begin_object();
    const auto field = [&w](std::string_view key, std::int64_t value) {
      w.key(key);
      w.integer(value);
    };
    field("id", d.id);
    w.key("name");
    w.string(d.name);
    field("totalGlobalMem", d.total_global_mem);
    field("computeMajor", d.compute_major);
    field("computeMinor", d.compute_minor);
    field("maxThreadsPerBlock", d.max_threads_per_block);
    field("maxThreadsPerMultiprocessor", d.max_threads_per_multiprocessor);
    field("regsPerBlock", d.regs_per_block);
    field("warpSize", d.warp_size);
    field("sharedMemPerBlock", d.shared_mem_per_block);
    field("numSms", d.num_sms);
    field("regsPerMultiprocessor", d.regs_per_multiprocessor);
    field("sharedMemPerBlockOptin", d.shared_mem_per_block_optin);
    field("sharedMemPerMultiprocessor", d.shared_mem_per_multiprocessor);
    w.end_object();
  }
  w.end_array();
  return std::string(w.view());
}

std::vector<DeviceProperties> query_cuda_devices() {
  std::vector<DeviceProperties> out;
  // Already loaded and initialized by the probe: this only finds it.
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (driver == nullptr) return out;
  const auto count = reinterpret_cast<CuDeviceGetCount>(::dlsym(driver, "cuDeviceGetCount"));
  const auto get = reinterpret_cast<CuDeviceGet>(::dlsym(driver, "cuDeviceGet"));
  const auto name = reinterpret_cast<CuDeviceGetName>(::dlsym(driver, "cuDeviceGetName"));
  const auto memory = reinterpret_cast<CuDeviceTotalMem>(::dlsym(driver, "cuDeviceTotalMem_v2"));
  const auto attribute =
      reinterpret_cast<CuDeviceGetAttribute>(::dlsym(driver, "cuDeviceGetAttribute"));
  int n = 0;
  if (count == nullptr || get == nullptr || name == nullptr || memory == nullptr ||
      attribute == nullptr || count(&n) != 0) {
    return out;
  }
  for (int i = 0; i < n; ++i) {
    int device = 0;
    if (get(&device, i) != 0) continue;
    DeviceProperties d;
    d.id = i;
    char text[256] = {};
    if (name(text, sizeof text - 1, device) == 0) d.name = text;
    std::size_t bytes = 0;
    if (memory(&bytes, device) == 0) d.total_global_mem = static_cast<std::int64_t>(bytes);
    const auto read = [&](Attribute a, int& value) {
      if (attribute(&value, a, device) != 0) value = 0;
    };
    read(kComputeCapabilityMajor, d.compute_major);
    read(kComputeCapabilityMinor, d.compute_minor);
    read(kMaxThreadsPerBlock, d.max_threads_per_block);
    read(kMaxThreadsPerMultiprocessor, d.max_threads_per_multiprocessor);
    read(kMaxRegistersPerBlock, d.regs_per_block);
    read(kWarpSize, d.warp_size);
    read(kMaxSharedMemoryPerBlock, d.shared_mem_per_block);
    read(kMultiprocessorCount, d.num_sms);
    read(kMaxRegistersPerMultiprocessor, d.regs_per_multiprocessor);
    read(kMaxSharedMemoryPerBlockOptin, d.shared_mem_per_block_optin);
    read(kMaxSharedMemoryPerMultiprocessor, d.shared_mem_per_multiprocessor);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace opscope::backend
