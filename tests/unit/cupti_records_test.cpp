// CUPTI activity records, built with CUDA 13's real layouts as a live CUPTI hands them over,
// through the converter into the model, and out as a Chrome trace compared with what Kineto
// writes for a real A100 job (../shared/peers/kineto-traces/nccl_parser_config).
#include "backend/cupti_records.h"

#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "opscope/export.h"
#include "opscope/result.h"
#include "opscope/trace_reader.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"

namespace opscope::backend {
namespace cupti_records_test {

using nlohmann::json;

constexpr std::uint64_t kTid = 4242;                     // the CPU thread that launches
constexpr std::uint64_t kHandle = 0x500000007;           // the range it launches in (External id)
constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // CUPTI's clock: CLOCK_REALTIME ns

// A JSON id written as -1, not as the unsigned 18446744073709551615 (which nlohmann::json
// compares equal to -1).
bool is_minus_one(const json& v) {
  return v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() == -1;
}

template <typename Record>
const CUpti_Activity& as_activity(const Record& r) {
  return *reinterpret_cast<const CUpti_Activity*>(&r);
}

// A runtime call as CUPTI records it, made on kTid.
CUpti_ActivityAPI runtime_call(CUpti_CallbackId cbid, std::int64_t start, std::int64_t end,
                               std::uint32_t correlation) {
  CUpti_ActivityAPI call{};
  call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  call.cbid = cbid;
  call.start = static_cast<std::uint64_t>(start);
  call.end = static_cast<std::uint64_t>(end);
  call.threadId = kTid;
  call.correlationId = correlation;
  return call;
}

// What CUPTI records when a call is made with kHandle pushed as the external correlation id.
CUpti_ActivityExternalCorrelation in_range(std::uint32_t correlation) {
  CUpti_ActivityExternalCorrelation ext{};
  ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  ext.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  ext.externalId = kHandle;
  ext.correlationId = correlation;
  return ext;
}

// One launch of each kind CUPTI reports, on stream 7 of device 0, context 1, as a program that
// launches a kernel, copies, sets, synchronizes and allocates would produce them.
void add_one_of_each(CuptiRecords& records) {
  records.add(as_activity(
      runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, kT0 + 1'000, kT0 + 4'000, 11)));

  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.name = "_Z6addOnePfi";
  kernel.start = kT0 + 10'000;
  kernel.end = kT0 + 51'407;
  kernel.deviceId = 0;
  kernel.contextId = 1;
  kernel.streamId = 7;
  kernel.gridX = 512;
  kernel.gridY = kernel.gridZ = 1;
  kernel.blockX = 512;
  kernel.blockY = kernel.blockZ = 1;
  kernel.registersPerThread = 40;
  kernel.staticSharedMemory = 256;
  kernel.dynamicSharedMemory = 144;
  kernel.correlationId = 11;
  records.add(as_activity(kernel));

  records.add(as_activity(in_range(11)));  // after the kernel: CUPTI's buffers keep no order

  // The copy's and the set's launches, in the same range.
  for (const std::uint32_t correlation : {12u, 13u}) {
    const std::int64_t start = kT0 + 5'000 + correlation * 100;
    records.add(
        as_activity(runtime_call(correlation == 12 ? CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020
                                                   : CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
                                 start, start + 50, correlation)));
    records.add(as_activity(in_range(correlation)));
  }

  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.bytes = 4096;
  copy.start = kT0 + 60'000;
  copy.end = kT0 + 62'000;  // 4096 B in 2 us: 2.048 GB/s
  copy.deviceId = 0;
  copy.contextId = 1;
  copy.streamId = 7;
  copy.correlationId = 12;
  records.add(as_activity(copy));

  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.bytes = 6291456;
  set.start = kT0 + 70'000;
  set.end = kT0 + 74'960;
  set.deviceId = 0;
  set.contextId = 1;
  set.streamId = 7;
  set.correlationId = 13;
  set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  records.add(as_activity(set));

  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.start = kT0 + 75'000;
  sync.end = kT0 + 80'000;
  sync.contextId = 1;  // no device in the record: the context's, device 0
  sync.streamId = 7;
  sync.correlationId = 14;
  records.add(as_activity(sync));

  records.add(as_activity(
      runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, kT0 + 81'000, kT0 + 90'000, 15)));

  CUpti_ActivityMemory4 alloc{};
  alloc.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  alloc.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  alloc.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  alloc.correlationId = 15;  // on the thread of the cudaMalloc that made it
  alloc.address = 0x7f0000000000;
  alloc.bytes = 1 << 20;
  alloc.timestamp = kT0 + 85'000;
  alloc.deviceId = 0;
  records.add(as_activity(alloc));

  CUpti_ActivityOverhead3 overhead{};  // a kind the converter does not hold: counted
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  records.add(as_activity(overhead));
}

CuptiContext context() {
  CuptiContext c;
  c.api_name = [](CUpti_ActivityKind, CUpti_CallbackId cbid) -> std::string {
    // What cuptiGetCallbackName answers, suffix and all, for the two calls used here.
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
      return std::string(without_version_suffix("cudaLaunchKernel_v7000"));
    }
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) {
      return std::string(without_version_suffix("cudaMalloc_v3020"));
    }
    return "";
  };
  c.sm_count = {{0, 108}};  // an A100
  c.offset_ns = -500;       // CUPTI's clock 500 ns ahead of the ranges'
  c.process_name = "python3.10";
  return c;
}

// A result as a window makes it: the CPU backend's thread and range first, then CUPTI's.
std::shared_ptr<const ProfilerResult> converted() {
  ProfilerResult::Builder builder;
  builder.set_pid(1234);
  const std::int32_t cpu = builder.add_thread({kTid, "main"});
  Event range;
  range.name = builder.keep("aten::add");
  range.kind = EventKind::kRange;
  range.start_ns = kT0 - 1'000;
  range.end_ns = kT0 + 95'000;
  range.handle = kHandle;
  range.thread = cpu;
  builder.add_event(range);
  CuptiRecords records(context());
  add_one_of_each(records);
  EXPECT_EQ(records.skipped(), 1u);
  records.emit(builder);
  builder.set_window(kT0 - 2'000, kT0 + 100'000);
  return builder.finish();
}

const Event* find(const ProfilerResult& r, std::string_view name) {
  for (const Event& e : r.events()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TEST(CuptiRecords, NamesAsKinetoWritesThem) {
  EXPECT_EQ(memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE),
            "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE),
            "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(memset_name(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE), "Memset (Device)");
  EXPECT_EQ(without_version_suffix("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(without_version_suffix("cudaFree"), "cudaFree");
  EXPECT_EQ(without_version_suffix("my_vector"), "my_vector");
}

TEST(CuptiRecords, OfTheDriverCallsOnlyLaunchesAreKeptAsKinetoKeepsThem) {
  // Seen on an H200 (tests/data/gpu): each <<<>>> launch of nvcc 13's runtime also makes a
  // cuKernelGetName, which Kineto drops; a launch through the driver (Triton's) it keeps.
  CuptiRecords records(context());
  CUpti_ActivityAPI name_call =
      runtime_call(CUPTI_DRIVER_TRACE_CBID_cuKernelGetName, kT0 + 10, kT0 + 20, 31);
  name_call.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  CUpti_ActivityAPI launch =
      runtime_call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kT0 + 30, kT0 + 40, 32);
  launch.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  records.add(as_activity(name_call));
  records.add(as_activity(launch));
  ProfilerResult::Builder builder;
  records.emit(builder);
  const auto r = builder.finish();
  ASSERT_EQ(r->events().size(), 1u);
  EXPECT_EQ(r->events()[0].kind, EventKind::kDriver);
  EXPECT_EQ(r->detail(r->events()[0])->gpu.correlation, 32);
  EXPECT_EQ(records.skipped(), 1u);
}

TEST(CuptiRecords, GpuWorkGoesOnItsStreamAndPointsAtItsLaunchAndRange) {
  const auto r = converted();
  const Event* kernel = find(*r, "addOne(float*, int)");  // demangled
  const Event* launch = find(*r, "cudaLaunchKernel");
  const Event* range = find(*r, "aten::add");
  ASSERT_TRUE(kernel && launch && range);

  EXPECT_EQ(kernel->kind, EventKind::kKernel);
  EXPECT_EQ(kernel->start_ns, kT0 + 10'000 - 500);  // the offset puts it on the ranges' clock
  EXPECT_EQ(kernel->duration_ns(), 41'407);
  const ThreadInfo& stream = r->threads()[static_cast<std::size_t>(kernel->thread)];
  EXPECT_EQ(stream.name, "stream 7");
  EXPECT_EQ(stream.pid, 0);
  EXPECT_EQ(stream.device, 0);
  EXPECT_EQ(stream.stream, 7);
  const GpuInfo& g = r->detail(*kernel)->gpu;
  EXPECT_EQ(g.correlation, 11);
  EXPECT_EQ(g.external_id, static_cast<std::int64_t>(kHandle));  // the range's handle
  EXPECT_EQ(g.grid[0], 512);
  EXPECT_EQ(g.block[0], 512);
  EXPECT_EQ(g.registers_per_thread, 40);
  EXPECT_EQ(g.shared_memory, 400);

  // The launch is on the thread the CPU backend added, inside the range.
  EXPECT_EQ(launch->kind, EventKind::kRuntime);
  EXPECT_EQ(launch->thread, range->thread);
  EXPECT_GE(launch->start_ns, range->start_ns);
  EXPECT_LE(launch->end_ns, range->end_ns);
  EXPECT_EQ(r->detail(*launch)->gpu.external_id, static_cast<std::int64_t>(kHandle));
  EXPECT_EQ(r->threads().size(), 2u);  // main and stream 7: no thread of its own for calls

  // An ac2g flow from each launch to its work: the kernel's, the copy's and the set's.
  ASSERT_EQ(r->flows().size(), 3u);
  int ac2g_to_kernel = 0;
  for (const Flow& f : r->flows()) {
    if (f.id != 11) continue;
    ++ac2g_to_kernel;
    EXPECT_EQ(f.category, "ac2g");
    EXPECT_EQ(&r->events()[static_cast<std::size_t>(f.from)], launch);
    EXPECT_EQ(&r->events()[static_cast<std::size_t>(f.to)], kernel);
  }
  EXPECT_EQ(ac2g_to_kernel, 1);
}

TEST(CuptiRecords, CopiesSetsSyncsAndAllocations) {
  const auto r = converted();
  const Event* copy = find(*r, "Memcpy HtoD (Pageable -> Device)");
  const Event* set = find(*r, "Memset (Device)");
  const Event* sync = find(*r, "Stream Sync");
  const Event* memory = find(*r, "[memory]");
  const Event* malloc_call = find(*r, "cudaMalloc");
  ASSERT_TRUE(copy && set && sync && memory && malloc_call);
  EXPECT_EQ(copy->kind, EventKind::kMemcpy);
  EXPECT_EQ(r->detail(*copy)->gpu.bytes, 4096);
  EXPECT_NE(r->other_args(*copy).find("\"memory bandwidth (GB/s)\":2.048"), std::string_view::npos)
      << r->other_args(*copy);
  EXPECT_EQ(set->kind, EventKind::kMemset);
  EXPECT_EQ(r->category(*sync), "cuda_sync");
  EXPECT_EQ(sync->thread, copy->thread);  // stream 7 of device 0, found from context 1
  EXPECT_EQ(memory->kind, EventKind::kMemory);
  EXPECT_EQ(memory->thread, malloc_call->thread);
  const MemoryUse& m = r->detail(*memory)->memory;
  EXPECT_EQ(m.device.type, DeviceType::kCUDA);
  EXPECT_EQ(m.bytes, 1 << 20);
  EXPECT_EQ(m.address, 0x7f0000000000u);
}

// Our Chrome trace of the converted records against what Kineto wrote on a real A100: the same
// categories, the same event keys, args Kineto has (ours may lack the ones needing the device's
// occupancy calculator), the device's process labelled "GPU 0" and sorted after the CPU's.
TEST(CuptiRecords, TheTraceHasKinetosLayout) {
  const json ours = json::parse(chrome_trace_json(*converted()));
  const json kineto = json::parse(testing::read_gzip_file(
      std::string(OPSCOPE_PEERS_DIR) + "/kineto-traces/nccl_parser_config/nccl_data.json.gz"));
  const auto first_of = [](const json& trace, const std::string& cat) -> const json* {
    for (const json& e : trace["traceEvents"]) {
      if (e.value("ph", "") == "X" && e.value("cat", "") == cat) return &e;
    }
    return nullptr;
  };
  for (const std::string cat : {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime"}) {
    SCOPED_TRACE(cat);
    const json* a = first_of(ours, cat);
    const json* b = first_of(kineto, cat);
    ASSERT_TRUE(a && b);
    std::set<std::string> our_keys, their_keys;
    for (auto it = a->begin(); it != a->end(); ++it) our_keys.insert(it.key());
    for (auto it = b->begin(); it != b->end(); ++it) their_keys.insert(it.key());
    EXPECT_EQ(our_keys, their_keys);
    for (auto it = (*a)["args"].begin(); it != (*a)["args"].end(); ++it) {
      EXPECT_TRUE((*b)["args"].contains(it.key())) << it.key() << " is not Kineto's";
    }
    for (const char* must : {"External id", "correlation"}) {
      EXPECT_TRUE((*a)["args"].contains(must)) << must;
    }
    if (cat != "cuda_runtime") {
      EXPECT_EQ((*a)["pid"], 0);
      EXPECT_EQ((*a)["tid"], 7);
    }
  }
  const json* kernel = first_of(ours, "kernel");
  EXPECT_NEAR((*kernel)["args"]["blocks per SM"].get<double>(), 4.740741, 1e-6);
  EXPECT_NEAR((*kernel)["args"]["warps per SM"].get<double>(), 75.851852, 1e-6);
  bool labelled = false, flow_start = false;
  for (const json& e : ours["traceEvents"]) {
    if (e.value("name", "") == "process_labels" && e["pid"] == 0) {
      labelled = e["args"]["labels"] == "GPU 0";
    }
    if (e.value("name", "") == "process_sort_index" && e["pid"] == 0) {
      EXPECT_EQ(e["args"]["sort_index"], 16777216);
    }
    if (e.value("ph", "") == "s" && e.value("cat", "") == "ac2g" && e["id"] == 11) {
      flow_start = e["tid"] == kTid;
    }
  }
  EXPECT_TRUE(labelled);
  EXPECT_TRUE(flow_start);
}

TEST(CuptiRecords, ItsTraceReadsBackWithItsGpuWork) {
  const auto r = converted();
  const testing::TempDir dir;
  const std::string path = dir.file("cupti_records_trace.json");
  export_chrome_trace(*r, path);
  const auto back = read_trace(path);
  const Event* kernel = find(*back, "addOne(float*, int)");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->kind, EventKind::kKernel);
  EXPECT_EQ(back->detail(*kernel)->gpu.external_id, static_cast<std::int64_t>(kHandle));
  EXPECT_EQ(back->flows().size(), r->flows().size());
}

// Holistic Trace Analysis reads the trace as one of PyTorch's: its temporal and idle
// breakdowns of our GPU work are opscope analyze's.
TEST(CuptiRecords, HtaReadsItsTraceAsOpscopeAnalyzeDoes) {
  const auto dir = tests::scratch("cupti_trace");
  std::filesystem::create_directories(dir);
  export_chrome_trace(*converted(), (dir / "rank0.json").string());
  for (const std::string report : {"temporal", "idle"}) {
    std::string why;
    const json want = tests::hta(dir.string(), report, why);
    if (!why.empty()) GTEST_SKIP() << why;
    const json got = tests::ours(dir.string(), report);
    tests::expect_rows_match(want[report], got[report], report);
    if (report == "temporal") {
      ASSERT_EQ(got[report].size(), 1u);
      EXPECT_GT(got[report][0]["kernel_time(us)"].get<double>(), 41.0);
    }
  }
}

// A program that records a CUDA event, waits for it on the host and on another stream, and
// synchronizes the device, as CUPTI reports it: syncs with their calls, and the event's records
// (one with the device time CUPTI gives when asked, one without).
std::shared_ptr<const ProfilerResult> synced() {
  ProfilerResult::Builder builder;
  builder.set_pid(1234);
  builder.add_thread({kTid, "main"});
  CuptiContext c = context();
  c.api_name = [](CUpti_ActivityKind, CUpti_CallbackId cbid) -> std::string {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        return "cudaLaunchKernel";
      case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
        return "cudaEventRecord";
      case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
        return "cudaEventSynchronize";
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
        return "cudaStreamWaitEvent";
      case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
        return "cudaDeviceSynchronize";
      default:
        return "";
    }
  };
  CuptiRecords records(c);
  const auto call = [&](CUpti_CallbackId cbid, std::uint32_t correlation) {
    const std::int64_t start = kT0 + correlation * 1'000;
    records.add(as_activity(runtime_call(cbid, start, start + 500, correlation)));
  };
  // A kernel on stream 7 of device 0 in context 1: what tells the syncs their device.
  call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 10);
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.name = "_Z6addOnePfi";
  kernel.start = kT0 + 12'000;
  kernel.end = kT0 + 19'000;
  kernel.contextId = 1;
  kernel.streamId = 7;
  kernel.correlationId = 10;
  records.add(as_activity(kernel));

  // Event 8 recorded on stream 7 (correlation 20), then again on stream 9 (25).
  call(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, 20);
  call(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, 25);
  for (const std::uint32_t correlation : {20u, 25u}) {
    CUpti_ActivityCudaEvent2 event{};
    event.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    event.correlationId = correlation;
    event.contextId = 1;
    event.deviceId = 0;
    event.eventId = 8;
    event.streamId = correlation == 20 ? 7 : 9;
    event.deviceTimestamp = correlation == 20 ? kT0 + 20'700 : 0;
    event.cudaEventSyncId = 500 + correlation;
    records.add(as_activity(event));
  }
  const auto sync = [&](CUpti_ActivitySynchronizationType type, std::uint32_t stream,
                        std::uint32_t event, std::uint64_t sync_id, std::uint32_t correlation) {
    CUpti_ActivitySynchronization2 s{};
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = type;
    s.start = kT0 + correlation * 1'000 + 100;
    s.end = s.start + 300;
    s.contextId = 1;
    s.streamId = stream;
    s.cudaEventId = event;
    s.cudaEventSyncId = sync_id;
    s.correlationId = correlation;
    records.add(as_activity(s));
  };
  constexpr std::uint32_t kNone = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  // cudaEventSynchronize (21) without a sync id: the event's latest record before it, 20.
  call(CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, 21);
  sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, kNone, 8, kNone, 21);
  // cudaStreamWaitEvent (26) on stream 7, naming the record of 25 by its sync id.
  call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, 26);
  sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 7, 8, 525, 26);
  // cudaDeviceSynchronize (30): the context's sync, on no stream.
  call(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 30);
  sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, kNone, kNone, kNone, 30);
  EXPECT_EQ(records.skipped(), 0u);
  records.emit(builder);
  builder.set_window(kT0, kT0 + 40'000);
  return builder.finish();
}

const json* x_event(const json& trace, const std::string& name) {
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("name", "") == name) return &e;
  }
  return nullptr;
}

// Kineto's layout of syncs (CuptiActivityProfiler::handleCudaSyncActivity,
// CudaSyncActivity::metadataJson; ../shared/peers/kineto-traces/critical_path/cuda_event_sync):
// category cuda_sync, on the stream's thread or, on none, thread -1 of the device; the sync's
// kind, stream (-1 for none), correlation, device and context; for event syncs the stream and
// call of the event record waited on.
TEST(CuptiRecords, SyncsHaveKinetosCategoryArgsAndThreads) {
  const json trace = json::parse(chrome_trace_json(*synced()));
  const json* context_sync = x_event(trace, "Context Sync");
  const json* event_sync = x_event(trace, "Event Sync");
  const json* wait = x_event(trace, "Stream Wait Event");
  ASSERT_TRUE(context_sync && event_sync && wait);
  for (const json* e : {context_sync, event_sync, wait}) {
    EXPECT_EQ((*e)["cat"], "cuda_sync");
    EXPECT_EQ((*e)["pid"], 0);
    EXPECT_EQ((*e)["args"]["device"], 0);
    EXPECT_EQ((*e)["args"]["context"], 1);
    EXPECT_EQ((*e)["args"]["cuda_sync_kind"], (*e)["name"]);
  }
  EXPECT_TRUE(is_minus_one((*context_sync)["tid"]));
  EXPECT_EQ((*context_sync)["args"]["stream"], -1);
  EXPECT_EQ((*context_sync)["args"]["correlation"], 30);
  EXPECT_FALSE((*context_sync)["args"].contains("wait_on_stream"));

  EXPECT_TRUE(is_minus_one((*event_sync)["tid"]));
  EXPECT_EQ((*event_sync)["args"]["stream"], -1);
  EXPECT_EQ((*event_sync)["args"]["wait_on_stream"], 7);
  EXPECT_EQ((*event_sync)["args"]["wait_on_cuda_event_record_corr_id"], 20);
  EXPECT_EQ((*event_sync)["args"]["wait_on_cuda_event_id"], 8);

  EXPECT_EQ((*wait)["tid"], 7);
  EXPECT_EQ((*wait)["args"]["stream"], 7);
  EXPECT_EQ((*wait)["args"]["wait_on_stream"], 9);
  EXPECT_EQ((*wait)["args"]["wait_on_cuda_event_record_corr_id"], 25);

  bool named = false;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("name", "") == "thread_name" && e["pid"] == 0 && is_minus_one(e["tid"])) {
      named = e["args"]["name"] == "Device 0";
    }
  }
  EXPECT_TRUE(named);
}

// Kineto draws an ac2g arrow from the call to each sync it waited in (flow id: the
// correlation); here every sync has its whole arrow, cudaEventSynchronize's too.
TEST(CuptiRecords, SyncsAreLinkedToTheirCallsByFlows) {
  const json trace = json::parse(chrome_trace_json(*synced()));
  for (const auto& [correlation, tid] : {std::pair{21, -1}, std::pair{26, 7}, std::pair{30, -1}}) {
    SCOPED_TRACE(correlation);
    bool start = false, end = false;
    for (const json& e : trace["traceEvents"]) {
      if (e.value("cat", "") != "ac2g" || e["id"] != correlation) continue;
      if (e["ph"] == "s") start = e["tid"] == kTid;
      if (e["ph"] == "f") {
        end = e["pid"] == 0 && (tid == -1 ? is_minus_one(e["tid"]) : e["tid"] == tid);
      }
    }
    EXPECT_TRUE(start);
    EXPECT_TRUE(end);
  }
}

// A recorded CUDA event with a device time is Kineto's 1 ns "cudaEvent" of category cuda_event
// on its stream (CudaEventActivity); one without has no place on the timeline.
TEST(CuptiRecords, CudaEventsAsKinetoWritesThem) {
  const json trace = json::parse(chrome_trace_json(*synced()));
  std::size_t events = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "cuda_event") ++events;
  }
  EXPECT_EQ(events, 1u);
  const json* event = x_event(trace, "cudaEvent");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ((*event)["cat"], "cuda_event");
  EXPECT_EQ((*event)["pid"], 0);
  EXPECT_EQ((*event)["tid"], 7);
  EXPECT_EQ((*event)["args"]["event_id"], 8);
  EXPECT_EQ((*event)["args"]["correlation"], 20);
  EXPECT_EQ((*event)["args"]["stream"], 7);
  EXPECT_NEAR((*event)["dur"].get<double>(), 0.001, 1e-9);
}

// Thread -1 reads back as the same thread, of no stream, with the context's sync on it.
TEST(CuptiRecords, ThreadMinusOneReadsBack) {
  const auto r = synced();
  const testing::TempDir dir;
  const std::string path = dir.file("synced.json");
  export_chrome_trace(*r, path);
  const auto back = read_trace(path);
  const Event* sync = find(*back, "Context Sync");
  ASSERT_NE(sync, nullptr);
  const ThreadInfo& t = back->threads()[static_cast<std::size_t>(sync->thread)];
  EXPECT_EQ(t.tid, static_cast<std::uint64_t>(std::int64_t{-1}));
  EXPECT_EQ(t.stream, -1);
  EXPECT_EQ(t.name, "Device 0");
  EXPECT_EQ(back->flows().size(), r->flows().size());
}

}  // namespace cupti_records_test
}  // namespace opscope::backend
