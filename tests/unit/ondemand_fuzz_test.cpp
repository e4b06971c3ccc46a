// Every decoder of what reaches a traced process or the daemon from outside, fed mutations of
// valid messages: IPC datagrams, "ctxt"/"req"/report payloads, config text, TCP requests and
// answers, JSON. Each must accept or refuse with a reason, never crash; the ASan+UBSan and TSan
// stages run the same tests, so undefined behaviour on any of these inputs fails there.
//
// A deterministic mutation fuzzer (the seed is fixed, the count bounded), so a failure
// reproduces and the suite's time stays put: about 20 000 inputs per decoder.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "daemon/daemon.h"
#include "daemon/requests.h"
#include "json/json_reader.h"
#include "ondemand/config.h"
#include "ondemand/ipc.h"
#include "opscope/export.h"
#include "support/mutation.h"

namespace opscope::ondemand {
namespace ondemand_fuzz_test {

constexpr int kRounds = 20000;

template <typename Decode>
void fuzz(const std::vector<std::string>& seeds, Decode decode, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < kRounds; ++i) {
    decode(testing::mutate_bytes(seeds[static_cast<std::size_t>(rng() % seeds.size())], rng));
  }
  for (const std::string& s : seeds) decode(s);  // and the valid ones, untouched
}

std::vector<std::string> payload_seeds() {
  const std::vector<std::int32_t> pids = {4242, 17, 1};
  return {encode_context({0, 4242, 7}), encode_request(kConfigTypeActivities, 7, pids),
          encode_report({12, "written", "/tmp/t_1.json"}), std::string(16, '\0')};
}

TEST(OndemandFuzz, Datagrams) {
  std::vector<std::string> seeds;
  for (const std::string& p : payload_seeds()) {
    seeds.push_back(encode("req", p));
    seeds.push_back(encode("ctxt", p));
  }
  int accepted = 0;
  fuzz(
      seeds,
      [&](const std::string& d) {
        std::string error;
        const auto m = decode(d, &error);
        if (m) {
          ++accepted;
          EXPECT_LT(m->type.size(), kTypeBytes);
        } else {
          EXPECT_FALSE(error.empty());
        }
      },
      1);
  EXPECT_GT(accepted, 0);
}

TEST(OndemandFuzz, Payloads) {
  fuzz(
      payload_seeds(),
      [](const std::string& p) {
        std::string error;
        if (const auto r = decode_request(p, &error)) {
          EXPECT_LE(r->pids.size(), static_cast<std::size_t>(kMaxRequestPids));
        } else {
          EXPECT_FALSE(error.empty());
        }
        error.clear();
        if (!decode_context(p, &error)) EXPECT_FALSE(error.empty());
        error.clear();
        if (!decode_report(p, &error)) EXPECT_FALSE(error.empty());
      },
      2);
}

TEST(OndemandFuzz, TheRegistryTakesAnyMessage) {
  ClientRegistry registry;
  const auto now = ClientRegistry::Clock::now();
  std::vector<std::string> seeds;
  for (const std::string& p : payload_seeds()) {
    seeds.push_back(encode("req", p));
    seeds.push_back(encode("ctxt", p));
    seeds.push_back(encode(kReportType, p));
  }
  std::mt19937_64 names(3);
  fuzz(
      seeds,
      [&](const std::string& d) {
        std::string error;
        const auto m = decode(d, &error);
        if (!m) return;
        const std::string sender = "fuzz" + std::to_string(names() % 50);
        registry.on_message(sender, *m, static_cast<uid_t>(names() % 3), now, &error);
      },
      3);
  TraceRequest r;
  r.config = "ACTIVITIES_DURATION_MSECS=5";
  registry.request_trace(r, 0, now);
  EXPECT_LE(registry.size(now), 50u);
}

TEST(OndemandFuzz, ConfigText) {
  const std::vector<std::string> seeds = {
      "\n    ACTIVITIES_LOG_FILE=/tmp/x.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=700\n"
      "PROFILE_REPORT_INPUT_SHAPES=false\nPROFILE_PROFILE_MEMORY=true\nPROFILE_MEMORY=true\n"
      "PROFILE_MEMORY_DURATION_MSECS=700\nPROFILE_WITH_STACK=true\n    REQUEST_TRACE_ID=99\n",
      "ACTIVITIES_ITERATIONS=3\nPROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP=10\n",
      "ACTIVITIES_DURATION_MSECS=5\nACTIVITIES_LOG_FILE=/tmp/a/../b.json.gz\n# c\n=\n"};
  fuzz(
      seeds,
      [](const std::string& text) {
        const ParsedConfig p = parse_capture_config(text, 42, "/tmp");
        if (p.request) {
          EXPECT_TRUE(p.request->output_path.starts_with("/tmp/")) << p.request->output_path;
          EXPECT_TRUE(p.request->duration_ms > 0 || p.request->iterations > 0);
        } else {
          EXPECT_FALSE(p.error.empty());
        }
        find_config_value(text, "REQUEST_TRACE_ID");
      },
      4);
}

TEST(OndemandFuzz, TcpRequestsAndAnswers) {
  const std::vector<std::string> seeds = {
      R"({"fn":"setKinetOnDemandRequest","config":"ACTIVITIES_DURATION_MSECS=5\nACTIVITIES_LOG_FILE=/tmp/x.json","job_id":0,"pids":[1,2],"process_limit":3})",
      R"({"fn":"getTraceStatus","request_id":1})",
      R"({"fn":"getStatus"})",
      R"({"fn":"getVersion"})",
      R"({"activityProfilersBusy":0,"activityProfilersTriggered":[5],"eventProfilersBusy":0,"eventProfilersTriggered":[],"processesMatched":[5],"opscopeRequestId":3,"opscopeReasons":["x"]})",
      R"({"processes":[{"pid":5,"known":true,"delivered":false,"state":"refused","detail":"why"}]})",
      R"([1.5e300,-0,"\u00e9\ud83d\ude00",{"a":[[[]]]},null,true])"};
  DaemonOptions o;
  o.ipc_name = "opscope-test-fuzz-" + std::to_string(::getpid());
  o.port = 0;
  o.log = [](std::string_view) {};
  Daemon daemon(o);
  fuzz(
      seeds,
      [&](const std::string& json) {
        // The daemon answers everything with JSON, an error included.
        const std::string answer = daemon.handle_request(json, uid_t{0});
        std::string error;
        EXPECT_TRUE(opscope::is_valid_json(answer, &error)) << error << ": " << answer;
        // The CLI's readers throw opscope::Error (or a standard exception), never worse.
        try {
          parse_trace_result(json);
        } catch (const std::exception&) {
        }
        try {
          parse_trace_status(json);
        } catch (const std::exception&) {
        }
        try {
          parse_trace_request(json);
        } catch (const std::exception&) {
        }
      },
      5);
}

}  // namespace ondemand_fuzz_test
}  // namespace opscope::ondemand
