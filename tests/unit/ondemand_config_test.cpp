// The daemon's config text: every key, refusals that name the key and value, path rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "ondemand/config.h"
#include "support/test_support.h"

namespace opscope::ondemand {
namespace {

ParsedConfig parse(std::string_view text, std::string_view dir = "/tmp") {
  return parse_capture_config(text, 42, dir);
}

TEST(OndemandConfig, DurationRequestAsDynologFramesIt) {
  const auto p = parse(
      "\n    ACTIVITIES_DURATION_MSECS=500\nACTIVITIES_LOG_FILE=/tmp/t.json\n"
      "PROFILE_START_TIME=1700000000123\n    REQUEST_TRACE_ID=1234567\n");
  ASSERT_TRUE(p.request) << p.error;
  EXPECT_TRUE(p.warnings.empty());
  const CaptureRequest& r = *p.request;
  EXPECT_EQ(r.kind, CaptureKind::kDuration);
  EXPECT_EQ(r.duration_ms, 500);
  EXPECT_EQ(r.start_time_ms, 1700000000123);
  EXPECT_EQ(r.log_file, "/tmp/t.json");
  EXPECT_EQ(r.output_path, "/tmp/t_42.json");
  EXPECT_EQ(r.trace_id, "1234567");
  EXPECT_FALSE(r.lenses.any());
}

TEST(OndemandConfig, IterationRequestAndLenses) {
  const auto p = parse(
      "  ACTIVITIES_ITERATIONS = 3  \n PROFILE_START_ITERATION=10\n"
      "PROFILE_START_ITERATION_ROUNDUP=4\nPROFILE_REPORT_INPUT_SHAPES=true\n"
      "PROFILE_PROFILE_MEMORY=1\nPROFILE_WITH_STACK=TRUE\nPROFILE_WITH_FLOPS=0\n"
      "PROFILE_WITH_MODULES=false\n\n# a comment\nACTIVITIES_ENABLED=true\n");
  ASSERT_TRUE(p.request) << p.error;
  EXPECT_TRUE(p.warnings.empty());
  const CaptureRequest& r = *p.request;
  EXPECT_EQ(r.kind, CaptureKind::kIterations);
  EXPECT_EQ(r.iterations, 3);
  EXPECT_EQ(r.start_iteration, 10);
  EXPECT_EQ(r.start_iteration_roundup, 4);
  EXPECT_TRUE(r.lenses.record_shapes);
  EXPECT_TRUE(r.lenses.profile_memory);
  EXPECT_TRUE(r.lenses.with_stack);
  EXPECT_FALSE(r.lenses.with_flops);
  EXPECT_FALSE(r.lenses.with_modules);
  // Kineto's default log file.
  EXPECT_EQ(r.log_file, "/tmp/libkineto_activities.json");
  EXPECT_EQ(r.output_path, "/tmp/libkineto_activities_42.json");
}

TEST(OndemandConfig, UnknownKeysAndBareLinesWarnOnly) {
  const auto p = parse("ACTIVITIES_DURATION_MSECS=5\nFROBNICATE=yes\njust text\n");
  ASSERT_TRUE(p.request) << p.error;
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_NE(p.warnings[0].find("unknown key FROBNICATE=\"yes\""), std::string::npos);
  EXPECT_NE(p.warnings[1].find("without '='"), std::string::npos);
}

TEST(OndemandConfig, InvalidValuesRefuseTheWholeRequestNamingKeyAndValue) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"ACTIVITIES_DURATION_MSECS=abc", "ACTIVITIES_DURATION_MSECS=\"abc\""},
      {"ACTIVITIES_DURATION_MSECS=-5", "ACTIVITIES_DURATION_MSECS=\"-5\""},
      {"ACTIVITIES_DURATION_MSECS=0", "ACTIVITIES_DURATION_MSECS=\"0\""},
      {"ACTIVITIES_DURATION_MSECS=1e3", "ACTIVITIES_DURATION_MSECS=\"1e3\""},
      {"ACTIVITIES_ITERATIONS=0", "ACTIVITIES_ITERATIONS=\"0\""},
      {"ACTIVITIES_ITERATIONS=2\nPROFILE_START_ITERATION=-1", "PROFILE_START_ITERATION=\"-1\""},
      {"ACTIVITIES_ITERATIONS=2\nPROFILE_START_ITERATION_ROUNDUP=x",
       "PROFILE_START_ITERATION_ROUNDUP=\"x\""},
      {"ACTIVITIES_DURATION_MSECS=5\nPROFILE_START_TIME=soon", "PROFILE_START_TIME=\"soon\""},
      {"ACTIVITIES_DURATION_MSECS=5\nPROFILE_WITH_STACK=yes", "PROFILE_WITH_STACK=\"yes\""},
      {"ACTIVITIES_DURATION_MSECS=5\nPROFILE_REPORT_INPUT_SHAPES=2",
       "PROFILE_REPORT_INPUT_SHAPES=\"2\""},
      {"ACTIVITIES_DURATION_MSECS=5\nPROFILE_PROFILE_MEMORY=", "PROFILE_PROFILE_MEMORY=\"\""},
      {"ACTIVITIES_DURATION_MSECS=5\nPROFILE_WITH_FLOPS=on", "PROFILE_WITH_FLOPS=\"on\""},
      {"ACTIVITIES_DURATION_MSECS=5\nPROFILE_WITH_MODULES=no", "PROFILE_WITH_MODULES=\"no\""},
      {"ACTIVITIES_DURATION_MSECS=5\nACTIVITIES_LOG_FILE=", "ACTIVITIES_LOG_FILE=\"\""},
      {"ACTIVITIES_DURATION_MSECS=5\nACTIVITIES_ITERATIONS=3", "are both given"},
      {"PROFILE_WITH_STACK=true", "neither ACTIVITIES_DURATION_MSECS nor"},
      {"", "neither ACTIVITIES_DURATION_MSECS nor"},
  };
  for (const Case& c : cases) {
    const auto p = parse(c.text);
    EXPECT_FALSE(p.request) << c.text;
    EXPECT_NE(p.error.find(c.expected), std::string::npos) << c.text << " -> " << p.error;
  }
}

TEST(OndemandConfig, OutputPathInsertsThePidBeforeTheExtension) {
  EXPECT_EQ(output_path_for("/tmp/t.json", 7), "/tmp/t_7.json");
  EXPECT_EQ(output_path_for("/tmp/t.json.gz", 7), "/tmp/t_7.json.gz");
  EXPECT_EQ(output_path_for("/tmp/trace", 7), "/tmp/trace_7.json");
  EXPECT_EQ(output_path_for("/tmp/a.b/trace", 7), "/tmp/a.b/trace_7.json");
  EXPECT_EQ(output_path_for("/tmp/x.txt", 7), "/tmp/x_7.txt");
  EXPECT_EQ(output_path_for("/tmp/.hidden", 7), "/tmp/.hidden_7.json");
}

TEST(OndemandConfig, OutputPathMustStayInTheAllowedDirectory) {
  std::string why;
  EXPECT_TRUE(check_output_path("/tmp/t_1.json", "/tmp", &why)) << why;
  EXPECT_TRUE(check_output_path("/tmp/sub/t_1.json", "/tmp/", &why)) << why;
  EXPECT_FALSE(check_output_path("/tmp/../etc/t_1.json", "/tmp", &why));
  EXPECT_NE(why.find("contains \"..\""), std::string::npos) << why;
  EXPECT_FALSE(check_output_path("/etc/t_1.json", "/tmp", &why));
  EXPECT_NE(why.find("outside the allowed directory /tmp"), std::string::npos) << why;
  EXPECT_FALSE(check_output_path("/tmpx/t_1.json", "/tmp", &why));
  EXPECT_FALSE(check_output_path("t_1.json", "/tmp", &why));
  EXPECT_NE(why.find("not absolute"), std::string::npos) << why;
  EXPECT_FALSE(check_output_path("/tmp", "/tmp", &why));

  const auto p = parse("ACTIVITIES_DURATION_MSECS=5\nACTIVITIES_LOG_FILE=/var/log/t.json");
  EXPECT_FALSE(p.request);
  EXPECT_NE(p.error.find("ACTIVITIES_LOG_FILE=\"/var/log/t.json\""), std::string::npos) << p.error;
  EXPECT_FALSE(parse("ACTIVITIES_DURATION_MSECS=5\nACTIVITIES_LOG_FILE=rel/t.json").request);
  EXPECT_FALSE(parse("ACTIVITIES_DURATION_MSECS=5\nACTIVITIES_LOG_FILE=/tmp/../t.json").request);
}

TEST(OndemandConfig, SymlinkOutOfTheAllowedDirectoryIsRefused) {
  testing::TempDir allowed;
  testing::TempDir elsewhere;
  std::filesystem::create_directory_symlink(elsewhere.path(), allowed.path() / "link");
  std::string why;
  EXPECT_FALSE(check_output_path(allowed.file("link/t.json"), allowed.path().string(), &why));
  EXPECT_NE(why.find("outside"), std::string::npos) << why;
  EXPECT_TRUE(check_output_path(allowed.file("t.json"), allowed.path().string(), &why)) << why;
}

TEST(OndemandConfig, AllowedDirectoryFromTheEnvironment) {
  ::unsetenv("OPSCOPE_ONDEMAND_TRACE_DIR");
  EXPECT_EQ(allowed_trace_dir(), "/tmp");
  ::setenv("OPSCOPE_ONDEMAND_TRACE_DIR", "/data/traces", 1);
  EXPECT_EQ(allowed_trace_dir(), "/data/traces");
  ::unsetenv("OPSCOPE_ONDEMAND_TRACE_DIR");
}

TEST(OndemandConfig, FirstCaptureStep) {
  EXPECT_EQ(first_capture_step(0, 0, 5), 5);
  EXPECT_EQ(first_capture_step(10, 0, 5), 10);
  EXPECT_EQ(first_capture_step(10, 4, 5), 12);
  EXPECT_EQ(first_capture_step(12, 4, 5), 12);
  EXPECT_EQ(first_capture_step(3, 4, 13), 16);
  EXPECT_EQ(first_capture_step(3, 1, 13), 13);
}

TEST(OndemandConfig, NonNegativeNumbers) {
  EXPECT_EQ(parse_non_negative("0"), 0);
  EXPECT_EQ(parse_non_negative("123"), 123);
  EXPECT_FALSE(parse_non_negative(""));
  EXPECT_FALSE(parse_non_negative("-1"));
  EXPECT_FALSE(parse_non_negative("+1"));
  EXPECT_FALSE(parse_non_negative("1 2"));
  EXPECT_FALSE(parse_non_negative("99999999999999999999"));
}

}  // namespace
}  // namespace opscope::ondemand
