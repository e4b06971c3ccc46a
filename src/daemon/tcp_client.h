// The command line's client of the daemon: one TCP request to opscope's daemon or dynolog on
// the loopback address, and its answer (`opscope trace`, tools/trace_command.cpp; the tests).
//
//   const TraceResult r = parse_trace_result(tcp_request(1778, trace_request_json(request)));
//
// The request and answer are JSON (src/daemon/requests.h), each in one frame
// (src/daemon/tcp_frame.h).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace opscope::ondemand {

// Sends one framed request to 127.0.0.1:port and returns the answer's JSON. Throws
// opscope::Error when the daemon cannot be reached or the answer is cut short.
std::string tcp_request(int port, std::string_view json,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace opscope::ondemand
