// The daemon's TCP requests and their answers: dynolog's JSON, as `dyno` and `opscope trace`
// send it and as dynolog answers it, plus opscope's own fields and getTraceStatus.
//
// Both sides use this file: the daemon parses requests and writes answers
// (src/daemon/request_handlers.cpp), the command line writes requests and reads answers back
// (tools/trace_command.cpp). Each message travels in one TCP frame (src/daemon/tcp_frame.h).
//
//   TraceRequest r;
//   r.config = "ACTIVITIES_DURATION_MSECS=500\nACTIVITIES_LOG_FILE=/tmp/t.json";
//   r.pids = {1234};
//   const std::string json = trace_request_json(r);  // {"fn":"setKinetOnDemandRequest",...}
//   TraceResult answer = parse_trace_result(tcp_request(port, json));
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::ondemand {

inline constexpr std::int64_t kDefaultProcessLimit = 1000;
inline constexpr std::string_view kTraceFn = "setKinetOnDemandRequest";
inline constexpr std::string_view kTraceStatusFn = "getTraceStatus";

// dynolog's TCP trace request. parse_trace_request throws opscope::Error naming the field
// that is missing or ill-typed.
struct TraceRequest {
  std::string config;  // KEY=VALUE lines
  std::int64_t job_id = 0;
  std::vector<std::int32_t> pids;  // empty or [0]: every process of the job
  std::int64_t process_limit = kDefaultProcessLimit;
};
TraceRequest parse_trace_request(std::string_view json);
std::string trace_request_json(const TraceRequest& request);

// The answer. `reasons` is opscope's own field ("opscopeReasons"), set when nothing was
// triggered, that dynolog's clients ignore.
struct TraceResult {
  std::uint64_t request_id = 0;  // opscope's "opscopeRequestId"; 0 from dynolog
  std::int64_t busy = 0;
  std::vector<std::int32_t> triggered;
  std::vector<std::int32_t> matched;
  std::vector<std::string> reasons;
};
std::string trace_result_json(const TraceResult& result);
// Reads an answer back (for the CLI). Throws opscope::Error, with the daemon's message when
// the answer is {"error": ...}.
TraceResult parse_trace_result(std::string_view json);

// What became of one triggered process, for getTraceStatus.
struct TraceStatus {
  std::int32_t pid = 0;
  bool delivered = false;  // the process fetched the config at a poll
  bool known = true;       // false: the process went silent and was forgotten
  std::string state;       // its last report: accepted, refused, recording, written, failed
  std::string detail;      // the reason or the file
};
// The getTraceStatus request for `request_id`, and its answer.
std::string trace_status_request_json(std::uint64_t request_id);
// The request id a getTraceStatus request asks about. Throws opscope::Error when it holds none
// (an integer >= 1).
std::uint64_t parse_trace_status_request(std::string_view json);
std::string trace_status_json(const std::vector<TraceStatus>& statuses);
// Reads a getTraceStatus answer back (for the CLI). Throws opscope::Error like
// parse_trace_result.
std::vector<TraceStatus> parse_trace_status(std::string_view json);

// The answer to a request the daemon refuses: {"error": message}. parse_trace_result and
// parse_trace_status throw it back as an opscope::Error.
std::string error_json(std::string_view message);

}  // namespace opscope::ondemand
