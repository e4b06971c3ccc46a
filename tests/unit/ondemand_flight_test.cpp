// The flight recorder's triggers from outside the program: its opt-in by environment
// (OPSCOPE_FLIGHT_RECORDER and companions), SIGUSR2 with OPSCOPE_SIGUSR2=flight, and the
// on-demand dump (OPSCOPE_FLIGHT_DUMP=true) through the client, with how a capture and the
// recorder share a process. The daemon and the CLI are in ondemand_cli_test.cpp, the real
// dynolog in tests/peers/.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ondemand/client.h"
#include "ondemand/config.h"
#include "ondemand/flight_env.h"
#include "ondemand/ipc.h"
#include "opscope/error.h"
#include "opscope/flight_recorder.h"
#include "opscope/ondemand.h"
#include "opscope/record_function.h"
#include "support/flight_checks.h"
#include "support/test_support.h"

extern char** environ;

namespace opscope::ondemand {
namespace ondemand_flight_test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string unique_name(const std::string& what) {
  static std::atomic<int> n{0};
  return "opscope-test-flight-" + what + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(++n);
}

bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit = 20s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Warnings and information from any thread, one line each, prefixed by their channel.
class Log {
 public:
  Log() {
    previous_ = set_warning_handler([this](std::string_view m) { add("warning: ", m); });
    previous_info_ = set_info_handler([this](std::string_view m) { add("info: ", m); });
  }
  ~Log() {
    set_warning_handler(previous_);
    set_info_handler(previous_info_);
  }
  int count(std::string_view needle) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& l : lines_) n += l.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& l : lines_) s += l + "\n";
    return s;
  }

 private:
  void add(const char* channel, std::string_view m) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(channel + std::string(m));
  }
  std::mutex mu_;
  std::vector<std::string> lines_;
  WarningHandler previous_;
  InfoHandler previous_info_;
};

// Sets environment variables for one scope, and puts back what was there.
class ScopedEnv {
 public:
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  void set(const std::string& name, const char* value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(name.c_str(), value, 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

json read_json(const std::string& path) { return json::parse(testing::read_file(path)); }

bool has_range(const json& trace, const std::string& name) {
  for (const auto& r : testing::dumped_ranges(trace)) {
    if (r.name == name) return true;
  }
  return false;
}

// --- the environment --------------------------------------------------------------------

TEST(OndemandFlightEnv, SecondsMibDirectoryAndCrashAreRead) {
  testing::TempDir dir;
  ScopedEnv env;
  env.set("OPSCOPE_FLIGHT_RECORDER", nullptr);
  env.set("OPSCOPE_FLIGHT_DIR", nullptr);
  env.set("OPSCOPE_FLIGHT_ON_CRASH", nullptr);
  FlightEnv none = flight_options_from_env();
  EXPECT_FALSE(none.options);
  EXPECT_TRUE(none.warnings.empty());

  // Seconds alone: the default ring, the current directory (made absolute), crash dumps on.
  ::setenv("OPSCOPE_FLIGHT_RECORDER", "30", 1);
  FlightEnv plain = flight_options_from_env();
  ASSERT_TRUE(plain.options);
  EXPECT_TRUE(plain.warnings.empty());
  EXPECT_EQ(plain.options->keep_seconds, 30);
  EXPECT_EQ(plain.options->max_bytes, 64ull << 20);
  EXPECT_EQ(plain.options->dump_dir, fs::current_path().lexically_normal().string());
  EXPECT_TRUE(plain.options->dump_on_crash);

  ::setenv("OPSCOPE_FLIGHT_RECORDER", "2.5,8", 1);
  ::setenv("OPSCOPE_FLIGHT_DIR", dir.path().c_str(), 1);
  ::setenv("OPSCOPE_FLIGHT_ON_CRASH", "FALSE", 1);
  FlightEnv all = flight_options_from_env();
  ASSERT_TRUE(all.options);
  EXPECT_EQ(all.options->keep_seconds, 2.5);
  EXPECT_EQ(all.options->max_bytes, 8ull << 20);
  EXPECT_EQ(all.options->dump_dir, dir.path().lexically_normal().string());
  EXPECT_FALSE(all.options->dump_on_crash);
}

TEST(OndemandFlightEnv, AMalformedValueIsNamedAndNothingStarts) {
  testing::TempDir dir;
  ScopedEnv env;
  env.set("OPSCOPE_FLIGHT_RECORDER", nullptr);
  env.set("OPSCOPE_FLIGHT_DIR", dir.path().c_str());
  env.set("OPSCOPE_FLIGHT_ON_CRASH", nullptr);
  for (const char* bad : {"0", "-5", "abc", "30s", "30,", "30,0", "30,x", "30,1.5", "inf", "nan",
                          "+3", "30,99999999", ",64", "1e999"}) {
    ::setenv("OPSCOPE_FLIGHT_RECORDER", bad, 1);
    const FlightEnv e = flight_options_from_env();
    EXPECT_FALSE(e.options) << bad;
    ASSERT_EQ(e.warnings.size(), 1u) << bad;
    EXPECT_NE(e.warnings[0].find(std::string("OPSCOPE_FLIGHT_RECORDER=\"") + bad + "\""),
              std::string::npos)
        << e.warnings[0];
    EXPECT_NE(e.warnings[0].find("seconds[,MiB]"), std::string::npos) << e.warnings[0];
    EXPECT_NE(e.warnings[0].find("no flight recorder records"), std::string::npos);
  }
  ::setenv("OPSCOPE_FLIGHT_RECORDER", "30", 1);
  const std::string missing = dir.file("missing");
  ::setenv("OPSCOPE_FLIGHT_DIR", missing.c_str(), 1);
  FlightEnv no_dir = flight_options_from_env();
  EXPECT_FALSE(no_dir.options);
  ASSERT_EQ(no_dir.warnings.size(), 1u);
  EXPECT_NE(no_dir.warnings[0].find("OPSCOPE_FLIGHT_DIR=\"" + missing + "\""), std::string::npos)
      << no_dir.warnings[0];
  ::setenv("OPSCOPE_FLIGHT_DIR", dir.path().c_str(), 1);
  ::setenv("OPSCOPE_FLIGHT_ON_CRASH", "maybe", 1);
  FlightEnv bad_crash = flight_options_from_env();
  EXPECT_FALSE(bad_crash.options);
  ASSERT_EQ(bad_crash.warnings.size(), 1u);
  EXPECT_NE(bad_crash.warnings[0].find("OPSCOPE_FLIGHT_ON_CRASH=\"maybe\""), std::string::npos);
  EXPECT_NE(bad_crash.warnings[0].find("true, false, 1 or 0"), std::string::npos);
}

TEST(OndemandFlightEnv, Sigusr2FlightIsChosenByEnvironment) {
  ScopedEnv env;
  env.set("OPSCOPE_SIGUSR2", "flight");
  env.set("OPSCOPE_SIGUSR2_DURATION_MS", nullptr);
  Log log;
  EXPECT_TRUE(client_options_from_env().sigusr2_flight_dump);
  EXPECT_EQ(log.all(), "");
  // Both asked for: the dump wins, and the warning names both.
  ::setenv("OPSCOPE_SIGUSR2_DURATION_MS", "500", 1);
  const ClientOptions both = client_options_from_env();
  EXPECT_TRUE(both.sigusr2_flight_dump);
  EXPECT_EQ(both.sigusr2_duration_ms, 0);
  EXPECT_EQ(log.count("OPSCOPE_SIGUSR2=\"flight\" and OPSCOPE_SIGUSR2_DURATION_MS=\"500\""), 1)
      << log.all();
  ::unsetenv("OPSCOPE_SIGUSR2_DURATION_MS");
  ::setenv("OPSCOPE_SIGUSR2", "dump", 1);
  EXPECT_FALSE(client_options_from_env().sigusr2_flight_dump);
  EXPECT_EQ(log.count("ignored OPSCOPE_SIGUSR2=\"dump\": the one value is \"flight\""), 1)
      << log.all();

  ClientOptions o;
  o.sigusr2_flight_dump = true;
  o.sigusr2_duration_ms = 10;
  EXPECT_NE(testing::error_of([&] { enable(o); }).find("both ask for SIGUSR2"), std::string::npos);
  EXPECT_FALSE(is_enabled());
}

// --- OPSCOPE_FLIGHT_DUMP in the config -----------------------------------------------------

TEST(OndemandFlightConfig, TheDumpKeyIsOneRowOfTheKeyTable) {
  testing::TempDir dir;
  const std::string log_file = dir.file("d.json");
  const ParsedConfig p = parse_capture_config(
      "OPSCOPE_FLIGHT_DUMP=true\nACTIVITIES_LOG_FILE=" + log_file + "\nREQUEST_TRACE_ID=9", 42,
      dir.path().string());
  ASSERT_TRUE(p.request) << p.error;
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_EQ(p.request->kind, CaptureKind::kFlightDump);
  EXPECT_EQ(p.request->output_path, dir.file("d_42.json"));  // dynolog's _<pid> rule
  EXPECT_EQ(p.request->trace_id, "9");
  // What the CLI sends for it, and back.
  EXPECT_EQ(format_capture_config(*p.request),
            "ACTIVITIES_LOG_FILE=" + log_file + "\nOPSCOPE_FLIGHT_DUMP=true");
  const ParsedConfig back =
      parse_capture_config(format_capture_config(*p.request), 42, dir.path().string());
  ASSERT_TRUE(back.request);
  EXPECT_EQ(back.request->kind, CaptureKind::kFlightDump);

  // A dump asks for no capture: a duration, iterations or a memory profile beside it is
  // refused; lens keys are ignored with a warning (the recorder's lenses are what it has).
  for (const char* capture :
       {"ACTIVITIES_DURATION_MSECS=100", "ACTIVITIES_ITERATIONS=3", "PROFILE_MEMORY=true"}) {
    const ParsedConfig r = parse_capture_config(
        std::string("OPSCOPE_FLIGHT_DUMP=1\n") + capture + "\nACTIVITIES_LOG_FILE=" + log_file, 42,
        dir.path().string());
    EXPECT_FALSE(r.request) << capture;
    EXPECT_NE(r.error.find("OPSCOPE_FLIGHT_DUMP=\"true\" asks for a dump"), std::string::npos)
        << r.error;
  }
  const ParsedConfig lens = parse_capture_config(
      "OPSCOPE_FLIGHT_DUMP=true\nPROFILE_WITH_STACK=true\nACTIVITIES_LOG_FILE=" + log_file, 42,
      dir.path().string());
  ASSERT_TRUE(lens.request);
  ASSERT_EQ(lens.warnings.size(), 1u);
  EXPECT_NE(lens.warnings[0].find("PROFILE_WITH_STACK is ignored by a flight recorder dump"),
            std::string::npos);
  // The same path rules as a capture's.
  const ParsedConfig outside = parse_capture_config(
      "OPSCOPE_FLIGHT_DUMP=true\nACTIVITIES_LOG_FILE=/var/tmp/x.json", 42, dir.path().string());
  EXPECT_FALSE(outside.request);
  EXPECT_NE(outside.error.find("outside the allowed directory"), std::string::npos);
  // false is no dump: a capture, which then needs its duration.
  const ParsedConfig off = parse_capture_config(
      "OPSCOPE_FLIGHT_DUMP=false\nACTIVITIES_LOG_FILE=" + log_file, 42, dir.path().string());
  EXPECT_FALSE(off.request);
  EXPECT_NE(off.error.find("none of ACTIVITIES_DURATION_MSECS"), std::string::npos);
  const ParsedConfig bad = parse_capture_config(
      "OPSCOPE_FLIGHT_DUMP=yes\nACTIVITIES_LOG_FILE=" + log_file, 42, dir.path().string());
  EXPECT_NE(bad.error.find("OPSCOPE_FLIGHT_DUMP=\"yes\" is not true, false, 1 or 0"),
            std::string::npos)
      << bad.error;
}

// --- the client, in this process --------------------------------------------------------

// The next datagram of `type` from the client, skipping others.
std::optional<Received> expect(const Endpoint& daemon, std::string_view type) {
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < until) {
    auto r = daemon.receive(50ms);
    if (r && r->message && r->message->type == type) return r;
  }
  return std::nullopt;
}

// A client enabled against a fake daemon, writing under a temporary directory.
class OndemandFlightClient : public ::testing::Test {
 protected:
  OndemandFlightClient() {
    ClientOptions o;
    o.daemon_endpoint = name_;
    o.poll_interval = 10ms;
    o.trace_dir = dir_.path().string();
    enable(o);
  }
  ~OndemandFlightClient() override { disable(); }

  // Answers the next poll with `config`, framed as dynolog frames it.
  void deliver(const std::string& config) {
    const auto req = expect(daemon_, "req");
    ASSERT_TRUE(req);
    ASSERT_TRUE(
        daemon_.send(req->sender, "req", "\n    " + config + "\n    REQUEST_TRACE_ID=4242\n"));
  }
  std::string written(const std::string& stem) const {
    return dir_.file(stem + "_" + std::to_string(::getpid()) + ".json");
  }

  testing::TempDir dir_;
  const std::string name_ = unique_name("daemon");
  Endpoint daemon_{name_};
  Log log_;
};

TEST_F(OndemandFlightClient, ADumpRequestWritesWhatTheRingHoldsAndCapturesNothing) {
  FlightRecorder recorder({.keep_seconds = 60, .max_bytes = 1 << 20});
  {
    OPSCOPE_USER_SCOPE("flight::outer");
    OPSCOPE_RECORD_FUNCTION("flight::inner");
  }
  OPSCOPE_USER_SCOPE("flight::still_open");
  deliver("OPSCOPE_FLIGHT_DUMP=true\nACTIVITIES_LOG_FILE=" + dir_.file("d.json"));
  const std::string path = written("d");
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log_.all();
  EXPECT_EQ(client_status().last_trace, path);
  EXPECT_FALSE(client_status().capture_armed);  // no capture took the slot
  EXPECT_EQ(log_.count("info: on-demand: flight recorder dumped to " + path), 1) << log_.all();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // as a capture's trace: its owner's alone

  const json trace = read_json(path);
  const auto ranges = testing::dumped_ranges(trace);
  const auto find = [&](const std::string& name) {
    return *std::find_if(ranges.begin(), ranges.end(),
                         [&](const testing::DumpedRange& r) { return r.name == name; });
  };
  ASSERT_TRUE(has_range(trace, "flight::outer") && has_range(trace, "flight::inner"));
  EXPECT_TRUE(testing::nested_in(find("flight::inner"), find("flight::outer")));
  ASSERT_TRUE(has_range(trace, "flight::still_open"));
  EXPECT_TRUE(find("flight::still_open").open);
  EXPECT_EQ(testing::flight_metadata_of(trace).value("trigger", ""), "on-demand (trace id 4242)");
}

TEST_F(OndemandFlightClient, WithoutARecorderTheDumpIsRefusedAndSaid) {
  ASSERT_FALSE(flight_recorder_running());
  deliver("OPSCOPE_FLIGHT_DUMP=true\nACTIVITIES_LOG_FILE=" + dir_.file("none.json"));
  ASSERT_TRUE(wait_for([&] { return log_.count("refused the flight recorder dump") == 1; }))
      << log_.all();
  EXPECT_EQ(log_.count("no flight recorder records in this process, and OPSCOPE_FLIGHT_DUMP"), 1)
      << log_.all();
  EXPECT_EQ(log_.count("OPSCOPE_FLIGHT_RECORDER=seconds[,MiB]"), 1);
  EXPECT_TRUE(fs::is_empty(dir_.path()));
  EXPECT_EQ(client_status().traces, 0u);
}

TEST_F(OndemandFlightClient, ADumpThroughALinkBelowTheAllowedDirectoryIsRefused) {
  FlightRecorder recorder({.keep_seconds = 60, .max_bytes = 1 << 20});
  // A link to a directory inside the allowed one: the path check allows it, the walk that
  // opens the directory without following links refuses it, as for a capture.
  fs::create_directory(dir_.path() / "real");
  fs::create_directory_symlink(dir_.path() / "real", dir_.path() / "link");
  deliver("OPSCOPE_FLIGHT_DUMP=true\nACTIVITIES_LOG_FILE=" + dir_.file("link/d.json"));
  ASSERT_TRUE(wait_for([&] { return log_.count("refused the flight recorder dump") == 1; }))
      << log_.all();
  EXPECT_EQ(log_.count("is a symbolic link"), 1) << log_.all();
  EXPECT_TRUE(fs::is_empty(dir_.path() / "real"));
}

// A capture and the flight recorder in one process: the capture's window records the
// capture's ranges, the recorder pauses meanwhile, and its dump names the pause. A dump asked
// for while the capture records writes what the ring held when it paused.
TEST_F(OndemandFlightClient, ACapturePausesTheRecorderAndTheDumpsNameThePause) {
  FlightRecorder recorder({.keep_seconds = 60, .max_bytes = 1 << 20});
  { OPSCOPE_USER_SCOPE("flight::before"); }
  // Long enough that it records until disable() stops it, whatever the machine's load.
  deliver("ACTIVITIES_DURATION_MSECS=600000\nACTIVITIES_ENABLED=false\nACTIVITIES_LOG_FILE=" +
          dir_.file("capture.json"));
  ASSERT_TRUE(wait_for([] { return client_status().capture_recording; })) << log_.all();
  { OPSCOPE_USER_SCOPE("flight::during"); }
  deliver("OPSCOPE_FLIGHT_DUMP=true\nACTIVITIES_LOG_FILE=" + dir_.file("mid.json"));
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log_.all();
  EXPECT_TRUE(client_status().capture_recording);  // the dump did not end the capture
  const json mid = read_json(written("mid"));
  EXPECT_TRUE(has_range(mid, "flight::before"));
  EXPECT_FALSE(has_range(mid, "flight::during"));
  const json mid_meta = testing::flight_metadata_of(mid);
  ASSERT_EQ(mid_meta.at("pausedNs").size(), 1u) << mid_meta.dump();
  // Still paused at the dump: the pause runs to the dump's time.
  EXPECT_EQ(mid_meta.at("pausedNs")[0][1], mid_meta.at("spanKeptNs")[1]) << mid_meta.dump();

  disable();  // stops the capture and writes it
  const json capture = read_json(written("capture"));
  EXPECT_TRUE(has_range(capture, "flight::during"));
  EXPECT_FALSE(has_range(capture, "flight::before"));

  { OPSCOPE_USER_SCOPE("flight::after"); }
  const std::string after_path = dir_.file("after.json");
  dump_flight_recorder(after_path, "test");
  const json after = read_json(after_path);
  EXPECT_TRUE(has_range(after, "flight::before"));
  EXPECT_TRUE(has_range(after, "flight::after"));
  EXPECT_FALSE(has_range(after, "flight::during"));
  const json after_meta = testing::flight_metadata_of(after);
  ASSERT_EQ(after_meta.at("pausedNs").size(), 1u) << after_meta.dump();
  EXPECT_LT(after_meta.at("pausedNs")[0][1].get<std::int64_t>(),
            after_meta.at("spanKeptNs")[1].get<std::int64_t>());
}

// --- a real process: the environment opt-in and SIGUSR2 -----------------------------------

// tests/support/ondemand_target.cpp with `env` (and no KINETO_ or OPSCOPE_ variable of this
// process), its stdout and stderr collected by a thread; killed at the end.
class Target {
 public:
  Target(const std::vector<std::string>& env, int steps) {
    std::string command = "exec env";
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string s = *e;
      if (s.starts_with("KINETO_") || s.starts_with("OPSCOPE_")) {
        command += " -u " + s.substr(0, s.find('='));
      }
    }
    for (const std::string& e : env) command += " '" + e + "'";
    command +=
        std::string(" ") + OPSCOPE_ONDEMAND_TARGET + " " + std::to_string(steps) + " 1 linger 2>&1";
    pipe_ = ::popen(command.c_str(), "r");
    if (pipe_ == nullptr) return;
    reader_ = std::thread([this] {
      char line[4096];
      while (std::fgets(line, sizeof line, pipe_) != nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        output_ += line;
        if (pid_ == 0) std::sscanf(line, "ready %d", &pid_);
      }
    });
  }
  ~Target() {
    if (pipe_ == nullptr) return;
    if (const pid_t p = pid(); p > 0) ::kill(p, SIGKILL);
    reader_.join();
    ::pclose(pipe_);
  }
  pid_t pid() {
    std::lock_guard<std::mutex> lock(mu_);
    return pid_;
  }
  std::string output() {
    std::lock_guard<std::mutex> lock(mu_);
    return output_;
  }
  bool says(const std::string& text) {
    return wait_for([&] { return output().find(text) != std::string::npos; });
  }
  bool running() {
    int status = 0;
    return ::waitpid(pid(), &status, WNOHANG) == 0;
  }

 private:
  FILE* pipe_ = nullptr;
  std::thread reader_;
  std::mutex mu_;
  std::string output_;
  int pid_ = 0;
};

TEST(OndemandFlightProcess, Sigusr2DumpsTheLastRangesOfAProcessOptedInByEnvironment) {
  testing::TempDir dir;
  // No daemon answers: SIGUSR2 needs none.
  Target target({"KINETO_USE_DAEMON=1", "OPSCOPE_DAEMON_ENDPOINT=" + unique_name("nobody"),
                 "OPSCOPE_SIGUSR2=flight", "OPSCOPE_FLIGHT_RECORDER=60,4",
                 "OPSCOPE_FLIGHT_DIR=" + dir.path().string()},
                50);
  ASSERT_TRUE(target.says("done\n")) << target.output();
  const std::string pid = std::to_string(target.pid());
  EXPECT_NE(target.output().find("flight recorder: recording the last 60 s in 4 MiB"),
            std::string::npos)
      << target.output();
  // OPSCOPE_FLIGHT_ON_CRASH is on by default: the crash file waits, opened, in the dump dir.
  EXPECT_TRUE(fs::exists(dir.file("opscope_flight_" + pid + "_crash.raw.part")));

  ASSERT_EQ(::kill(target.pid(), SIGUSR2), 0);
  const std::string first = dir.file("opscope_flight_" + pid + "_sigusr2_1.json");
  ASSERT_TRUE(wait_for([&] { return fs::exists(first); })) << target.output();
  const json trace = read_json(first);
  testing::expect_last_steps_of_target(trace, 50);
  EXPECT_EQ(testing::flight_metadata_of(trace).value("trigger", ""), "SIGUSR2");
  // The process goes on, and the next signal writes the next file.
  ASSERT_EQ(::kill(target.pid(), SIGUSR2), 0);
  ASSERT_TRUE(wait_for([&] {
    return fs::exists(dir.file("opscope_flight_" + pid + "_sigusr2_2.json"));
  })) << target.output();
  EXPECT_TRUE(target.running());
}

TEST(OndemandFlightProcess, AMalformedValueWarnsAndSigusr2ThenSaysNothingRecords) {
  testing::TempDir dir;
  Target target({"KINETO_USE_DAEMON=1", "OPSCOPE_DAEMON_ENDPOINT=" + unique_name("nobody"),
                 "OPSCOPE_SIGUSR2=flight", "OPSCOPE_FLIGHT_RECORDER=60s",
                 "OPSCOPE_FLIGHT_DIR=" + dir.path().string()},
                5);
  ASSERT_TRUE(target.says("done\n")) << target.output();
  EXPECT_NE(target.output().find("ignored OPSCOPE_FLIGHT_RECORDER=\"60s\": the form is "
                                 "seconds[,MiB]"),
            std::string::npos)
      << target.output();
  EXPECT_TRUE(fs::is_empty(dir.path()));  // no recorder, so no crash file either
  ASSERT_EQ(::kill(target.pid(), SIGUSR2), 0);
  ASSERT_TRUE(target.says("SIGUSR2: no flight recorder records in this process"))
      << target.output();
  EXPECT_TRUE(target.running());
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(OndemandFlightProcess, WithoutTheClientOpscopeSigusr2IsSaidToDoNothing) {
  testing::TempDir dir;
  Target target({"OPSCOPE_SIGUSR2=flight", "OPSCOPE_FLIGHT_RECORDER=5", "OPSCOPE_FLIGHT_ON_CRASH=0",
                 "OPSCOPE_FLIGHT_DIR=" + dir.path().string()},
                5);
  ASSERT_TRUE(target.says("done\n")) << target.output();
  EXPECT_NE(target.output().find("OPSCOPE_SIGUSR2=\"flight\" is read by the on-demand client, "
                                 "which is not enabled"),
            std::string::npos)
      << target.output();
  EXPECT_NE(target.output().find("flight recorder: recording the last 5 s in 64 MiB"),
            std::string::npos)
      << target.output();
  EXPECT_TRUE(fs::is_empty(dir.path()));  // OPSCOPE_FLIGHT_ON_CRASH=0: no crash file
}

}  // namespace ondemand_flight_test
}  // namespace opscope::ondemand
