// opscope against the real dynolog 0.6 daemon and `dyno` CLI (../shared/peers/dynolog): they,
// not opscope's own daemon, are the authority on what dynolog-compatible means.
//
// Every test runs in a private network namespace (peer_main.cpp), so dynolog and opscope's
// daemon use their real defaults there: TCP port 1778 and the abstract name "dynolog". The
// traced process is tests/support/ondemand_target.cpp, which opts in by environment only
// (KINETO_USE_DAEMON=1), as a PyTorch job does.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "peers/peer_support.h"
#include "support/flight_checks.h"
#include "support/test_support.h"

namespace opscope::peers {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;

const std::string kDynolog = std::string(OPSCOPE_PEERS_DIR) + "/dynolog/bin/dynolog";
const std::string kDyno = std::string(OPSCOPE_PEERS_DIR) + "/dynolog/bin/dyno";

class DynologPeer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!namespace_error().empty()) GTEST_SKIP() << namespace_error();
    if (!fs::exists(kDynolog) || !fs::exists(kDyno)) {
      GTEST_SKIP() << "the real dynolog and dyno are not in " << OPSCOPE_PEERS_DIR
                   << "/dynolog/bin (../shared/peers beside the checkout)";
    }
  }

  void TearDown() override {
    targets_.clear();
    daemon_.reset();
    // Every file a test made in /tmp or /var/tmp starts with prefix_.
    std::error_code ec;
    for (const char* dir : {"/tmp", "/var/tmp"}) {
      for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (entry.path().filename().string().rfind(prefix_, 0) == 0) {
          fs::remove_all(entry.path(), ec);
        }
      }
    }
  }

  // The real dynolog with its IPC monitor, on its default port; returns once `dyno status`
  // answers.
  void start_dynolog() {
    daemon_ = std::make_unique<Child>(std::vector<std::string>{kDynolog, "--enable_ipc_monitor"},
                                      std::vector<std::string>{}, dir_.file("dynolog.log"));
    wait_until_status_answers();
  }

  // opscope's daemon with dynolog's defaults (endpoint "dynolog", port 1778).
  void start_opscope_daemon() {
    daemon_ = std::make_unique<Child>(std::vector<std::string>{OPSCOPE_CLI, "daemon"},
                                      std::vector<std::string>{}, dir_.file("opscope-daemon.log"));
    ASSERT_TRUE(daemon_->wait_for_line("opscope daemon:", 10s)) << daemon_->output();
  }

  void wait_until_status_answers() {
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (run({kDyno, "status"}, 10s).first != 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "the daemon does not answer `dyno status`:\n"
          << daemon_->output();
      std::this_thread::sleep_for(50ms);
    }
  }

  // A traced process (STEPS steps of SLEEP_MS each), opted in by environment. `poll_ms` 0
  // leaves the client's default poll interval (1 s, as libkineto's); `linger` keeps it alive
  // after its steps, in an open range (ondemand_target.cpp). Returns its pid.
  pid_t start_target(int steps, int sleep_ms, std::vector<std::string> env = {}, int poll_ms = 100,
                     bool linger = false) {
    env.push_back("KINETO_USE_DAEMON=1");
    if (poll_ms > 0) env.push_back("OPSCOPE_DAEMON_POLL_MS=" + std::to_string(poll_ms));
    const std::string log = dir_.file("target-" + std::to_string(targets_.size()) + ".log");
    targets_.push_back(std::make_unique<Child>(
        linger ? std::vector<std::string>{OPSCOPE_ONDEMAND_TARGET, std::to_string(steps),
                                          std::to_string(sleep_ms), "linger"}
               : std::vector<std::string>{OPSCOPE_ONDEMAND_TARGET, std::to_string(steps),
                                          std::to_string(sleep_ms)},
        env, log));
    const auto ready = targets_.back()->wait_for_line("ready ", 10s);
    EXPECT_TRUE(ready) << targets_.back()->output();
    return targets_.back()->pid();
  }

  std::string target_output(std::size_t i) const { return targets_.at(i)->output(); }

  // Whether target i's output comes to hold `text` within `timeout`: a traced process logs what
  // it did after doing it (the trace file is in place before "trace written to" is printed).
  bool target_says(std::size_t i, const std::string& text,
                   std::chrono::milliseconds timeout = 10s) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (target_output(i).find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }

  // A trace file name of this test in /tmp (the directory a traced process writes to by default).
  std::string log_file(const std::string& name, const std::string& ext = ".json") const {
    return "/tmp/" + prefix_ + name + ext;
  }
  // A writable directory outside /tmp, removed after the test: a traced process refuses it.
  fs::path directory_outside_tmp(const std::string& name) const {
    const fs::path dir = "/var/tmp/" + prefix_ + name;
    fs::create_directories(dir);
    return dir;
  }
  static std::string written(const std::string& log, pid_t pid, const std::string& ext = ".json") {
    return log.substr(0, log.size() - ext.size()) + "_" + std::to_string(pid) + ext;
  }

  static std::pair<int, std::string> dyno(std::vector<std::string> args) {
    args.insert(args.begin(), kDyno);
    return run(args, 30s);
  }

  // `dyno gputrace ARGS` until it says "Matched N processes": a process counts for the daemon
  // only after its first poll. Returns dyno's last output.
  std::string gputrace_until_matched(const std::vector<std::string>& args, int n) {
    std::vector<std::string> full = {"gputrace"};
    full.insert(full.end(), args.begin(), args.end());
    const std::string want = "Matched " + std::to_string(n) + " processes";
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    std::string out;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto [code, text] = dyno(full);
      out = text;
      if (code == 0 && text.find(want) != std::string::npos) return out;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "dyno never said \"" << want << "\"; last output:\n"
                  << out << "\ndaemon log:\n"
                  << (daemon_ ? daemon_->output() : "");
    return out;
  }

  // The trace written to `path` (waits for it), parsed.
  json trace_at(const std::string& path, std::chrono::milliseconds timeout = 20s) {
    if (!wait_for_file(path, timeout)) {
      std::string outputs;
      for (const auto& t : targets_) outputs += t->output();
      ADD_FAILURE() << path << " did not appear; the traced processes said:\n" << outputs;
      return json();
    }
    const std::string text =
        path.ends_with(".gz") ? testing::read_gzip_file(path) : testing::read_file(path);
    return json::parse(text);
  }

  static std::vector<std::string> range_names(const json& trace) {
    std::vector<std::string> names;
    if (!trace.is_object()) return names;
    for (const json& e : trace.at("traceEvents")) {
      if (e.value("ph", "") == "X") names.push_back(e.value("name", ""));
    }
    return names;
  }
  static bool has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  }

  testing::TempDir dir_;
  const std::string prefix_ = "opscope-peer-" + std::to_string(::getpid()) + "-";
  std::unique_ptr<Child> daemon_;
  std::vector<std::unique_ptr<Child>> targets_;
};

TEST_F(DynologPeer, DynoTracesAProcessThatOnlySetKinetoUseDaemon) {
  start_dynolog();
  // Nothing but KINETO_USE_DAEMON=1: the client's defaults, a poll a second as libkineto's.
  const pid_t pid = start_target(600, 20, {}, /*poll_ms=*/0);
  const std::string log = log_file("plain");
  const std::string out = gputrace_until_matched(
      {"--log-file", log, "--duration-ms", "500", "--pids", std::to_string(pid)}, 1);
  // dyno prints where the file goes; the process writes exactly there.
  EXPECT_NE(out.find("    " + written(log, pid)), std::string::npos) << out;
  const json trace = trace_at(written(log, pid));
  const auto names = range_names(trace);
  EXPECT_TRUE(has(names, "target::forward")) << trace.dump().substr(0, 2000);
  EXPECT_TRUE(has(names, "target::mm"));
  EXPECT_TRUE(target_says(0, "trace written to " + written(log, pid))) << target_output(0);
}

TEST_F(DynologPeer, IterationCaptureStartsOnTheRoundup) {
  start_dynolog();
  const pid_t pid = start_target(3000, 5);
  const std::string log = log_file("iterations");
  gputrace_until_matched({"--log-file", log, "--iterations", "3",
                          "--profile-start-iteration-roundup", "10", "--pids", std::to_string(pid)},
                         1);
  const json trace = trace_at(written(log, pid));
  std::vector<int> steps;
  for (const std::string& name : range_names(trace)) {
    if (name.rfind("step_", 0) == 0) steps.push_back(std::stoi(name.substr(5)));
  }
  std::sort(steps.begin(), steps.end());
  ASSERT_EQ(steps.size(), 3u) << trace.dump().substr(0, 2000);
  EXPECT_EQ(steps[0] % 10, 0) << "the capture starts on a multiple of the roundup";
  EXPECT_EQ(steps[1], steps[0] + 1);
  EXPECT_EQ(steps[2], steps[0] + 2);
}

TEST_F(DynologPeer, AnAncestorPidReachesTheProcessUnderIt) {
  start_dynolog();
  // A launcher (a shell) whose child is the traced process.
  targets_.push_back(std::make_unique<Child>(
      std::vector<std::string>{"/bin/sh", "-c",
                               std::string(OPSCOPE_ONDEMAND_TARGET) + " 2000 10 & wait"},
      std::vector<std::string>{"KINETO_USE_DAEMON=1", "OPSCOPE_DAEMON_POLL_MS=100"},
      dir_.file("launcher.log")));
  const auto ready = targets_.back()->wait_for_line("ready ", 10s);
  ASSERT_TRUE(ready) << targets_.back()->output();
  const pid_t worker = std::stoi(ready->substr(6));
  const pid_t launcher = targets_.back()->pid();
  ASSERT_NE(worker, launcher);
  const std::string log = log_file("ancestor");
  const std::string out = gputrace_until_matched(
      {"--log-file", log, "--duration-ms", "300", "--pids", std::to_string(launcher)}, 1);
  // dynolog reports (and the process writes) the worker's pid, not the launcher's.
  EXPECT_NE(out.find(written(log, worker)), std::string::npos) << out;
  trace_at(written(log, worker));
  // Killing the launcher (TearDown) leaves the worker running: an orphan that would register
  // with the next test's dynolog and be matched by its `dyno gputrace` without --pids.
  ::kill(worker, SIGKILL);
}

TEST_F(DynologPeer, TwoProcessesAtOnceAndTheProcessLimit) {
  start_dynolog();
  const pid_t a = start_target(3000, 10);
  const pid_t b = start_target(3000, 10);
  // Both, whatever their pids: dyno's default --pids 0 is every process of job 0.
  const std::string both = log_file("both");
  gputrace_until_matched({"--log-file", both, "--duration-ms", "300"}, 2);
  trace_at(written(both, a));
  trace_at(written(both, b));

  // --process-limit 1: both match, one is triggered.
  const std::string one = log_file("one");
  const auto [code, out] =
      dyno({"gputrace", "--log-file", one, "--duration-ms", "300", "--process-limit", "1"});
  ASSERT_EQ(code, 0) << out;
  // The pid in "activityProfilersTriggered":[PID] of dyno's answer. Found by hand: <regex>
  // was a fifth of this file's compiling under ASan+UBSan (145 s against 119 s on a busy VM).
  const std::string key = R"("activityProfilersTriggered":[)";
  const std::size_t at = out.find(key);
  ASSERT_NE(at, std::string::npos) << out;
  pid_t chosen = 0;
  const auto [end, ec] =
      std::from_chars(out.data() + at + key.size(), out.data() + out.size(), chosen);
  ASSERT_TRUE(ec == std::errc() && *end == ']') << out;
  const pid_t other = chosen == a ? b : a;
  trace_at(written(one, chosen));
  std::this_thread::sleep_for(1500ms);  // the other one polled several times meanwhile
  EXPECT_FALSE(fs::exists(written(one, other)));
}

TEST_F(DynologPeer, JobIdSelectsTheProcessesOfAJob) {
  start_dynolog();
  const pid_t in_job = start_target(3000, 10, {"SLURM_JOB_ID=77"});
  const pid_t no_job = start_target(3000, 10);
  const std::string log = log_file("job");
  const std::string out =
      gputrace_until_matched({"--log-file", log, "--duration-ms", "300", "--job-id", "77"}, 1);
  EXPECT_NE(out.find(written(log, in_job)), std::string::npos) << out;
  trace_at(written(log, in_job));
  // Job 0 is the processes without a job, in dynolog.
  const std::string log0 = log_file("job0");
  const std::string out0 = gputrace_until_matched({"--log-file", log0, "--duration-ms", "300"}, 1);
  EXPECT_NE(out0.find(written(log0, no_job)), std::string::npos) << out0;
  trace_at(written(log0, no_job));
  EXPECT_FALSE(fs::exists(written(log, no_job)));
}

TEST_F(DynologPeer, EveryLensFlagReachesTheTrace) {
  start_dynolog();
  const pid_t pid = start_target(3000, 10);
  const std::string log = log_file("lenses");
  // --profile-memory also sends PROFILE_MEMORY and PROFILE_MEMORY_DURATION_MSECS.
  gputrace_until_matched(
      {"--log-file", log, "--duration-ms", "400", "--pids", std::to_string(pid), "--record-shapes",
       "--with-stacks", "--with-flops", "--with-modules", "--profile-memory"},
      1);
  const json trace = trace_at(written(log, pid));
  ASSERT_TRUE(trace.is_object());
  EXPECT_EQ(trace["opscope"]["lenses"],
            json({"record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"}));
  bool stacks = false;
  for (const json& e : trace["traceEvents"]) {
    stacks = stacks ||
             (e.value("ph", "") == "X" && e.contains("args") && e["args"].contains("Call stack"));
  }
  EXPECT_TRUE(stacks) << "with_stack: no range has a \"Call stack\"";
  // The memory profile: the window's memory timeline beside the trace.
  const std::string page =
      log.substr(0, log.size() - 5) + "_" + std::to_string(pid) + ".memory.html";
  ASSERT_TRUE(wait_for_file(page, 10s)) << target_output(0);
  EXPECT_NE(testing::read_file(page).find("<svg"), std::string::npos)
      << "the memory timeline plots the process's allocation reports";
  bool memory_events = false;
  for (const json& e : trace["traceEvents"])
    memory_events = memory_events || e["name"] == "[memory]";
  EXPECT_TRUE(memory_events) << "profile_memory: no [memory] events";
  // Neither memory key is unknown to the client.
  EXPECT_EQ(target_output(0).find("unknown key"), std::string::npos) << target_output(0);
}

TEST_F(DynologPeer, AGzipLogFileIsWrittenGzipped) {
  start_dynolog();
  const pid_t pid = start_target(3000, 10);
  const std::string log = log_file("gz", ".json.gz");
  const std::string out = gputrace_until_matched(
      {"--log-file", log, "--duration-ms", "300", "--pids", std::to_string(pid)}, 1);
  EXPECT_NE(out.find(written(log, pid, ".json.gz")), std::string::npos) << out;
  const json trace = trace_at(written(log, pid, ".json.gz"));
  EXPECT_TRUE(has(range_names(trace), "target::forward"));
}

TEST_F(DynologPeer, TheDaemonRestartedWhileTheProcessRuns) {
  start_dynolog();
  const pid_t pid = start_target(5000, 10);
  const std::string first = log_file("before");
  gputrace_until_matched(
      {"--log-file", first, "--duration-ms", "200", "--pids", std::to_string(pid)}, 1);
  trace_at(written(first, pid));
  daemon_->stop(SIGKILL);
  std::this_thread::sleep_for(500ms);  // the client's polls fail meanwhile
  start_dynolog();
  const std::string second = log_file("after");
  gputrace_until_matched(
      {"--log-file", second, "--duration-ms", "200", "--pids", std::to_string(pid)}, 1);
  trace_at(written(second, pid));
}

TEST_F(DynologPeer, TheProcessStartedBeforeTheDaemon) {
  const pid_t pid = start_target(5000, 10);
  std::this_thread::sleep_for(500ms);  // polls that reach nobody
  start_dynolog();
  const std::string log = log_file("late-daemon");
  gputrace_until_matched({"--log-file", log, "--duration-ms", "200", "--pids", std::to_string(pid)},
                         1);
  trace_at(written(log, pid));
}

TEST_F(DynologPeer, OpscopeTraceDrivesTheRealDynolog) {
  start_dynolog();
  const pid_t pid = start_target(5000, 10);
  const std::string log = log_file("opscope-trace");
  std::pair<int, std::string> result;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  do {  // until the process has polled once
    result = run({OPSCOPE_CLI, "trace", "--pid", std::to_string(pid), "--duration-ms", "300",
                  "--log-file", log, "--wait", "--timeout-s", "30"});
  } while (result.first != 0 && std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(result.first, 0) << result.second << daemon_->output();
  EXPECT_NE(result.second.find("matched 1 process(es), triggered 1"), std::string::npos)
      << result.second;
  EXPECT_NE(result.second.find("\n" + written(log, pid) + "\n"), std::string::npos)
      << result.second;
  EXPECT_TRUE(has(range_names(trace_at(written(log, pid))), "target::mm"));
}

// `opscope trace --dump` through the real dynolog: the config key OPSCOPE_FLIGHT_DUMP goes
// through dynolog untouched, and the process dumps its flight recorder (started by
// OPSCOPE_FLIGHT_RECORDER) where the request says, its last ranges nested as recorded.
TEST_F(DynologPeer, OpscopeTraceDumpsTheFlightRecorderThroughTheRealDynolog) {
  start_dynolog();
  constexpr int kSteps = 40;
  const pid_t pid =
      start_target(kSteps, 1, {"OPSCOPE_FLIGHT_RECORDER=60,4", "OPSCOPE_FLIGHT_ON_CRASH=0"}, 100,
                   /*linger=*/true);
  ASSERT_TRUE(targets_.back()->wait_for_line("done", 20s)) << target_output(0);
  const std::string log = log_file("dump");
  std::pair<int, std::string> result;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  do {  // until the process has polled once
    result = run({OPSCOPE_CLI, "trace", "--pid", std::to_string(pid), "--dump", "--log-file", log,
                  "--wait", "--timeout-s", "30"});
  } while (result.first != 0 && std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(result.first, 0) << result.second << daemon_->output();
  EXPECT_NE(result.second.find("\n" + written(log, pid) + "\n"), std::string::npos)
      << result.second;
  const json trace = trace_at(written(log, pid));
  testing::expect_last_steps_of_target(trace, kSteps);
  EXPECT_EQ(testing::flight_metadata_of(trace).value("trigger", "").rfind("on-demand", 0), 0u);
  EXPECT_TRUE(target_says(0, "flight recorder dumped to " + written(log, pid))) << target_output(0);

  // A process without a flight recorder refuses, and says why on its stderr (dynolog takes no
  // reports, so `opscope trace` can only wait).
  const pid_t plain = start_target(5000, 10);
  gputrace_until_matched(
      {"--log-file", log_file("warmup"), "--duration-ms", "50", "--pids", std::to_string(plain)},
      1);
  trace_at(written(log_file("warmup"), plain));
  const auto [code, out] = run({OPSCOPE_CLI, "trace", "--pid", std::to_string(plain), "--dump",
                                "--log-file", log_file("none"), "--wait", "--timeout-s", "3"});
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(target_says(1, "no flight recorder records in this process")) << target_output(1);
}

TEST_F(DynologPeer, OpscopeTraceSaysWhatDynologCannotTell) {
  start_dynolog();
  const pid_t pid = start_target(5000, 10);
  // A directory the traced process refuses: it writes only under /tmp by default.
  const fs::path outside = directory_outside_tmp("outside");
  const std::string log = (outside / "t.json").string();
  // Once the process has polled (and written this first trace), it is known and idle.
  gputrace_until_matched(
      {"--log-file", log_file("warmup"), "--duration-ms", "50", "--pids", std::to_string(pid)}, 1);
  trace_at(written(log_file("warmup"), pid));
  const auto [code, out] = run({OPSCOPE_CLI, "trace", "--pid", std::to_string(pid), "--duration-ms",
                                "300", "--log-file", log, "--wait", "--timeout-s", "3"});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("is outside /tmp"), std::string::npos) << out;
  EXPECT_NE(out.find("dynolog) does not tell"), std::string::npos) << out;
  // The process said why on its stderr.
  EXPECT_TRUE(target_says(0, "outside the allowed directory")) << target_output(0);
}

TEST_F(DynologPeer, DynoDrivesOpscopesDaemon) {
  start_opscope_daemon();
  wait_until_status_answers();
  const pid_t pid = start_target(5000, 10);
  const std::string log = log_file("dyno-opscope");
  const std::string out = gputrace_until_matched(
      {"--log-file", log, "--duration-ms", "300", "--pids", std::to_string(pid)}, 1);
  EXPECT_NE(out.find(written(log, pid)), std::string::npos) << out;
  EXPECT_TRUE(has(range_names(trace_at(written(log, pid))), "target::forward"));

  // dyno status and dyno version, on both loopback addresses and on `localhost`, whichever
  // address that resolves to first.
  for (const std::string host : {"localhost", "127.0.0.1", "::1"}) {
    const auto [status_code, status] = dyno({"--hostname", host, "status"});
    EXPECT_EQ(status_code, 0) << host << ": " << status;
    EXPECT_NE(status.find(R"(response = {"status":1})"), std::string::npos) << status;
    const auto [version_code, version] = dyno({"--hostname", host, "version"});
    EXPECT_EQ(version_code, 0) << host << ": " << version;
    EXPECT_NE(version.find(R"({"version":"opscope )"), std::string::npos) << version;
  }
}

TEST_F(DynologPeer, OpscopeTraceWaitReportsARefusalAtOnceWithOpscopesDaemon) {
  start_opscope_daemon();
  const pid_t pid = start_target(5000, 10);
  const fs::path outside = directory_outside_tmp("refused");
  std::pair<int, std::string> result;
  const auto started = std::chrono::steady_clock::now();
  do {
    result = run({OPSCOPE_CLI, "trace", "--pid", std::to_string(pid), "--duration-ms", "300",
                  "--log-file", (outside / "t.json").string(), "--wait", "--timeout-s", "60"});
  } while (result.second.find("triggered 1") == std::string::npos &&
           std::chrono::steady_clock::now() - started < 20s);
  EXPECT_EQ(result.first, 1) << result.second;
  EXPECT_NE(result.second.find("pid " + std::to_string(pid) + " refused the request"),
            std::string::npos)
      << result.second;
  EXPECT_NE(result.second.find("outside the allowed directory"), std::string::npos)
      << result.second;
  // Said as soon as the process reported it, not after the 60 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);

  // A process that stops polling never fetches the request: the timeout says so.
  ::kill(pid, SIGSTOP);
  const auto [code, out] =
      run({OPSCOPE_CLI, "trace", "--pid", std::to_string(pid), "--duration-ms", "300", "--log-file",
           log_file("stopped"), "--wait", "--timeout-s", "2"});
  ::kill(pid, SIGCONT);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("has not fetched the request"), std::string::npos) << out;
}

}  // namespace
}  // namespace opscope::peers
