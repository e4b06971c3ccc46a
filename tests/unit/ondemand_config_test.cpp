// The daemon's config text: every key, refusals that name the key and value, path rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "ondemand/config.h"
#include "support/test_support.h"

namespace opscope::ondemand {
namespace ondemand_config_test {

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

TEST(OndemandConfig, DynosMemoryProfileKeysAreHonoured) {
  // What `dyno gputrace --profile-memory --duration-ms 700` sends.
  const auto p = parse(
      "ACTIVITIES_LOG_FILE=/tmp/x.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=700\n"
      "PROFILE_REPORT_INPUT_SHAPES=false\nPROFILE_PROFILE_MEMORY=true\nPROFILE_MEMORY=true\n"
      "PROFILE_MEMORY_DURATION_MSECS=700\nPROFILE_WITH_STACK=true\nPROFILE_WITH_FLOPS=false\n"
      "PROFILE_WITH_MODULES=false");
  ASSERT_TRUE(p.request) << p.error;
  EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
  EXPECT_TRUE(p.request->memory_profile);
  EXPECT_EQ(p.request->memory_duration_ms, 700);
  EXPECT_EQ(p.request->duration_ms, 700);
  EXPECT_EQ(p.request->lenses, (LensSet{.profile_memory = true, .with_stack = true}));
  EXPECT_EQ(memory_timeline_path(p.request->output_path), "/tmp/x_42.memory.html");
  EXPECT_EQ(memory_timeline_path("/tmp/x_42.json.gz"), "/tmp/x_42.memory.html");

  // PROFILE_MEMORY alone turns the lens on; its duration stands for a missing one, and the
  // capture covers the longer of the two.
  const auto alone = parse("PROFILE_MEMORY=1\nPROFILE_MEMORY_DURATION_MSECS=250");
  ASSERT_TRUE(alone.request) << alone.error;
  EXPECT_EQ(alone.request->kind, CaptureKind::kDuration);
  EXPECT_EQ(alone.request->duration_ms, 250);
  EXPECT_TRUE(alone.request->lenses.profile_memory);
  const auto longer = parse(
      "ACTIVITIES_DURATION_MSECS=100\nPROFILE_MEMORY=true\nPROFILE_MEMORY_DURATION_MSECS=900");
  ASSERT_TRUE(longer.request) << longer.error;
  EXPECT_EQ(longer.request->duration_ms, 900);
  // An iteration capture keeps its steps and says the memory duration is not used.
  const auto steps =
      parse("ACTIVITIES_ITERATIONS=2\nPROFILE_MEMORY=true\nPROFILE_MEMORY_DURATION_MSECS=900");
  ASSERT_TRUE(steps.request) << steps.error;
  EXPECT_EQ(steps.request->kind, CaptureKind::kIterations);
  ASSERT_EQ(steps.warnings.size(), 1u);
  EXPECT_NE(steps.warnings[0].find("PROFILE_MEMORY_DURATION_MSECS is ignored"), std::string::npos);
  const auto bad = parse("ACTIVITIES_DURATION_MSECS=5\nPROFILE_MEMORY_DURATION_MSECS=0");
  EXPECT_FALSE(bad.request);
  EXPECT_NE(bad.error.find("PROFILE_MEMORY_DURATION_MSECS=\"0\""), std::string::npos) << bad.error;
}

TEST(OndemandConfig, EveryKeyFormatsAndParsesBackTheSame) {
  CaptureRequest timed;
  timed.kind = CaptureKind::kDuration;
  timed.duration_ms = 1500;
  timed.start_time_ms = 1700000000000;
  timed.log_file = "/tmp/every.json";
  timed.memory_profile = true;
  timed.memory_duration_ms = 1500;
  for (const LensField& f : kLensFields) timed.lenses.*f.member = true;
  CaptureRequest steps;
  steps.kind = CaptureKind::kIterations;
  steps.iterations = 7;
  steps.start_iteration = 30;
  steps.start_iteration_roundup = 4;
  steps.log_file = "/tmp/steps.json.gz";
  steps.lenses.with_flops = true;
  for (const CaptureRequest& r : {timed, steps}) {
    const std::string text = format_capture_config(r);
    const auto back = parse(text);
    ASSERT_TRUE(back.request) << back.error << "\n" << text;
    EXPECT_TRUE(back.warnings.empty()) << text;
    const CaptureRequest& b = *back.request;
    EXPECT_EQ(b.kind, r.kind);
    EXPECT_EQ(b.duration_ms, r.duration_ms);
    EXPECT_EQ(b.start_time_ms, r.start_time_ms);
    EXPECT_EQ(b.iterations, r.iterations);
    EXPECT_EQ(b.start_iteration, r.start_iteration);
    EXPECT_EQ(b.start_iteration_roundup, r.start_iteration_roundup);
    EXPECT_EQ(b.lenses, r.lenses);
    EXPECT_EQ(b.memory_profile, r.memory_profile);
    EXPECT_EQ(b.memory_duration_ms, r.memory_duration_ms);
    EXPECT_EQ(b.log_file, r.log_file);
    EXPECT_EQ(format_capture_config(b), text);
  }
  // Each lens's key is Kineto's.
  EXPECT_EQ(lens_config_key(Lens::kRecordShapes), "PROFILE_REPORT_INPUT_SHAPES");
  EXPECT_EQ(lens_config_key(Lens::kWithModules), "PROFILE_WITH_MODULES");
  EXPECT_NE(format_capture_config(timed).find("PROFILE_WITH_STACK=true"), std::string::npos);
}

TEST(OndemandConfig, ActivitiesEnabledSaysWhetherGpuActivityIsAskedFor) {
  // dynolog's `dyno gputrace` never sends the key: Kineto's default activities, GPU ones too.
  const auto dyno = parse("ACTIVITIES_LOG_FILE=/tmp/x.json\nACTIVITIES_DURATION_MSECS=500");
  ASSERT_TRUE(dyno.request) << dyno.error;
  EXPECT_TRUE(dyno.request->gpu_activities);
  EXPECT_EQ(format_capture_config(*dyno.request).find("ACTIVITIES_ENABLED"), std::string::npos);

  const auto on = parse("ACTIVITIES_DURATION_MSECS=500\nACTIVITIES_ENABLED=TRUE");
  ASSERT_TRUE(on.request) << on.error;
  EXPECT_TRUE(on.warnings.empty());
  EXPECT_TRUE(on.request->gpu_activities);

  const auto off = parse("ACTIVITIES_DURATION_MSECS=500\nACTIVITIES_ENABLED=0");
  ASSERT_TRUE(off.request) << off.error;
  EXPECT_FALSE(off.request->gpu_activities);
  const std::string text = format_capture_config(*off.request);
  EXPECT_NE(text.find("ACTIVITIES_ENABLED=false"), std::string::npos) << text;
  const auto back = parse(text);
  ASSERT_TRUE(back.request) << back.error;
  EXPECT_FALSE(back.request->gpu_activities);

  const auto bad = parse("ACTIVITIES_DURATION_MSECS=500\nACTIVITIES_ENABLED=maybe");
  EXPECT_FALSE(bad.request);
  EXPECT_NE(bad.error.find("ACTIVITIES_ENABLED=\"maybe\""), std::string::npos) << bad.error;
}

TEST(OndemandConfig, AMissingOrUnwritableDirectoryIsRefusedBeforeRecording) {
  testing::TempDir dir;
  const auto missing =
      parse("ACTIVITIES_DURATION_MSECS=5\nACTIVITIES_LOG_FILE=" + dir.file("nowhere/t.json"),
            dir.path().string());
  EXPECT_FALSE(missing.request);
  EXPECT_NE(missing.error.find("nowhere does not exist"), std::string::npos) << missing.error;
  std::string why;
  EXPECT_FALSE(check_output_directory(dir.file("t.json") + "/x.json", &why));
  EXPECT_TRUE(check_output_directory(dir.file("t.json"), &why)) << why;
  if (::geteuid() != 0) {  // root writes anywhere
    std::filesystem::create_directory(dir.file("ro"));
    std::filesystem::permissions(
        dir.file("ro"), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    EXPECT_FALSE(check_output_directory(dir.file("ro/t.json"), &why));
    EXPECT_NE(why.find("not writable"), std::string::npos) << why;
  }
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
      {"PROFILE_WITH_STACK=true", "none of ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS and"},
      {"", "none of ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS and"},
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

}  // namespace ondemand_config_test
}  // namespace opscope::ondemand
