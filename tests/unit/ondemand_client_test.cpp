// The on-demand client against a fake daemon made of an ondemand::Endpoint: registration and
// polls, duration and iteration captures, refusals, SIGUSR2, and the environment opt-in of a
// real second process (tests/support/ondemand_target.cpp).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "ondemand/client.h"
#include "ondemand/config.h"
#include "ondemand/ipc.h"
#include "opscope/ondemand.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "support/test_support.h"

extern char** environ;

namespace opscope::ondemand {
namespace ondemand_client_test {

using namespace std::chrono_literals;

std::string daemon_name() {
  static std::atomic<int> n{0};
  return "opscope-test-fake-daemon-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

// Warnings and information from any thread (the client's included), safely; each line
// starts with its channel ("warning: ", "info: ").
class Log {
 public:
  Log() {
    previous_ = set_warning_handler([this](std::string_view m) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back("warning: " + std::string(m));
    });
    previous_info_ = set_info_handler([this](std::string_view m) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back("info: " + std::string(m));
    });
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
  std::mutex mu_;
  std::vector<std::string> lines_;
  WarningHandler previous_;
  InfoHandler previous_info_;
};

bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// The next datagram of `type`, skipping others.
std::optional<Received> expect(const Endpoint& daemon, std::string_view type,
                               std::chrono::milliseconds limit = 10s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    auto r = daemon.receive(50ms);
    if (r && r->message && r->message->type == type) return r;
  }
  return std::nullopt;
}

// Answers the next poll with `config` framed as dynolog frames it.
void deliver(const Endpoint& daemon, const std::string& config) {
  const auto req = expect(daemon, "req");
  ASSERT_TRUE(req);
  ASSERT_TRUE(daemon.send(req->sender, "req", "\n    " + config + "\n    REQUEST_TRACE_ID=4242\n"));
}

std::set<std::string> event_names(const std::string& path) {
  const auto j = nlohmann::json::parse(testing::read_file(path));
  std::set<std::string> names;
  for (const auto& e : j.at("traceEvents")) {
    if (e.contains("name") && e.value("ph", "") == "X")
      names.insert(e.at("name").get<std::string>());
  }
  return names;
}

ClientOptions options_for(const std::string& daemon, const testing::TempDir& dir) {
  ClientOptions o;
  o.daemon_endpoint = daemon;
  o.poll_interval = 10ms;
  o.trace_dir = dir.path().string();
  return o;
}

struct Disable {
  ~Disable() { disable(); }
};

// A client enabled against a fake daemon endpoint, writing under a temporary directory, with
// its warnings captured; disabled again at the end of the test.
class OndemandRunningClient : public ::testing::Test {
 protected:
  OndemandRunningClient() { enable(options_for(name, dir)); }

  testing::TempDir dir;
  const std::string name = daemon_name();
  Endpoint daemon{name};
  Log log;
  Disable guard;  // declared last: disables the client before the rest goes
};

TEST(OndemandClient, RegistersAndPollsAsLibkineto) {
  testing::TempDir dir;
  const std::string name = daemon_name();
  Endpoint daemon(name);
  ClientOptions o = options_for(name, dir);
  o.job_id = 77;
  enable(o);
  Disable guard;
  EXPECT_TRUE(is_enabled());
  EXPECT_THROW(enable(o), Error);

  const auto ctxt = expect(daemon, "ctxt");
  ASSERT_TRUE(ctxt);
  std::string error;
  const auto c = decode_context(ctxt->message->payload, &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->pid, ::getpid());
  EXPECT_EQ(c->jobid, 77);
  EXPECT_EQ(c->gpu, -1);
  EXPECT_EQ(ctxt->sender, client_status().endpoint);
  const std::int32_t zero = 0;
  ASSERT_TRUE(
      daemon.send(ctxt->sender, "ctxt", std::string(reinterpret_cast<const char*>(&zero), 4)));

  const auto req = expect(daemon, "req");
  ASSERT_TRUE(req);
  const auto r = decode_request(req->message->payload, &error);
  ASSERT_TRUE(r) << error;
  // libkineto's poll asks for activities: dynolog hands a trace request to no other.
  EXPECT_EQ(r->type, kConfigTypeActivities);
  EXPECT_EQ(r->jobid, 77);
  ASSERT_FALSE(r->pids.empty());
  EXPECT_EQ(r->pids.front(), ::getpid());
  EXPECT_EQ(r->pids, pid_and_ancestors());
  EXPECT_TRUE(wait_for([] { return client_status().registered; }));
  // The client thread is named (Linux keeps 15 characters).
  bool named = false;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    named = named || testing::read_file((task.path() / "comm").string()) == "opscope-ondmand\n";
  }
  EXPECT_TRUE(named);
  // Registered: later polls are "req" only.
  for (int i = 0; i < 3; ++i) {
    const auto next = daemon.receive(1s);
    ASSERT_TRUE(next && next->message);
    EXPECT_EQ(next->message->type, "req");
  }
  disable();
  EXPECT_FALSE(is_enabled());
  EXPECT_FALSE(client_status().enabled);
}

TEST_F(OndemandRunningClient, DurationCaptureWritesOnlyTheWindow) {
  { OPSCOPE_USER_SCOPE("outside_before"); }
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=1000\n    ACTIVITIES_LOG_FILE=" + dir.file("t.json"));
  ASSERT_TRUE(wait_for([] { return client_status().capture_recording; })) << log.all();
  {
    OPSCOPE_USER_SCOPE("inside_window");
    OPSCOPE_RECORD_FUNCTION("inside_child");
  }
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log.all();
  const std::string path = dir.file("t_" + std::to_string(::getpid()) + ".json");
  EXPECT_EQ(client_status().last_trace, path);
  EXPECT_EQ(log.count("trace written to " + path), 1) << log.all();
  // A capture that went as asked is information, never a warning.
  EXPECT_EQ(log.count("info: on-demand: trace written to " + path), 1) << log.all();
  EXPECT_EQ(log.count("warning: on-demand: trace written"), 0) << log.all();
  const auto names = event_names(path);
  EXPECT_TRUE(names.count("inside_window"));
  EXPECT_TRUE(names.count("inside_child"));
  EXPECT_FALSE(names.count("outside_before"));
  EXPECT_FALSE(client_status().capture_armed);
  // The trace id reaches the trace's metadata.
  EXPECT_NE(testing::read_file(path).find("4242"), std::string::npos);
}

// A request's activities reach the backends: GPU activity unless ACTIVITIES_ENABLED=false, and
// what this process cannot record is named in the trace.
TEST_F(OndemandRunningClient, GpuActivityIsAskedForUnlessTheRequestLeavesItOut) {
  const std::string why = activity_unavailable_reason(ActivityType::kCUDA);
  if (why.empty()) GTEST_SKIP() << "this machine records CUDA activity";
  const std::string pid = std::to_string(::getpid());
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=200\n    ACTIVITIES_LOG_FILE=" + dir.file("gpu.json"));
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log.all();
  const auto gpu = nlohmann::json::parse(testing::read_file(dir.file("gpu_" + pid + ".json")));
  EXPECT_EQ(gpu.at("opscope_not_recorded"), nlohmann::json::array({"cuda"}));
  EXPECT_EQ(log.count("accepted but not recorded: cuda (" + why + ")"), 1) << log.all();

  deliver(daemon, "ACTIVITIES_DURATION_MSECS=200\n    ACTIVITIES_ENABLED=false\n"
                  "    ACTIVITIES_LOG_FILE=" + dir.file("cpu.json"));
  ASSERT_TRUE(wait_for([] { return client_status().traces == 2; })) << log.all();
  const auto cpu = nlohmann::json::parse(testing::read_file(dir.file("cpu_" + pid + ".json")));
  EXPECT_FALSE(cpu.contains("opscope_not_recorded"));
  EXPECT_EQ(cpu.at("opscope").at("not_recorded"), nlohmann::json::array());
  EXPECT_EQ(log.count("accepted but not recorded"), 1) << log.all();
}

// The output directory is opened when the request is accepted and the file created in it:
// swapping the directory for a link to somewhere else during the capture changes nothing, and
// the trace is its owner's alone (0600).
TEST_F(OndemandRunningClient, TheTraceLandsWhereTheRequestWasAcceptedAndIsPrivate) {
  namespace fs = std::filesystem;
  testing::TempDir outside;  // not under the allowed directory
  fs::create_directory(dir.file("sub"));
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=400\nACTIVITIES_LOG_FILE=" + dir.file("sub/t.json"));
  ASSERT_TRUE(wait_for([] { return client_status().capture_recording; })) << log.all();
  fs::rename(dir.file("sub"), dir.file("accepted"));
  fs::create_directory_symlink(outside.path(), dir.file("sub"));
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log.all();
  const std::string name = "t_" + std::to_string(::getpid()) + ".json";
  EXPECT_TRUE(fs::exists(dir.file("accepted/" + name))) << log.all();
  EXPECT_TRUE(fs::is_empty(outside.path())) << "the swapped-in link redirected the trace";
  struct stat st;
  ASSERT_EQ(::stat(dir.file("accepted/" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(OndemandRunningClient, LinksAndLoopsInThePathAreRefused) {
  namespace fs = std::filesystem;
  testing::TempDir outside;
  fs::create_directory_symlink(outside.path(), dir.file("link"));
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=10\nACTIVITIES_LOG_FILE=" + dir.file("link/t.json"));
  ASSERT_TRUE(wait_for([&] { return log.count("config refused") == 1; })) << log.all();
  fs::create_directory_symlink(dir.file("loop-b"), dir.file("loop-a"));
  fs::create_directory_symlink(dir.file("loop-a"), dir.file("loop-b"));
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=10\nACTIVITIES_LOG_FILE=" + dir.file("loop-a/t.json"));
  ASSERT_TRUE(wait_for([&] { return log.count("config refused") == 2; })) << log.all();
  EXPECT_NE(log.all().find("cannot be resolved"), std::string::npos) << log.all();
  EXPECT_EQ(client_status().traces, 0u);
  EXPECT_TRUE(fs::is_empty(outside.path()));
  // And a link made into the allowed directory itself, pointing inside it, is not followed
  // either: the path must be the directory's own.
  fs::create_directory(dir.file("real"));
  fs::create_directory_symlink(dir.file("real"), dir.file("alias"));
  std::string why;
  EXPECT_FALSE(open_output_directory(dir.file("alias/t.json"), dir.path().string(), &why));
  EXPECT_NE(why.find("symbolic link"), std::string::npos) << why;
  EXPECT_TRUE(open_output_directory(dir.file("real/t.json"), dir.path().string(), &why)) << why;
}

TEST_F(OndemandRunningClient, SynchronizedStartWaitsForTheWallClock) {
  const auto start = std::chrono::system_clock::now() + 800ms;
  const auto start_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(start.time_since_epoch()).count();
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=50\nPROFILE_START_TIME=" + std::to_string(start_ms) +
                      "\nACTIVITIES_LOG_FILE=" + dir.file("sync.json"));
  ASSERT_TRUE(wait_for([] { return client_status().capture_armed; }));
  // A second request while one is pending is dropped, with a reason.
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=50\nACTIVITIES_LOG_FILE=" + dir.file("second.json"));
  ASSERT_TRUE(wait_for([] { return client_status().capture_recording; })) << log.all();
  // PROFILE_START_TIME is in whole milliseconds: the start asked for is `start` cut to them.
  EXPECT_GE(std::chrono::system_clock::now(),
            std::chrono::system_clock::time_point(std::chrono::milliseconds(start_ms)));
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log.all();
  EXPECT_TRUE(wait_for([&] { return log.count("dropped a request") == 1; })) << log.all();
  EXPECT_FALSE(std::filesystem::exists(dir.file("second_" + std::to_string(::getpid()) + ".json")));
}

TEST_F(OndemandRunningClient, IterationCaptureCountsSteps) {
  const std::int64_t from = step_count() + 3;
  deliver(daemon, "ACTIVITIES_ITERATIONS=2\nPROFILE_START_ITERATION=" + std::to_string(from) +
                      "\nACTIVITIES_LOG_FILE=" + dir.file("it.json"));
  ASSERT_TRUE(wait_for([] { return client_status().capture_armed; })) << log.all();
  EXPECT_FALSE(client_status().capture_recording);
  for (int i = 0; i < 8; ++i) {
    RecordFunction r("iter_" + std::to_string(step_count()), RecordScope::kUserScope);
    r.end();
    step();
  }
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log.all();
  const auto names = event_names(dir.file("it_" + std::to_string(::getpid()) + ".json"));
  EXPECT_FALSE(names.count("iter_" + std::to_string(from - 1)));
  EXPECT_TRUE(names.count("iter_" + std::to_string(from)));
  EXPECT_TRUE(names.count("iter_" + std::to_string(from + 1)));
  EXPECT_FALSE(names.count("iter_" + std::to_string(from + 2)));
}

TEST_F(OndemandRunningClient, IterationStartRoundsUpAndProfilerStepCounts) {
  // Profiler::step() counts as an on-demand step (it calls the profiler layer's step hook).
  {
    Profiler app;
    app.start();
    const std::int64_t before = step_count();
    app.step();
    app.step();
    app.stop();
    EXPECT_EQ(step_count(), before + 2);
  }
  const std::int64_t now = step_count();
  deliver(daemon,
          "ACTIVITIES_ITERATIONS=1\nPROFILE_START_ITERATION_ROUNDUP=5\nACTIVITIES_LOG_FILE=" +
              dir.file("round.json"));
  ASSERT_TRUE(wait_for([] { return client_status().capture_armed; })) << log.all();
  const std::int64_t expected = first_capture_step(0, 5, now + 1);
  EXPECT_EQ(expected % 5, 0);
  while (step_count() < expected + 3) {
    RecordFunction r("round_" + std::to_string(step_count()), RecordScope::kUserScope);
    r.end();
    step();
  }
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log.all();
  const auto names = event_names(dir.file("round_" + std::to_string(::getpid()) + ".json"));
  std::set<std::string> rounds;
  for (const auto& n : names) {
    if (n.starts_with("round_")) rounds.insert(n);
  }
  EXPECT_EQ(rounds, std::set<std::string>{"round_" + std::to_string(expected)});
}

TEST_F(OndemandRunningClient, InvalidConfigIsDroppedWithItsReason) {
  deliver(daemon, "FOO=1\nACTIVITIES_DURATION_MSECS=abc");
  ASSERT_TRUE(wait_for([&] { return log.count("ACTIVITIES_DURATION_MSECS=\"abc\"") == 1; }))
      << log.all();
  EXPECT_EQ(log.count("unknown key FOO=\"1\""), 1) << log.all();
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=10\nACTIVITIES_LOG_FILE=/etc/t.json");
  ASSERT_TRUE(wait_for([&] { return log.count("outside the allowed directory") == 1; }))
      << log.all();
  EXPECT_FALSE(client_status().capture_armed);
  EXPECT_EQ(client_status().configs, 2u);
  EXPECT_FALSE(std::filesystem::exists("/etc/t_" + std::to_string(::getpid()) + ".json"));
}

TEST_F(OndemandRunningClient, RefusedWhileTheApplicationProfiles) {
  Profiler app;
  app.start();
  deliver(daemon, "ACTIVITIES_DURATION_MSECS=20\nACTIVITIES_LOG_FILE=" + dir.file("busy.json"));
  ASSERT_TRUE(wait_for([&] { return log.count("busy: refused the capture") == 1; })) << log.all();
  // What went wrong still warns.
  EXPECT_EQ(log.count("warning: on-demand: busy: refused the capture"), 1) << log.all();
  app.stop();
  EXPECT_FALSE(client_status().capture_armed);
  EXPECT_EQ(client_status().traces, 0u);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// A valid config, as a daemon would frame it, sent 3 times to the client from `address` by
// another user.
int send_as_another_user(const std::string& address, const std::string& client_endpoint,
                         const std::string& config) {
  return testing::send_datagram_as_another_user(
      address, std::string("\0", 1) + client_endpoint + std::string("\0", 1),
      encode("req", "\n    " + config + "\n    REQUEST_TRACE_ID=666\n"), 3);
}

// Another local user can neither pose as the daemon under a similar name ("\0dynolog\0\0" is
// another address than "\0dynolog\0") nor take the daemon's own name while no daemon runs:
// the client believes the kernel's credentials and the exact address, not names.
TEST(OndemandClient, AnotherUserCannotTriggerACapture) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to send as a throwaway user";
  testing::TempDir dir;
  const std::string name = daemon_name();  // no daemon is bound to it: the name is free
  Log log;
  enable(options_for(name, dir));
  Disable guard;
  ASSERT_FALSE(client_status().endpoint.empty());
  const std::string config =
      "ACTIVITIES_DURATION_MSECS=20\nACTIVITIES_LOG_FILE=" + dir.file("stolen.json");
  const std::string similar = std::string("\0", 1) + name + std::string("\0\0", 2);
  ASSERT_EQ(send_as_another_user(similar, client_status().endpoint, config), 0);
  const std::string exact = std::string("\0", 1) + name + std::string("\0", 1);
  ASSERT_EQ(send_as_another_user(exact, client_status().endpoint, config), 0);
  ASSERT_TRUE(wait_for([&] { return log.count("ignored a datagram") >= 1; })) << log.all();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(client_status().configs, 0u) << log.all();
  EXPECT_FALSE(client_status().capture_armed);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  // Six datagrams, one line: another user cannot flood the process's stderr either.
  EXPECT_EQ(log.count("ignored a datagram"), 1) << log.all();
}

TEST(OndemandClient, AbsentDaemonWarnsOnceAndSigusr2Captures) {
  testing::TempDir dir;
  Log log;
  ClientOptions o = options_for(daemon_name() + "-nobody", dir);
  o.sigusr2_duration_ms = 500;
  enable(o);
  Disable guard;
  // Polls fail: one warning, however many polls.
  ASSERT_TRUE(wait_for([&] { return log.count("is the daemon running") == 1; })) << log.all();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(log.count("is the daemon running"), 1) << log.all();
  EXPECT_EQ(client_status().polls, 0u);

  ASSERT_EQ(::raise(SIGUSR2), 0);
  ASSERT_TRUE(wait_for([] { return client_status().capture_recording; })) << log.all();
  { OPSCOPE_USER_SCOPE("after_signal"); }
  ASSERT_TRUE(wait_for([] { return client_status().traces == 1; })) << log.all();
  const std::string path = sigusr2_trace_path(dir.path().string(), ::getpid());
  EXPECT_EQ(client_status().last_trace, path);
  EXPECT_TRUE(event_names(path).count("after_signal"));
  disable();
  // The previous disposition is back: SIGUSR2 ignored now instead of killing the test.
  struct sigaction sa {};
  ::sigaction(SIGUSR2, nullptr, &sa);
  EXPECT_EQ(sa.sa_handler, SIG_DFL);
}

TEST(OndemandClient, DisableDropsAPendingCapture) {
  testing::TempDir dir;
  const std::string name = daemon_name();
  Endpoint daemon(name);
  Log log;
  enable(options_for(name, dir));
  deliver(daemon, "ACTIVITIES_ITERATIONS=5\nPROFILE_START_ITERATION=" +
                      std::to_string(step_count() + 1000) +
                      "\nACTIVITIES_LOG_FILE=" + dir.file("p.json"));
  ASSERT_TRUE(wait_for([] { return client_status().capture_armed; })) << log.all();
  disable();
  EXPECT_EQ(log.count("dropped the pending capture"), 1) << log.all();
  step();  // no client: the fast path only
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(OndemandClient, InvalidOptionsThrow) {
  ClientOptions o;
  o.poll_interval = 0ms;
  EXPECT_NE(testing::error_of([&] { enable(o); }).find("poll_interval is 0 ms"), std::string::npos);
  o = {};
  o.daemon_endpoint = "";
  EXPECT_THROW(enable(o), Error);
  o = {};
  o.sigusr2_duration_ms = -1;
  EXPECT_THROW(enable(o), Error);
  EXPECT_FALSE(is_enabled());
}

TEST(OndemandClient, EnvironmentHelpers) {
  EXPECT_EQ(parse_init_delay_s(nullptr), std::nullopt);
  EXPECT_EQ(parse_init_delay_s("abc"), std::nullopt);
  EXPECT_EQ(parse_init_delay_s("-3"), std::nullopt);
  EXPECT_EQ(parse_init_delay_s("5"), 5);
  EXPECT_EQ(parse_init_delay_s("0"), 0);
  EXPECT_EQ(sigusr2_trace_path("/tmp/", 12), "/tmp/opscope_sigusr2_12.json");

  ::unsetenv("KINETO_USE_DAEMON");
  ::unsetenv("OPSCOPE_USE_DAEMON");
  EXPECT_FALSE(autostart_requested());
  ::setenv("OPSCOPE_USE_DAEMON", "0", 1);
  EXPECT_FALSE(autostart_requested());
  ::setenv("KINETO_USE_DAEMON", "1", 1);
  EXPECT_TRUE(autostart_requested());
  ::unsetenv("KINETO_USE_DAEMON");
  ::unsetenv("OPSCOPE_USE_DAEMON");

  Log log;
  ::setenv("OPSCOPE_DAEMON_ENDPOINT", "mydaemon", 1);
  ::setenv("OPSCOPE_DAEMON_POLL_MS", "250", 1);
  ::setenv("SLURM_JOB_ID", "991", 1);
  ::setenv("OPSCOPE_SIGUSR2_DURATION_MS", "soon", 1);
  const ClientOptions o = client_options_from_env();
  EXPECT_EQ(o.daemon_endpoint, "mydaemon");
  EXPECT_EQ(o.poll_interval, 250ms);
  EXPECT_EQ(o.job_id, 991);
  EXPECT_EQ(o.sigusr2_duration_ms, 0);
  EXPECT_EQ(log.count("OPSCOPE_SIGUSR2_DURATION_MS=\"soon\""), 1) << log.all();
  for (const char* v : {"OPSCOPE_DAEMON_ENDPOINT", "OPSCOPE_DAEMON_POLL_MS", "SLURM_JOB_ID",
                        "OPSCOPE_SIGUSR2_DURATION_MS"}) {
    ::unsetenv(v);
  }
  const ClientOptions d = client_options_from_env();
  EXPECT_EQ(d.daemon_endpoint, "dynolog");
  EXPECT_EQ(d.poll_interval, 1000ms);
  EXPECT_EQ(d.job_id, 0);
}

// A real process opting in by environment only: it registers, polls, and writes the trace.
class Target {
 public:
  Target(const std::vector<std::string>& env, const char* steps, const char* sleep_ms) {
    std::vector<std::string> storage = env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string s = *e;
      if (s.starts_with("KINETO_") || s.starts_with("OPSCOPE_")) continue;
      storage.push_back(s);
    }
    std::vector<char*> envp;
    for (auto& s : storage) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string path = OPSCOPE_ONDEMAND_TARGET;
    std::string a1 = steps, a2 = sleep_ms;
    char* argv[] = {path.data(), a1.data(), a2.data(), nullptr};
    spawned_ = ::posix_spawn(&pid_, path.c_str(), nullptr, nullptr, argv, envp.data()) == 0;
  }
  ~Target() {
    if (!spawned_) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  bool spawned() const { return spawned_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool spawned_ = false;
};

TEST(OndemandClient, EnvironmentOptInOfARealProcess) {
  testing::TempDir dir;
  const std::string name = daemon_name();
  Endpoint daemon(name);
  Target target({"KINETO_USE_DAEMON=1", "OPSCOPE_DAEMON_ENDPOINT=" + name,
                 "OPSCOPE_DAEMON_POLL_MS=20", "OPSCOPE_ONDEMAND_TRACE_DIR=" + dir.path().string()},
                "2000", "5");
  ASSERT_TRUE(target.spawned());
  const auto ctxt = expect(daemon, "ctxt");
  ASSERT_TRUE(ctxt);
  std::string error;
  const auto c = decode_context(ctxt->message->payload, &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->pid, target.pid());
  const auto req = expect(daemon, "req");
  ASSERT_TRUE(req);
  const auto r = decode_request(req->message->payload, &error);
  ASSERT_TRUE(r) << error;
  ASSERT_GE(r->pids.size(), 2u);
  EXPECT_EQ(r->pids[0], target.pid());
  EXPECT_EQ(r->pids[1], ::getpid());  // its parent: this test
  ASSERT_TRUE(daemon.send(req->sender, "req",
                          "\n    ACTIVITIES_ITERATIONS=3\nACTIVITIES_LOG_FILE=" +
                              dir.file("target.json") + "\n    REQUEST_TRACE_ID=7\n"));
  const std::string path = dir.file("target_" + std::to_string(target.pid()) + ".json");
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(path); }, 20s));
  std::set<std::string> steps;
  for (const auto& n : event_names(path)) {
    if (n.starts_with("step_")) steps.insert(n);
  }
  EXPECT_EQ(steps.size(), 3u);
  EXPECT_TRUE(event_names(path).count("target::mm"));
}

TEST(OndemandClient, InitDelayDefersRegistration) {
  const std::string name = daemon_name();
  Endpoint daemon(name);
  const auto spawned_at = std::chrono::steady_clock::now();
  Target target({"OPSCOPE_USE_DAEMON=1", "KINETO_DAEMON_INIT_DELAY_S=1",
                 "OPSCOPE_DAEMON_ENDPOINT=" + name, "OPSCOPE_DAEMON_POLL_MS=10"},
                "1000", "5");
  ASSERT_TRUE(target.spawned());
  const auto ctxt = expect(daemon, "ctxt", 15s);
  ASSERT_TRUE(ctxt);
  EXPECT_GE(std::chrono::steady_clock::now() - spawned_at, 1s);
}

TEST(OndemandClient, NoOptInNoClient) {
  const std::string name = daemon_name();
  Endpoint daemon(name);
  Target target({"OPSCOPE_DAEMON_ENDPOINT=" + name, "OPSCOPE_DAEMON_POLL_MS=10"}, "40", "5");
  ASSERT_TRUE(target.spawned());
  EXPECT_FALSE(daemon.receive(400ms));
}

}  // namespace ondemand_client_test
}  // namespace opscope::ondemand
