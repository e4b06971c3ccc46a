// The on-demand daemon: the client registry (no sockets, fake clock and uids) and the
// transport (a Daemon on a private endpoint and an ephemeral port, fake clients made of
// ondemand::Endpoint).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "daemon/daemon.h"
#include "daemon/request_handlers.h"
#include "daemon/requests.h"
#include "daemon/tcp_client.h"
#include "json/json_reader.h"
#include "support/test_support.h"

namespace opscope::ondemand {
namespace ondemand_daemon_test {

using namespace std::chrono_literals;
using Clock = ClientRegistry::Clock;

std::string unique_name(const std::string& what) {
  static int counter = 0;
  return "opscope-test-daemon-" + what + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(++counter);
}

// --- the registry --------------------------------------------------------------------------------

class OndemandRegistry : public ::testing::Test {
 protected:
  // A client that registered and polled once: pid, then its ancestors.
  void poll(const std::string& name, std::vector<std::int32_t> pids, std::int64_t job = 0,
            uid_t uid = 1000) {
    std::string error;
    ASSERT_TRUE(registry.on_message(name, {"req", encode_request(kConfigTypeActivities, job, pids)},
                                    uid, now, &error))
        << error;
  }
  std::string poll_config(const std::string& name, std::vector<std::int32_t> pids,
                          std::int64_t job = 0, uid_t uid = 1000) {
    std::string error;
    const auto reply = registry.on_message(
        name, {"req", encode_request(kConfigTypeActivities, job, pids)}, uid, now, &error);
    EXPECT_TRUE(reply) << error;
    if (!reply) return "";
    EXPECT_EQ(reply->type, "req");
    return reply->payload;
  }
  TraceResult trace(std::vector<std::int32_t> pids, std::int64_t job = 0,
                    std::int64_t limit = kDefaultProcessLimit, uid_t uid = 1000) {
    TraceRequest r;
    r.config = "ACTIVITIES_DURATION_MSECS=100";
    r.pids = std::move(pids);
    r.job_id = job;
    r.process_limit = limit;
    return registry.request_trace(r, uid, now);
  }

  ClientRegistry registry{60s};
  Clock::time_point now = Clock::now();
};

TEST_F(OndemandRegistry, ContextIsAnsweredWithZeroButOnlyAPollMakesAMatch) {
  std::string error;
  const auto reply =
      registry.on_message("c1", {"ctxt", encode_context({0, 300, 0})}, uid_t{1000}, now, &error);
  ASSERT_TRUE(reply) << error;
  EXPECT_EQ(reply->type, "ctxt");
  // libkineto reads the int32; opscope's client also sees the mark that says reports are taken.
  ASSERT_EQ(reply->payload.size(), 4u + kOpscopeDaemonMark.size());
  std::int32_t v = -1;
  std::memcpy(&v, reply->payload.data(), 4);
  EXPECT_EQ(v, 0);
  EXPECT_EQ(reply->payload.substr(4), kOpscopeDaemonMark);

  TraceResult r = trace({300});
  EXPECT_TRUE(r.matched.empty());
  ASSERT_FALSE(r.reasons.empty());
  EXPECT_NE(r.reasons[0].find("no process is registered"), std::string::npos) << r.reasons[0];

  poll("c1", {300, 200, 100});
  r = trace({300});
  EXPECT_EQ(r.matched, std::vector<std::int32_t>{300});
  EXPECT_EQ(r.triggered, std::vector<std::int32_t>{300});
  EXPECT_TRUE(r.reasons.empty());
}

TEST_F(OndemandRegistry, MatchesByAncestorPid) {
  poll("w1", {301, 200, 100});
  poll("w2", {302, 200, 100});
  poll("other", {400, 100});
  const TraceResult r = trace({200});  // the launcher of w1 and w2
  EXPECT_EQ(r.matched, (std::vector<std::int32_t>{301, 302}));
  EXPECT_EQ(r.triggered, (std::vector<std::int32_t>{301, 302}));
}

TEST_F(OndemandRegistry, MatchesByJobIdWhenNoPidsAreGiven) {
  poll("a", {11}, 7);
  poll("b", {12}, 7);
  poll("c", {13}, 8);
  EXPECT_EQ(trace({}, 7).triggered, (std::vector<std::int32_t>{11, 12}));
  EXPECT_EQ(trace({0}, 8).triggered, (std::vector<std::int32_t>{13}));
  // job 0: every process of this user, whatever its job (all three are busy by now)
  const TraceResult all = trace({0}, 0);
  EXPECT_EQ(all.matched, (std::vector<std::int32_t>{11, 12, 13}));
  EXPECT_EQ(all.busy, 3);
  // a job id with pids narrows the pids to that job
  const TraceResult narrowed = trace({13}, 7);
  EXPECT_TRUE(narrowed.matched.empty());
  ASSERT_FALSE(narrowed.reasons.empty());
  EXPECT_NE(narrowed.reasons.back().find("job id other than 7"), std::string::npos);
  const TraceResult none = trace({}, 99);
  ASSERT_FALSE(none.reasons.empty());
  EXPECT_NE(none.reasons[0].find("no registered process has job id 99"), std::string::npos)
      << none.reasons[0];
}

TEST_F(OndemandRegistry, ProcessLimitCapsTheTriggeredOnes) {
  for (int i = 0; i < 5; ++i) poll("p" + std::to_string(i), {50 + i, 10});
  const TraceResult r = trace({10}, 0, 2);
  EXPECT_EQ(r.matched.size(), 5u);
  EXPECT_EQ(r.triggered.size(), 2u);
  EXPECT_EQ(r.busy, 0);
}

TEST_F(OndemandRegistry, AnUndeliveredConfigMakesTheClientBusy) {
  poll("c", {70});
  EXPECT_EQ(trace({70}).triggered.size(), 1u);
  const TraceResult again = trace({70});
  EXPECT_TRUE(again.triggered.empty());
  EXPECT_EQ(again.busy, 1);
  EXPECT_EQ(again.matched, std::vector<std::int32_t>{70});
  ASSERT_FALSE(again.reasons.empty());
  EXPECT_NE(again.reasons.back().find("not yet fetched"), std::string::npos);
  // once delivered, it can be triggered again
  EXPECT_FALSE(poll_config("c", {70}).empty());
  EXPECT_EQ(trace({70}).triggered.size(), 1u);
}

TEST_F(OndemandRegistry, ConfigIsDeliveredOnceInDynologsFrame) {
  poll("c", {80});
  EXPECT_EQ(poll_config("c", {80}), "");
  trace({80});
  const std::string got = poll_config("c", {80});
  const std::string head = "\n    ACTIVITIES_DURATION_MSECS=100\n    REQUEST_TRACE_ID=";
  ASSERT_EQ(got.substr(0, head.size()), head) << got;
  EXPECT_EQ(got.back(), '\n');
  EXPECT_GT(got.size(), head.size() + 1);
  EXPECT_EQ(poll_config("c", {80}), "");
}

TEST_F(OndemandRegistry, OnlyAPollForActivitiesReceivesTheTraceRequest) {
  poll("c", {81});
  const TraceResult r = trace({81});
  ASSERT_EQ(r.triggered, std::vector<std::int32_t>{81});
  ASSERT_GT(r.request_id, 0u);
  // As dynolog: a poll for events only (type 1) leaves the activity config where it is.
  std::string error;
  const auto events = registry.on_message(
      "c", {"req", encode_request(kConfigTypeEvents, 0, std::vector<std::int32_t>{81})}, 1000u, now,
      &error);
  ASSERT_TRUE(events) << error;
  EXPECT_EQ(events->payload, "");
  // The next poll for activities gets it, numbered with the request's id.
  EXPECT_NE(poll_config("c", {81}).find("REQUEST_TRACE_ID=" + std::to_string(r.request_id) + "\n"),
            std::string::npos);
  // A poll without pids is dropped, as dynolog drops it.
  EXPECT_FALSE(registry.on_message(
      "c", {"req", encode_request(kConfigTypeActivities, 0, std::vector<std::int32_t>{})}, 1000u,
      now, &error));
  EXPECT_NE(error.find("without pids"), std::string::npos) << error;
}

TEST_F(OndemandRegistry, TraceStatusFollowsDeliveryAndTheClientsReports) {
  poll("c", {90});
  const TraceResult r = trace({90});
  ASSERT_EQ(r.triggered, std::vector<std::int32_t>{90});
  auto status = registry.trace_status(r.request_id, 1000, now);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].pid, 90);
  EXPECT_TRUE(status[0].known);
  EXPECT_FALSE(status[0].delivered);
  EXPECT_EQ(status[0].state, "");

  poll_config("c", {90});
  status = registry.trace_status(r.request_id, 1000, now);
  EXPECT_TRUE(status[0].delivered);

  std::string error;
  const OutcomeReport refused{r.request_id, "refused", "the directory /x does not exist"};
  const auto reply = registry.on_message("c", {std::string(kReportType), encode_report(refused)},
                                         1000u, now, &error);
  ASSERT_TRUE(reply) << error;
  EXPECT_TRUE(reply->type.empty()) << "a report is not answered";
  status = registry.trace_status(r.request_id, 1000, now);
  EXPECT_EQ(status[0].state, "refused");
  EXPECT_EQ(status[0].detail, "the directory /x does not exist");

  // Only the requester's user learns about it; a report about another request is refused.
  EXPECT_TRUE(registry.trace_status(r.request_id, 1001, now).empty());
  const OutcomeReport stray{r.request_id + 7, "written", "/tmp/t.json"};
  EXPECT_FALSE(registry.on_message("c", {std::string(kReportType), encode_report(stray)}, 1000u,
                                   now, &error));
  EXPECT_NE(error.find("was not given"), std::string::npos) << error;

  // A process that went silent is forgotten, and the status says so.
  now += 61s;
  status = registry.trace_status(r.request_id, 1000, now);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_FALSE(status[0].known);
}

TEST(OndemandReports, EncodeAndDecode) {
  const OutcomeReport r{12, "written", "/tmp/a b\nc.json"};
  std::string error;
  const auto back = decode_report(encode_report(r), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->request_id, 12u);
  EXPECT_EQ(back->state, "written");
  EXPECT_EQ(back->detail, "/tmp/a b\nc.json");
  EXPECT_FALSE(decode_report("12\nexploded\nx", &error));
  EXPECT_NE(error.find("unknown state"), std::string::npos);
  EXPECT_FALSE(decode_report("x\nwritten\ny", &error));
  EXPECT_FALSE(decode_report("12 written", &error));
  const auto long_detail = decode_report("1\nfailed\n" + std::string(10000, 'x'), &error);
  ASSERT_TRUE(long_detail);
  EXPECT_EQ(long_detail->detail.size(), 4096u);
}

TEST_F(OndemandRegistry, OnlyTheSameUsersClientsMatchAndTheReasonsSaySo) {
  poll("mine", {90, 1});
  poll("theirs", {91, 1}, 0, 2000);
  TraceResult r = trace({91});
  EXPECT_TRUE(r.matched.empty());
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_NE(r.reasons[0].find("pid 91 belongs to another user"), std::string::npos) << r.reasons[0];

  r = trace({1});  // the common ancestor reaches only my own process
  EXPECT_EQ(r.triggered, std::vector<std::int32_t>{90});

  r = trace({12345});
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_NE(r.reasons[0].find("pid 12345 is not a registered process"), std::string::npos)
      << r.reasons[0];

  // A message whose credentials were not received is refused: the client never exists.
  std::string error;
  EXPECT_FALSE(registry.on_message(
      "anon", {"req", encode_request(kConfigTypeActivities, 0, std::vector<std::int32_t>{92})},
      std::nullopt, now, &error));
  EXPECT_NE(error.find("without credentials"), std::string::npos) << error;
  EXPECT_TRUE(trace({92}).matched.empty());
}

TEST_F(OndemandRegistry, AnAddressTakenOverByAnotherUserIsANewClient) {
  // Root's process polled from "c" and was triggered; then its socket closed and another user
  // bound the same address. That user's polls neither inherit the request nor keep root's
  // pids, and root's request cannot be delivered to them.
  poll("c", {70}, 0, 0);
  ASSERT_EQ(trace({70}, 0, kDefaultProcessLimit, 0).triggered, std::vector<std::int32_t>{70});
  EXPECT_EQ(poll_config("c", {71}, 0, 2000), "") << "the new socket gets nothing";
  EXPECT_TRUE(trace({70}, 0, kDefaultProcessLimit, 0).matched.empty());
  EXPECT_EQ(trace({71}, 0, kDefaultProcessLimit, 2000).triggered, std::vector<std::int32_t>{71});
}

TEST(OndemandRegistryLimits, OneUserCannotLockOthersOut) {
  ClientRegistry registry(60s, 10, 3);
  Clock::time_point now = Clock::now();
  const auto req = [](std::int32_t pid) {
    return Message{"req", encode_request(kConfigTypeActivities, 0, std::vector<std::int32_t>{pid})};
  };
  std::string error;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(
        registry.on_message("flood" + std::to_string(i), req(100 + i), uid_t{666}, now, &error));
  }
  EXPECT_FALSE(registry.on_message("flood3", req(103), uid_t{666}, now, &error));
  EXPECT_NE(error.find("uid 666 has 3 clients registered, the most one user may have"),
            std::string::npos)
      << error;
  // Others still get in.
  EXPECT_TRUE(registry.on_message("mine", req(200), uid_t{1000}, now, &error)) << error;
  // The quota frees up as clients go silent.
  now += 61s;
  EXPECT_TRUE(registry.on_message("flood3", req(103), uid_t{666}, now, &error)) << error;
}

TEST_F(OndemandRegistry, SilentClientsAreForgotten) {
  poll("c", {60});
  EXPECT_EQ(registry.size(now), 1u);
  now += 59s;
  EXPECT_EQ(registry.size(now), 1u);
  poll("c", {60});
  now += 61s;
  EXPECT_EQ(registry.size(now), 0u);
  EXPECT_TRUE(trace({60}).matched.empty());
}

TEST_F(OndemandRegistry, MalformedPayloadsAreRefusedWithAReason) {
  std::string error;
  EXPECT_FALSE(registry.on_message("c", {"ctxt", "abc"}, uid_t{1}, now, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(registry.on_message("c", {"req", "abc"}, uid_t{1}, now, &error));
  EXPECT_FALSE(registry.on_message("c", {"what", ""}, uid_t{1}, now, &error));
  EXPECT_NE(error.find("unknown message type"), std::string::npos) << error;
  EXPECT_FALSE(registry.on_message(
      "", {"req", encode_request(kConfigTypeActivities, 0, std::vector<std::int32_t>{1})}, uid_t{1},
      now, &error));
  EXPECT_EQ(registry.size(now), 0u);
}

TEST(OndemandRegistryLimits, NewcomersPastTheCapAreRefusedUntilOthersGoSilent) {
  ClientRegistry registry(60s, 2);
  Clock::time_point now = Clock::now();
  const auto req = [](std::int32_t pid) {
    return Message{"req", encode_request(kConfigTypeActivities, 0, std::vector<std::int32_t>{pid})};
  };
  std::string error;
  EXPECT_TRUE(registry.on_message("a", req(1), uid_t{1}, now, &error));
  EXPECT_TRUE(registry.on_message("b", req(2), uid_t{1}, now, &error));
  EXPECT_FALSE(registry.on_message("c", req(3), uid_t{1}, now, &error));
  EXPECT_NE(error.find("too many clients"), std::string::npos) << error;
  EXPECT_TRUE(registry.on_message("a", req(1), uid_t{1}, now, &error)) << "known ones still poll";
  now += 61s;
  EXPECT_TRUE(registry.on_message("c", req(3), uid_t{1}, now, &error)) << error;
}

TEST(OndemandDaemonRequest, ParsesDynologsRequestAndNamesBadFields) {
  const TraceRequest r = parse_trace_request(
      R"({"fn":"setKinetOnDemandRequest","config":"A=1","job_id":5,"pids":[1,2],"process_limit":3})");
  EXPECT_EQ(r.config, "A=1");
  EXPECT_EQ(r.job_id, 5);
  EXPECT_EQ(r.pids, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(r.process_limit, 3);
  const TraceRequest d = parse_trace_request(R"({"config":""})");
  EXPECT_EQ(d.process_limit, kDefaultProcessLimit);
  EXPECT_TRUE(d.pids.empty());

  using testing::error_of;
  EXPECT_NE(error_of([] { parse_trace_request("{}"); }).find("\"config\" is missing"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_trace_request(R"({"config":1})"); }).find("must be a string"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_trace_request(R"({"config":"","pids":"7"})");
            }).find("\"pids\" must be an array"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_trace_request(R"({"config":"","pids":[-1]})");
            }).find("\"pids\" must hold process ids"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_trace_request(R"({"config":"","job_id":"x"})");
            }).find("\"job_id\" must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_trace_request("[1]"); }).find("JSON object"), std::string::npos);

  // The answer, as dynolog writes it, reads back.
  TraceResult res;
  res.busy = 1;
  res.triggered = {4};
  res.matched = {4, 5};
  const std::string json = trace_result_json(res);
  EXPECT_EQ(json,
            R"({"activityProfilersBusy":1,"activityProfilersTriggered":[4],"eventProfilersBusy":0,)"
            R"("eventProfilersTriggered":[],"processesMatched":[4,5]})");
  EXPECT_EQ(parse_trace_result(json).matched, res.matched);
  EXPECT_THROW(parse_trace_result(R"({"error":"no"})"), Error);
}

TEST(OndemandDaemonRequest, TheHandlerTableServesDynologsRequestsAndGetTraceStatus) {
  for (const std::string_view fn :
       {"getStatus", "getVersion", "getTraceStatus", "setKinetOnDemandRequest"}) {
    const RequestHandler* handler = find_request_handler(fn);
    ASSERT_NE(handler, nullptr) << fn;
    EXPECT_EQ(handler->fn, fn);
  }
  EXPECT_EQ(find_request_handler("nope"), nullptr);
  EXPECT_EQ(find_request_handler(""), nullptr);
}

TEST(OndemandDaemonRequest, FindsTheOwnerOfALoopbackConnection) {
  const std::string table =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:06F2 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        "
      "0 1 1 0000000000000000 100 0 0 10 0\n"
      "   1: 0100007F:A1B2 0100007F:06F2 01 00000000:00000000 00:00000000 00000000  1234        "
      "0 2 1 0000000000000000 20 4 30 10 -1\n";
  EXPECT_EQ(tcp_owner(table, "0100007F:A1B2", "0100007F:06F2"), uid_t{1234});
  EXPECT_EQ(tcp_owner(table, "0100007F:A1B3", "0100007F:06F2"), std::nullopt);
  EXPECT_EQ(tcp_owner("garbage", "0100007F:A1B2", "0100007F:06F2"), std::nullopt);
}

// --- the transport -------------------------------------------------------------------------------

// A fake traced process: its own endpoint, registering and polling as libkineto does.
class FakeClient {
 public:
  FakeClient(const std::string& daemon, std::vector<std::int32_t> pids, std::int64_t job = 0)
      : endpoint_(unique_name("client")), daemon_(daemon), pids_(std::move(pids)), job_(job) {}

  void register_context() {
    ASSERT_TRUE(endpoint_.send(daemon_, "ctxt", encode_context({0, pids_[0], job_})));
    const auto r = endpoint_.receive(5s);
    ASSERT_TRUE(r && r->message);
    EXPECT_EQ(r->message->type, "ctxt");
  }
  // One poll; the config text received (usually empty).
  std::string poll() {
    EXPECT_TRUE(endpoint_.send(daemon_, "req", encode_request(kConfigTypeActivities, job_, pids_)));
    const auto r = endpoint_.receive(5s);
    EXPECT_TRUE(r && r->message);
    if (!r || !r->message) return "<no answer>";
    EXPECT_EQ(r->message->type, "req");
    return r->message->payload;
  }
  Endpoint& endpoint() { return endpoint_; }

 private:
  Endpoint endpoint_;
  std::string daemon_;
  std::vector<std::int32_t> pids_;
  std::int64_t job_;
};

std::string request_for(std::vector<std::int32_t> pids, std::int64_t job = 0,
                        std::int64_t limit = kDefaultProcessLimit) {
  TraceRequest r;
  r.config = "ACTIVITIES_LOG_FILE=/tmp/x.json\nACTIVITIES_DURATION_MSECS=50";
  r.pids = std::move(pids);
  r.job_id = job;
  r.process_limit = limit;
  return trace_request_json(r);
}

bool wait_for_size(Daemon& daemon, std::size_t n) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (daemon.registry().size(ClientRegistry::Clock::now()) < n) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class OndemandDaemon : public ::testing::Test {
 protected:
  OndemandDaemon() {
    DaemonOptions o;
    o.ipc_name = unique_name("daemon");
    o.port = 0;
    o.read_timeout = 300ms;
    o.log = [this](std::string_view line) {
      std::lock_guard lock(log_mu_);
      log_.emplace_back(line);
    };
    daemon_ = std::make_unique<Daemon>(o);
    name_ = o.ipc_name;
  }
  TraceResult ask(const std::string& json) {
    return parse_trace_result(tcp_request(daemon_->port(), json));
  }

  std::mutex log_mu_;
  std::vector<std::string> log_;
  std::unique_ptr<Daemon> daemon_;
  std::string name_;
};

// Another user binds an address that differs from a root client's only by a trailing NUL (the
// old daemon stripped NULs and took both for one client) and polls with its own pids. The
// daemon keys clients by exact address and credentials: the root client keeps its pids and uid.
TEST_F(OndemandDaemon, AnotherUserCannotPoseAsAClientsEndpoint) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to send as a throwaway user";
  FakeClient root(name_, {4100});
  EXPECT_EQ(root.poll(), "");
  const std::string similar =
      std::string("\0", 1) + root.endpoint().name() + std::string("\0\0", 2);
  const std::string poll =
      encode("req", encode_request(kConfigTypeActivities, 0, std::vector<std::int32_t>{4200}));
  ASSERT_EQ(testing::send_datagram_as_another_user(
                similar, std::string("\0", 1) + name_ + std::string("\0", 1), poll),
            0);
  const auto now = ClientRegistry::Clock::now();
  ASSERT_TRUE(wait_for_size(*daemon_, 2)) << "the impostor is a client of its own";
  TraceRequest r;
  r.config = "ACTIVITIES_DURATION_MSECS=10";
  r.pids = {4100};
  EXPECT_EQ(daemon_->registry().request_trace(r, 0, now).triggered, std::vector<std::int32_t>{4100})
      << "root's client kept its pids and its uid";
  r.pids = {4200};
  EXPECT_TRUE(daemon_->registry().request_trace(r, 0, now).triggered.empty())
      << "the impostor's process belongs to uid 54321, not root";
}

// A TCP connection to 127.0.0.1:port, connected, nothing sent.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// Idle peers and peers that never read their answer each hold one connection, not the daemon:
// a valid request is answered while 20 of each are connected. (Served one at a time, the
// idle ones alone held it for 20 x the read deadline.)
TEST(OndemandDaemonTcp, NoPeerStallsTheOthers) {
  DaemonOptions o;
  o.ipc_name = unique_name("stall");
  o.port = 0;
  o.read_timeout = 2s;
  o.log = [](std::string_view) {};
  Daemon daemon(o);
  std::vector<int> peers;
  for (int i = 0; i < 20; ++i) peers.push_back(connect_to(daemon.port()));  // idle
  // Non-reading: a large, well-formed request, whose answer is never read.
  const std::string big = R"({"fn":"getStatus","pad":")" + std::string(900'000, 'x') + R"("})";
  std::string framed(4, '\0');
  const auto size = static_cast<std::int32_t>(big.size());
  std::memcpy(framed.data(), &size, 4);
  framed += big;
  for (int i = 0; i < 20; ++i) {
    const int fd = connect_to(daemon.port());
    std::thread([fd, framed] { ::send(fd, framed.data(), framed.size(), MSG_NOSIGNAL); }).join();
    peers.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string answer = tcp_request(daemon.port(), R"({"fn":"getStatus"})", 10s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(answer, R"({"status":1})");
  // Well under one read deadline; the old daemon took 20 of them (40 s).
  EXPECT_LT(took, 1500ms);
  for (const int fd : peers) ::close(fd);
}

TEST_F(OndemandDaemon, TracesARegisteredProcessByPidAndDeliversOnce) {
  const std::int32_t me = ::getpid();
  FakeClient c(name_, {me, 4242});
  c.register_context();
  // registered but not polled: no match yet
  TraceResult r = ask(request_for({me}));
  EXPECT_TRUE(r.matched.empty());
  EXPECT_EQ(c.poll(), "");
  r = ask(request_for({me}));  // the requester is this process's user, as is the client
  EXPECT_EQ(r.matched, std::vector<std::int32_t>{me});
  EXPECT_EQ(r.triggered, std::vector<std::int32_t>{me});
  const std::string config = c.poll();
  EXPECT_EQ(config.rfind("\n    ACTIVITIES_LOG_FILE=/tmp/x.json\nACTIVITIES_DURATION_MSECS=50\n"
                         "    REQUEST_TRACE_ID=",
                         0),
            0u)
      << config;
  EXPECT_EQ(c.poll(), "");
}

TEST_F(OndemandDaemon, MatchesByAncestorAndJobAndHonoursTheLimit) {
  FakeClient a(name_, {900001, 900000, 1}, 42);
  FakeClient b(name_, {900002, 900000, 1}, 42);
  FakeClient other(name_, {900003, 1}, 43);
  a.poll();
  b.poll();
  other.poll();
  TraceResult r = ask(request_for({900000}, 0, 1));
  EXPECT_EQ(r.matched, (std::vector<std::int32_t>{900001, 900002}));
  EXPECT_EQ(r.triggered.size(), 1u);
  r = ask(request_for({0}, 42));
  EXPECT_EQ(r.busy, 1);
  EXPECT_EQ(r.triggered.size(), 1u);
  r = ask(request_for({}, 43));
  EXPECT_EQ(r.triggered, std::vector<std::int32_t>{900003});
  EXPECT_NE(a.poll(), "");
  EXPECT_NE(b.poll(), "");
  EXPECT_NE(other.poll(), "");
}

TEST_F(OndemandDaemon, AnswersBadRequestsWithAnError) {
  const auto error_in = [&](const std::string& json) {
    const internal::JsonValue v = internal::parse_json(tcp_request(daemon_->port(), json));
    const internal::JsonValue* e = v.find("error");
    return e == nullptr ? std::string("<no error>") : e->as_string();
  };
  // The served names come from the handler table (request_handlers.cpp), in its order.
  EXPECT_EQ(error_in(R"({"fn":"nope"})"),
            "unknown fn \"nope\"; this daemon serves \"getStatus\", \"getTraceStatus\", "
            "\"getVersion\", \"setKinetOnDemandRequest\"");
  EXPECT_NE(error_in(R"({"config":"x"})").find("no \"fn\""), std::string::npos);
  EXPECT_NE(error_in("{garbage").find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_in(R"({"fn":"setKinetOnDemandRequest","pids":[1]})").find("config"),
            std::string::npos);
  EXPECT_EQ(tcp_request(daemon_->port(), R"({"fn":"getStatus"})"), R"({"status":1})");
}

// Raw bytes to the TCP port; returns whatever came back before the daemon closed.
std::string raw_tcp(int port, const std::string& bytes, bool half_close = true) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "<connect failed>";
  }
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  if (half_close) ::shutdown(fd, SHUT_WR);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

std::string frame(std::int32_t size, const std::string& body) {
  std::string s(reinterpret_cast<const char*>(&size), 4);
  return s + body;
}

TEST_F(OndemandDaemon, SurvivesGarbageDatagramsAndTcpMessages) {
  std::mt19937 rng(12345);
  Endpoint fuzzer(unique_name("fuzz"));
  const std::string valid_req =
      encode("req", encode_request(kConfigTypeActivities, 0, std::vector<std::int32_t>{1}));
  for (int i = 0; i < 300; ++i) {
    std::string d;
    switch (i % 4) {
      case 0:  // random bytes
        d.resize(rng() % 200);
        for (char& ch : d) ch = static_cast<char>(rng());
        break;
      case 1:  // a valid datagram cut short
        d = valid_req.substr(0, rng() % valid_req.size());
        break;
      case 2: {  // a header with a lying size, or a payload of the wrong size
        d = encode(i % 8 == 2 ? "ctxt" : "req", std::string(rng() % 40, 'x'));
        break;
      }
      default: {  // a request claiming more pids than it has
        std::string payload =
            encode_request(kConfigTypeActivities, 0, std::vector<std::int32_t>{1, 2});
        const std::int32_t n = static_cast<std::int32_t>(rng());
        std::memcpy(payload.data() + 4, &n, 4);
        d = encode("req", payload);
      }
    }
    socklen_t len = 0;
    (void)len;
    // send raw bytes through the fuzzer's socket: Endpoint::send frames, so write directly
    sockaddr_un to{};
    to.sun_family = AF_UNIX;
    to.sun_path[0] = '\0';
    std::memcpy(to.sun_path + 1, name_.data(), name_.size());
    to.sun_path[1 + name_.size()] = '\0';
    ::sendto(fuzzer.fd(), d.data(), d.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to),
             static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_.size() + 2));
  }
  // An oversized datagram, too.
  fuzzer.send(name_, "req", std::string(kMaxDatagram, 'z'));

  const int port = daemon_->port();
  EXPECT_NE(raw_tcp(port, "ab"), "<connect failed>");  // length cut short
  EXPECT_NE(raw_tcp(port, frame(kMaxTcpMessage + 1, "")).find("error"), std::string::npos);
  EXPECT_NE(raw_tcp(port, frame(-5, "")).find("error"), std::string::npos);
  EXPECT_EQ(raw_tcp(port, frame(100, "{\"fn\"")), "");         // body cut short
  EXPECT_EQ(raw_tcp(port, frame(100, "{\"fn\""), false), "");  // silent peer: timeout
  for (int i = 0; i < 50; ++i) {
    std::string body(rng() % 64, ' ');
    for (char& ch : body) ch = static_cast<char>(rng());
    const std::string reply = raw_tcp(port, frame(static_cast<std::int32_t>(body.size()), body));
    if (!body.empty()) EXPECT_NE(reply.find("error"), std::string::npos);
  }

  // Still serving both sides.
  FakeClient c(name_, {::getpid()});
  EXPECT_EQ(c.poll(), "");
  EXPECT_EQ(ask(request_for({::getpid()})).triggered.size(), 1u);
  EXPECT_NE(c.poll(), "");
  std::lock_guard lock(log_mu_);
  EXPECT_FALSE(log_.empty());
  EXPECT_LE(log_.size(), 12u) << "malformed messages are logged at most 10 times a minute";
}

TEST_F(OndemandDaemon, ASecondDaemonOnTheSameEndpointIsRefused) {
  DaemonOptions o;
  o.ipc_name = name_;
  o.port = 0;
  EXPECT_NE(testing::error_of([&] { Daemon second(o); }).find(name_), std::string::npos);
  o.ipc_name = unique_name("other");
  o.port = daemon_->port();
  EXPECT_NE(testing::error_of([&] { Daemon second(o); }).find("cannot listen"), std::string::npos);
}

}  // namespace ondemand_daemon_test
}  // namespace opscope::ondemand
