// `opscope activities`: the `opscope` binary run as a real process (a fresh process is what
// the probe sees once per process), against what this test process's own probe says, and with
// the places a torch process and a venv keep their CUPTI made in a scratch folder from the
// toolkit's libcupti.so.13.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cuda_probe.h"
#include "cli.h"
#include "opscope/profiler.h"
#include "support/cli_test_support.h"
#include "support/test_support.h"

namespace opscope::cli {
namespace activities_cli_test {

namespace fs = std::filesystem;
using tests::shell;

const std::string kCli = OPSCOPE_CLI;
const fs::path kToolkitCupti = "/usr/local/cuda/lib64/libcupti.so.13";

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The `opscope activities` of a clean environment plus `env` ("NAME=value ..."): what the
// search reads is left to the test, not to whoever runs it.
std::pair<int, std::string> activities(const std::string& flags, const std::string& env = "") {
  return shell("env -u VIRTUAL_ENV -u CONDA_PREFIX -u OPSCOPE_CUPTI_LIBRARY " + env + " " + kCli +
               " activities" + flags);
}

// A copy (a library of its own, not a link to the toolkit's file) of the toolkit's CUPTI.
fs::path copy_toolkit_cupti(const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(kToolkitCupti, to);
  return to;
}

TEST(ActivitiesCli, SaysWhatIsRecordableAndWhyCudaIsNot) {
  const auto [code, text] = activities("");
  ASSERT_EQ(code, 0) << text;
  EXPECT_TRUE(has(text, "\ncpu       yes\n")) << text;
  const std::string why = activity_unavailable_reason(ActivityType::kCUDA);
  if (why.empty()) GTEST_SKIP() << "this machine records CUDA activity:\n" << text;
  // The reason a program here gets, word for word.
  EXPECT_TRUE(has(text, "\ncuda      no: " + why + "\n")) << text;
  if (backend::cuda_probe().driver_version != 0) return;
  // No driver (this machine): said, and CUPTI looked up by the command itself, as the probe
  // stops before it.
  EXPECT_TRUE(has(why, "no CUDA driver: libcuda.so.1 could not be loaded")) << why;
  EXPECT_TRUE(has(text, "  driver    none initialized\n  devices   0\n")) << text;
  EXPECT_TRUE(has(text, "(looked up by this command: the probe looks for CUPTI only once")) << text;
  if (fs::exists(kToolkitCupti)) EXPECT_FALSE(has(text, "CUPTI     none loaded")) << text;
}

TEST(ActivitiesCli, JsonSaysTheSame) {
  const auto [code, text] = activities(" --json");
  ASSERT_EQ(code, 0) << text;
  const nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_EQ(j["activities"].size(), 2u) << text;
  EXPECT_EQ(j["activities"][0]["name"], "cpu");
  EXPECT_EQ(j["activities"][0]["recordable"], true);
  EXPECT_EQ(j["activities"][0]["reason"], "");
  const std::string why = activity_unavailable_reason(ActivityType::kCUDA);
  EXPECT_EQ(j["activities"][1]["name"], "cuda");
  EXPECT_EQ(j["activities"][1]["recordable"], why.empty());
  EXPECT_EQ(j["activities"][1]["reason"], why);
  EXPECT_EQ(j["cuda"]["driver_version"], backend::cuda_probe().driver_version);
  EXPECT_EQ(j["cuda"]["devices"], backend::cuda_probe().devices);
  const nlohmann::json& cupti = j["cuda"]["cupti"];
  EXPECT_EQ(cupti["looked_up_by"], backend::cuda_probe().devices == 0 ? "this command" : "probe");
  // The search's order: CUDA 13's soname before 12's, the toolkit's versioned name listed.
  std::vector<std::string> search;
  for (const nlohmann::json& c : cupti["search"]) search.push_back(c["path"]);
  const auto at = [&search](const std::string& path) {
    return std::find(search.begin(), search.end(), path) - search.begin();
  };
  EXPECT_LT(at("libcupti.so.13"), at("libcupti.so.12")) << text;
  EXPECT_LT(at("/usr/local/cuda/lib64/libcupti.so.13"), at("libcupti.so.12")) << text;
  EXPECT_LT(at("libcupti.so.12"), static_cast<std::ptrdiff_t>(search.size())) << text;
  if (fs::exists(kToolkitCupti)) {
    EXPECT_NE(cupti["path"], "") << text;
    EXPECT_NE(cupti["found_by"], "none") << text;
  }
}

TEST(ActivitiesCli, ACuptiTheProcessLoadedIsTheOneReported) {
  // LD_PRELOAD stands for torch having loaded its CUPTI before opscope looks.
  if (!fs::exists(kToolkitCupti)) GTEST_SKIP() << "no " << kToolkitCupti << " here";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer's runtime must come first in the binary's libraries: a preloaded one aborts it.
  GTEST_SKIP() << "a library preloaded into a sanitized binary stops it before main";
#endif
  const testing::TempDir tmp;
  const fs::path copy = copy_toolkit_cupti(tmp.path() / "torch/lib/libcupti.so.13");
  const auto [code, text] = activities("", "LD_PRELOAD=" + copy.string());
  ASSERT_EQ(code, 0) << text;
  EXPECT_TRUE(has(text, "\n  CUPTI     " + copy.string() + " (found by: already loaded)\n"))
      << text;
}

TEST(ActivitiesCli, AVenvsWheelIsFoundThroughVirtualEnv) {
  if (!fs::exists(kToolkitCupti)) GTEST_SKIP() << "no " << kToolkitCupti << " here";
  const testing::TempDir tmp;
  const fs::path venv = tmp.path() / "venv";
  const fs::path lib =
      copy_toolkit_cupti(venv / "lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13");
  const auto [code, text] = activities("", "VIRTUAL_ENV=" + venv.string());
  ASSERT_EQ(code, 0) << text;
  EXPECT_TRUE(has(text, "\n  CUPTI     " + lib.string() + " (found by: pip layout)\n")) << text;
}

TEST(ActivitiesCli, OpscopeCuptiLibraryIsTheOnlyOneTried) {
  const auto [code, text] =
      activities(" --json", "OPSCOPE_CUPTI_LIBRARY=/nonexistent/libcupti.so.13");
  ASSERT_EQ(code, 0) << text;
  const nlohmann::json j = nlohmann::json::parse(text);
  const nlohmann::json& cupti = j["cuda"]["cupti"];
  EXPECT_EQ(cupti["path"], "");
  EXPECT_EQ(cupti["found_by"], "none");
  ASSERT_EQ(cupti["tried"].size(), 1u) << text;
  EXPECT_EQ(cupti["tried"][0],
            "/nonexistent/libcupti.so.13 (OPSCOPE_CUPTI_LIBRARY): cannot open shared object "
            "file: No such file or directory");
}

TEST(ActivitiesCli, HelpAndUsage) {
  EXPECT_TRUE(has(main_help(), "\n  activities  what can be recorded here")) << main_help();
  const auto [help_code, help] = activities(" --help");
  EXPECT_EQ(help_code, 0);
  EXPECT_TRUE(has(help, "usage: opscope activities [--json]")) << help;
  const auto [code, text] = activities(" --jsn");
  EXPECT_EQ(code, kExitUsage);
  EXPECT_TRUE(has(text, "unknown flag --jsn for `opscope activities`; allowed: --json, --help"))
      << text;
}

}  // namespace activities_cli_test
}  // namespace opscope::cli
