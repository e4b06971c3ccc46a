// The lenses end to end: what ranges and allocation reports record, and how key_averages,
// table() and the Chrome trace show it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/memory.h"
#include "opscope/observer.h"
#include "opscope/profiler.h"
#include "opscope/result.h"
#include "support/test_support.h"

namespace opscope {
namespace lenses_test {

using nlohmann::json;

constexpr std::int64_t kBase = 1'700'000'000'000'000'000;
constexpr std::int64_t kUs = 1000;

RecordedValue tensor(std::vector<std::int64_t> sizes) {
  return testing::recorded_tensor(std::move(sizes));
}
RecordedValue scalar(std::int64_t i) { return testing::recorded_int(i); }

// A window as the reference's forward pass records it, by hand (times in us):
//   forward [0,1000)                     free 1000 b @950
//     aten::linear [10,900)   inputs [[32,64],[128,64],[128]]
//       aten::addmm [20,800)  inputs [[128],[32,64],[64,128],[],[]]   alloc 16 KiB @30
//   aten::addmm [1000,1500)   inputs [[10],[32,128],[128,10],[],[]]   alloc 1280 b @1100
//   aten::mul [1600,1700)     inputs [[32,10],[]]
//   aten::mul [1700,1750)     no inputs, 1000 FLOPs stated
class LensResult {
 public:
  LensResult() {
    t_ = b_.add_thread({7, "main"});
    b_.set_lenses({.record_shapes = true, .profile_memory = true, .with_flops = true});
    range("forward", 0, 1000, {});
    range("aten::linear", 10, 900, {tensor({32, 64}), tensor({128, 64}), tensor({128})});
    range("aten::addmm", 20, 800,
          {tensor({128}), tensor({32, 64}), tensor({64, 128}), scalar(1), scalar(1)});
    memory(30, 16384, 16384);
    memory(950, -1000, 15384);
    range("aten::addmm", 1000, 1500,
          {tensor({10}), tensor({32, 128}), tensor({128, 10}), scalar(1), scalar(1)});
    memory(1100, 1280, 16664);
    range("aten::mul", 1600, 1700, {tensor({32, 10}), scalar(2)});
    EventDetail stated;
    stated.flops = 1000;
    add(b_.keep("aten::mul"), 1700, 1750, std::move(stated));
  }
  std::shared_ptr<const ProfilerResult> finish() { return b_.finish(); }

 private:
  void add(std::string_view name, std::int64_t start, std::int64_t end, EventDetail d,
           EventKind kind = EventKind::kRange) {
    Event e;
    e.name = name;
    e.thread = t_;
    e.start_ns = kBase + start * kUs;
    e.end_ns = kBase + end * kUs;
    e.handle = ++handle_;
    e.kind = kind;
    e.detail = b_.add_detail(std::move(d));
    b_.add_event(e);
  }
  void range(std::string_view name, std::int64_t start, std::int64_t end,
             std::vector<RecordedValue> inputs) {
    EventDetail d;
    d.has_inputs = !inputs.empty();
    d.inputs = std::move(inputs);
    add(name, start, end, std::move(d));
  }
  void memory(std::int64_t at, std::int64_t bytes, std::int64_t total) {
    EventDetail d;
    d.memory = {0x1000,
                bytes,
                total,
                total,
                {},
                MemoryCategory::kActivation,
                bytes < 0 ? MemoryAction::kFree : MemoryAction::kAllocate};
    add("[memory]", at, at, std::move(d), EventKind::kMemory);
  }

  ProfilerResult::Builder b_;
  std::int32_t t_ = 0;
  std::uint64_t handle_ = 0;
};

const FunctionEventAvg* row(const KeyAverages& k, std::string_view key,
                            std::string_view shapes = {}) {
  for (const auto& r : k.rows()) {
    if (r.key == key && (shapes.empty() || r.input_shapes == shapes)) return &r;
  }
  return nullptr;
}
// The row would dangle as soon as the statement ends (TSan saw it): keep the KeyAverages.
const FunctionEventAvg* row(KeyAverages&&, std::string_view, std::string_view = {}) = delete;

TEST(Lenses, MemoryIsAttributedToTheInnermostRangeAndSummedUpwards) {
  auto r = LensResult().finish();
  KeyAverages k = key_averages(*r);
  ASSERT_TRUE(k.profile_memory);
  const auto* forward = row(k, "forward");
  const auto* linear = row(k, "aten::linear");
  const auto* addmm = row(k, "aten::addmm");
  ASSERT_TRUE(forward && linear && addmm);
  EXPECT_EQ(forward->self_cpu_memory_usage, -1000);
  EXPECT_EQ(forward->cpu_memory_usage, 16384 - 1000);
  EXPECT_EQ(linear->self_cpu_memory_usage, 0);
  EXPECT_EQ(linear->cpu_memory_usage, 16384);
  EXPECT_EQ(addmm->self_cpu_memory_usage, 16384 + 1280);
  EXPECT_EQ(addmm->cpu_memory_usage, 16384 + 1280);
  // Memory events are not rows.
  EXPECT_EQ(row(k, "[memory]"), nullptr);
  // The sum of the reported bytes equals the change of the allocator's total.
  std::int64_t bytes = 0, first_total = 0, last_total = 0;
  bool first = true;
  for (const Event& e : r->events()) {
    if (e.kind != EventKind::kMemory) continue;
    const MemoryUse& m = r->detail(e)->memory;
    if (first) first_total = m.total_allocated - m.bytes;
    first = false;
    bytes += m.bytes;
    last_total = m.total_allocated;
  }
  EXPECT_EQ(bytes, last_total - first_total);
}

TEST(Lenses, FlopsComeFromInputsOrFromTheCaller) {
  auto r = LensResult().finish();
  KeyAverages k = key_averages(*r);
  ASSERT_TRUE(k.with_flops);
  EXPECT_EQ(row(k, "aten::addmm")->flops, 524288 + 2 * 32 * 128 * 10);
  EXPECT_EQ(row(k, "aten::mul")->flops, 32 * 10 + 1000);
  EXPECT_EQ(row(k, "forward")->flops, 0);
}

TEST(Lenses, GroupByInputShapeSplitsRows) {
  auto r = LensResult().finish();
  EXPECT_TRUE(key_averages(*r).rows().front().input_shapes.empty());
  KeyAverages k = key_averages(*r, /*group_by_input_shape=*/true);
  EXPECT_EQ(k.rows().size(), 6u);
  const auto* big = row(k, "aten::addmm", "[[128], [32, 64], [64, 128], [], []]");
  const auto* small = row(k, "aten::addmm", "[[10], [32, 128], [128, 10], [], []]");
  ASSERT_TRUE(big && small);
  EXPECT_EQ(big->flops, 524288);
  EXPECT_EQ(small->flops, 81920);
  EXPECT_EQ(big->count, 1);
  EXPECT_EQ(row(k, "aten::mul", "[]")->flops, 1000);
  EXPECT_EQ(row(k, "forward")->input_shapes, "[]");
}

TEST(Lenses, TableGoldenWithShapesMemoryAndFlops) {
  auto r = LensResult().finish();
  const std::string table =
      key_averages(*r, true).table({.sort_by = "cpu_time_total", .row_limit = 10});
  EXPECT_EQ(table, testing::read_file(std::string(OPSCOPE_GOLDEN_DIR) + "/table_lenses.txt"))
      << table;
}

TEST(Lenses, TraceArgsCarryInputsFlopsAndMemory) {
  auto r = LensResult().finish();
  json t = json::parse(chrome_trace_json(*r));
  int memory_events = 0;
  bool saw_addmm = false;
  for (const json& e : t["traceEvents"]) {
    if (e["name"] == "[memory]") {
      ++memory_events;
      EXPECT_EQ(e["ph"], "i");
      EXPECT_EQ(e["cat"], "cpu_instant_event");
      for (const char* key :
           {"Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved"}) {
        EXPECT_TRUE(e["args"].contains(key)) << key;
      }
      EXPECT_EQ(e["args"]["Device Type"], 0);
    }
    if (e["name"] == "aten::addmm" && e["args"]["Input Dims"][0] == json({128})) {
      saw_addmm = true;
      EXPECT_EQ(e["args"]["Input Dims"], json::parse("[[128], [32, 64], [64, 128], [], []]"));
      EXPECT_EQ(e["args"]["Input type"], json({"float", "float", "float", "Scalar", "Scalar"}));
      EXPECT_EQ(e["args"]["Concrete Inputs"], json({"", "", "", "1", "1"}));
      EXPECT_EQ(e["args"]["flops"], 524288);
    }
  }
  EXPECT_EQ(memory_events, 3);
  EXPECT_TRUE(saw_addmm);
  // The trace says which lenses it was recorded with, by their ProfilerConfig names.
  EXPECT_EQ(t["opscope"]["lenses"], json({"record_shapes", "profile_memory", "with_flops"}));
}

// --- through a real Profiler ---

int g_built = 0;
Value counted_tensor(std::initializer_list<std::int64_t> sizes) {
  ++g_built;
  static thread_local std::vector<std::int64_t> keep;
  keep.assign(sizes.begin(), sizes.end());
  return Value::tensor(keep);
}

void matmul_op(std::int64_t m, std::int64_t k, std::int64_t n) {
  OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", Value::tensor({m, k}),
                                      Value::tensor({k, n}, "float", {n, 1}));
}

TEST(Lenses, InputsAreBuiltOnlyWhenSomeoneRecordsThem) {
  g_built = 0;
  { OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("op", counted_tensor({1, 2})); }
  EXPECT_EQ(g_built, 0);  // no session
  Profiler plain;
  plain.start();
  { OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("op", counted_tensor({1, 2})); }
  plain.stop();
  EXPECT_EQ(g_built, 0);  // a session without record_shapes or with_flops
  Profiler shapes({.lenses = {.record_shapes = true}});
  shapes.start();
  { OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("op", counted_tensor({1, 2})); }
  shapes.stop();
  EXPECT_EQ(g_built, 1);
}

TEST(Lenses, RecordShapesEndToEnd) {
  Profiler prof({.lenses = {.record_shapes = true, .with_flops = true}});
  prof.start();
  matmul_op(32, 64, 128);
  matmul_op(32, 64, 128);
  matmul_op(8, 8, 8);  // 16 bytes of inputs: kept in one record (kInputsInline), not a blob
  prof.stop();
  KeyAverages k = prof.key_averages(/*group_by_input_shape=*/true);
  const auto* big = row(k, "aten::mm", "[[32, 64], [64, 128]]");
  const auto* small = row(k, "aten::mm", "[[8, 8], [8, 8]]");
  ASSERT_TRUE(big && small) << k.table();
  EXPECT_EQ(big->count, 2);
  EXPECT_EQ(big->flops, 2 * 2 * 32 * 64 * 128);
  EXPECT_EQ(small->flops, 2 * 8 * 8 * 8);
  const std::string table = k.table();
  EXPECT_NE(table.find("Input Shapes"), std::string::npos) << table;
  EXPECT_NE(table.find("Total KFLOPs"), std::string::npos) << table;  // smallest count 1024

  json t = json::parse(chrome_trace_json(prof.result()));
  int mm = 0;
  for (const json& e : t["traceEvents"]) {
    if (e["name"] != "aten::mm") continue;
    ++mm;
    EXPECT_EQ(e["args"]["Input type"], json({"float", "float"}));
    EXPECT_EQ(e["args"]["Input Strides"][1][1], 1);
    EXPECT_FALSE(e["args"].contains("Concrete Inputs"));
  }
  EXPECT_EQ(mm, 3);
}

TEST(Lenses, ObserversThatNeedInputsSeeThem) {
  std::vector<std::string> seen;
  const CallbackHandle h = add_thread_local_callback(
      RecordFunctionCallback([&](const RecordFunction& rf) -> std::unique_ptr<ObserverContext> {
        for (const Value& v : rf.inputs()) {
          seen.push_back(v.kind() == ValueKind::kTensor ? "tensor" : "other");
        }
        return nullptr;
      }).needs_inputs(true));
  matmul_op(2, 3, 4);
  remove_callback(h);
  EXPECT_EQ(seen, (std::vector<std::string>{"tensor", "tensor"}));
}

TEST(Lenses, StatedFlopsNeedWithFlops) {
  const auto run = [](bool with_flops) {
    Profiler prof({.lenses = {.with_flops = with_flops}});
    prof.start();
    {
      RecordFunction rf(std::string_view("custom_kernel"));
      rf.set_flops(12345);
    }
    prof.stop();
    const KeyAverages k = prof.key_averages();
    const auto* r = row(k, "custom_kernel");
    return r == nullptr ? -1 : r->flops;
  };
  EXPECT_EQ(run(true), 12345);
  EXPECT_EQ(run(false), 0);
}

TEST(Lenses, MemoryReportsBecomeEventsOnlyWithProfileMemory) {
  static char block[64];
  Profiler off;
  off.start();
  report_memory_usage(block, 64, 64, 64);
  off.stop();
  for (const Event& e : off.events()) EXPECT_NE(e.kind, EventKind::kMemory);

  Profiler on({.lenses = {.profile_memory = true}});
  on.start();
  {
    OPSCOPE_RECORD_FUNCTION("alloc_op");
    MemoryCategoryScope category(MemoryCategory::kGradient);
    report_memory_usage(block, 64, 1064, 2048);
  }
  report_memory_usage(block, -64, 1000, 2048, {}, MemoryCategory::kTemporary);
  on.stop();
  std::vector<const Event*> mem;
  for (const Event& e : on.events()) {
    if (e.kind == EventKind::kMemory) mem.push_back(&e);
  }
  ASSERT_EQ(mem.size(), 2u);
  const MemoryUse& a = on.result().detail(*mem[0])->memory;
  EXPECT_EQ(a.address, reinterpret_cast<std::uint64_t>(block));
  EXPECT_EQ(a.bytes, 64);
  EXPECT_EQ(a.total_allocated, 1064);
  EXPECT_EQ(a.total_reserved, 2048);
  EXPECT_EQ(a.category, MemoryCategory::kGradient);
  EXPECT_EQ(a.action, MemoryAction::kAllocate);
  ASSERT_GE(mem[0]->parent, 0);
  EXPECT_EQ(on.events()[static_cast<std::size_t>(mem[0]->parent)].name, "alloc_op");
  const MemoryUse& f = on.result().detail(*mem[1])->memory;
  EXPECT_EQ(f.bytes, -64);
  EXPECT_EQ(f.category, MemoryCategory::kTemporary);
  EXPECT_EQ(f.action, MemoryAction::kFree);
  const KeyAverages k = on.key_averages();
  const auto* op = row(k, "alloc_op");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->self_cpu_memory_usage, 64);
  EXPECT_NE(k.table().find("Self CPU Mem"), std::string::npos);
}

// torch 1.13 splits allocation reports by device: "CPU Mem" and "CUDA Mem" columns, and the
// reports no operator encloses have a "[memory]" row of their own.
TEST(Lenses, CudaMemoryHasItsOwnColumnsAndReportsOutsideRangesARow) {
  static char block[4];
  const Device gpu{DeviceType::kCUDA, 0};
  Profiler p({.lenses = {.profile_memory = true}});
  p.start();
  {
    OPSCOPE_RECORD_FUNCTION("step");
    report_memory_usage(block, 100, 100, 100);  // CPU
    {
      OPSCOPE_RECORD_FUNCTION("to_cuda");
      report_memory_usage(block + 1, 4096, 4096, 8192, gpu);
      report_memory_usage(block + 2, 512, 4608, 8192, gpu);
    }
    report_memory_usage(block + 1, -4096, 512, 8192, gpu);
  }
  report_memory_usage(block + 3, 2048, 2560, 8192, gpu);  // outside every range
  report_memory_usage(block, -100, 0, 100);
  p.stop();

  const KeyAverages k = p.key_averages();
  const auto* step = row(k, "step");
  const auto* to_cuda = row(k, "to_cuda");
  const auto* memory = row(k, "[memory]");
  ASSERT_TRUE(step && to_cuda && memory);
  EXPECT_EQ(to_cuda->self_cuda_memory_usage, 4608);
  EXPECT_EQ(to_cuda->cuda_memory_usage, 4608);
  EXPECT_EQ(to_cuda->cpu_memory_usage, 0);
  EXPECT_EQ(step->self_cuda_memory_usage, -4096);
  EXPECT_EQ(step->cuda_memory_usage, 512);
  EXPECT_EQ(step->self_cpu_memory_usage, 100);
  EXPECT_EQ(step->cpu_memory_usage, 100);
  // The two reports outside "step": one row, each device's bytes apart, no time.
  EXPECT_EQ(memory->count, 2);
  EXPECT_EQ(memory->cuda_memory_usage, 2048);
  EXPECT_EQ(memory->self_cuda_memory_usage, 2048);
  EXPECT_EQ(memory->cpu_memory_usage, -100);
  EXPECT_EQ(memory->cpu_time_total_ns, 0);
  EXPECT_TRUE(memory->top_level);

  const std::string table = k.table({.sort_by = "self_cuda_memory_usage"});
  const std::string header = table.substr(0, table.find('\n', table.find("Name")));
  EXPECT_LT(header.find("Self CPU Mem"), header.find("CUDA Mem")) << table;
  EXPECT_LT(header.find("CUDA Mem"), header.find("Self CUDA Mem")) << table;
  EXPECT_LT(header.find("Self CUDA Mem"), header.find("# of Calls")) << table;
  // Sorted by self CUDA memory: to_cuda (4.50 Kb), [memory] (2.00 Kb), step (-4.00 Kb).
  EXPECT_LT(table.find("to_cuda"), table.find("[memory]")) << table;
  EXPECT_LT(table.find("[memory]"), table.find("  step")) << table;
  EXPECT_NE(table.find("4.50 Kb"), std::string::npos) << table;
  EXPECT_NE(table.find("-4.00 Kb"), std::string::npos) << table;
}

TEST(Lenses, CpuOnlyMemoryShowsNoCudaColumns) {
  static char block[4];
  Profiler p({.lenses = {.profile_memory = true}});
  p.start();
  {
    OPSCOPE_RECORD_FUNCTION("op");
    report_memory_usage(block, 64, 64, 64);
  }
  p.stop();
  const std::string table = p.key_averages().table();
  EXPECT_NE(table.find("Self CPU Mem"), std::string::npos) << table;
  EXPECT_EQ(table.find("CUDA Mem"), std::string::npos) << table;
}

}  // namespace lenses_test
}  // namespace opscope
