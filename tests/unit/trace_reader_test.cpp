// read_trace(): Chrome / Kineto traces into the result model, checked against an independent
// JSON parser (nlohmann) on the real traces PyTorch wrote (../shared/peers/kineto-traces), and
// on small traces that carry the quirks of real ones.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "import/kineto_importer.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/memory.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "opscope/trace_reader.h"
#include "support/test_support.h"

namespace opscope {
namespace trace_reader_test {

namespace fs = std::filesystem;

std::string peers(const std::string& rel) { return std::string(OPSCOPE_PEERS_DIR) + "/" + rel; }

std::string gunzip(const std::string& path) { return testing::read_gzip_file(path); }

// A file in this test process's scratch directory, removed with it when the process exits.
fs::path scratch(const std::string& name) {
  static const testing::TempDir dir;
  return dir.path() / name;
}

std::string write_file(const std::string& name, const std::string& text) {
  const fs::path p = scratch(name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

// `text` gzip-compressed into a file of its own.
std::string write_gzip_file(const std::string& name, const std::string& text) {
  const std::string path = scratch(name).string();
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(f);
  return path;
}

std::string read_error(const std::string& path) {
  try {
    read_trace(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Every complete event of a real trace, counted per category by nlohmann, is in the result
// with that category; GPU work sits on stream threads of the GPU's process; runtime calls and
// kernels carry their correlation; the rank is distributedInfo.rank.
TEST(TraceReader, RealKinetoTraceMatchesAnIndependentParser) {
  const std::string path = peers("kineto-traces/trace_filter/sampled_rank-1.json.gz");
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path << " (../shared/peers)";
  const nlohmann::json j = nlohmann::json::parse(gunzip(path));
  std::map<std::string, std::size_t> expected;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") == "X") ++expected[e.value("cat", "")];
  }
  const auto r = read_trace(path);
  std::map<std::string, std::size_t> got;
  std::size_t kernels_with_correlation = 0;
  for (const Event& e : r->events()) {
    if (e.kind == EventKind::kInstant || e.kind == EventKind::kMemory) continue;
    ++got[std::string(r->category(e))];
    if (e.kind == EventKind::kKernel) {
      const EventDetail* d = r->detail(e);
      ASSERT_NE(d, nullptr);
      if (d->gpu.correlation > 0) ++kernels_with_correlation;
      const ThreadInfo& t = r->threads()[static_cast<std::size_t>(e.thread)];
      EXPECT_EQ(t.stream, d->gpu.stream) << e.name;
      EXPECT_EQ(t.device, d->gpu.device) << e.name;
      EXPECT_GE(t.pid, 0) << "a GPU stream belongs to the device's process";
    }
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(kernels_with_correlation, expected["kernel"]);
  EXPECT_EQ(r->rank(), j["distributedInfo"]["rank"].get<std::int64_t>());
  // Nesting of CPU ops is rebuilt: some op has a parent.
  bool nested = false;
  for (const Event& e : r->events()) nested |= e.kind == EventKind::kRange && e.parent >= 0;
  EXPECT_TRUE(nested);
}

// Every real trace in ../shared/peers/kineto-traces reads without error (the memory timeline's
// raw file and the Chakra execution trace are not Chrome traces: they are refused with a
// message saying what they are), and reading one exported again gives the same events.
TEST(TraceReader, EverySharedTraceReadsAndRoundTrips) {
  const std::string root = peers("kineto-traces");
  if (!fs::exists(root)) GTEST_SKIP() << "no " << root << " (../shared/peers)";
  int read = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string p = entry.path().string();
    if (!entry.is_regular_file() || p.find(".json") == std::string::npos) continue;
    if (p.find("memory_timeline.raw") != std::string::npos) {
      EXPECT_NE(read_error(p).find("expected a JSON object"), std::string::npos) << read_error(p);
      continue;
    }
    if (p.find("_et.json") != std::string::npos) {
      EXPECT_NE(read_error(p).find("execution trace"), std::string::npos) << read_error(p);
      continue;
    }
    SCOPED_TRACE(p);
    const auto r = read_trace(p);
    ++read;
    const std::string exported = chrome_trace_json(*r);
    const std::string again_path = write_file("again.json", exported);
    const auto again = read_trace(again_path);
    // The same events on the same (pid, tid), whatever the order of those that tie, with the
    // args the model has no field for.
    using Row = std::tuple<std::int64_t, std::uint64_t, std::int64_t, std::int64_t, std::string,
                           std::string, int, std::string>;
    const auto rows = [](const ProfilerResult& x) {
      std::vector<Row> v;
      for (const Event& e : x.events()) {
        const ThreadInfo& t = x.threads()[static_cast<std::size_t>(e.thread)];
        v.emplace_back(x.pid_of(t), t.tid, e.start_ns - x.start_time_ns(), e.end_ns - e.start_ns,
                       std::string(e.name), std::string(x.category(e)), static_cast<int>(e.kind),
                       std::string(x.other_args(e)));
      }
      std::sort(v.begin(), v.end());
      return v;
    };
    const std::vector<Row> before = rows(*r);
    const std::vector<Row> after = rows(*again);
    ASSERT_EQ(before.size(), after.size());
    for (std::size_t i = 0; i < before.size(); ++i) ASSERT_EQ(before[i], after[i]) << i;
    EXPECT_EQ(again->rank(), r->rank());
    EXPECT_EQ(again->device_properties().empty(), r->device_properties().empty());
  }
  EXPECT_GE(read, 15);
}

// A read told to leave out the CPU ranges' args and the flows (TraceReadOptions) leaves out
// exactly those, on two threads or one, streamed or whole: every event is there with its name,
// kind, category, times and thread, and GPU work and runtime calls keep their args.
TEST(TraceReader, LeavesOutWhatTheOptionsSay) {
  const std::string path = peers("kineto-traces/nccl_parser_config/nccl_data.json.gz");
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  const std::string plain = write_file("nccl_plain.json", gunzip(path));
  const std::vector<std::string> paths{plain};
  const auto whole = read_traces(paths, 1);
  TraceReadOptions less;
  less.cpu_range_args = false;
  less.flows = false;
  const auto count_args = [](const ProfilerResult& r) {
    std::size_t ranges_with_args = 0, others_with_args = 0;
    for (const Event& e : r.events()) {
      const bool has = !r.other_args(e).empty() || e.handle != 0 || e.sequence_nr >= 0;
      (e.kind == EventKind::kRange ? ranges_with_args : others_with_args) += has ? 1 : 0;
    }
    return std::pair(ranges_with_args, others_with_args);
  };
  ASSERT_FALSE(whole[0]->flows().empty());
  ASSERT_GT(count_args(*whole[0]).first, 1000u);
  using Row = std::tuple<std::string, int, std::string, std::int64_t, std::int64_t, std::int32_t,
                         std::string, std::int64_t>;
  const auto rows = [](const ProfilerResult& r, bool cpu_args) {
    std::vector<Row> v;
    for (const Event& e : r.events()) {
      const bool range = e.kind == EventKind::kRange;
      const EventDetail* d = r.detail(e);
      v.emplace_back(std::string(e.name), static_cast<int>(e.kind), std::string(r.category(e)),
                     e.start_ns, e.end_ns, e.thread,
                     range && !cpu_args ? std::string() : std::string(r.other_args(e)),
                     d != nullptr ? d->gpu.correlation : -1);
    }
    return v;
  };
  for (const unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    const auto part = read_traces(paths, threads, less);
    EXPECT_TRUE(part[0]->flows().empty());
    EXPECT_EQ(count_args(*part[0]).first, 0u);
    EXPECT_EQ(count_args(*part[0]).second, count_args(*whole[0]).second);
    EXPECT_EQ(rows(*part[0], false), rows(*whole[0], false));
  }
  const auto whole_text = import::read_trace_whole(plain, less);
  EXPECT_TRUE(whole_text->flows().empty());
  EXPECT_EQ(rows(*whole_text, false), rows(*whole[0], false));
  // Each option alone.
  TraceReadOptions no_flows;
  no_flows.flows = false;
  const auto flowless = read_traces(paths, 2, no_flows);
  EXPECT_TRUE(flowless[0]->flows().empty());
  EXPECT_EQ(rows(*flowless[0], true), rows(*whole[0], true));
  TraceReadOptions no_args;
  no_args.cpu_range_args = false;
  const auto argless = read_traces(paths, 2, no_args);
  EXPECT_EQ(argless[0]->flows().size(), whole[0]->flows().size());
  EXPECT_EQ(count_args(*argless[0]).first, 0u);
  // Without the args no field holds: none kept, every field as a whole read has it.
  TraceReadOptions no_other = less;
  no_other.other_args = false;
  const auto fields = [](const ProfilerResult& r) {
    std::vector<std::tuple<std::string, int, std::int64_t, std::int64_t, std::int32_t, std::int64_t,
                           std::int64_t, std::int64_t, std::int64_t>>
        v;
    for (const Event& e : r.events()) {
      const EventDetail* d = r.detail(e);
      v.emplace_back(std::string(e.name), static_cast<int>(e.kind), e.start_ns, e.end_ns, e.thread,
                     d != nullptr ? d->gpu.correlation : -1, d != nullptr ? d->gpu.stream : -1,
                     d != nullptr ? d->gpu.bytes : -1, d != nullptr ? d->memory.bytes : 0);
    }
    return v;
  };
  const auto with_other = [](const ProfilerResult& r) {
    std::size_t n = 0;
    for (const Event& e : r.events()) n += r.other_args(e).empty() ? 0 : 1;
    return n;
  };
  ASSERT_GT(with_other(*whole[0]), 1000u);
  for (const unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    const auto otherless = read_traces(paths, threads, no_other);
    EXPECT_EQ(with_other(*otherless[0]), 0u);
    EXPECT_EQ(fields(*otherless[0]), fields(*read_traces(paths, threads, less)[0]));
  }
  EXPECT_EQ(with_other(*import::read_trace_whole(plain, no_other)), 0u);
  // Without the CPU ranges: the profiler steps stay, every other event is as a whole read has
  // it, and the recording process is the same one.
  TraceReadOptions no_ranges = less;
  no_ranges.cpu_ranges = false;
  const auto without_ranges = [&](const ProfilerResult& r) {
    std::vector<Row> v;
    for (Row& row : rows(r, false)) {
      const bool range = std::get<1>(row) == static_cast<int>(EventKind::kRange);
      if (!range || std::get<0>(row).starts_with("ProfilerStep#")) v.push_back(std::move(row));
    }
    return v;
  };
  const auto steps = [](const ProfilerResult& r) {
    std::size_t n = 0;
    for (const Event& e : r.events()) n += e.name.starts_with("ProfilerStep#") ? 1 : 0;
    return n;
  };
  ASSERT_GT(steps(*whole[0]), 1u);
  for (const unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    const auto rangeless = read_traces(paths, threads, no_ranges);
    EXPECT_LT(rangeless[0]->events().size(), whole[0]->events().size() / 2);
    EXPECT_EQ(rows(*rangeless[0], false), without_ranges(*whole[0]));
    EXPECT_EQ(steps(*rangeless[0]), steps(*whole[0]));
    EXPECT_EQ(rangeless[0]->pid(), whole[0]->pid());
    EXPECT_EQ(rangeless[0]->threads().size(), whole[0]->threads().size());
  }
  EXPECT_EQ(rows(*import::read_trace_whole(plain, no_ranges), false), without_ranges(*whole[0]));
}

// A CPU range is left out however its fields are ordered (the phase, category or name last).
TEST(TraceReader, LeavesOutCpuRangesWhateverTheFieldOrder) {
  const std::string path = write_file("ranges_in_any_order.json", R"json({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10, "dur": 5},
    {"name": "aten::add", "pid": 1, "tid": 2, "ts": 11, "dur": 1, "cat": "cpu_op", "ph": "X"},
    {"cat": "user_annotation", "ts": 12, "dur": 1, "pid": 1, "tid": 2, "ph": "X", "name": "fwd"},
    {"pid": 3, "tid": 4, "ts": 9, "dur": 20, "ph": "X", "name": "ProfilerStep#3", "cat": "cpu_op"},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 13,
     "dur": 1, "args": {"correlation": 5}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 15, "dur": 2,
     "args": {"stream": 7, "correlation": 5, "device": 0}}
  ]})json");
  TraceReadOptions no_ranges;
  no_ranges.cpu_ranges = false;
  const auto r = read_traces(std::vector<std::string>{path}, 1, no_ranges)[0];
  std::vector<std::string> names;
  for (const Event& e : r->events()) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ProfilerStep#3", "cudaLaunchKernel", "k"}));
  // The process with the most CPU ranges is still the recording one, though all it kept is a
  // runtime call, and the step's process kept one range.
  EXPECT_EQ(r->pid(), 1);
}

// Kineto writes microseconds with a nanosecond fraction, more digits than a double holds;
// ids come as integers or strings; processes may be named with text.
TEST(TraceReader, KeepsNanosecondsAndTakesIdsAsStringsOrIntegers) {
  const std::string path = write_file("quirks.json", R"json({
  "schemaVersion": 1,
  "distributedInfo": {"rank": "3"},
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": "11", "ts": 1682725898236567.123, "dur": 2.5,
     "args": {"External id": 7, "Ev Idx": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11, "ts": 1682725898236568, "dur": 1,
     "args": {"correlation": 99, "External id": 7}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": "1682725898236570.001", "dur": 3,
     "args": {"device": 0, "stream": 7, "correlation": 99, "grid": [1, 2, 3], "block": [4, 5, 6], "queued": 0}},
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1682725898236560, "dur": 20},
    {"ph": "s", "id": 99, "pid": 10, "tid": 11, "ts": 1682725898236568, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 99, "pid": 0, "tid": "stream 7", "ts": 1682725898236570.001, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11, "args": {"name": "main"}},
    {"ph": "X", "cat": "cpu_op", "name": "esc1", "pid": 10, "tid": "w\"1\"", "ts": 1682725898236580 , "dur" : 1 ,
     "args": {"External id": 123456789012345678901}},
    {"ph": "X", "cat": "cpu_op", "name": "esc2", "pid": 10, "tid": "w\u00221\"", "ts": 1682725898236582, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "w1", "pid": 10, "tid": "w1", "ts": 1682725898236584, "dur": 1}
  ]})json");
  const auto r = read_trace(path);
  EXPECT_EQ(r->rank(), 3);
  // Ids spelled with escapes are their unescaped text (one thread for both spellings); numbers
  // with spaces after them are read; an integer past 64 bits is not one, and is kept as written.
  const auto named = [&](std::string_view name) -> const Event* {
    for (const Event& e : r->events()) {
      if (e.name == name) return &e;
    }
    return nullptr;
  };
  const Event* esc1 = named("esc1");
  const Event* esc2 = named("esc2");
  const Event* w1 = named("w1");
  ASSERT_TRUE(esc1 && esc2 && w1);
  EXPECT_EQ(esc1->thread, esc2->thread);
  EXPECT_NE(esc1->thread, w1->thread);
  EXPECT_EQ(esc1->start_ns, 1682725898236580000);
  EXPECT_EQ(esc1->duration_ns(), 1000);
  EXPECT_EQ(r->other_args(*esc1), R"({"External id":123456789012345678901})");
  const Event* mm = nullptr;
  const Event* kernel = nullptr;
  const Event* launch = nullptr;
  const Event* span = nullptr;
  for (const Event& e : r->events()) {
    if (e.name == "aten::mm") mm = &e;
    if (e.name == "gemm") kernel = &e;
    if (e.name == "cudaLaunchKernel") launch = &e;
    if (e.name == "PyTorch Profiler (0)") span = &e;
  }
  ASSERT_TRUE(mm && kernel && launch && span);
  EXPECT_EQ(mm->start_ns, 1682725898236567123);
  EXPECT_EQ(mm->end_ns - mm->start_ns, 2500);
  EXPECT_EQ(mm->handle, 7u);
  EXPECT_EQ(kernel->start_ns, 1682725898236570001);
  EXPECT_EQ(kernel->kind, EventKind::kKernel);
  EXPECT_EQ(r->detail(*kernel)->gpu.grid[2], 3);
  EXPECT_EQ(r->detail(*kernel)->gpu.block[0], 4);
  EXPECT_EQ(r->other_args(*kernel), R"({"queued":0})");
  EXPECT_EQ(r->other_args(*mm), R"({"Ev Idx":1})");
  // An op whose only other arg is kept beside it needs no EventDetail (168 bytes): most of a
  // real trace's CPU ops are such.
  EXPECT_EQ(mm->detail, -1);
  EXPECT_EQ(span->kind, EventKind::kOther);
  EXPECT_EQ(r->category(*span), "Trace");
  // The runtime call nests in the op that made it only by time; the flow links it to the kernel.
  ASSERT_EQ(r->flows().size(), 1u);
  const Flow& f = r->flows()[0];
  EXPECT_EQ(f.category, "ac2g");
  ASSERT_GE(f.from, 0);
  ASSERT_GE(f.to, 0);
  EXPECT_EQ(&r->events()[static_cast<std::size_t>(f.from)], launch);
  EXPECT_EQ(&r->events()[static_cast<std::size_t>(f.to)], kernel);
  const ThreadInfo& main = r->threads()[static_cast<std::size_t>(mm->thread)];
  EXPECT_EQ(main.name, "main");
  EXPECT_EQ(main.tid, 11u);
  EXPECT_EQ(r->pid_of(main), 10);
  EXPECT_EQ(r->pid(), 10);
}

// Kineto's "[memory]" instants (profile_memory) are allocation reports again: on the CPU or a
// CUDA device (HIP's counted as CUDA, as torch counts them), owned by the op open on their
// thread, in the memory columns; an unknown device type, or no "Bytes", leaves an instant.
TEST(TraceReader, MemoryInstantsAreAllocationReports) {
  const std::string path = write_file("memory.json", R"json({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 100, "dur": 10,
     "args": {"External id": 5}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 102,
     "args": {"Device Type": 0, "Device Id": -1, "Addr": 4096, "Bytes": 512, "Total Allocated": 512, "Total Reserved": 1024}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 104,
     "args": {"Device Type": 1, "Device Id": 0, "Addr": 8192, "Bytes": 2048, "Total Allocated": 2048, "Total Reserved": 4096, "Extra": "kept"}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 120,
     "args": {"Device Type": 6, "Device Id": 1, "Addr": 8192, "Bytes": -2048, "Total Allocated": 0, "Total Reserved": 4096}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 121,
     "args": {"Device Type": 12, "Bytes": 64}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 122,
     "args": {"Device Type": 0}}
  ]})json");
  const auto r = read_trace(path);
  EXPECT_TRUE(r->lenses().profile_memory);
  std::vector<const Event*> memory, instants;
  for (const Event& e : r->events()) {
    if (e.kind == EventKind::kMemory) memory.push_back(&e);
    if (e.kind == EventKind::kInstant) instants.push_back(&e);
  }
  ASSERT_EQ(memory.size(), 3u);
  ASSERT_EQ(instants.size(), 2u);  // device type 12 (not CPU, CUDA or HIP), and no "Bytes"
  EXPECT_NE(r->other_args(*instants[0]).find("\"Device Type\":12"), std::string::npos);
  const MemoryUse& cpu = r->detail(*memory[0])->memory;
  EXPECT_EQ(cpu.device.type, DeviceType::kCPU);
  EXPECT_EQ(cpu.address, 4096u);
  EXPECT_EQ(cpu.bytes, 512);
  EXPECT_EQ(cpu.total_allocated, 512);
  EXPECT_EQ(cpu.total_reserved, 1024);
  EXPECT_EQ(cpu.action, MemoryAction::kAllocate);
  const EventDetail& cuda = *r->detail(*memory[1]);
  EXPECT_EQ(cuda.memory.device, (Device{DeviceType::kCUDA, 0}));
  EXPECT_EQ(r->other_args(*memory[1]), R"({"Extra":"kept"})");
  const MemoryUse& hip = r->detail(*memory[2])->memory;
  EXPECT_EQ(hip.device, (Device{DeviceType::kCUDA, 1}));
  EXPECT_EQ(hip.action, MemoryAction::kFree);
  ASSERT_GE(memory[0]->parent, 0);
  EXPECT_EQ(r->events()[static_cast<std::size_t>(memory[0]->parent)].name, "aten::empty");
  EXPECT_LT(memory[2]->parent, 0);  // after aten::empty ended

  const KeyAverages k = key_averages(*r);
  std::map<std::string, const FunctionEventAvg*> row;
  for (const FunctionEventAvg& a : k.rows()) row[a.key] = &a;
  ASSERT_TRUE(row.count("aten::empty") && row.count("[memory]"));
  EXPECT_EQ(row["aten::empty"]->self_cpu_memory_usage, 512);
  EXPECT_EQ(row["aten::empty"]->self_cuda_memory_usage, 2048);
  EXPECT_EQ(row["[memory]"]->cuda_memory_usage, -2048);
  EXPECT_NE(k.table().find("Self CUDA Mem"), std::string::npos);
}

// What opscope records of memory survives its own trace: devices, addresses, totals, in-place
// writes (an arg of opscope's own, which Kineto's readers ignore), and the tables made of them.
TEST(TraceReader, RecordedMemoryRoundTrips) {
  static char block[4];
  Profiler p({.lenses = {.profile_memory = true}});
  p.start();
  {
    OPSCOPE_RECORD_FUNCTION("step");
    report_memory_usage(block, 100, 100, 100);
    report_memory_version(block, 100);
    report_memory_usage(block + 1, 4096, 4096, 8192, {DeviceType::kCUDA, 0});
  }
  report_memory_usage(block, -100, 0, 100);
  p.stop();
  const std::string path = scratch("memory_roundtrip.json").string();
  p.export_chrome_trace(path);
  const auto back = read_trace(path);
  std::vector<MemoryUse> want, got;
  for (const Event& e : p.events()) {
    if (e.kind == EventKind::kMemory) want.push_back(p.result().detail(e)->memory);
  }
  for (const Event& e : back->events()) {
    if (e.kind == EventKind::kMemory) got.push_back(back->detail(e)->memory);
  }
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(want.size(), 4u);
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].address, want[i].address);
    EXPECT_EQ(got[i].bytes, want[i].bytes);
    EXPECT_EQ(got[i].total_allocated, want[i].total_allocated);
    EXPECT_EQ(got[i].total_reserved, want[i].total_reserved);
    EXPECT_EQ(got[i].device, want[i].device);
    EXPECT_EQ(got[i].action, want[i].action);
  }
  const auto rows = [](const KeyAverages& k) {
    std::map<std::string, std::vector<std::int64_t>> out;
    for (const FunctionEventAvg& a : k.rows()) {
      out[a.key] = {a.count, a.cpu_memory_usage, a.self_cpu_memory_usage, a.cuda_memory_usage,
                    a.self_cuda_memory_usage};
    }
    return out;
  };
  EXPECT_EQ(rows(key_averages(*back)), rows(p.key_averages()));
}

// A file that is not a trace is refused with the file, the byte offset and what was expected;
// so is gzip data that is cut short.
TEST(TraceReader, RefusesMalformedAndTruncatedFilesWithTheOffset) {
  const std::string cut = write_file(
      "cut.json", R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur)");
  std::string e = read_error(cut);
  EXPECT_NE(e.find(cut), std::string::npos) << e;
  EXPECT_NE(e.find("byte"), std::string::npos) << e;

  const std::string bad_ts = write_file(
      "bad_ts.json",
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "soon", "dur": 1}]})");
  e = read_error(bad_ts);
  EXPECT_NE(e.find("microseconds"), std::string::npos) << e;
  EXPECT_NE(e.find("soon"), std::string::npos) << e;
  EXPECT_NE(e.find("byte 17"), std::string::npos) << e;

  EXPECT_NE(read_error(write_file("list.json", "[1, 2]")).find("expected a JSON object"),
            std::string::npos);
  EXPECT_NE(read_error(write_file("noevents.json", R"({"schemaVersion": 1})")).find("traceEvents"),
            std::string::npos);
  EXPECT_NE(read_error(scratch("missing.json").string()).find("No such file"), std::string::npos);

  // A real .json.gz cut in half.
  const std::string real = peers("kineto-traces/trace_filter/sampled_rank-0.json.gz");
  if (fs::exists(real)) {
    std::ifstream in(real, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string half = write_file("half.json.gz", bytes.substr(0, bytes.size() / 2));
    e = read_error(half);
    EXPECT_NE(e.find("gzip"), std::string::npos) << e;
    // Inflated on a thread of its own: the error crosses to the reader, after the text before
    // the cut was read.
    try {
      import::read_trace_streaming(half, 65536, 65536, true);
      ADD_FAILURE() << "no error";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("gzip"), std::string::npos) << error.what();
    }
  }

  // A gzip trace malformed early in a long text: the reader stops while the inflating thread
  // is ahead of it (or waits for room), which must end it, not hang. The whole read names the
  // byte.
  std::string text = R"({"traceEvents": [{"ph": "X", "ts": "soon"})";
  for (int i = 0; i < 100000; ++i) {
    text += R"(, {"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":)" + std::to_string(i) +
            R"(,"dur":1})";
  }
  text += "]}";
  const std::string early = write_gzip_file("early.json.gz", text);
  EXPECT_THROW(import::read_trace_streaming(early, 65536, 65536, true), Error);
  e = read_error(early);
  EXPECT_NE(e.find("soon"), std::string::npos) << e;
  EXPECT_NE(e.find("byte 17"), std::string::npos) << e;
}

// The streamed read (the way read_trace goes) gives what the whole read gives, for every shared
// trace, plain and gzip, cut into pieces of one event and more, the file read a byte at a time
// and more; the trace exported again from either is the same text.
//
// ThreadSanitizer finds what threads do to each other, and a streamed read with no inflating
// ahead and no helper parsing starts no thread (TextChunks and PieceQueue start one only when
// asked): under TSan only the reads that start threads are compared, the release and ASan builds
// compare every read. The others (byte by byte among them) take 95 % of the test's time: 57 s
// of 60 in the release build, of 88 s under TSan.
#ifdef __SANITIZE_THREAD__
constexpr bool kThreadedReadsOnly = true;
#else
constexpr bool kThreadedReadsOnly = false;
#endif

TEST(TraceReader, StreamedReadIsTheWholeRead) {
  const std::string root = peers("kineto-traces");
  if (!fs::exists(root)) GTEST_SKIP() << "no " << root << " (../shared/peers)";
  int compared = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string gz = entry.path().string();
    if (!entry.is_regular_file() || !gz.ends_with(".json.gz") ||
        gz.find("_et.json") != std::string::npos) {
      continue;
    }
    SCOPED_TRACE(gz);
    const std::string whole = chrome_trace_json(*import::read_trace_whole(gz));
    EXPECT_EQ(chrome_trace_json(*read_trace(gz)), whole);
    const std::string plain = write_file("plain.json", gunzip(gz));
    const std::pair<std::size_t, std::size_t> sizes[] = {
        {1, 65536}, {4096, 1}, {4096, 100}, {std::size_t{1} << 20, 65536}};
    for (const auto& [batch, chunk] : sizes) {
      if (!kThreadedReadsOnly) {
        EXPECT_EQ(chrome_trace_json(*import::read_trace_streaming(gz, batch, chunk)), whole)
            << batch << " " << chunk;
      }
      // zlib inflating on a thread of its own, a few chunks ahead of the reading (chunks of a
      // few bytes would make this a test of handing them over).
      if (chunk >= 65536) {
        EXPECT_EQ(chrome_trace_json(*import::read_trace_streaming(gz, batch, chunk, true)), whole)
            << batch << " " << chunk << " inflated ahead";
      }
      if (!kThreadedReadsOnly) {
        EXPECT_EQ(chrome_trace_json(*import::read_trace_streaming(plain, batch, chunk)), whole)
            << batch << " " << chunk;
      }
      // Pieces parsed on two threads and joined in order (read_trace() does this for a plain
      // text of 1 MiB or more when it has a core to spare).
      if (batch != 4096 || chunk != 1) {
        EXPECT_EQ(
            chrome_trace_json(*import::read_trace_streaming(plain, batch, chunk, false, true)),
            whole)
            << batch << " " << chunk << " parsed on two threads";
      }
    }
    ++compared;
  }
  EXPECT_GE(compared, 15);
}

// Pieces parsed apart, on two threads, number their threads, categories, text pids and flow
// categories each on its own; joined in the order of the text they make the model one walk of
// the whole text makes: threads numbered in the order first named (by an event, a flow end or
// a metadata event), text pids likewise, a thread's last device and stream, metadata that
// comes after the events it names, flows whose ends lie pieces apart, and the events no
// phase of the model holds counted.
TEST(TraceReader, PiecesParsedApartJoinAsOneWalk) {
  std::string text = R"({"traceEvents": [)";
  const auto add = [&](const std::string& event) {
    if (text.back() != '[') text += ",\n";
    text += event;
  };
  // A text pid first named by an event the model does not hold: it is numbered first still.
  add(R"({"ph":"C","name":"c0","pid":"Traces","ts":1,"args":{"v":0}})");
  for (int i = 0; i < 400; ++i) {
    const std::string ts = std::to_string(1000 + 10 * i);
    const std::string pid = i % 7 == 0 ? R"("Spans")" : i % 11 == 0 ? R"("Traces")" : "1";
    const std::string tid =
        i % 5 == 0 ? R"("stream )" + std::to_string(i % 3) + R"(")" : std::to_string(10 + i % 4);
    add(R"({"ph":"X","cat":"cpu_op","name":"op)" + std::to_string(i % 9) + R"(\n","pid":)" + pid +
        R"(,"tid":)" + tid + R"(,"ts":)" + ts + R"(,"dur":5,"args":{"Ev Idx":)" +
        std::to_string(i) + "}}");
    add(R"({"ph":"X","cat":"kernel","name":"k)" + std::to_string(i % 4) + R"(","pid":0,"tid":)" +
        std::to_string(7 + i % 2) + R"(,"ts":)" + ts + R"(,"dur":3,"args":{"device":0,"stream":)" +
        std::to_string(7 + (i / 50) % 3) + R"(,"correlation":)" + std::to_string(i) + "}}");
    add(R"({"ph":"s","cat":")" + std::string(i % 2 == 0 ? "ac2g" : "fwdbwd") +
        R"(","name":"f","pid":1,"tid":10,"ts":)" + ts + R"(,"id":")" + std::to_string(i) + R"("})");
    if (i % 13 == 0) {
      add(R"({"ph":"i","cat":"my_cat","s":"t","name":"mark","pid":1,"tid":)" +
          std::to_string(20 + i % 3) + R"(,"ts":)" + ts + R"(,"args":{"n":1}})");
      add(R"({"ph":"X","cat":"custom)" + std::to_string(i % 3) +
          R"(","name":"c","pid":1,"tid":11,)"
          R"("ts":)" +
          ts + R"(,"dur":1})");
      add(R"({"ph":"C","name":"counter","pid":1,"ts":)" + ts + R"(,"args":{"v":1}})");
    }
    if (i % 17 == 3) {
      add(R"({"ph":"M","name":"thread_name","pid":1,"tid":)" + std::to_string(10 + i % 4) +
          R"(,"args":{"name":"worker )" + std::to_string(i) + R"("}})");
      add(R"({"ph":"M","name":"process_name","pid":"Spans","args":{"name":"spans )" +
          std::to_string(i) + R"("}})");
      add(R"({"ph":"M","name":"thread_sort_index","pid":0,"tid":7,"args":{"sort_index":)" +
          std::to_string(i) + "}}");
    }
  }
  for (int i = 0; i < 400; i += 3) {  // the flows' other ends, far from their starts
    add(R"({"ph":"f","bp":"e","cat":")" + std::string(i % 2 == 0 ? "ac2g" : "fwdbwd") +
        R"(","name":"f","pid":0,"tid":7,"ts":)" + std::to_string(1000 + 10 * i + 1) + R"(,"id":")" +
        std::to_string(i) + R"("})");
  }
  text += R"(], "traceName": "apart"})";
  const std::string path = write_file("apart.json", text);
  const auto whole = import::read_trace_whole(path);
  ASSERT_GT(whole->events().size(), 800u);
  ASSERT_GT(whole->flows().size(), 100u);
  ASSERT_GE(whole->threads().size(), 8u);
  // Text pids are numbered from 2^40 in the order the text first names them.
  const auto process_name = [](const ProfilerResult& r, std::int64_t pid) {
    for (const ProcessInfo& p : r.processes()) {
      if (p.pid == pid) return p.name;
    }
    return std::string("(none)");
  };
  EXPECT_EQ(process_name(*whole, std::int64_t{1} << 40), "Traces");
  EXPECT_EQ(process_name(*whole, (std::int64_t{1} << 40) + 1), "spans 394");
  const std::string expected = chrome_trace_json(*whole);
  for (const std::size_t batch : {std::size_t{1}, std::size_t{300}, std::size_t{4096}}) {
    for (const bool helper : {false, true}) {
      const auto r = import::read_trace_streaming(path, batch, 65536, false, helper);
      EXPECT_EQ(process_name(*r, std::int64_t{1} << 40), "Traces");
      EXPECT_EQ(chrome_trace_json(*r), expected) << batch << (helper ? " two threads" : "");
      ASSERT_EQ(r->threads().size(), whole->threads().size());
      for (std::size_t t = 0; t < r->threads().size(); ++t) {
        EXPECT_EQ(r->threads()[t].tid, whole->threads()[t].tid) << t;
        EXPECT_EQ(r->threads()[t].pid, whole->threads()[t].pid) << t;
        EXPECT_EQ(r->threads()[t].name, whole->threads()[t].name) << t;
        EXPECT_EQ(r->threads()[t].stream, whole->threads()[t].stream) << t;
      }
      EXPECT_EQ(r->flows().size(), whole->flows().size());
      EXPECT_EQ(r->categories(), whole->categories());
    }
  }
}

// Strings holding what the cutter looks for (commas, brackets, braces, escaped quotes and
// backslashes, a key named traceEvents inside an event), keys before and after the events,
// an empty array, and errors named at their byte in the whole text.
TEST(TraceReader, StreamedReadFollowsStringsAndNestingAndNamesTheByte) {
  const std::string events =
      R"([ {"ph":"X","cat":"cpu_op","name":"a,]}\"[{","pid":1,"tid":1,"ts":1,"dur":5,)"
      R"("args":{"traceEvents":[1,{"x":"],"}],"k\\":"\\"}},)"
      "\n  "
      R"({"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":2,"ts":2,"dur":1} ])";
  const std::string text = R"({"distributedInfo": {"rank": 3}, "x": "traceEvents",
    "traceEvents": )" + events +
                           R"(, "deviceProperties": [{"id": 0}], "traceName": "t"})";
  const std::string path = write_file("tricky.json", text);
  const std::string whole = chrome_trace_json(*import::read_trace_whole(path));
  for (const std::size_t batch : {std::size_t{1}, std::size_t{2}, std::size_t{64}}) {
    const auto r = import::read_trace_streaming(path, batch, batch);
    EXPECT_EQ(chrome_trace_json(*r), whole) << batch;
    EXPECT_EQ(r->rank(), 3);
    ASSERT_EQ(r->events().size(), 2u);
    EXPECT_EQ(r->events()[0].name, "a,]}\"[{");
  }
  const std::string empty =
      write_file("empty_events.json", R"({"traceEvents": [ ], "traceName": "t"})");
  EXPECT_TRUE(import::read_trace_streaming(empty, 1, 1)->events().empty());

  // An event that is not an object, in the second piece: named at its byte.
  const std::string bad_text =
      R"({"traceEvents": [{"ph":"X","cat":"c","name":"a","pid":1,"tid":1,"ts":1,"dur":1}, 7]})";
  const std::string bad = write_file("bad_event.json", bad_text);
  const std::string at = "byte " + std::to_string(bad_text.find(", 7") + 2);
  for (const std::size_t batch : {std::size_t{1}, std::size_t{8}}) {
    for (const bool helper : {false, true}) {
      try {
        import::read_trace_streaming(bad, batch, batch, false, helper);
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(at), std::string::npos) << e.what() << " want " << at;
      }
    }
  }
  // Malformed early in a long text parsed on two threads: the first error in the text is
  // the one thrown, though the helper parsed pieces after it, and the read ends (no hang).
  std::string long_text = R"({"traceEvents": [{"ph":"X","cat":"c","name":"a","ts":1,"dur":1})";
  for (int i = 0; i < 3000; ++i) {
    long_text += R"(, {"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":)" +
                 std::to_string(i) + R"(,"dur":1})";
    if (i == 40) long_text += R"(, {"ph":"X","cat":"cpu_op","ts":"soon"})";
    if (i == 2000) long_text += R"(, {"ph":"X","cat":"cpu_op","ts":"later"})";
  }
  long_text += "]}";
  const std::string early = write_file("early_two_threads.json", long_text);
  for (const std::size_t batch : {std::size_t{1}, std::size_t{512}}) {
    try {
      import::read_trace_streaming(early, batch, 4096, false, true);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("soon"), std::string::npos) << e.what();
    }
  }
  // Truncated in the events, and not a trace at all: refused, as by the whole read.
  const std::string cut = write_file("cut.json", text.substr(0, text.find("\"b\"")));
  EXPECT_THROW(import::read_trace_streaming(cut, 4, 4), Error);
  const std::string chakra = write_file("nodes.json", R"({"nodes": [], "schema": "1"})");
  try {
    import::read_trace_streaming(chakra, 4, 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("execution trace"), std::string::npos) << e.what();
  }
}

// The cutter takes 64 bytes at a time where it can: strings with brackets, braces and commas
// in them that straddle those blocks and the chunks the file is read in, escaped quotes and
// backslashes at a block's last byte, nested arrays of objects in args. Every way of cutting
// and reading gives the whole read's events.
TEST(TraceReader, StreamedReadCutsOnlyBetweenEventsWhateverTheBlocks) {
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 300; ++i) {
    std::string name =
        "op" + std::to_string(i) + std::string(static_cast<std::size_t>(i % 67), 'x');
    name += i % 3 == 0 ? R"(,]}{[\", ,)" : i % 3 == 1 ? R"(\\\\)" : "],[{}";
    if (i > 0) text += i % 5 == 0 ? ",\n  " : ",";
    text += R"({"ph":"X","cat":"cpu_op","name":")" + name + R"(","pid":1,"tid":)" +
            std::to_string(1 + i % 3) + R"(,"ts":)" + std::to_string(10 * i) +
            R"(,"dur":5,"args":{"list":[{"a":[1,{"b":"}],"}]},[]],"s":")" +
            std::string(static_cast<std::size_t>(i % 61), ',') + R"("}})";
  }
  text += R"(], "traceName": "blocks"})";
  const std::string path = write_file("blocks.json", text);
  const auto whole = import::read_trace_whole(path);
  ASSERT_EQ(whole->events().size(), 300u);
  EXPECT_TRUE(std::any_of(whole->events().begin(), whole->events().end(),
                          [](const Event& e) { return e.name == "op3xxx,]}{[\", ,"; }));
  const std::string expected = chrome_trace_json(*whole);
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65},
                                  std::size_t{1000}, std::size_t{1} << 20}) {
    for (const std::size_t batch : {std::size_t{1}, std::size_t{200}, std::size_t{5000}}) {
      EXPECT_EQ(chrome_trace_json(*import::read_trace_streaming(path, batch, chunk)), expected)
          << "batch " << batch << ", chunk " << chunk;
    }
  }
  EXPECT_EQ(chrome_trace_json(*read_trace(path)), expected);
}

// Ranks read in parallel come back in the order given, each the same as read alone; the
// first unreadable path (in that order) is the error, whichever thread met it first.
TEST(TraceReader, ReadsRanksInParallelInTheOrderGiven) {
  const std::vector<std::string> paths = {
      peers("kineto-traces/trace_filter/sampled_rank-1.json.gz"),
      peers("kineto-traces/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
      peers("kineto-traces/trace_filter/sampled_rank-0.json.gz")};
  if (!fs::exists(paths[0])) GTEST_SKIP() << "no ../shared/peers";
  const auto ranks = read_traces(paths, 3);
  ASSERT_EQ(ranks.size(), 3u);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const auto alone = read_trace(paths[i]);
    EXPECT_EQ(ranks[i]->rank(), alone->rank()) << paths[i];
    EXPECT_EQ(ranks[i]->events().size(), alone->events().size()) << paths[i];
  }
  EXPECT_EQ(ranks[0]->rank(), 1);
  EXPECT_EQ(ranks[2]->rank(), 0);

  const std::string bad = write_file("bad_rank.json", "{\"traceEvents\": [");
  const std::vector<std::string> with_bad = {paths[0], "/nonexistent/rank.json", bad};
  try {
    read_traces(with_bad, 3);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/rank.json"), std::string::npos) << e.what();
  }
}

}  // namespace trace_reader_test
}  // namespace opscope
