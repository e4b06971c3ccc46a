// export_stacks (src/export/collapsed_stacks.h): the collapsed-stacks file, read back by us
// and by a real consumer (speedscope's importer, run under Node.js).
#include "export/collapsed_stacks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "analysis/stacks.h"
#include "analysis/symbolizer.h"
#include "opscope/export.h"
#include "opscope/module.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "support/test_support.h"

// Outside namespace opscope so that the symbolized names are unambiguous.
namespace opscope_collapsed_test {

inline void keep_frame() { asm volatile("" ::: "memory"); }

// Spins for `us` microseconds so that a range has a self time well above 1 us.
inline void spin_us(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) keep_frame();
}

[[gnu::noipa]] void matmul_op() {
  OPSCOPE_RECORD_FUNCTION("aten::mm");
  spin_us(150);
}

[[gnu::noipa]] void linear_layer() {
  OPSCOPE_MODULE("Linear_0");
  OPSCOPE_RECORD_FUNCTION("aten::linear");
  spin_us(50);
  matmul_op();
}

[[gnu::noipa]] void relu_layer() {
  OPSCOPE_MODULE("ReLU_0");
  OPSCOPE_RECORD_FUNCTION("aten::relu");
  spin_us(80);
}

[[gnu::noipa]] void model_step() {
  OPSCOPE_MODULE("MLP");
  linear_layer();
  relu_layer();
  matmul_op();  // the same operator from another place: its own stack
  keep_frame();
}

}  // namespace opscope_collapsed_test

namespace opscope {
namespace collapsed_stacks_test {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::error_of;
using testing::read_file;
using testing::TempDir;
using testing::WarningCapture;

constexpr std::int64_t kBase = 1'700'000'000'000'000'000;

// One line of the file: frames root first, then the value.
struct Line {
  std::vector<std::string> frames;
  std::int64_t value = 0;
};

// Parses a collapsed-stacks file strictly: "frame;frame;...;frame <integer>" per line, no
// space inside frames, no empty frame, a newline after every line.
std::vector<Line> parse(const std::string& text) {
  std::vector<Line> out;
  if (text.empty()) return out;
  EXPECT_EQ(text.back(), '\n');
  static const std::regex kLine(R"(^([^ ;\n]+(;[^ ;\n]+)*) ([0-9]+)$)");
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    std::smatch m;
    if (!std::regex_match(line, m, kLine)) {
      ADD_FAILURE() << "not a collapsed-stacks line: '" << line << "'";
      continue;
    }
    Line l;
    l.value = std::stoll(m[3]);
    std::string frames = m[1];
    std::size_t b = 0;
    while (true) {
      const std::size_t e = frames.find(';', b);
      l.frames.push_back(frames.substr(b, e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    out.push_back(std::move(l));
  }
  return out;
}

std::string join(const std::vector<std::string>& frames) {
  std::string out;
  for (const std::string& f : frames) out += (out.empty() ? "" : ";") + f;
  return out;
}

// A hand-built window whose stacks are labelled frames, so the file is exact.
class StackResult {
 public:
  explicit StackResult(bool with_stack = true) {
    t_ = b_.add_thread({7, "main"});
    b_.set_lenses({.with_stack = with_stack});
  }
  std::int32_t stack(std::vector<std::string_view> innermost_first) {
    std::vector<StackFrame> frames;
    for (std::string_view f : innermost_first) frames.push_back({0, b_.keep(f)});
    return b_.add_stack(std::move(frames));
  }
  // A range of `ns` nanoseconds starting at `start_ns`, with stack `stack` (-1: none).
  void range(std::string_view name, std::int64_t start_ns, std::int64_t ns, std::int32_t stack) {
    Event e;
    e.name = b_.keep(name);
    e.thread = t_;
    e.start_ns = kBase + start_ns;
    e.end_ns = kBase + start_ns + ns;
    e.handle = ++handle_;
    if (stack >= 0) {
      EventDetail d;
      d.stack = stack;
      e.detail = b_.add_detail(std::move(d));
    }
    b_.add_event(e);
  }
  // A kernel of `ns` on a stream, launched inside the range with handle `launched_in`.
  void kernel(std::int64_t start_ns, std::int64_t ns, std::uint64_t launched_in) {
    if (stream_ < 0) stream_ = b_.add_thread({7, "stream 7", 0, 0, 7});
    Event e;
    e.name = b_.keep("gemm_kernel");
    e.kind = EventKind::kKernel;
    e.thread = stream_;
    e.start_ns = kBase + start_ns;
    e.end_ns = kBase + start_ns + ns;
    EventDetail d;
    d.gpu.stream = 7;
    d.gpu.external_id = static_cast<std::int64_t>(launched_in);
    e.detail = b_.add_detail(std::move(d));
    b_.add_event(e);
  }
  std::shared_ptr<const ProfilerResult> finish() { return b_.finish(); }

 private:
  ProfilerResult::Builder b_;
  std::int32_t stream_ = -1;
  std::int32_t t_ = 0;
  std::uint64_t handle_ = 0;
};

std::string collapsed(const ProfilerResult& r, std::string_view metric = "self_cpu_time_total") {
  internal::MemorySink sink;
  internal::write_collapsed_stacks(r, metric, sink);
  EXPECT_TRUE(sink.committed());
  return sink.data();
}

constexpr std::int64_t kUs = 1000;

// self_cuda_time_total weighs each stack by the GPU work launched directly in its range (the
// kernel's "External id" is the range's handle), in us, as torch's export_stacks does.
TEST(CollapsedStacks, SelfCudaTimeIsTheWorkEachRangeLaunched) {
  StackResult s;
  const std::int32_t st = s.stack({"model.cpp(7): step()", "main"});
  s.range("forward", 0, 1000 * kUs, st);         // handle 1
  s.range("aten::mm", 10 * kUs, 100 * kUs, st);  // handle 2: launches both kernels
  s.kernel(200 * kUs, 340 * kUs, 2);
  s.kernel(600 * kUs, 60 * kUs, 2);
  const auto r = s.finish();
  EXPECT_EQ(collapsed(*r, "self_cuda_time_total"), "main;model.cpp(7):_step();aten::mm 400\n");
}

TEST(CollapsedStacks, RootFirstFramesThenTheRangeThenMicroseconds) {
  StackResult s;
  const std::int32_t linear =
      s.stack({"model.cpp(113): Linear::forward()", "nn.Module: Linear_0", "main.cpp(8): main"});
  const std::int32_t top = s.stack({"main.cpp(8): main"});
  // forward [0, 1300us) holds aten::linear [10, 1250), which holds aten::addmm [20, 1200).
  s.range("forward", 0, 1300 * kUs, top);
  s.range("aten::linear", 10 * kUs, 1240 * kUs, linear);
  s.range("aten::addmm", 20 * kUs, 1180 * kUs, linear);
  const auto r = s.finish();
  EXPECT_EQ(collapsed(*r),
            "main.cpp(8):_main;forward 60\n"
            "main.cpp(8):_main;nn.Module:_Linear_0;model.cpp(113):_Linear::forward();"
            "aten::linear 60\n"
            "main.cpp(8):_main;nn.Module:_Linear_0;model.cpp(113):_Linear::forward();"
            "aten::addmm 1180\n");
}

TEST(CollapsedStacks, SeparatorsInsideFramesAndNamesBecomeUnderscores) {
  StackResult s;
  const std::int32_t st = s.stack({"f(int, char const*)", "weird;frame\tname\nhere", "main"});
  s.range("my op; with spaces", 0, 5 * kUs, st);
  const auto r = s.finish();
  const std::string text = collapsed(*r);
  EXPECT_EQ(text, "main;weird_frame_name_here;f(int,_char_const*);my_op__with_spaces 5\n");
  EXPECT_EQ(parse(text).size(), 1u);
}

TEST(CollapsedStacks, EqualStacksAreSummedBeforeRounding) {
  StackResult s;
  const std::int32_t a = s.stack({"g()", "main"});
  const std::int32_t a_again = s.stack({"g()", "main"});  // the same text from other words
  const std::int32_t b = s.stack({"h()", "main"});
  // Three 400 ns ranges: each rounds to 0 us, together 1.2 us -> 1.
  s.range("op", 0, 400, a);
  s.range("op", 1000, 400, a);
  s.range("op", 2000, 400, a_again);
  // A different range name on the same stack is its own line.
  s.range("other", 3000, 2500, a);
  // Alone below half a microsecond: rounds to 0 and is left out, as PyTorch leaves out zeros.
  s.range("op", 6000, 300, b);
  // No stack: not in the file.
  s.range("nostack", 7000, 9000, -1);
  const auto r = s.finish();
  EXPECT_EQ(collapsed(*r), "main;g();op 1\nmain;g();other 3\n");
}

TEST(CollapsedStacks, UnknownMetricNamesTheAllowedOnes) {
  StackResult s;
  const auto r = s.finish();
  const std::string message = error_of([&] { collapsed(*r, "cpu_time_total"); });
  EXPECT_NE(message.find("'cpu_time_total'"), std::string::npos) << message;
  EXPECT_NE(message.find("self_cpu_time_total"), std::string::npos) << message;
  EXPECT_NE(message.find("self_cuda_time_total"), std::string::npos) << message;
}

TEST(CollapsedStacks, NeedsWithStack) {
  StackResult s(/*with_stack=*/false);
  const auto r = s.finish();
  const std::string message = error_of([&] { collapsed(*r); });
  EXPECT_NE(message.find("with_stack"), std::string::npos) << message;
}

TEST(CollapsedStacks, CudaTimeIsEmptyWithAWarning) {
  StackResult s;
  s.range("op", 0, 5 * kUs, s.stack({"main"}));
  const auto r = s.finish();
  WarningCapture warnings;
  EXPECT_EQ(collapsed(*r, "self_cuda_time_total"), "");
  EXPECT_TRUE(warnings.contains("self_cuda_time_total")) << warnings.messages().size();
}

TEST(CollapsedStacks, AnEmptyFileSaysWhy) {
  StackResult s;
  s.range("op", 0, 5 * kUs, -1);  // recorded with with_stack, but no range has a stack
  const auto r = s.finish();
  WarningCapture warnings;
  EXPECT_EQ(collapsed(*r), "");
  EXPECT_TRUE(warnings.contains("no range in this result has a call stack"));
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

TEST(CollapsedStacks, FailedExportsLeaveNoFile) {
  TempDir dir;
  StackResult s;
  s.range("op", 0, 5 * kUs, s.stack({"main"}));
  const auto r = s.finish();
  StackResult plain(/*with_stack=*/false);
  const auto no_stack = plain.finish();

  const std::string path = dir.file("stacks.txt");
  std::string message = error_of([&] { export_stacks(*r, path, "self_cpu_time"); });
  EXPECT_NE(message.find("self_cpu_time_total"), std::string::npos) << message;
  message = error_of([&] { export_stacks(*no_stack, path); });
  EXPECT_NE(message.find("with_stack"), std::string::npos) << message;
  EXPECT_TRUE(entries(dir.path()).empty());

  // A directory that does not exist, and a path that is a directory.
  const std::string missing = dir.file("no/such/dir/stacks.txt");
  message = error_of([&] { export_stacks(*r, missing); });
  EXPECT_NE(message.find(missing), std::string::npos) << message;
  fs::create_directory(dir.path() / "taken");
  message = error_of([&] { export_stacks(*r, dir.file("taken")); });
  EXPECT_NE(message.find("taken"), std::string::npos) << message;
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"taken"});
  EXPECT_TRUE(entries(dir.path() / "taken").empty());

  // And a good one, through the same entry point, gzip too.
  export_stacks(*r, path);
  EXPECT_EQ(read_file(path), "main;op 5\n");
  export_stacks(*r, path + ".gz");
  EXPECT_EQ(testing::read_gzip_file(path + ".gz"), "main;op 5\n");
}

// --- through a real Profiler ---

// Records the model's step with with_stack (and modules when asked) and returns the profiler.
std::unique_ptr<Profiler> record_model(bool with_modules) {
  auto prof = std::make_unique<Profiler>(
      ProfilerConfig{.lenses = {.with_stack = true, .with_modules = with_modules}});
  prof->start();
  for (int i = 0; i < 3; ++i) opscope_collapsed_test::model_step();
  prof->stop();
  return prof;
}

// What the file must hold, computed from the result's events: per distinct stack text and
// name (an unrolled loop calls from several addresses that read the same without line
// numbers), the summed self time rounded to microseconds, zeros left out.
std::map<std::string, std::int64_t> expected_lines(const ProfilerResult& r) {
  analysis::Symbolizer symbolizer;
  std::map<std::string, std::int64_t> ns;
  for (const Event& e : r.events()) {
    const EventDetail* d = r.detail(e);
    if (d == nullptr || d->stack < 0) continue;
    std::vector<std::string> frames = analysis::stack_text(r, e, symbolizer);
    std::reverse(frames.begin(), frames.end());
    frames.emplace_back(e.name);
    for (std::string& f : frames) {
      for (char& c : f) c = c == ' ' || c == ';' ? '_' : c;
    }
    ns[join(frames)] += e.self_ns;
  }
  std::map<std::string, std::int64_t> out;
  for (const auto& [text, total] : ns) {
    const auto us = std::llround(static_cast<double>(total) / 1000.0);
    if (us > 0) out.emplace(text, us);
  }
  return out;
}

TEST(CollapsedStacks, ProfilerExportMatchesTheSelfTimes) {
  const auto prof = record_model(/*with_modules=*/true);
  TempDir dir;
  const std::string path = dir.file("stacks.txt");
  prof->export_stacks(path);
  const std::vector<Line> lines = parse(read_file(path));
  ASSERT_FALSE(lines.empty());

  std::map<std::string, std::int64_t> got;
  for (const Line& l : lines) {
    EXPECT_TRUE(got.emplace(join(l.frames), l.value).second) << "a stack twice: " << join(l.frames);
  }
  EXPECT_EQ(got, expected_lines(prof->result()));

  // Two places call aten::mm: two lines. Its self time is 3 x 2 x ~150 us.
  std::int64_t mm_total = 0;
  int mm_lines = 0;
  for (const Line& l : lines) {
    if (l.frames.back() != "aten::mm") continue;
    ++mm_lines;
    mm_total += l.value;
  }
  EXPECT_EQ(mm_lines, 2);
  EXPECT_GE(mm_total, 6 * 150);

  // Module frames sit where their scopes were entered, root first.
  bool saw_linear_mm = false;
  for (const Line& l : lines) {
    const std::string text = join(l.frames);
    if (l.frames.back() == "aten::mm" && text.find("nn.Module:_Linear_0") != std::string::npos) {
      saw_linear_mm = true;
      EXPECT_LT(text.find("nn.Module:_MLP"), text.find("nn.Module:_Linear_0")) << text;
      if (analysis::Symbolizer::reads_debug_info()) {
        const std::size_t step = text.find("opscope_collapsed_test::model_step()");
        const std::size_t layer = text.find("opscope_collapsed_test::linear_layer()");
        const std::size_t op = text.find("opscope_collapsed_test::matmul_op()");
        ASSERT_NE(step, std::string::npos) << text;
        ASSERT_NE(layer, std::string::npos) << text;
        ASSERT_NE(op, std::string::npos) << text;
        EXPECT_LT(step, text.find("nn.Module:_MLP")) << text;
        EXPECT_LT(text.find("nn.Module:_MLP"), layer) << text;
        EXPECT_LT(layer, text.find("nn.Module:_Linear_0")) << text;
        EXPECT_LT(text.find("nn.Module:_Linear_0"), op) << text;
        // The function holding the range is the innermost native frame.
        EXPECT_TRUE(std::string_view(l.frames[l.frames.size() - 2])
                        .ends_with("opscope_collapsed_test::matmul_op()"))
            << text;
      }
    }
  }
  EXPECT_TRUE(saw_linear_mm);

  // The free function writes the same file.
  const std::string again = dir.file("again.txt");
  export_stacks(prof->result(), again);
  EXPECT_EQ(read_file(again), read_file(path));
}

// --- a real consumer: speedscope's importer ---

// Runs a shell command, returning its exit status and output (stdout and stderr).
int run(const std::string& command, std::string* output) {
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  std::string out;
  while (std::size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  const int status = ::pclose(pipe);
  if (output != nullptr) *output = std::move(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string tail(const std::string& s, std::size_t n = 600) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// The version the Node script below is written against: the bundle's layout is not an API.
constexpr const char* kSpeedscopeVersion = "1.25.0";

// speedscope's importer run under Node.js (tests/support/speedscope_import.mjs says how).
const std::string kImportScript = OPSCOPE_SOURCE_DIR "/tests/support/speedscope_import.mjs";

// speedscope installed from npm into the build tree (next to this test binary), once: later
// runs reuse it. Empty, with the reason in *why, when it cannot be had.
std::string speedscope_package(std::string* why) {
  std::string out;
  if (run("command -v node && command -v npm", &out) != 0) {
    *why = "node or npm is not installed";
    return "";
  }
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  const fs::path cache = exe.parent_path() / (std::string("speedscope-") + kSpeedscopeVersion);
  const fs::path package = cache / "node_modules" / "speedscope";
  if (fs::exists(package / "package.json")) return package.string();

  // Installed under a private name and renamed, so that a concurrent or interrupted run never
  // leaves a half-installed cache behind.
  const fs::path staging = cache.string() + ".tmp." + std::to_string(::getpid());
  fs::remove_all(staging);
  const std::string command =
      "timeout 300 npm install --no-audit --no-fund --no-save "
      "--fetch-retries=1 --fetch-timeout=60000 --prefer-offline "
      "--prefix " +
      quoted(staging.string()) + " speedscope@" + kSpeedscopeVersion;
  if (run(command, &out) != 0) {
    fs::remove_all(staging);
    *why = "npm could not install speedscope@" + std::string(kSpeedscopeVersion) +
           " (registry unreachable?): " + tail(out);
    return "";
  }
  std::error_code ec;
  fs::rename(staging, cache, ec);
  if (ec) fs::remove_all(staging);  // another run got there first
  if (!fs::exists(package / "package.json")) {
    *why = "npm install did not produce " + package.string();
    return "";
  }
  return package.string();
}

// Our file, aggregated by stack text (speedscope's grouped tree merges equal stacks too).
std::map<std::string, std::int64_t> by_stack(const std::vector<Line>& lines) {
  std::map<std::string, std::int64_t> out;
  for (const Line& l : lines) out[join(l.frames)] += l.value;
  return out;
}

TEST(CollapsedStacks, SpeedscopeImportsTheFile) {
  std::string why;
  const std::string package = speedscope_package(&why);
  if (package.empty()) GTEST_SKIP() << why;

  const auto prof = record_model(/*with_modules=*/true);
  TempDir dir;
  const std::string script = kImportScript;
  const std::string stacks = dir.file("opscope_stacks.txt");
  prof->export_stacks(stacks);
  const std::vector<Line> lines = parse(read_file(stacks));
  ASSERT_FALSE(lines.empty());
  std::int64_t total = 0;
  for (const Line& l : lines) total += l.value;

  // The name speedscope's documentation gives the format, and a plain name that leaves the
  // choice of importer to its detection (which tries `perf script` output first).
  for (const std::string name : {"profile.collapsedstack.txt", "opscope_stacks.txt"}) {
    SCOPED_TRACE(name);
    std::string out;
    const int rc = run("node " + quoted(script) + " " + quoted(package) + " " + quoted(stacks) +
                           " " + quoted(name),
                       &out);
    ASSERT_EQ(rc, 0) << out;
    const std::size_t brace = out.rfind("\n{");
    const json got = json::parse(brace == std::string::npos ? out : out.substr(brace + 1));
    EXPECT_EQ(got["importer"], "Importing as collapsed stack format") << out;
    EXPECT_EQ(got["total"].get<std::int64_t>(), total) << out;
    std::map<std::string, std::int64_t> theirs;
    for (const json& s : got["stacks"]) {
      theirs[s[0].get<std::string>()] += s[1].get<std::int64_t>();
    }
    EXPECT_EQ(theirs, by_stack(lines)) << out;
  }
}

}  // namespace collapsed_stacks_test
}  // namespace opscope
