// Issue 38's smaller findings about the command line, each as a person meets it: the help a
// usage error points at, suggestions for a slip of the keyboard, step ranges in a diff of two
// iterations, no negative zero, what --augment says, `opscope sample --kernel` without the
// permission, and the completion and manual page made from the help texts.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "analyze_diff.h"
#include "cli.h"
#include "cli_args.h"
#include "opscope/export.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/test_support.h"

namespace opscope::cli {
namespace cli_small_test {

using tests::usage_error;

struct Ran {
  int code;
  std::string out;
  std::string err;
};

// The binary as a process, for commands that install signal handlers (analyze with --augment
// removes its temporaries on SIGTERM), which must not stay in the test process.
Ran run_binary(const std::vector<std::string>& args) {
  testing::TempDir dir;
  std::string command = OPSCOPE_CLI;
  for (const std::string& a : args) command += " '" + a + "'";
  const std::string err_file = dir.file("stderr");
  const auto [code, out] = tests::shell("(" + command + " 2>" + err_file + ")");
  std::ifstream in(err_file);
  return {code, out,
          std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

Ran run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = run(args, out, err);
  return {code, out.str(), err.str()};
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A trace of one step, ProfilerStep#`step`, holding an operator that launches one kernel.
std::string step_trace(int step) {
  const std::string n = std::to_string(step);
  return R"({"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#)" +
         n + R"(","pid":1,"tid":1,"ts":1000,"dur":1000},
{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1100,"dur":200},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1150,"dur":20,"args":{"correlation":7}},
{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":1200,"dur":50,"args":{"device":0,"stream":7,"correlation":7}},
{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":1260,"dur":30,"args":{"device":0,"stream":7,"correlation":8}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1180,"dur":10,"args":{"correlation":8}}
],"distributedInfo":{"rank":0}})";
}

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

// --- each subcommand's own help -----------------------------------------------------------------

TEST(CliSmall, AnalyzeDiffErrorsPointAtItsOwnHelp) {
  const Ran bad_flag = run_cli({"analyze", "diff", "a.json", "b.json", "--bogus"});
  EXPECT_EQ(bad_flag.code, kExitUsage);
  EXPECT_TRUE(has(bad_flag.err, "opscope analyze diff: unknown flag --bogus")) << bad_flag.err;
  EXPECT_TRUE(has(bad_flag.err, "Run `opscope analyze diff --help` for the flags."))
      << bad_flag.err;
  EXPECT_FALSE(has(bad_flag.err, "`opscope analyze --help`")) << bad_flag.err;
  const Ran one = run_cli({"analyze", "diff", "a.json"});
  EXPECT_EQ(one.code, kExitUsage);
  EXPECT_TRUE(has(one.err, "Run `opscope analyze diff --help`")) << one.err;
  // analyze itself still points at its own.
  const Ran analyze = run_cli({"analyze", "--bogus"});
  EXPECT_TRUE(has(analyze.err, "Run `opscope analyze --help` for the flags.")) << analyze.err;
}

// --- did you mean -------------------------------------------------------------------------------

TEST(CliSmall, AMistypedCommandGetsASuggestion) {
  EXPECT_TRUE(has(usage_error({"analyse"}), "unknown command 'analyse' (did you mean 'analyze'?)"))
      << usage_error({"analyse"});
  EXPECT_TRUE(has(usage_error({"anlayze"}), "(did you mean 'analyze'?)"));  // two letters swapped
  EXPECT_TRUE(has(usage_error({"mrege"}), "(did you mean 'merge'?)"));
  EXPECT_TRUE(has(usage_error({"smaple"}), "(did you mean 'sample'?)"));
  // Nothing near: no guess, the list of commands as before.
  EXPECT_FALSE(has(usage_error({"xyz"}), "did you mean")) << usage_error({"xyz"});
  EXPECT_TRUE(has(usage_error({"xyz"}), "allowed: ")) << usage_error({"xyz"});
  const Ran ran = run_cli({"analyse", "trace.json"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_TRUE(has(ran.err, "did you mean 'analyze'?")) << ran.err;
}

TEST(CliSmall, AMistypedReportNameGetsASuggestion) {
  const Ran ran = run_cli({"analyze", "t.json", "--report", "temporal,idel"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_TRUE(has(ran.err, "got 'idel' (did you mean 'idle'?)")) << ran.err;
  EXPECT_EQ(nearest_name("kernal", {"kernels", "kernel-dist"}), "kernels");
  EXPECT_EQ(nearest_name("zz", {"ops", "idle"}), "");
}

// --- step ranges in a diff of two iterations ----------------------------------------------------

TEST(CliSmall, ADiffOfTwoIterationsMatchesTheStepsByPosition) {
  testing::TempDir dir;
  const std::string control = write(dir, "c.json", step_trace(4));
  const std::string test = write(dir, "t.json", step_trace(5));
  const Ran ran = run_cli({"analyze", "diff", control, test, "--format", "csv"});
  ASSERT_EQ(ran.code, kExitOk) << ran.err;
  // One row for the step, unchanged; neither #4 deleted nor #5 added.
  EXPECT_TRUE(has(ran.out, "ProfilerStep#4 (Test #5),1,1000,1,1000,0,0,=")) << ran.out;
  EXPECT_TRUE(has(ran.out, "unchanged,ProfilerStep#4 (Test #5)")) << ran.out;
  EXPECT_FALSE(has(ran.out, "deleted")) << ran.out;
  EXPECT_FALSE(has(ran.out, "added")) << ran.out;
  EXPECT_TRUE(has(ran.out, "unchanged,gemm")) << ran.out;

  // --steps-by-name: HTA's rows.
  const Ran hta = run_cli({"analyze", "diff", control, test, "--format", "csv", "--steps-by-name"});
  ASSERT_EQ(hta.code, kExitOk) << hta.err;
  EXPECT_TRUE(has(hta.out, "deleted,ProfilerStep#4")) << hta.out;
  EXPECT_TRUE(has(hta.out, "added,ProfilerStep#5")) << hta.out;

  // The library keeps HTA's by default (the Python API is HTA's drop-in).
  const auto c = read_traces(std::vector<std::string>{control}, 1, {});
  const auto t = read_traces(std::vector<std::string>{test}, 1, {});
  const std::vector<Report> library = trace_diff(c, t);
  EXPECT_TRUE(has(format_reports(library, ReportFormat::kCsv), "deleted,ProfilerStep#4"));
  // The same iteration on both sides needs no new name.
  DiffOptions same;
  same.match_steps_by_position = true;
  EXPECT_TRUE(has(format_reports(trace_diff(c, c, same), ReportFormat::kCsv),
                  "unchanged,ProfilerStep#4\n"));
}

// --- no negative zero ---------------------------------------------------------------------------

TEST(CliSmall, NoNegativeZeroInAnyFormat) {
  Report r;
  r.name = "t";
  r.columns = {"name", "a", "b", "c"};
  r.rows = {{std::string("x"), -0.0, -0.0000001, -1.5}};
  for (const ReportFormat f :
       {ReportFormat::kText, ReportFormat::kCsv, ReportFormat::kJson, ReportFormat::kHtml}) {
    const std::string text = format_reports({&r, 1}, f);
    // "-0" followed by anything but a digit other than 0 (so "-0.5" would be allowed; -1.5 is
    // there to show that real negatives keep their sign).
    for (std::size_t at = text.find("-0"); at != std::string::npos; at = text.find("-0", at + 1)) {
      std::size_t end = at + 2;
      while (end < text.size() && (text[end] == '0' || text[end] == '.')) ++end;
      const bool nonzero_digit = end < text.size() && text[end] >= '1' && text[end] <= '9';
      const bool exponent = end < text.size() && (text[end] == 'e' || text[end] == 'E');
      EXPECT_TRUE(nonzero_digit || exponent)
          << "format " << static_cast<int>(f) << ": " << text.substr(at, 12) << "\n"
          << text;
    }
    EXPECT_TRUE(has(text, "-1.5")) << text;
  }
}

// --- --augment says what it wrote ---------------------------------------------------------------

TEST(CliSmall, AugmentSaysWhatItWroteWhereAndHowManyEvents) {
  testing::TempDir dir;
  const std::string trace = write(dir, "r0.json", step_trace(1));
  const std::string out = dir.file("r0_with_counters.json");
  const Ran one = run_binary({"analyze", trace, "--augment", out});
  ASSERT_EQ(one.code, kExitOk) << one.err;
  EXPECT_EQ(one.out, "");  // standard output stays the reports', none here
  EXPECT_TRUE(has(one.err, "opscope analyze: wrote " + out + ": " + trace + " with ")) << one.err;
  EXPECT_TRUE(has(one.err, " counter events (Queue Length, Memcpy BW)")) << one.err;
  EXPECT_TRUE(std::filesystem::exists(out));
  // The count is what the file holds: its "ph":"C" events.
  std::ifstream in(out);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t counters = 0;
  for (std::size_t at = written.find("\"ph\":\"C\""); at != std::string::npos;
       at = written.find("\"ph\":\"C\"", at + 1)) {
    ++counters;
  }
  ASSERT_GT(counters, 0u);
  EXPECT_TRUE(has(one.err, "with " + std::to_string(counters) + " counter events")) << one.err;

  const std::string second = write(dir, "r1.json", step_trace(1));
  const std::string into = dir.file("augmented");
  const Ran two = run_binary({"analyze", trace, second, "--augment", into});
  ASSERT_EQ(two.code, kExitOk) << two.err;
  EXPECT_TRUE(has(two.err, "opscope analyze: wrote 2 traces with counters")) << two.err;
  EXPECT_TRUE(
      has(two.err, "into " + into + ", " + std::to_string(2 * counters) + " counter events in all"))
      << two.err;
}

// --- sample --kernel without the permission -----------------------------------------------------

TEST(CliSmall, SampleKernelSaysWhenPerfWillLeaveTheKernelOut) {
  const std::string note = kernel_permission_note(2, false);
  EXPECT_TRUE(has(note, "--kernel: kernel.perf_event_paranoid is 2")) << note;
  EXPECT_TRUE(has(note, "user-space frames only")) << note;
  EXPECT_TRUE(has(note, "CAP_PERFMON")) << note;
  EXPECT_EQ(kernel_permission_note(1, false), "");
  EXPECT_EQ(kernel_permission_note(2, true), "");
}

// --- completion and the manual page -------------------------------------------------------------

TEST(CliSmall, CompletionNamesEveryCommandAndItsFlags) {
  const std::string bash = completion_text("bash");
  const std::string zsh = completion_text("zsh");
  for (const Subcommand* s : subcommand_table()) {
    const std::string name = s->name;
    EXPECT_TRUE(has(bash, " " + name + " ") || has(bash, "\"" + name + " ")) << name;
    EXPECT_TRUE(has(bash, "    " + name + ")")) << name;
    EXPECT_TRUE(has(zsh, "'" + name + ":")) << name;
  }
  // Flags come from the help texts: analyze's, analyze diff's, merge's.
  for (const std::string flag : {"--report", "--augment", "--threads", "--include-last-step"}) {
    EXPECT_TRUE(has(bash, flag + " ") || has(bash, flag + "\"")) << flag;
    EXPECT_TRUE(has(zsh, "'" + flag + "'")) << flag;
  }
  EXPECT_TRUE(has(bash, "--steps-by-name")) << bash;
  EXPECT_TRUE(has(bash, "--control-iteration")) << bash;
  for (const ReportKind& k : report_kinds()) EXPECT_TRUE(has(bash, std::string(k.name))) << k.name;
  EXPECT_TRUE(has(bash, "complete -o default -o filenames -F _opscope opscope")) << bash;
  EXPECT_TRUE(zsh.starts_with("#compdef opscope\n")) << zsh;

  const Ran ran = run_cli({"completion", "fish"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_TRUE(has(ran.err, "expects bash, zsh or man, got 'fish'")) << ran.err;
  EXPECT_EQ(run_cli({"completion", "bash"}).out, bash);
}

TEST(CliSmall, TheManualPageHoldsEveryCommandsHelp) {
  const std::string man = completion_text("man");
  EXPECT_TRUE(man.find(".TH OPSCOPE 1") != std::string::npos) << man.substr(0, 300);
  EXPECT_TRUE(has(man, roff_text(main_help()))) << "opscope --help";
  for (const Subcommand* s : subcommand_table()) {
    EXPECT_TRUE(has(man, roff_text(s->help()))) << s->name;
    std::string upper = s->name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_TRUE(has(man, ".SH \"OPSCOPE " + upper + "\"")) << s->name;
  }
  EXPECT_TRUE(has(man, roff_text(analyze_diff_help()))) << "analyze diff";
  // No line of help turned into a roff request.
  std::istringstream lines(man);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || (line[0] != '.' && line[0] != '\'')) continue;
    EXPECT_TRUE(line.starts_with(".TH") || line.starts_with(".SH") || line.starts_with(".PP") ||
                line.starts_with(".nf") || line.starts_with(".fi") || line.starts_with(".\\\""))
        << line;
  }
}

TEST(CliSmall, TheBuildInstallsTheCompletionAndManPageFromTheBinary) {
  // tools/CMakeLists.txt runs the built opscope to make them; they are what it prints.
  const std::filesystem::path share = std::filesystem::path(OPSCOPE_CLI).parent_path() / "share";
  const auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  if (!std::filesystem::exists(share / "man/man1/opscope.1")) {
    GTEST_SKIP() << "the opscope_docs target was not built: " << share;
  }
  EXPECT_EQ(read(share / "bash-completion/completions/opscope"), completion_text("bash"));
  EXPECT_EQ(read(share / "zsh/site-functions/_opscope"), completion_text("zsh"));
  EXPECT_EQ(read(share / "man/man1/opscope.1"), completion_text("man"));
}

}  // namespace cli_small_test
}  // namespace opscope::cli
