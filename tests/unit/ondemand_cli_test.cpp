// The `opscope` command line: parsing, help, errors, the config text, and the binary run as a
// real process against an in-test daemon with a fake traced process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli.h"
#include "daemon/daemon.h"
#include "daemon/requests.h"
#include "json/json_reader.h"
#include "opscope/version.h"
#include "support/cli_test_support.h"
#include "support/flight_checks.h"
#include "support/test_support.h"

namespace opscope::cli {
namespace ondemand_cli_test {

using namespace std::chrono_literals;

using tests::shell;
using tests::usage_error;

const std::vector<std::string> kBase = {"trace", "--pid",      "42",         "--duration-ms",
                                        "500",   "--log-file", "/tmp/t.json"};

std::vector<std::string> with(std::vector<std::string> extra) {
  std::vector<std::string> a = kBase;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(OndemandCli, ParsesATraceRequestIntoDynologsConfigKeys) {
  const Command c = parse({"trace",
                           "--pid",
                           "1,2",
                           "--pid=3",
                           "--iterations",
                           "4",
                           "--start-iteration",
                           "10",
                           "--roundup=5",
                           "--log-file",
                           "/tmp/a/t.json",
                           "--record-shapes",
                           "--profile-memory",
                           "--with-stack",
                           "--with-flops",
                           "--with-modules",
                           "--process-limit",
                           "2",
                           "--port",
                           "1234",
                           "--wait",
                           "--timeout-s",
                           "7"});
  ASSERT_EQ(c.kind, Command::Kind::kTrace);
  const TraceArgs& t = c.trace;
  EXPECT_EQ(t.pids, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(t.port, 1234);
  EXPECT_TRUE(t.wait);
  EXPECT_EQ(t.timeout_s, 7);
  EXPECT_EQ(config_text(t),
            "ACTIVITIES_LOG_FILE=/tmp/a/t.json\n"
            "ACTIVITIES_ITERATIONS=4\n"
            "PROFILE_START_ITERATION=10\n"
            "PROFILE_START_ITERATION_ROUNDUP=5\n"
            "PROFILE_REPORT_INPUT_SHAPES=true\n"
            "PROFILE_PROFILE_MEMORY=true\n"
            "PROFILE_WITH_STACK=true\n"
            "PROFILE_WITH_FLOPS=true\n"
            "PROFILE_WITH_MODULES=true");
  const ondemand::TraceRequest r = ondemand::parse_trace_request(request_json(t));
  EXPECT_EQ(r.pids, t.pids);
  EXPECT_EQ(r.process_limit, 2);
  EXPECT_EQ(r.job_id, 0);
  EXPECT_EQ(r.config, config_text(t));
  const internal::JsonValue doc = internal::parse_json(request_json(t));
  EXPECT_EQ(doc.find("fn")->as_string(), "setKinetOnDemandRequest");

  const Command j =
      parse({"trace", "--job-id", "9", "--duration-ms", "100", "--log-file", "t.json"});
  EXPECT_EQ(config_text(j.trace),
            "ACTIVITIES_LOG_FILE=" + (std::filesystem::current_path() / "t.json").string() +
                "\nACTIVITIES_DURATION_MSECS=100");

  // A timed capture with --profile-memory asks for a memory profile too, as dyno does; dyno's
  // spellings of the flags are accepted.
  const Command m =
      parse({"trace", "--pids", "5", "--duration-ms", "300", "--log-file", "/tmp/m.json",
             "--profile-memory", "--with-stacks", "--profile-start-time", "1700000000000"});
  EXPECT_EQ(config_text(m.trace),
            "ACTIVITIES_LOG_FILE=/tmp/m.json\n"
            "PROFILE_START_TIME=1700000000000\n"
            "ACTIVITIES_DURATION_MSECS=300\n"
            "PROFILE_PROFILE_MEMORY=true\n"
            "PROFILE_WITH_STACK=true\n"
            "PROFILE_MEMORY=true\n"
            "PROFILE_MEMORY_DURATION_MSECS=300");
  // What the CLI writes, the traced process reads back the same (one key table).
  const auto back = ondemand::parse_capture_config(config_text(m.trace), 5, "/tmp");
  ASSERT_TRUE(back.request) << back.error;
  EXPECT_EQ(back.request->duration_ms, 300);
  EXPECT_EQ(back.request->start_time_ms, 1700000000000);
  EXPECT_EQ(back.request->lenses, (LensSet{.profile_memory = true, .with_stack = true}));
  EXPECT_TRUE(back.request->memory_profile);
  EXPECT_EQ(back.request->memory_duration_ms, 300);
  EXPECT_EQ(ondemand::format_capture_config(*back.request), config_text(m.trace));
  const ondemand::TraceRequest jr = ondemand::parse_trace_request(request_json(j.trace));
  EXPECT_EQ(jr.job_id, 9);
  EXPECT_EQ(jr.pids, std::vector<std::int32_t>{0});
  EXPECT_EQ(jr.process_limit, 1000);

  EXPECT_EQ(trace_file_for("/tmp/a/t.json", 77), "/tmp/a/t_77.json");
  EXPECT_EQ(trace_file_for("/tmp/a/trace", 77), "/tmp/a/trace_77.json");
  EXPECT_EQ(trace_file_for("/tmp/a/t.json.gz", 77), "/tmp/a/t_77.json.gz");
  EXPECT_EQ(trace_file_for("/tmp/a.b/trace", 77), "/tmp/a.b/trace_77.json");

  const Command d = parse({"daemon", "--ipc-name", "x", "--port", "0", "--socket-dir", "/tmp"});
  ASSERT_EQ(d.kind, Command::Kind::kDaemon);
  EXPECT_EQ(d.daemon.ipc_name, "x");
  EXPECT_EQ(d.daemon.port, 0);
  EXPECT_EQ(d.daemon.socket_dir, "/tmp");
}

// --dump asks each process for its flight recorder's dump: one key of the config table, and
// nothing that would start a capture.
TEST(OndemandCli, DumpSendsTheFlightRecorderKeyAlone) {
  const Command c = parse({"trace", "--pid", "7", "--dump", "--log-file", "/tmp/d.json"});
  ASSERT_EQ(c.kind, Command::Kind::kTrace);
  EXPECT_EQ(config_text(c.trace), "ACTIVITIES_LOG_FILE=/tmp/d.json\nOPSCOPE_FLIGHT_DUMP=true");
  const auto back = ondemand::parse_capture_config(config_text(c.trace), 7, "/tmp");
  ASSERT_TRUE(back.request) << back.error;
  EXPECT_EQ(back.request->kind, ondemand::CaptureKind::kFlightDump);
  EXPECT_EQ(back.request->output_path, "/tmp/d_7.json");
  EXPECT_NE(trace_help().find("OPSCOPE_FLIGHT_DUMP=true"), std::string::npos);
}

TEST(OndemandCli, BadFlagsNameTheFlagAndWhatIsAllowed) {
  const auto has = [](const std::string& msg, const std::string& needle) {
    return msg.find(needle) != std::string::npos;
  };
  EXPECT_TRUE(has(usage_error(with({"--bogus"})), "unknown flag --bogus")) << "";
  EXPECT_TRUE(has(usage_error({"trace", "--pid", "x"}), "--pid expects process ids"));
  EXPECT_TRUE(has(usage_error({"trace", "--pid", "0"}), "--pid expects"));
  EXPECT_TRUE(has(usage_error({"trace", "--pid"}), "--pid needs a value"));
  EXPECT_TRUE(has(usage_error(with({"--job-id", "3"})), "exactly one of --pid and --job-id"));
  EXPECT_TRUE(has(usage_error({"trace", "--duration-ms", "5", "--log-file", "/t"}),
                  "exactly one of --pid and --job-id"));
  EXPECT_TRUE(has(usage_error(with({"--iterations", "3"})),
                  "exactly one of --duration-ms, --iterations and --dump"));
  EXPECT_TRUE(
      has(usage_error(with({"--dump"})), "exactly one of --duration-ms, --iterations and --dump"));
  EXPECT_TRUE(has(
      usage_error({"trace", "--pid", "1", "--dump", "--log-file", "/tmp/d.json", "--with-stack"}),
      "the lens flags do not go with --dump"));
  EXPECT_TRUE(has(usage_error({"trace", "--pid", "1", "--dump"}), "--log-file is required"));
  EXPECT_TRUE(has(usage_error({"trace", "--pid", "1", "--log-file", "/t", "--dump=yes"}),
                  "--dump takes no value"));
  EXPECT_TRUE(has(usage_error(with({"--roundup", "3"})), "need --iterations"));
  EXPECT_TRUE(has(usage_error({"trace", "--pid", "1", "--iterations", "3", "--log-file", "/t",
                               "--start-time-ms", "5"}),
                  "--start-time-ms needs --duration-ms"));
  EXPECT_TRUE(has(usage_error(with({"--timeout-s", "3"})), "--timeout-s needs --wait"));
  EXPECT_TRUE(has(usage_error(with({"--wait", "--timeout-s", "0"})), "--timeout-s expects"));
  EXPECT_TRUE(has(usage_error(with({"--with-stack=yes"})), "--with-stack takes no value"));
  EXPECT_TRUE(has(usage_error(with({"--port", "70000"})), "--port expects a port from 1 to 65535"));
  EXPECT_TRUE(has(usage_error(with({"--duration-ms", "-1"})), "--duration-ms expects"));
  EXPECT_TRUE(
      has(usage_error({"trace", "--pid", "1", "--duration-ms", "5"}), "--log-file is required"));
  EXPECT_TRUE(has(usage_error({"daemon", "--port", "-1"}), "--port expects a port from 0"));
  EXPECT_TRUE(has(usage_error({"daemon", "--pid", "1"}), "unknown flag --pid"));
  EXPECT_TRUE(has(usage_error({"frobnicate"}), "unknown command 'frobnicate'"));
  EXPECT_TRUE(has(usage_error(with({"stray"})), "unexpected argument 'stray'"));

  std::ostringstream out, err;
  EXPECT_EQ(run(with({"--bogus"}), out, err), kExitUsage);
  EXPECT_NE(err.str().find("unknown flag --bogus"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("opscope trace --help"), std::string::npos) << err.str();
}

TEST(OndemandCli, HelpExplainsEveryFlag) {
  for (const char* flag :
       {"--pid", "--job-id", "--duration-ms", "--iterations", "--start-iteration", "--roundup",
        "--log-file", "--record-shapes", "--profile-memory", "--with-stack", "--with-flops",
        "--with-modules", "--start-time-ms", "--process-limit", "--port", "--wait", "--timeout-s",
        "--dump"}) {
    EXPECT_NE(trace_help().find(std::string("  ") + flag + " "), std::string::npos) << flag;
  }
  for (const char* flag : {"--ipc-name", "--port", "--socket-dir"}) {
    EXPECT_NE(daemon_help().find(std::string("  ") + flag + " "), std::string::npos) << flag;
  }
  EXPECT_EQ(parse({"trace", "--help"}).help, trace_help());
  EXPECT_EQ(parse({"trace", "--pid", "x", "--help"}).help, trace_help());
  EXPECT_EQ(parse({"daemon", "-h"}).help, daemon_help());
  std::ostringstream out, err;
  EXPECT_EQ(run({"--help"}, out, err), kExitOk);
  EXPECT_NE(out.str().find("daemon"), std::string::npos);
  // No command at all is a usage error: the usage goes to stderr, the exit code is 2.
  std::ostringstream none_out, none_err;
  EXPECT_EQ(run({}, none_out, none_err), kExitUsage);
  EXPECT_EQ(none_err.str(), main_help());
  EXPECT_TRUE(none_out.str().empty());
  std::ostringstream version_out, version_err;
  EXPECT_EQ(run({"--version"}, version_out, version_err), kExitOk);
  EXPECT_EQ(version_out.str(), std::string("opscope ") + opscope::version() + " (libopscope " +
                                   opscope::version() + ")\n");
}

// The build tree's binary looks for its libraries where it was built, never in the directory it
// is run from: a RUNPATH with an empty entry (which CMake's build-tree RUNPATH of an installed
// target had) makes the loader try the current directory, and a library planted there would be
// loaded into the profiler. Here the planted one is not even a library: loading it would fail.
TEST(OndemandCli, TheBinaryIgnoresLibrariesInTheDirectoryItRunsFrom) {
  const testing::TempDir dir;
  for (const char* name : {"libstdc++.so.6", "libfmt.so.9", "libz.so.1", "libopscope.so.0.1"}) {
    std::ofstream(dir.path() / name) << "not a library\n";
  }
  const auto [code, output] =
      shell("cd '" + dir.path().string() + "' && " + std::string(OPSCOPE_CLI) + " --version");
  EXPECT_EQ(code, 0) << output;
  EXPECT_NE(output.find(std::string("opscope ") + opscope::version()), std::string::npos) << output;
}

TEST(OndemandCli, SaysWhyNothingMatched) {
  ondemand::DaemonOptions o;
  o.ipc_name = "opscope-test-cli-empty-" + std::to_string(::getpid());
  o.port = 0;
  o.log = [](std::string_view) {};
  ondemand::Daemon daemon(o);
  std::ostringstream out, err;
  EXPECT_EQ(run(with({"--port", std::to_string(daemon.port())}), out, err), kExitFailure);
  EXPECT_NE(out.str().find("matched 0 process(es)"), std::string::npos) << out.str();
  EXPECT_NE(err.str().find("no process is registered"), std::string::npos) << err.str();
}

TEST(OndemandCli, TheBinaryTracesAFakeProcessAndWaitsForItsFile) {
  testing::TempDir dir;
  ondemand::DaemonOptions o;
  o.ipc_name = "opscope-test-cli-daemon-" + std::to_string(::getpid());
  o.port = 0;
  o.log = [](std::string_view) {};
  ondemand::Daemon daemon(o);

  // A fake traced process: polls like libkineto and, given a config, writes the trace file
  // the way a client would (<stem>_<pid>.json).
  const std::int32_t fake_pid = ::getpid();
  std::atomic<bool> stop{false};
  std::string received;
  std::thread client([&] {
    ondemand::Endpoint e("opscope-test-cli-client-" + std::to_string(::getpid()));
    const std::vector<std::int32_t> pids = {fake_pid, 1};
    while (!stop.load()) {
      e.send(o.ipc_name, "req", ondemand::encode_request(ondemand::kConfigTypeActivities, 0, pids));
      const auto r = e.receive(1s);
      if (r && r->message && !r->message->payload.empty()) {
        received = r->message->payload;
        std::ofstream(dir.file("t_" + std::to_string(fake_pid) + ".json")) << "{}";
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
  });
  while (daemon.registry().size(ondemand::ClientRegistry::Clock::now()) == 0) {
    std::this_thread::sleep_for(10ms);
  }

  const auto [code, output] =
      shell(std::string(OPSCOPE_CLI) + " trace --pid " + std::to_string(fake_pid) +
            " --duration-ms 50 --record-shapes --log-file " + dir.file("t.json") + " --port " +
            std::to_string(daemon.port()) + " --wait --timeout-s 20");
  stop = true;
  client.join();
  EXPECT_EQ(code, 0) << output;
  EXPECT_NE(output.find("matched 1 process(es), triggered 1"), std::string::npos) << output;
  EXPECT_NE(output.find("\n" + dir.file("t_" + std::to_string(fake_pid) + ".json") + "\n"),
            std::string::npos)
      << output;
  EXPECT_NE(received.find("ACTIVITIES_LOG_FILE=" + dir.file("t.json") + "\n"), std::string::npos)
      << received;
  EXPECT_NE(received.find("PROFILE_REPORT_INPUT_SHAPES=true"), std::string::npos) << received;

  const auto [bad, message] = shell(std::string(OPSCOPE_CLI) + " trace --pid 1 --frob");
  EXPECT_EQ(bad, 2) << message;
  EXPECT_NE(message.find("unknown flag --frob"), std::string::npos) << message;
  const auto [unreachable, why] =
      shell(std::string(OPSCOPE_CLI) + " trace --pid 1 --duration-ms 5 --log-file /tmp/x.json" +
            " --port " + std::to_string(daemon.port() == 65535 ? 65534 : daemon.port() + 1));
  EXPECT_EQ(unreachable, 1) << why;
}

TEST(OndemandCli, TheDaemonSubcommandRunsUntilSigterm) {
  const std::string name = "opscope-test-cli-sub-" + std::to_string(::getpid());
  const auto [code, output] = shell(std::string(OPSCOPE_CLI) + " daemon --port 0 --ipc-name " +
                                    name + " & pid=$!; sleep 1; kill -TERM $pid; wait $pid");
  EXPECT_EQ(code, 0) << output;
  EXPECT_NE(output.find("IPC endpoint '" + name + "'"), std::string::npos) << output;
  EXPECT_NE(output.find("trace requests on 127.0.0.1"), std::string::npos) << output;
  EXPECT_NE(output.find(" port "), std::string::npos) << output;
}

#ifdef OPSCOPE_ONDEMAND_TARGET
// End to end: the daemon, real traced processes (opscope_ondemand_target, opted in by
// environment only) and the `opscope` binary.
class OndemandEndToEnd : public ::testing::Test {
 protected:
  OndemandEndToEnd() {
    ondemand::DaemonOptions o;
    o.ipc_name = "opscope-test-e2e-" + std::to_string(::getpid());
    o.port = 0;
    o.log = [](std::string_view) {};
    daemon_ = std::make_unique<ondemand::Daemon>(o);
    name_ = o.ipc_name;
  }
  ~OndemandEndToEnd() override {
    for (auto& [pid, pipe] : targets_) {
      ::kill(pid, SIGTERM);
      ::pclose(pipe);
    }
  }
  // Starts a target; returns its pid (read from its "ready <pid>" line).
  // `args`: the target's (STEPS SLEEP_MS [linger]).
  pid_t start_target(const std::string& extra_env = "", const std::string& args = "2000 5") {
    const std::string command =
        "KINETO_USE_DAEMON=1 OPSCOPE_DAEMON_ENDPOINT=" + name_ +
        " OPSCOPE_DAEMON_POLL_MS=20 OPSCOPE_ONDEMAND_TRACE_DIR=" + dir_.path().string() + " " +
        extra_env + " exec " + OPSCOPE_ONDEMAND_TARGET + " " + args;
    FILE* p = ::popen(command.c_str(), "r");
    EXPECT_NE(p, nullptr);
    int pid = 0;
    EXPECT_EQ(std::fscanf(p, "ready %d", &pid), 1);
    targets_.emplace_back(pid, p);
    return pid;
  }
  void wait_for_clients(std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (daemon_->registry().size(ondemand::ClientRegistry::Clock::now()) < n &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    std::this_thread::sleep_for(200ms);  // their first polls, which make them count
  }
  std::pair<int, std::string> trace(const std::string& flags) {
    return shell(std::string(OPSCOPE_CLI) + " trace " + flags + " --port " +
                 std::to_string(daemon_->port()) + " --log-file " + dir_.file("t.json") +
                 " --wait --timeout-s 30");
  }
  // The names of the complete events in a trace file.
  std::vector<std::string> names_in(const std::string& path) {
    std::vector<std::string> names;
    const auto doc = nlohmann::json::parse(testing::read_file(path));
    for (const auto& e : doc.at("traceEvents")) {
      if (e.contains("name") && e.value("ph", "") == "X") names.push_back(e["name"]);
    }
    return names;
  }
  static bool has(const std::vector<std::string>& v, const std::string& name) {
    return std::find(v.begin(), v.end(), name) != v.end();
  }

  testing::TempDir dir_;
  std::unique_ptr<ondemand::Daemon> daemon_;
  std::string name_;
  std::vector<std::pair<pid_t, FILE*>> targets_;
};

TEST_F(OndemandEndToEnd, TracesARunningProcessByPid) {
  const pid_t pid = start_target();
  wait_for_clients(1);
  const auto [code, output] = trace("--pid " + std::to_string(pid) + " --duration-ms 200");
  ASSERT_EQ(code, 0) << output;
  const std::string file = dir_.file("t_" + std::to_string(pid) + ".json");
  EXPECT_NE(output.find("\n" + file + "\n"), std::string::npos) << output;
  const auto names = names_in(file);
  EXPECT_TRUE(has(names, "target::mm")) << names.size();
  EXPECT_TRUE(has(names, "target::forward"));
  EXPECT_TRUE(std::any_of(names.begin(), names.end(),
                          [](const std::string& n) { return n.rfind("step_", 0) == 0; }));
}

// `opscope trace --dump` against opscope's daemon: the process, which runs a flight recorder
// from the environment, dumps it to the request's path and reports it written; one that runs
// none refuses, and the CLI says why as soon as the process reports it.
TEST_F(OndemandEndToEnd, DumpsTheFlightRecorderOfARunningProcess) {
  constexpr int kSteps = 40;
  const pid_t pid = start_target("OPSCOPE_FLIGHT_RECORDER=60,4 OPSCOPE_FLIGHT_ON_CRASH=0",
                                 std::to_string(kSteps) + " 1 linger");
  // Its steps are done once it said so (after "ready", the only other line on its stdout).
  char line[256];
  ASSERT_NE(std::fgets(line, sizeof line, targets_.back().second), nullptr);
  ASSERT_NE(std::fgets(line, sizeof line, targets_.back().second), nullptr);
  ASSERT_STREQ(line, "done\n");
  wait_for_clients(1);
  const auto [code, output] = trace("--pid " + std::to_string(pid) + " --dump");
  ASSERT_EQ(code, 0) << output;
  const std::string file = dir_.file("t_" + std::to_string(pid) + ".json");
  EXPECT_NE(output.find("\n" + file + "\n"), std::string::npos) << output;
  const auto doc = nlohmann::json::parse(testing::read_file(file));
  testing::expect_last_steps_of_target(doc, kSteps);
  EXPECT_EQ(testing::flight_metadata_of(doc).value("trigger", "").rfind("on-demand", 0), 0u);

  const pid_t plain = start_target();  // no flight recorder
  wait_for_clients(2);
  const auto [refused, said] = trace("--pid " + std::to_string(plain) + " --dump");
  EXPECT_EQ(refused, 1) << said;
  EXPECT_NE(said.find("pid " + std::to_string(plain) +
                      " refused the request: no flight recorder "
                      "records in this process"),
            std::string::npos)
      << said;
}

TEST_F(OndemandEndToEnd, TracesTwoProcessesByJobId) {
  const std::string job = std::to_string(100000 + ::getpid());
  const pid_t a = start_target("SLURM_JOB_ID=" + job);
  const pid_t b = start_target("SLURM_JOB_ID=" + job);
  wait_for_clients(2);
  const auto [code, output] = trace("--job-id " + job + " --iterations 5");
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("triggered 2"), std::string::npos) << output;
  for (const pid_t pid : {a, b}) {
    const std::string file = dir_.file("t_" + std::to_string(pid) + ".json");
    EXPECT_NE(output.find(file), std::string::npos) << output;
    EXPECT_TRUE(has(names_in(file), "target::mm")) << file;
  }
}
#endif  // OPSCOPE_ONDEMAND_TARGET

}  // namespace ondemand_cli_test
}  // namespace opscope::cli
