#include "daemon/request_handlers.h"

#include <algorithm>
#include <iterator>

#include "daemon/requests.h"
#include "json/json_writer.h"
#include "opscope/version.h"

namespace opscope::ondemand {

using internal::JsonWriter;

std::string daemon_version() { return std::string("opscope ") + version(); }

namespace {

std::string set_trace_request(std::string_view json, const RequestContext& context) {
  if (!context.requester) {
    return error_json(
        "cannot tell which user sent the request (no /proc/net/tcp entry), so it is "
        "refused");
  }
  const TraceRequest request = parse_trace_request(json);
  return trace_result_json(
      context.registry.request_trace(request, *context.requester, ClientRegistry::Clock::now()));
}

std::string get_trace_status(std::string_view json, const RequestContext& context) {
  if (!context.requester) {
    return error_json("cannot tell which user sent the request (no /proc/net/tcp entry)");
  }
  const std::uint64_t id = parse_trace_status_request(json);
  return trace_status_json(
      context.registry.trace_status(id, *context.requester, ClientRegistry::Clock::now()));
}

// dyno status and dyno version: dynolog answers {"status":1} and {"version":"..."}.
std::string get_status(std::string_view, const RequestContext&) {
  return std::string(R"({"status":1})");
}

std::string get_version(std::string_view, const RequestContext&) {
  JsonWriter w;
  w.begin_object();
  w.key("version");
  w.string(daemon_version());
  w.end_object();
  return w.str();
}

// dynolog's own requests that opscope serves, and getTraceStatus. Built at compile time, once.
constexpr RequestHandler kRequestHandlers[] = {
    {"getStatus", get_status},
    {kTraceStatusFn, get_trace_status},
    {"getVersion", get_version},
    {kTraceFn, set_trace_request},
};
static_assert(std::ranges::is_sorted(kRequestHandlers, {}, &RequestHandler::fn),
              "keep the rows sorted by fn: an unknown fn's answer lists them in this order");

}  // namespace

std::span<const RequestHandler> request_handlers() { return kRequestHandlers; }

const RequestHandler* find_request_handler(std::string_view fn) {
  const auto it = std::ranges::find(kRequestHandlers, fn, &RequestHandler::fn);
  return it == std::end(kRequestHandlers) ? nullptr : it;
}

}  // namespace opscope::ondemand
