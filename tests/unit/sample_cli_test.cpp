// `opscope sample`: parsing, help, errors; the run itself in-process against a fake sampler
// (ordering, --duration, exit codes, signal forwarding, failures after the command ran); and the
// `opscope` binary as a real process, against a fake failing perf and against the real perf
// (skipped, with the reason, where perf cannot sample).
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "cli.h"
#include "support/cli_test_support.h"
#include "support/test_support.h"

namespace opscope::cli {
namespace sample_cli_test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

using tests::shell;
using tests::usage_error;

std::vector<std::string> sample(std::vector<std::string> flags) {
  std::vector<std::string> a = {"sample"};
  a.insert(a.end(), flags.begin(), flags.end());
  a.insert(a.end(), {"--", "true"});
  return a;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

TEST(SampleCli, ParsesEveryFlag) {
  const Command c = parse({"sample",
                           "--freq",
                           "4999",
                           "--duration=2.5",
                           "--event",
                           "cpu-clock",
                           "--call-graph",
                           "dwarf",
                           "--kernel",
                           "--top",
                           "5",
                           "--output",
                           "/tmp/s.folded.gz",
                           "--perf",
                           "/opt/perf",
                           "--timeout=7",
                           "--",
                           "python3",
                           "-c",
                           "print(1)"});
  ASSERT_EQ(c.kind, Command::Kind::kSample);
  const SampleArgs& s = c.sample;
  EXPECT_EQ(s.frequency_hz, 4999u);
  EXPECT_EQ(s.period, 0u);
  ASSERT_TRUE(s.duration_s);
  EXPECT_DOUBLE_EQ(*s.duration_s, 2.5);
  EXPECT_EQ(s.event, "cpu-clock");
  EXPECT_EQ(s.call_graph, "dwarf");
  EXPECT_TRUE(s.include_kernel);
  EXPECT_EQ(s.top, 5);
  EXPECT_EQ(s.output, "/tmp/s.folded.gz");
  EXPECT_EQ(s.perf, "/opt/perf");
  EXPECT_EQ(s.timeout_s, 7);
  EXPECT_EQ(s.command, (std::vector<std::string>{"python3", "-c", "print(1)"}));

  const SampleArgs p = parse({"sample", "--period", "100000", "--", "true"}).sample;
  EXPECT_EQ(p.period, 100000u);
  EXPECT_EQ(p.frequency_hz, 999u);  // the default, unused when period is set
}

TEST(SampleCli, DefaultsMatchTheHelp) {
  const SampleArgs s = parse({"sample", "--", "true"}).sample;
  EXPECT_EQ(s.frequency_hz, 999u);
  EXPECT_EQ(s.period, 0u);
  EXPECT_FALSE(s.duration_s);
  EXPECT_EQ(s.event, "cycles");
  EXPECT_EQ(s.call_graph, "fp");
  EXPECT_FALSE(s.include_kernel);
  EXPECT_EQ(s.top, 20);
  EXPECT_EQ(s.output, "");
  EXPECT_EQ(s.perf, "");
  EXPECT_EQ(s.timeout_s, 60);
  EXPECT_EQ(s.command, std::vector<std::string>{"true"});
}

TEST(SampleCli, EverythingAfterTheDashesBelongsToTheCommand) {
  const SampleArgs s =
      parse({"sample", "--top", "3", "--", "grep", "--help", "--", "-h", "--top"}).sample;
  EXPECT_EQ(s.top, 3);
  EXPECT_EQ(s.command, (std::vector<std::string>{"grep", "--help", "--", "-h", "--top"}));
  // --help before the dashes is opscope's; after them it is the command's.
  EXPECT_EQ(parse({"sample", "--help", "--", "grep"}).kind, Command::Kind::kHelp);
  EXPECT_EQ(parse({"sample", "-h"}).help, sample_help());
  EXPECT_EQ(parse({"sample", "--", "grep", "--help"}).kind, Command::Kind::kSample);
}

TEST(SampleCli, BadValuesNameTheFlagTheValueAndWhatIsAllowed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {sample({"--freq", "0"}), "--freq expects samples per second from 1 to 100000, got '0'"},
      {sample({"--freq", "100001"}), "--freq expects samples per second from 1 to 100000"},
      {sample({"--freq", "fast"}), "got 'fast'"},
      {sample({"--freq", "1.5"}), "--freq expects samples per second"},
      {sample({"--period", "0"}), "--period expects a number of events per sample >= 1, got '0'"},
      {sample({"--period", "-5"}), "--period expects"},
      {sample({"--freq", "99", "--period", "1000"}), "give only one of --freq and --period"},
      {sample({"--duration", "0"}), "--duration expects seconds above 0, at most 86400, got '0'"},
      {sample({"--duration", "-1"}), "--duration expects"},
      {sample({"--duration", "1e3"}), "got '1e3'"},
      {sample({"--duration", "inf"}), "got 'inf'"},
      {sample({"--duration", "nan"}), "got 'nan'"},
      {sample({"--duration", "86401"}), "at most 86400"},
      {sample({"--duration", "1.2.3"}), "got '1.2.3'"},
      {sample({"--duration", "."}), "got '.'"},
      {sample({"--event", ""}), "--event expects one perf event name"},
      {sample({"--event", "cycles instructions"}), "got 'cycles instructions'"},
      {sample({"--call-graph", "lbr"}), "--call-graph expects fp or dwarf, got 'lbr'"},
      {sample({"--kernel=yes"}), "--kernel takes no value, got 'yes'"},
      {sample({"--top", "0"}), "--top expects a number of functions from 1 to 100000, got '0'"},
      {sample({"--output", ""}), "--output expects a file path"},
      {sample({"--perf", ""}), "--perf expects the perf executable"},
      {sample({"--timeout", "0"}), "--timeout expects seconds from 1 to 86400, got '0'"},
      {sample({"--timeout", "1.5"}), "--timeout expects"},
      {sample({"--freq"}), "--freq needs a value"},
      {sample({"--bogus"}), "unknown flag --bogus for `opscope sample`"},
      {sample({"--pid", "3"}), "unknown flag --pid"},
      {{"sample"}, "no command to profile; usage: opscope sample [flags] -- command"},
      {{"sample", "--top", "3"}, "no command to profile"},
      {{"sample", "--top", "3", "--"}, "no command to profile"},
      {{"sample", "--", ""}, "the command to profile is an empty string"},
      {{"sample", "ls", "-l"}, "unexpected argument 'ls'; put the command to profile after --"},
  };
  for (const auto& [args, message] : cases) {
    const std::string got = usage_error(args);
    EXPECT_TRUE(has(got, message))
        << "args ending " << args[args.size() - 3] << " " << args[args.size() - 2] << ": " << got;
  }

  std::ostringstream out, err;
  EXPECT_EQ(run(sample({"--top", "x"}), out, err), kExitUsage);
  EXPECT_TRUE(has(err.str(), "opscope sample: --top expects")) << err.str();
  EXPECT_TRUE(has(err.str(), "Run `opscope sample --help` for the flags.")) << err.str();
  EXPECT_EQ(out.str(), "");
}

TEST(SampleCli, HelpExplainsEveryFlagAndTheExitCodes) {
  for (const char* flag : {"--freq", "--period", "--event", "--call-graph", "--kernel",
                           "--duration", "--top", "--output", "--perf", "--timeout", "--help"}) {
    EXPECT_TRUE(has(sample_help(), std::string("  ") + flag + " ")) << flag;
  }
  EXPECT_TRUE(has(sample_help(), "usage: opscope sample [flags] -- command [args...]"));
  for (const char* code : {"  1 ", "  2 ", "  126 ", "  127 ", "128+N"}) {
    EXPECT_TRUE(has(sample_help(), code)) << code;
  }
  EXPECT_TRUE(has(main_help(), "\n  sample "));
  std::ostringstream out, err;
  EXPECT_EQ(run({"sample", "--help"}, out, err), kExitOk);
  EXPECT_EQ(out.str(), sample_help());
  EXPECT_EQ(run({"nope"}, out, err), kExitUsage);
  EXPECT_TRUE(
      has(err.str(), "allowed: activities, analyze, completion, daemon, flight, merge, sample, trace"))
      << err.str();
}

// A sampler that samples nothing: it records what run_sample asks of it and when, and hands
// back a fixed batch. Each step can be made to fail.
class FakeSampler : public Sampler {
 public:
  struct Log {
    std::mutex mu;
    SamplerRequest request;
    std::vector<std::string> calls;
    std::function<void()> on_wait_running;
    std::function<void()> on_stop;
    bool fail_start = false;
    bool fail_running = false;
    bool fail_samples = false;
    SampleBatch batch;
  };

  explicit FakeSampler(std::shared_ptr<Log> log) : log_(std::move(log)) {}
  std::string name() const override { return "fake"; }
  std::unique_ptr<SamplerSession> start(const SamplerRequest& request) override {
    log_->request = request;
    log_->calls.push_back("start");
    if (log_->fail_start) throw Error("fake: cannot start (remedy: install it)");
    return std::make_unique<Session>(log_);
  }

 private:
  class Session : public SamplerSession {
   public:
    explicit Session(std::shared_ptr<Log> log) : log_(std::move(log)) {}
    SamplerState state() const override { return state_; }
    void wait_running(std::chrono::milliseconds) override {
      log_->calls.push_back("wait_running");
      if (log_->on_wait_running) log_->on_wait_running();
      if (log_->fail_running) {
        state_ = SamplerState::kFailed;
        throw Error("fake sampler failed to start; its output:\nfake: no PMU\nremedy: none");
      }
      state_ = SamplerState::kRunning;
    }
    void stop(std::chrono::milliseconds) override {
      if (state_ != SamplerState::kRunning) return;
      log_->calls.push_back("stop");
      if (log_->on_stop) log_->on_stop();
      state_ = SamplerState::kProcessing;
    }
    SampleBatch samples(std::chrono::milliseconds) override {
      log_->calls.push_back("samples");
      if (log_->fail_samples) {
        state_ = SamplerState::kFailed;
        throw Error("fake: perf script failed");
      }
      state_ = SamplerState::kFinished;
      return log_->batch;
    }
    std::string output() const override { return ""; }

   private:
    std::shared_ptr<Log> log_;
    SamplerState state_ = SamplerState::kPreparing;
  };

  std::shared_ptr<Log> log_;
};

Sample sample_of(std::vector<std::string> frames) {
  Sample s;
  s.tid = 1;
  s.frames = std::move(frames);
  return s;
}

// Sums the counts of a collapsed-stacks text, checking every line's shape.
std::uint64_t sum_of_counts(const std::string& folded) {
  std::istringstream lines(folded);
  std::string line;
  std::uint64_t sum = 0;
  while (std::getline(lines, line)) {
    const auto space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    EXPECT_GT(space, 0u) << line;
    const std::string count = line.substr(space + 1);
    EXPECT_FALSE(count.empty()) << line;
    EXPECT_EQ(count.find_first_not_of("0123456789"), std::string::npos) << line;
    sum += std::stoull(count);
  }
  return sum;
}

// The number N in summary()'s first line, "N samples of '<event>'...".
std::uint64_t samples_reported(const std::string& out) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::uint64_t n = 0;
    std::string samples, of;
    if (words >> n >> samples >> of && samples == "samples" && of == "of") return n;
  }
  return UINT64_MAX;
}

class SampleCliRun : public ::testing::Test {
 protected:
  SampleCliRun() : log_(std::make_shared<FakeSampler::Log>()) {
    log_->batch.event = "cpu-clock";
    log_->batch.fallback_reason = "cycles is not supported here";
    log_->batch.samples = {sample_of({"inner", "middle", "main"}),
                           sample_of({"inner", "middle", "main"}), sample_of({"other", "main"})};
  }
  int run_with(std::vector<std::string> command, std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {"sample", "--output", dir_.file("out.folded")};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    const Command c = parse(args);
    return run_sample(c.sample, out_, err_, std::make_shared<FakeSampler>(log_));
  }

  testing::TempDir dir_;
  std::shared_ptr<FakeSampler::Log> log_;
  std::ostringstream out_, err_;
};

TEST_F(SampleCliRun, TheCommandRunsOnlyOnceTheSamplerSamples) {
  const std::string marker = dir_.file("ran");
  bool ran_before_running = true;
  log_->on_wait_running = [&] {
    std::this_thread::sleep_for(200ms);  // a command that was not paused would have run by now
    ran_before_running = exists(marker);
  };
  const int code = run_with({"sh", "-c", "echo ran > " + marker},
                            {"--freq", "123", "--event", "instructions", "--kernel", "--call-graph",
                             "dwarf", "--top", "1"});
  EXPECT_EQ(code, 0) << err_.str();
  EXPECT_FALSE(ran_before_running);
  EXPECT_TRUE(exists(marker));
  EXPECT_EQ(log_->calls, (std::vector<std::string>{"start", "wait_running", "stop", "samples"}));
  EXPECT_GT(log_->request.pid, 0);
  EXPECT_EQ(log_->request.frequency_hz, 123u);
  EXPECT_EQ(log_->request.event, "instructions");
  EXPECT_TRUE(log_->request.include_kernel);
  EXPECT_EQ(log_->request.call_graph, "dwarf");

  const std::string& out = out_.str();
  EXPECT_EQ(samples_reported(out), 3u) << out;
  EXPECT_TRUE(has(out, "opscope sample: profile of `sh -c 'echo ran > " + marker + "'` (pid " +
                           std::to_string(log_->request.pid) + ")\n3 samples of 'cpu-clock'"))
      << out;
  EXPECT_TRUE(has(out, "cycles is not supported here")) << out;  // the fallback reason
  // The top function by Total (--top 1): main, under which every sample was taken (issue 38:
  // the table listed the leaves only, Total equal to Self).
  EXPECT_TRUE(has(out, "       0    0.0%        3  100.0%  main\n")) << out;
  // Said while it runs, not only at the end (issue 38).
  EXPECT_TRUE(has(err_.str(), "opscope sample: sampling `sh -c")) << err_.str();
  EXPECT_TRUE(has(err_.str(), "at 123 Hz; the profile follows when it ends")) << err_.str();
  EXPECT_TRUE(has(err_.str(), "ended; reading its samples")) << err_.str();
  EXPECT_TRUE(has(out, "collapsed stacks: " + dir_.file("out.folded") + "\n")) << out;
  const std::string folded = testing::read_file(dir_.file("out.folded"));
  EXPECT_TRUE(has(folded, "main;middle;inner 2\n")) << folded;
  EXPECT_TRUE(has(folded, "main;other 1\n")) << folded;
  EXPECT_EQ(sum_of_counts(folded), 3u);
}

TEST_F(SampleCliRun, MessagesQuoteTheCommandAsAShellWould) {
  log_->fail_running = true;
  EXPECT_EQ(run_with({"sh", "-c", "echo 'a b'; exit", "", "x/y=1,2"}), kExitFailure);
  EXPECT_TRUE(has(err_.str(), "`sh -c 'echo '\\''a b'\\''; exit' '' x/y=1,2` was not run"))
      << err_.str();
}

TEST_F(SampleCliRun, ASamplerThatCannotStartKillsThePausedCommand) {
  const std::string marker = dir_.file("ran");
  log_->fail_running = true;
  EXPECT_EQ(run_with({"sh", "-c", "echo ran > " + marker}), kExitFailure);
  EXPECT_TRUE(has(err_.str(),
                  "opscope sample: fake sampler failed to start; its output:\n"
                  "fake: no PMU\nremedy: none\n"))
      << err_.str();
  EXPECT_TRUE(has(err_.str(), "`sh -c 'echo ran > " + marker + "'` was not run")) << err_.str();
  // Reaped already: the pid is no child of ours any more.
  EXPECT_EQ(::waitpid(log_->request.pid, nullptr, WNOHANG), -1);
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(exists(marker));
  EXPECT_FALSE(exists(dir_.file("out.folded")));
  EXPECT_EQ(out_.str(), "");

  log_->fail_running = false;
  log_->fail_start = true;
  std::ostringstream out, err;
  const Command c = parse({"sample", "--", "sh", "-c", "echo ran > " + marker});
  EXPECT_EQ(run_sample(c.sample, out, err, std::make_shared<FakeSampler>(log_)), kExitFailure);
  EXPECT_TRUE(has(err.str(), "fake: cannot start (remedy: install it)")) << err.str();
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(exists(marker));
}

TEST_F(SampleCliRun, TheCommandsExitCodeIsOpscopes) {
  EXPECT_EQ(run_with({"sh", "-c", "exit 3"}), 3) << err_.str();
  EXPECT_TRUE(has(out_.str(), "collapsed stacks: ")) << out_.str();
  EXPECT_EQ(run_with({"sh", "-c", "kill -KILL $$"}), 128 + SIGKILL) << err_.str();
  EXPECT_TRUE(has(err_.str(), "was ended by signal 9")) << err_.str();
}

TEST_F(SampleCliRun, ACommandThatCannotRunExitsLikeAShell) {
  EXPECT_EQ(run_with({"opscope-no-such-command-xyz", "arg"}), 127);
  EXPECT_TRUE(
      has(err_.str(), "cannot run 'opscope-no-such-command-xyz': No such file or directory"))
      << err_.str();
  EXPECT_FALSE(exists(dir_.file("out.folded")));

  const std::string not_executable = dir_.file("script");
  std::ofstream(not_executable) << "#!/bin/sh\n";
  std::ostringstream err;
  EXPECT_EQ(run_sample(parse({"sample", "--", not_executable}).sample, out_, err,
                       std::make_shared<FakeSampler>(log_)),
            126);
  EXPECT_TRUE(has(err.str(), "cannot run '" + not_executable + "': Permission denied"))
      << err.str();
}

TEST_F(SampleCliRun, DurationStopsSamplingAndWaitsForTheCommand) {
  const std::string marker = dir_.file("done");
  bool done_at_stop = true;
  log_->on_stop = [&] { done_at_stop = exists(marker); };
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_EQ(run_with({"sh", "-c", "sleep 1; echo done > " + marker}, {"--duration", "0.1"}), 0)
      << err_.str();
  EXPECT_GE(std::chrono::steady_clock::now() - begin, 1s);
  EXPECT_FALSE(done_at_stop);   // sampling stopped while the command still ran
  EXPECT_TRUE(exists(marker));  // and opscope waited for it
  EXPECT_EQ(log_->calls, (std::vector<std::string>{"start", "wait_running", "stop", "samples"}));
  EXPECT_TRUE(has(err_.str(), "sampling stopped after 0.1 s; waiting for")) << err_.str();
  EXPECT_EQ(samples_reported(out_.str()), 3u) << out_.str();
}

TEST_F(SampleCliRun, SamplesLostAfterTheCommandRanFailASuccessfulRunOnly) {
  log_->fail_samples = true;
  EXPECT_EQ(run_with({"true"}), kExitFailure);
  EXPECT_TRUE(has(err_.str(), "`true` ran, but its profile is lost: fake: perf script failed"))
      << err_.str();
  EXPECT_FALSE(exists(dir_.file("out.folded")));
  EXPECT_EQ(run_with({"sh", "-c", "exit 4"}), 4);
}

TEST_F(SampleCliRun, NoSamplesIsSaidAndStillWritesTheFile) {
  log_->batch.samples.clear();
  log_->batch.fallback_reason.clear();
  EXPECT_EQ(run_with({"true"}), 0) << err_.str();
  EXPECT_EQ(samples_reported(out_.str()), 0u) << out_.str();
  EXPECT_TRUE(has(out_.str(), "no samples")) << out_.str();
  EXPECT_TRUE(has(out_.str(), "nor time in the kernel without --kernel")) << out_.str();
  EXPECT_TRUE(exists(dir_.file("out.folded")));
}

TEST_F(SampleCliRun, AnUnwritableOutputIsRefusedBeforeTheCommandRuns) {
  std::ostringstream err;
  SampleArgs args = parse({"sample", "--", "true"}).sample;
  args.output = dir_.file("missing/dir/out.folded");
  EXPECT_EQ(run_sample(args, out_, err, std::make_shared<FakeSampler>(log_)), kExitUsage);
  EXPECT_TRUE(has(err.str(), "--output '" + args.output + "': the directory '" +
                                 dir_.file("missing/dir") + "' does not exist"))
      << err.str();
  args.output = dir_.path().string();
  EXPECT_EQ(run_sample(args, out_, err, std::make_shared<FakeSampler>(log_)), kExitUsage);
  EXPECT_TRUE(has(err.str(), "is a directory")) << err.str();
  EXPECT_TRUE(log_->calls.empty());
}

TEST_F(SampleCliRun, GzipOutputAndTheDefaultName) {
  const Command gz = parse({"sample", "--output", dir_.file("s.folded.gz"), "--", "true"});
  EXPECT_EQ(run_sample(gz.sample, out_, err_, std::make_shared<FakeSampler>(log_)), 0);
  EXPECT_EQ(sum_of_counts(testing::read_gzip_file(dir_.file("s.folded.gz"))), 3u);

  // The default is opscope-sample-<pid>.folded in the current directory.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_.path());
  std::ostringstream out;
  const int code = run_sample(parse({"sample", "--", "true"}).sample, out, err_,
                              std::make_shared<FakeSampler>(log_));
  fs::current_path(cwd);
  EXPECT_EQ(code, 0);
  const std::string expected =
      dir_.file("opscope-sample-" + std::to_string(log_->request.pid) + ".folded");
  EXPECT_TRUE(has(out.str(), "collapsed stacks: " + expected + "\n")) << out.str();
  EXPECT_TRUE(exists(expected));
}

// The command's /proc/<pid>/comm, which becomes its program's name once it exec'd.
std::string comm_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

TEST_F(SampleCliRun, StopSignalsGoToTheCommandAndTheResultsAreStillPrinted) {
  // Signals are sent once the command exec'd `sleep`: by then the forwarding is in place.
  std::atomic<pid_t> pid{0};
  log_->on_wait_running = [&] { pid = log_->request.pid; };
  std::thread signaller([&] {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while ((pid == 0 || comm_of(pid) != "sleep") && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    ::kill(::getpid(), SIGTERM);
  });
  const auto begin = std::chrono::steady_clock::now();
  const int code = run_with({"sleep", "30"});
  signaller.join();
  EXPECT_EQ(code, 128 + SIGTERM) << err_.str();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 20s);
  EXPECT_TRUE(has(err_.str(), "`sleep 30` was ended by signal 15")) << err_.str();
  EXPECT_EQ(samples_reported(out_.str()), 3u) << out_.str();
  // The forwarding ends with the command: SIGTERM is back to what it was (the default).
  struct sigaction now {};
  ::sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST_F(SampleCliRun, ATerminalsCtrlCIsNotPassedOnTwice) {
  // Ctrl-C at a terminal reaches the whole foreground group, the command included, as a signal
  // from the kernel (SI_KERNEL): opscope must survive it without passing it on. A thread may
  // queue such a signal to itself, which stands in for the terminal here.
  std::atomic<pid_t> pid{0};
  log_->on_wait_running = [&] { pid = log_->request.pid; };
  std::atomic<bool> alive_after_ctrl_c{false};
  std::thread signaller([&] {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while ((pid == 0 || comm_of(pid) != "sleep") && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    siginfo_t info{};
    info.si_signo = SIGINT;
    info.si_code = SI_KERNEL;
    // The kernel lets a thread queue a kernel-coded signal only to itself.
    EXPECT_EQ(::syscall(SYS_rt_tgsigqueueinfo, ::getpid(), ::gettid(), SIGINT, &info), 0)
        << std::strerror(errno);
    std::this_thread::sleep_for(300ms);
    alive_after_ctrl_c = comm_of(pid) == "sleep";
    // From a process (SI_USER): passed on. Only while the command runs, as SIGINT would
    // otherwise end this test program.
    if (alive_after_ctrl_c) ::kill(::getpid(), SIGINT);
  });
  const int code = run_with({"sleep", "30"});
  signaller.join();
  EXPECT_TRUE(alive_after_ctrl_c);
  EXPECT_EQ(code, 128 + SIGINT) << err_.str();
  EXPECT_EQ(samples_reported(out_.str()), 3u) << out_.str();
}

// ---- The `opscope` binary as a real process.

// The binary uses the same perf as the in-process probe ($OPSCOPE_PERF, else perf).
#define SKIP_UNLESS_PERF_SAMPLES() \
  if (const std::string& why = testing::perf_unavailable_reason(); !why.empty()) GTEST_SKIP() << why

const std::string kCli = OPSCOPE_CLI;

TEST(SampleCliBinary, AFailingPerfIsReportedAndTheCommandNeverRuns) {
  testing::TempDir dir;
  const std::string perf = dir.file("fake-perf");
  std::ofstream(perf) << "#!/bin/sh\n"
                         "echo 'fake-perf: no PMU on this machine (try cpu-clock)' >&2\n"
                         "exit 1\n";
  fs::permissions(perf, fs::perms::owner_all);
  const std::string marker = dir.file("ran");
  const auto [code, output] =
      shell(kCli + " sample --perf " + perf + " --timeout 10 -- sh -c 'echo ran > " + marker + "'");
  EXPECT_EQ(code, 1) << output;
  EXPECT_TRUE(has(output, "fake-perf: no PMU on this machine (try cpu-clock)")) << output;
  EXPECT_TRUE(has(output, "was not run")) << output;
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(exists(marker));

  const auto [missing, why] =
      shell(kCli + " sample --perf " + dir.file("no-such-perf") + " -- true");
  EXPECT_EQ(missing, 1) << why;
  EXPECT_TRUE(has(why, dir.file("no-such-perf"))) << why;
}

// A perf that always loses the race with the command's threads is started six times; what it
// said is shown once, not once per attempt (issue 38: "[opscope: relaunching perf record]"
// five times, each attempt's lines again).
TEST(SampleCliBinary, PerfsRepeatedAttemptsAreShownOnce) {
  testing::TempDir dir;
  const std::string perf = dir.file("racy-perf");
  std::ofstream(perf) << "#!/bin/sh\n"
                         "echo \"Couldn't create thread/CPU maps: No such process\" >&2\n"
                         "exit 1\n";
  fs::permissions(perf, fs::perms::owner_all);
  const auto [code, output] = shell(kCli + " sample --perf " + perf + " --timeout 10 -- true");
  EXPECT_EQ(code, 1) << output;
  const auto count = [&](const std::string& part) {
    std::size_t n = 0;
    for (std::size_t at = output.find(part); at != std::string::npos;
         at = output.find(part, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("No such process"), 1u) << output;
  EXPECT_EQ(count("relaunching"), 0u) << output;
  EXPECT_EQ(count("perf record was started 6 times; each of its lines once"), 1u) << output;
}

TEST(SampleCliBinary, BadFlagsExit2NamingTheFlag) {
  const auto [code, output] = shell(kCli + " sample --freq 0 -- true");
  EXPECT_EQ(code, 2) << output;
  EXPECT_TRUE(has(output, "--freq expects samples per second from 1 to 100000, got '0'")) << output;
  const auto [none, why] = shell(kCli + " sample --top 3");
  EXPECT_EQ(none, 2) << why;
  EXPECT_TRUE(has(why, "no command to profile")) << why;
}

TEST(SampleCliBinary, SamplesABusyCommandWithRealPerf) {
  SKIP_UNLESS_PERF_SAMPLES();
  testing::TempDir dir;
  const std::string folded = dir.file("busy.folded");
  const auto [code, output] =
      shell(kCli + " sample --freq 2000 --top 5 --output " + folded +
            " -- /bin/sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'");
  ASSERT_EQ(code, 0) << output;
  const std::uint64_t total = samples_reported(output);
  EXPECT_GT(total, 10u) << output;  // ~0.4 s of busy loop at 2000 Hz
  EXPECT_TRUE(has(output, "collapsed stacks: " + folded + "\n")) << output;
  ASSERT_TRUE(exists(folded)) << output;
  EXPECT_EQ(sum_of_counts(testing::read_file(folded)), total) << output;
}

TEST(SampleCliBinary, ExitCodesWithRealPerf) {
  SKIP_UNLESS_PERF_SAMPLES();
  testing::TempDir dir;
  const std::string out = " --output " + dir.file("s.folded");
  const auto [three, output3] = shell(kCli + " sample" + out + " -- sh -c 'exit 3'");
  EXPECT_EQ(three, 3) << output3;
  EXPECT_TRUE(has(output3, "collapsed stacks: ")) << output3;

  const auto [missing, why] = shell(kCli + " sample" + out + " -- opscope-no-such-command-xyz");
  EXPECT_EQ(missing, 127) << why;
  EXPECT_TRUE(has(why, "cannot run 'opscope-no-such-command-xyz': No such file or directory"))
      << why;
}

TEST(SampleCliBinary, SigtermReachesTheCommandAndTheResultsArePrinted) {
  SKIP_UNLESS_PERF_SAMPLES();
  testing::TempDir dir;
  const std::string folded = dir.file("s.folded");
  // `exec` makes $! opscope itself; once `sleep` shows as its child's name, opscope forwards.
  const auto [code, output] = shell("(exec " + kCli + " sample --output " + folded +
                                    " -- sleep 30 2>&1) & pid=$!; " + "for i in $(seq 200); do " +
                                    "  c=$(pgrep -P $pid -x sleep) && break; sleep 0.05; done; " +
                                    "kill -TERM $pid; wait $pid");
  EXPECT_EQ(code, 128 + SIGTERM) << output;
  EXPECT_TRUE(has(output, "`sleep 30` was ended by signal 15")) << output;
  EXPECT_TRUE(has(output, "collapsed stacks: " + folded)) << output;
  EXPECT_TRUE(exists(folded));
}

TEST(SampleCliBinary, CtrlCAtATerminalEndsTheCommandAndTheProfileIsPrinted) {
  SKIP_UNLESS_PERF_SAMPLES();
  // The terminal's SIGINT reaches opscope and the command, not perf (a process group of its
  // own): opscope survives it, does not pass it on, waits for the command and prints its
  // profile.
  testing::TempDir dir;
  const std::string folded = dir.file("s.folded");
  const std::vector<std::string> args = {
      kCli,       "sample",
      "--output", folded,
      "--",       "sh",
      "-c",       "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done"};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  int terminal = -1;
  const pid_t pid = ::forkpty(&terminal, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // Reads the terminal until `want` shows (or it closes, or 30 s pass).
  std::string screen;
  const auto read_until = [&](const std::string& want) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!has(screen, want) && std::chrono::steady_clock::now() < deadline) {
      pollfd p{terminal, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(terminal, buf, sizeof buf);
      if (n <= 0) break;  // EIO: everyone holding the terminal is gone
      screen.append(buf, static_cast<std::size_t>(n));
    }
    return has(screen, want);
  };
  const bool ready = read_until("\nready");
  EXPECT_TRUE(ready) << screen;
  if (ready) EXPECT_EQ(::write(terminal, "\x03", 1), 1);  // the terminal's VINTR: Ctrl-C
  EXPECT_TRUE(read_until("collapsed stacks: " + folded)) << screen;
  if (!ready) ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(terminal);
  ASSERT_TRUE(WIFEXITED(status)) << "opscope was ended by signal " << WTERMSIG(status) << "\n"
                                 << screen;
  EXPECT_EQ(WEXITSTATUS(status), 7) << screen;  // the command's, from its trap
  EXPECT_TRUE(has(screen, "got-int")) << screen;
  EXPECT_TRUE(exists(folded));
}

}  // namespace sample_cli_test
}  // namespace opscope::cli
