// The TCP requests the daemon serves: one handler per "fn", in one table that the transport
// (Daemon::handle_request, src/daemon/daemon.cpp) dispatches through, as dynolog's
// ServiceHandler answers for its SimpleJsonServer.
//
// A new request is a handler function and a row in the table in request_handlers.cpp (its
// JSON, when it has more than a field or two, in src/daemon/requests.{h,cpp}); the transport
// does not change.
#pragma once

#include <sys/types.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "daemon/client_registry.h"

namespace opscope::ondemand {

// What a handler may use: the registry, and the uid of the user who sent the request (nullopt
// when the connection's owner could not be told, which the same-user rule refuses).
struct RequestContext {
  ClientRegistry& registry;
  std::optional<uid_t> requester;
};

// One "fn" and its answer. `answer` gets the whole request (a JSON object with that "fn") and
// returns the answer's JSON; it throws opscope::Error for a bad request, which the transport
// answers as {"error": ...}.
struct RequestHandler {
  std::string_view fn;
  std::string (*answer)(std::string_view json, const RequestContext& context);
};

// The table, sorted by fn (the order in which an unknown fn's answer lists them).
std::span<const RequestHandler> request_handlers();
// The row for `fn`; nullptr when the daemon does not serve it.
const RequestHandler* find_request_handler(std::string_view fn);

// opscope's version as getVersion answers it.
std::string daemon_version();

}  // namespace opscope::ondemand
