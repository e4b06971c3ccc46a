// The memory timeline: the model (analysis/memory_timeline.h) on hand-built results, and
// Profiler::export_memory_timeline end to end in its four formats, read back and checked
// number by number against PyTorch's layout.
#include "analysis/memory_timeline.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "export/memory_timeline.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/memory.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "support/test_support.h"

namespace opscope {
namespace memory_timeline_test {

namespace fs = std::filesystem;
using analysis::CategorySizes;
using analysis::CoalescedTimeline;
using analysis::TimelineAction;
using analysis::TimelineEntry;
using nlohmann::json;
using testing::error_of;
using testing::read_file;
using testing::TempDir;

constexpr std::int64_t kBase = 1'700'000'000'000'000'000;  // ns since the epoch
constexpr Device kCpu{DeviceType::kCPU, -1};

// --- hand-built results ------------------------------------------------------------------

class Reports {
 public:
  Reports() {
    threads_[0] = b_.add_thread({100, "main"});
    threads_[1] = b_.add_thread({101, "worker"});
    b_.set_lenses({.record_shapes = true, .profile_memory = true, .with_stack = true});
  }
  // A report `at_ns` after kBase on thread 0 or 1.
  Reports& add(std::int64_t at_ns, std::uint64_t address, std::int64_t bytes,
               MemoryCategory category = MemoryCategory::kUnknown, Device device = kCpu,
               int thread = 0, std::optional<MemoryAction> action = std::nullopt) {
    EventDetail d;
    d.memory = {address,
                bytes,
                0,
                0,
                device,
                category,
                action      ? *action
                : bytes < 0 ? MemoryAction::kFree
                            : MemoryAction::kAllocate};
    Event e;
    e.name = "[memory]";
    e.kind = EventKind::kMemory;
    e.thread = threads_[thread];
    e.start_ns = e.end_ns = kBase + at_ns;
    e.handle = ++handle_;
    e.detail = b_.add_detail(std::move(d));
    b_.add_event(e);
    return *this;
  }
  Reports& version(std::int64_t at_ns, std::uint64_t address, std::int64_t bytes,
                   MemoryCategory category = MemoryCategory::kUnknown) {
    return add(at_ns, address, bytes, category, kCpu, 0, MemoryAction::kVersion);
  }
  std::shared_ptr<const ProfilerResult> finish() { return b_.finish(); }

 private:
  ProfilerResult::Builder b_;
  std::int32_t threads_[2] = {0, 0};
  std::uint64_t handle_ = 0;
};

TimelineEntry entry(std::int64_t t, TimelineAction action, std::int64_t bytes,
                    MemoryCategory category) {
  return {t, action, bytes, category};
}

TEST(MemoryTimeline, ActionsFollowPyTorchsModel) {
  using C = MemoryCategory;
  using A = TimelineAction;
  auto r = Reports()
               .add(100, 0xA0, 1000, C::kParameter)
               .add(200, 0xB0, 300, C::kActivation)
               .version(250, 0xA0, 1000, C::kGradient)  // the live block's category wins
               .version(260, 0xF0, 64, C::kInput)       // unknown block: the report's
               .add(300, 0xC0, -4096, C::kTemporary)    // allocated before the window
               .add(400, 0xA0, -999, C::kGradient)      // freed: the allocation's size/category
               .add(500, 0xB0, 700, C::kInput)          // allocated again, its free never reported
               .finish();
  const std::vector<TimelineEntry> t = analysis::memory_timeline(*r, kCpu);
  const std::vector<TimelineEntry> expected = {
      entry(-1, A::kPreexisting, 4096, C::kTemporary),
      entry(kBase + 100, A::kCreate, 1000, C::kParameter),
      entry(kBase + 200, A::kCreate, 300, C::kActivation),
      entry(kBase + 250, A::kIncrementVersion, 1000, C::kParameter),
      entry(kBase + 260, A::kIncrementVersion, 64, C::kInput),
      entry(kBase + 300, A::kDestroy, 4096, C::kTemporary),
      entry(kBase + 400, A::kDestroy, 1000, C::kParameter),
      // At one time PyTorch's order puts CREATE before DESTROY.
      entry(kBase + 500, A::kCreate, 700, C::kInput),
      entry(kBase + 500, A::kDestroy, 300, C::kActivation),
  };
  EXPECT_EQ(t, expected);
  // No size is ever negative: the action says which way it goes.
  for (const TimelineEntry& e : t) EXPECT_GT(e.bytes, 0);
}

TEST(MemoryTimeline, ReportsOfAllThreadsAreMergedInTimeOrder) {
  auto r = Reports()
               .add(300, 0x10, 30, MemoryCategory::kUnknown, kCpu, 1)
               .add(100, 0x20, 10, MemoryCategory::kUnknown, kCpu, 0)
               .add(200, 0x30, 20, MemoryCategory::kUnknown, kCpu, 1)
               .add(400, 0x20, -10, MemoryCategory::kUnknown, kCpu, 1)  // freed elsewhere
               .finish();
  const std::vector<TimelineEntry> t = analysis::memory_timeline(*r, kCpu);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].t_ns, kBase + 100);
  EXPECT_EQ(t[1].t_ns, kBase + 200);
  EXPECT_EQ(t[2].t_ns, kBase + 300);
  EXPECT_EQ(t[3], entry(kBase + 400, TimelineAction::kDestroy, 10, MemoryCategory::kUnknown));
}

TEST(MemoryTimeline, DevicesAreKeptApart) {
  const Device cuda0{DeviceType::kCUDA, 0}, cuda1{DeviceType::kCUDA, 1};
  const Device cuda_default{DeviceType::kCUDA, -1};
  auto r = Reports()
               .add(100, 0x10, 10, MemoryCategory::kUnknown, kCpu)
               .add(200, 0x10, 20, MemoryCategory::kUnknown, cuda0)
               .add(300, 0x10, 30, MemoryCategory::kUnknown, cuda1)
               .add(400, 0x20, 40, MemoryCategory::kUnknown, cuda_default)
               .finish();
  auto sizes = [&](Device d) {
    std::vector<std::int64_t> out;
    for (const TimelineEntry& e : analysis::memory_timeline(*r, d)) out.push_back(e.bytes);
    return out;
  };
  EXPECT_EQ(sizes(kCpu), std::vector<std::int64_t>({10}));
  EXPECT_EQ(sizes(Device{DeviceType::kCPU, 0}), std::vector<std::int64_t>({10}));
  // "cuda" is the current device, 0 unless told otherwise.
  EXPECT_EQ(sizes(cuda0), std::vector<std::int64_t>({20, 40}));
  EXPECT_EQ(sizes(cuda_default), std::vector<std::int64_t>({20, 40}));
  EXPECT_EQ(sizes(cuda1), std::vector<std::int64_t>({30}));
  EXPECT_TRUE(analysis::device_matches(cuda_default, cuda0));
  EXPECT_FALSE(analysis::device_matches(cuda1, cuda0));
  EXPECT_FALSE(analysis::device_matches(kCpu, cuda0));
}

TEST(MemoryTimeline, CoalescingMergesEachMicrosecondAndPlacesPreexistingMemoryFirst) {
  using C = MemoryCategory;
  using A = TimelineAction;
  const std::vector<TimelineEntry> t = {
      entry(-1, A::kPreexisting, 50, C::kOptimizerState),
      entry(-1, A::kPreexisting, 5, C::kUnknown),
      entry(kBase + 1'000, A::kCreate, 100, C::kParameter),
      entry(kBase + 1'999, A::kCreate, 10, C::kGradient),  // same microsecond: merged
      entry(kBase + 2'000, A::kIncrementVersion, 100, C::kParameter),
      entry(kBase + 3'500, A::kDestroy, 50, C::kOptimizerState),
      entry(kBase + 3'600, A::kDestroy, 100, C::kParameter),
  };
  const CoalescedTimeline c = analysis::coalesce_timeline(t);
  const std::int64_t us = kBase / 1000;
  // The pre-existing memory is shown from the first time seen, as PyTorch shows it: the
  // first two times are then equal.
  EXPECT_EQ(c.times_us, std::vector<std::int64_t>({us + 1, us + 1, us + 2, us + 3}));
  const std::vector<CategorySizes> expected = {
      {0, 0, 50, 0, 0, 0, 0, 0, 5},
      {0, 100, 50, 0, 0, 0, 10, 0, 5},
      {0, 100, 50, 0, 0, 0, 10, 0, 5},  // a new version changes no size
      {0, 0, 0, 0, 0, 0, 10, 0, 5},
  };
  EXPECT_EQ(c.sizes, expected);
  EXPECT_TRUE(analysis::coalesce_timeline({}).times_us.empty());
}

TEST(MemoryTimeline, ActionNames) {
  EXPECT_EQ(analysis::timeline_action_name(TimelineAction::kPreexisting), "PREEXISTING");
  EXPECT_EQ(analysis::timeline_action_name(TimelineAction::kCreate), "CREATE");
  EXPECT_EQ(analysis::timeline_action_name(TimelineAction::kIncrementVersion), "INCREMENT_VERSION");
  EXPECT_EQ(analysis::timeline_action_name(TimelineAction::kDestroy), "DESTROY");
  // PyTorch's enum.auto() values, which the raw file holds.
  EXPECT_EQ(static_cast<int>(TimelineAction::kPreexisting), 1);
  EXPECT_EQ(static_cast<int>(TimelineAction::kDestroy), 4);
}

// --- end to end through a Profiler --------------------------------------------------------

// Waits until a few microseconds have passed, so that consecutive reports fall into
// different microseconds of the coalesced timeline.
void next_microseconds() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Fake addresses: report_memory_usage never dereferences them.
const void* address(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }
const void* const kParam = address(0x10000);
const void* const kActivation = address(0x20000);
const void* const kScratch = address(0x30000);
const void* const kOld = address(0x40000);  // allocated before the session
const void* const kGpu = address(0x50000);

// One window with every kind of report, recorded by a real Profiler with the three switches
// the timeline needs:
//   t1  PARAMETER   +1024  kParam       (category given with the report)
//   t2  ACTIVATION  +4096  kActivation  (from a MemoryCategoryScope)
//   t3  UNKNOWN      +512  kScratch
//   t4  version of kParam (1024)
//   t5  INPUT       -2048  kOld         (allocated before the window)
//   t6  ACTIVATION  -4096  kActivation
//   and a CUDA allocation, on another device.
class MemoryTimelineWindow : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Made before any session: nothing records it.
    report_memory_usage(kOld, 2048, 2048, 4096);
    profiler_ = new Profiler(
        {.lenses = {.record_shapes = true, .profile_memory = true, .with_stack = true}});
    profiler_->start();
    {
      OPSCOPE_RECORD_FUNCTION("model_init");
      report_memory_usage(kParam, 1024, 3072, 4096, {}, MemoryCategory::kParameter);
      next_microseconds();
      {
        MemoryCategoryScope scope(MemoryCategory::kActivation);
        report_memory_usage(kActivation, 4096, 7168, 8192);
      }
      next_microseconds();
      report_memory_usage(kScratch, 512, 7680, 8192);
      next_microseconds();
      report_memory_version(kParam, 1024);
      next_microseconds();
      report_memory_usage(kOld, -2048, 5632, 8192, {}, MemoryCategory::kInput);
      next_microseconds();
      report_memory_usage(kActivation, -4096, 1536, 8192);
      report_memory_usage(kGpu, 1 << 20, 1 << 20, 2 << 20, Device{DeviceType::kCUDA, 0});
    }
    profiler_->stop();
  }
  static void TearDownTestSuite() {
    delete profiler_;
    profiler_ = nullptr;
  }

  const ProfilerResult& result() const { return profiler_->result(); }

  // The time (ns) of the allocation (bytes > 0) or free (bytes < 0) reported at `ptr`, or of
  // the version report when `action` says so.
  std::int64_t time_of(const void* ptr, std::int64_t bytes,
                       std::optional<MemoryAction> action = std::nullopt) const {
    const MemoryAction wanted = action      ? *action
                                : bytes < 0 ? MemoryAction::kFree
                                            : MemoryAction::kAllocate;
    for (const Event& e : result().events()) {
      if (e.kind != EventKind::kMemory) continue;
      const MemoryUse& m = result().detail(e)->memory;
      if (m.address == reinterpret_cast<std::uint64_t>(ptr) && m.bytes == bytes &&
          m.action == wanted) {
        return e.start_ns;
      }
    }
    ADD_FAILURE() << "no report of " << bytes << " bytes at " << ptr;
    return 0;
  }

  static Profiler* profiler_;
};
Profiler* MemoryTimelineWindow::profiler_ = nullptr;

// Inflates a gzip file with zlib, requiring one complete stream.
std::string gunzip(const std::string& compressed) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buf[1 << 15];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END) << "not one complete gzip stream";
  EXPECT_EQ(zs.avail_in, 0u) << "bytes after the gzip stream";
  inflateEnd(&zs);
  return out;
}

// What Python's json.dump writes for [times, sizes].
std::string json_dump(const std::vector<std::int64_t>& times,
                      const std::vector<std::vector<std::int64_t>>& sizes) {
  auto list = [](const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::string out = "[" + list(times) + ", [";
  for (std::size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + list(sizes[i]);
  return out + "]]";
}

bool is_gzip(const std::string& bytes) {
  return bytes.size() > 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// The files' contents apart from the directory listing: nothing but `names` may be there.
void expect_only_files(const fs::path& dir, std::vector<std::string> names) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    found.push_back(entry.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(found, names);
}

TEST_F(MemoryTimelineWindow, JsonIsPyTorchsCoalescedTimelineByteForByte) {
  TempDir dir;
  const std::string path = dir.file("mem.json");
  profiler_->export_memory_timeline(path);
  const std::string text = read_file(path);

  const std::int64_t t1 = time_of(kParam, 1024) / 1000;
  const std::int64_t t2 = time_of(kActivation, 4096) / 1000;
  const std::int64_t t3 = time_of(kScratch, 512) / 1000;
  const std::int64_t t4 = time_of(kParam, 1024, MemoryAction::kVersion) / 1000;
  const std::int64_t t5 = time_of(kOld, -2048) / 1000;
  const std::int64_t t6 = time_of(kActivation, -4096) / 1000;
  // next_microseconds() kept the reports apart.
  ASSERT_LT(t1, t2);
  ASSERT_LT(t2, t3);
  ASSERT_LT(t3, t4);
  ASSERT_LT(t4, t5);
  ASSERT_LT(t5, t6);
  // [times_us, sizes]: the PREEXISTING step is shown at the first time, then one step per
  // microsecond with a report; index 0 of each size list is PyTorch's unused column, then
  // PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY, ACTIVATION, GRADIENT, AUTOGRAD_DETAIL,
  // UNKNOWN.
  const std::string expected =
      json_dump({t1, t1, t2, t3, t4, t5, t6}, {{0, 0, 0, 2048, 0, 0, 0, 0, 0},
                                               {0, 1024, 0, 2048, 0, 0, 0, 0, 0},
                                               {0, 1024, 0, 2048, 0, 4096, 0, 0, 0},
                                               {0, 1024, 0, 2048, 0, 4096, 0, 0, 512},
                                               {0, 1024, 0, 2048, 0, 4096, 0, 0, 512},
                                               {0, 1024, 0, 0, 0, 4096, 0, 0, 512},
                                               {0, 1024, 0, 0, 0, 0, 0, 0, 512}});
  EXPECT_EQ(text, expected);
  // And it is JSON that an independent parser reads the same way.
  const json doc = json::parse(text);
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[0].size(), 7u);
  EXPECT_EQ(doc[1][6][8], 512);
  for (std::size_t i = 1; i < doc[0].size(); ++i) EXPECT_LE(doc[0][i - 1], doc[0][i]);
}

TEST_F(MemoryTimelineWindow, JsonGzIsTheSameDocumentGzipped) {
  TempDir dir;
  profiler_->export_memory_timeline(dir.file("mem.json"));
  profiler_->export_memory_timeline(dir.file("mem.json.gz"));
  const std::string compressed = read_file(dir.file("mem.json.gz"));
  ASSERT_TRUE(is_gzip(compressed));
  EXPECT_EQ(gunzip(compressed), read_file(dir.file("mem.json")));
  expect_only_files(dir.path(), {"mem.json", "mem.json.gz"});
}

TEST_F(MemoryTimelineWindow, RawJsonGzHoldsEveryChangeAsPyTorchsTuples) {
  TempDir dir;
  const std::string path = dir.file("mem.raw.json.gz");
  profiler_->export_memory_timeline(path);
  const std::string compressed = read_file(path);
  ASSERT_TRUE(is_gzip(compressed));
  const json raw = json::parse(gunzip(compressed));

  const std::int64_t tv = time_of(kParam, 1024, MemoryAction::kVersion);
  // (timestamp ns, action, bytes, category): actions PREEXISTING=1, CREATE=2,
  // INCREMENT_VERSION=3, DESTROY=4; categories PARAMETER=0, INPUT=2, ACTIVATION=4,
  // UNKNOWN=7. A version is two rows: the old version out, the new one in.
  const json expected = json::array({
      json::array({-1, 1, 2048, 2}),
      json::array({time_of(kParam, 1024), 2, 1024, 0}),
      json::array({time_of(kActivation, 4096), 2, 4096, 4}),
      json::array({time_of(kScratch, 512), 2, 512, 7}),
      json::array({tv, 3, -1024, 0}),
      json::array({tv, 3, 1024, 0}),
      json::array({time_of(kOld, -2048), 4, -2048, 2}),
      json::array({time_of(kActivation, -4096), 4, -4096, 4}),
  });
  EXPECT_EQ(raw, expected);
  // Written as json.dump writes it.
  const std::string text = gunzip(compressed);
  EXPECT_EQ(text.substr(0, 20), "[[-1, 1, 2048, 2], [");
}

TEST_F(MemoryTimelineWindow, OtherDevicesHaveTheirOwnTimeline) {
  TempDir dir;
  for (const char* device : {"cuda", "cuda:0"}) {
    const std::string path = dir.file(std::string(device) + ".json");
    profiler_->export_memory_timeline(path, device);
    const json doc = json::parse(read_file(path));
    ASSERT_EQ(doc[0].size(), 1u) << device;
    EXPECT_EQ(doc[1][0], json::array({0, 0, 0, 0, 0, 0, 0, 0, 1 << 20})) << device;
  }
  // A device that reported nothing: an empty timeline, still a valid file.
  profiler_->export_memory_timeline(dir.file("cuda1.json"), "cuda:1");
  EXPECT_EQ(read_file(dir.file("cuda1.json")), "[[], []]");
  profiler_->export_memory_timeline(dir.file("cuda1.html"), "cuda:1");
  EXPECT_NE(read_file(dir.file("cuda1.html")).find("No memory was reported on device cuda:1"),
            std::string::npos);
}

TEST_F(MemoryTimelineWindow, HtmlIsOneSelfContainedPage) {
  TempDir dir;
  const std::string path = dir.file("mem.html");
  profiler_->export_memory_timeline(path);
  const std::string html = read_file(path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  // The peak is 1024 + 2048 + 4096 + 512 bytes = 7.50 KiB.
  EXPECT_NE(html.find("data-peak-bytes=\"7680\""), std::string::npos);
  EXPECT_NE(html.find("7.50 KiB"), std::string::npos);
  expect_only_files(dir.path(), {"mem.html"});
}

TEST_F(MemoryTimelineWindow, TheFreeFunctionWritesWhatTheProfilerWrites) {
  TempDir dir;
  profiler_->export_memory_timeline(dir.file("a.json"));
  export_memory_timeline(result(), dir.file("b.json"), "cpu");
  EXPECT_EQ(read_file(dir.file("a.json")), read_file(dir.file("b.json")));
}

TEST_F(MemoryTimelineWindow, UnknownDevicesAreRefusedByName) {
  TempDir dir;
  for (const char* device : {"tpu", "cuda:x", "cuda:", "cuda:128", "CPU", " cpu", ""}) {
    const std::string message =
        error_of([&] { profiler_->export_memory_timeline(dir.file("m.json"), device); });
    EXPECT_NE(message.find("unknown device '" + std::string(device) + "'"), std::string::npos)
        << message;
    EXPECT_NE(message.find("'cpu', 'cuda' or 'cuda:N'"), std::string::npos) << message;
  }
  expect_only_files(dir.path(), {});
}

TEST_F(MemoryTimelineWindow, UnknownSuffixesAreRefusedWithTheAllowedOnes) {
  TempDir dir;
  for (const char* name : {"m.txt", "m.gz", "m.JSON", "m.json.bz2", "m"}) {
    const std::string path = dir.file(name);
    const std::string message = error_of([&] { profiler_->export_memory_timeline(path); });
    EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(".html, .json, .json.gz or .raw.json.gz"), std::string::npos) << message;
  }
  expect_only_files(dir.path(), {});
}

TEST_F(MemoryTimelineWindow, AnUnwritablePathFailsAndLeavesNothing) {
  TempDir dir;
  // A file where a directory should be: no permission trick, so it fails even as root.
  { std::ofstream(dir.file("not_a_dir")) << "x"; }
  const std::string message =
      error_of([&] { profiler_->export_memory_timeline(dir.file("not_a_dir/mem.json.gz")); });
  EXPECT_NE(message.find("cannot write memory timeline to"), std::string::npos) << message;
  EXPECT_NE(message.find("not_a_dir/mem.json.gz"), std::string::npos) << message;
  // A directory in the way of the file itself: the rename at the end fails, and the
  // temporary written before it is removed.
  fs::create_directory(dir.file("taken.json"));
  EXPECT_NE(error_of([&] { profiler_->export_memory_timeline(dir.file("taken.json")); }),
            "(no error)");
  expect_only_files(dir.path(), {"not_a_dir", "taken.json"});
  EXPECT_TRUE(fs::is_empty(dir.file("taken.json")));
}

TEST_F(MemoryTimelineWindow, AFailedExportKeepsTheFileThatWasThere) {
  TempDir dir;
  const std::string path = dir.file("mem.json");
  { std::ofstream(path) << "previous"; }
  EXPECT_NE(error_of([&] { profiler_->export_memory_timeline(path, "tpu"); }), "(no error)");
  EXPECT_EQ(read_file(path), "previous");
  profiler_->export_memory_timeline(path);
  EXPECT_EQ(read_file(path).substr(0, 2), "[[");
  expect_only_files(dir.path(), {"mem.json"});
}

TEST(MemoryTimelineExport, NeedsTheThreeSwitchesAndNamesEachMissingOne) {
  TempDir dir;
  struct Case {
    ProfilerConfig config;
    std::vector<std::string> missing;
  };
  const std::vector<Case> cases = {
      {{}, {"record_shapes", "profile_memory", "with_stack"}},
      {{.lenses = {.profile_memory = true}}, {"record_shapes", "with_stack"}},
      {{.lenses = {.record_shapes = true, .profile_memory = true}}, {"with_stack"}},
      {{.lenses = {.record_shapes = true, .with_stack = true}}, {"profile_memory"}},
  };
  for (const Case& c : cases) {
    Profiler prof(c.config);
    prof.start();
    report_memory_usage(kParam, 64, 64, 64);
    prof.stop();
    const std::string message =
        error_of([&] { prof.export_memory_timeline(dir.file("mem.json")); });
    EXPECT_NE(message.find("needs record_shapes, profile_memory and with_stack"), std::string::npos)
        << message;
    const std::string without = message.substr(message.find("without:"));
    for (const char* name : {"record_shapes", "profile_memory", "with_stack"}) {
      const bool listed = std::find(c.missing.begin(), c.missing.end(), name) != c.missing.end();
      EXPECT_EQ(without.find(name) != std::string::npos, listed) << message;
    }
  }
  // Checked before anything else: the path or the device being wrong too changes nothing.
  Profiler plain;
  plain.start();
  plain.stop();
  EXPECT_NE(error_of([&] {
              plain.export_memory_timeline(dir.file("x.txt"), "tpu");
            }).find("this profile was recorded without"),
            std::string::npos);
  expect_only_files(dir.path(), {});
}

TEST(MemoryTimelineExport, NoWindowYetIsAnError) {
  Profiler prof({.lenses = {.record_shapes = true, .profile_memory = true, .with_stack = true}});
  TempDir dir;
  EXPECT_NE(error_of([&] { prof.export_memory_timeline(dir.file("mem.json")); }), "(no error)");
  expect_only_files(dir.path(), {});
}

}  // namespace memory_timeline_test
}  // namespace opscope
