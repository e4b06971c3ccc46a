#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <system_error>
#include <thread>

#include "export/json_reader.h"
#include "export/json_writer.h"
#include "opscope/error.h"
#include "opscope/version.h"

namespace opscope::ondemand {

using internal::JsonValue;
using internal::JsonWriter;

// --- the request and its answer -----------------------------------------------------------------

namespace {

std::int64_t int_field(const JsonValue& doc, std::string_view key, std::int64_t fallback) {
  const JsonValue* v = doc.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_integer()) {
    throw Error("field \"" + std::string(key) + "\" must be an integer, not " +
                std::string(internal::json_type_name(v->type())));
  }
  return v->as_int();
}

void write_ints(JsonWriter& w, std::string_view key, const std::vector<std::int32_t>& values) {
  w.key(key);
  w.begin_array();
  for (const std::int32_t v : values) w.integer(v);
  w.end_array();
}

// A daemon's answer, parsed; its {"error": ...} thrown as an Error with the daemon's message.
JsonValue parse_answer(std::string_view json) {
  JsonValue doc = internal::parse_json(json);
  if (const JsonValue* e = doc.find("error")) {
    throw Error("the daemon refused the request: " +
                (e->type() == JsonValue::Type::kString ? e->as_string() : std::string("?")));
  }
  return doc;
}

}  // namespace

TraceRequest parse_trace_request(std::string_view json) {
  const JsonValue doc = internal::parse_json(json);
  if (doc.type() != JsonValue::Type::kObject) throw Error("the request must be a JSON object");
  TraceRequest r;
  const JsonValue* config = doc.find("config");
  if (config == nullptr) throw Error("field \"config\" is missing");
  if (config->type() != JsonValue::Type::kString) {
    throw Error("field \"config\" must be a string, not " +
                std::string(internal::json_type_name(config->type())));
  }
  r.config = config->as_string();
  r.job_id = int_field(doc, "job_id", 0);
  r.process_limit = int_field(doc, "process_limit", kDefaultProcessLimit);
  if (r.process_limit < 0) {
    throw Error("field \"process_limit\" must not be negative, got " +
                std::to_string(r.process_limit));
  }
  if (const JsonValue* pids = doc.find("pids")) {
    if (pids->type() != JsonValue::Type::kArray) {
      throw Error("field \"pids\" must be an array of integers, not " +
                  std::string(internal::json_type_name(pids->type())));
    }
    for (const JsonValue& p : pids->as_array()) {
      if (!p.is_integer() || p.as_int() < 0 || p.as_int() > INT32_MAX) {
        throw Error("field \"pids\" must hold process ids (integers from 0 to 2147483647)");
      }
      r.pids.push_back(static_cast<std::int32_t>(p.as_int()));
    }
  }
  return r;
}

std::string trace_request_json(const TraceRequest& request) {
  JsonWriter w;
  w.begin_object();
  w.key("fn");
  w.string(kTraceFn);
  w.key("config");
  w.string(request.config);
  w.key("job_id");
  w.integer(request.job_id);
  write_ints(w, "pids", request.pids);
  w.key("process_limit");
  w.integer(request.process_limit);
  w.end_object();
  return w.str();
}

std::string trace_result_json(const TraceResult& result) {
  JsonWriter w;
  w.begin_object();
  w.key("activityProfilersBusy");
  w.integer(result.busy);
  write_ints(w, "activityProfilersTriggered", result.triggered);
  w.key("eventProfilersBusy");
  w.integer(0);
  w.key("eventProfilersTriggered");
  w.begin_array();
  w.end_array();
  write_ints(w, "processesMatched", result.matched);
  if (result.request_id != 0) {
    w.key("opscopeRequestId");
    w.integer(static_cast<std::int64_t>(result.request_id));
  }
  if (!result.reasons.empty()) {
    w.key("opscopeReasons");
    w.begin_array();
    for (const std::string& r : result.reasons) w.string(r);
    w.end_array();
  }
  w.end_object();
  return w.str();
}

TraceResult parse_trace_result(std::string_view json) {
  const JsonValue doc = parse_answer(json);
  TraceResult r;
  const auto ints = [&](std::string_view key) {
    std::vector<std::int32_t> out;
    if (const JsonValue* a = doc.find(key)) {
      for (const JsonValue& v : a->as_array()) out.push_back(static_cast<std::int32_t>(v.as_int()));
    }
    return out;
  };
  if (const JsonValue* b = doc.find("activityProfilersBusy")) r.busy = b->as_int();
  if (const JsonValue* id = doc.find("opscopeRequestId"); id != nullptr && id->is_integer()) {
    r.request_id = static_cast<std::uint64_t>(id->as_int());
  }
  r.triggered = ints("activityProfilersTriggered");
  r.matched = ints("processesMatched");
  if (const JsonValue* a = doc.find("opscopeReasons")) {
    for (const JsonValue& v : a->as_array()) r.reasons.push_back(v.as_string());
  }
  return r;
}

std::string frame_config(std::string_view config, std::uint64_t trace_id) {
  return "\n    " + std::string(config) + "\n    REQUEST_TRACE_ID=" + std::to_string(trace_id) +
         "\n";
}

std::string trace_status_request_json(std::uint64_t request_id) {
  JsonWriter w;
  w.begin_object();
  w.key("fn");
  w.string(kTraceStatusFn);
  w.key("request_id");
  w.integer(static_cast<std::int64_t>(request_id));
  w.end_object();
  return w.str();
}

std::string trace_status_json(const std::vector<TraceStatus>& statuses) {
  JsonWriter w;
  w.begin_object();
  w.key("processes");
  w.begin_array();
  for (const TraceStatus& t : statuses) {
    w.begin_object();
    w.key("pid");
    w.integer(t.pid);
    w.key("known");
    w.boolean(t.known);
    w.key("delivered");
    w.boolean(t.delivered);
    w.key("state");
    w.string(t.state);
    w.key("detail");
    w.string(t.detail);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.str();
}

std::vector<TraceStatus> parse_trace_status(std::string_view json) {
  const JsonValue doc = parse_answer(json);
  const JsonValue* list = doc.find("processes");
  if (list == nullptr || list->type() != JsonValue::Type::kArray) {
    throw Error("the daemon's answer has no \"processes\" list");
  }
  std::vector<TraceStatus> out;
  for (const JsonValue& p : list->as_array()) {
    TraceStatus t;
    const auto text = [&](std::string_view key) {
      const JsonValue* v = p.find(key);
      return v != nullptr && v->type() == JsonValue::Type::kString ? v->as_string() : std::string();
    };
    const auto flag = [&](std::string_view key) {
      const JsonValue* v = p.find(key);
      return v != nullptr && v->type() == JsonValue::Type::kBool && v->as_bool();
    };
    if (const JsonValue* pid = p.find("pid"); pid != nullptr && pid->is_integer()) {
      t.pid = static_cast<std::int32_t>(pid->as_int());
    }
    t.known = flag("known");
    t.delivered = flag("delivered");
    t.state = text("state");
    t.detail = text("detail");
    out.push_back(std::move(t));
  }
  return out;
}

std::string daemon_version() { return std::string("opscope ") + version(); }

// --- the registry -------------------------------------------------------------------------------

ClientRegistry::ClientRegistry(std::chrono::milliseconds client_timeout, std::size_t max_clients,
                               std::size_t max_per_user)
    : client_timeout_(client_timeout), max_clients_(max_clients), max_per_user_(max_per_user) {}

void ClientRegistry::forget_silent(Clock::time_point now) {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (now - it->second.last_seen > client_timeout_) {
      it = erase_client(it);
    } else {
      ++it;
    }
  }
}

std::map<std::string, ClientRegistry::Client>::iterator ClientRegistry::erase_client(
    std::map<std::string, Client>::iterator it) {
  if (auto user = per_user_.find(it->second.uid); user != per_user_.end() && --user->second == 0) {
    per_user_.erase(user);
  }
  return clients_.erase(it);
}

std::optional<Message> ClientRegistry::on_message(const std::string& sender, const Message& message,
                                                  std::optional<uid_t> uid, Clock::time_point now,
                                                  std::string* error) {
  const auto fail = [&](std::string why) -> std::optional<Message> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  if (sender.empty()) return fail("a \"" + message.type + "\" message from an unnamed socket");
  const std::string who = printable_address(sender);
  if (!uid)
    return fail("a \"" + message.type + "\" message from '" + who + "' without credentials");
  std::string why;
  std::lock_guard lock(mu_);
  forget_silent(now);
  auto known = clients_.find(sender);
  // The kernel gives an address to one socket at a time, so a message from a known address
  // with another uid comes from a new socket that bound it after the first one closed: a new
  // client, which inherits nothing (no pending request) from the old one.
  if (known != clients_.end() && known->second.uid != *uid) {
    erase_client(known);
    known = clients_.end();
  }
  if ((message.type == "ctxt" || message.type == "req") && known == clients_.end()) {
    if (clients_.size() >= max_clients_) {
      return fail("too many clients (" + std::to_string(max_clients_) + "); '" + who +
                  "' is not registered");
    }
    if (per_user_[*uid] >= max_per_user_) {
      return fail("uid " + std::to_string(*uid) + " has " + std::to_string(max_per_user_) +
                  " clients registered, the most one user may have; '" + who +
                  "' is not registered");
    }
    known = clients_.emplace(sender, Client{}).first;
    known->second.uid = *uid;
    ++per_user_[*uid];
  }
  if (message.type == kReportType) {
    // An outcome report; answered with nothing. Only about the request the client got last.
    const auto report = decode_report(message.payload, &why);
    if (!report) return fail(why);
    if (known == clients_.end() || known->second.request_id != report->request_id) {
      return fail("a report from '" + who + "' about a request it was not given");
    }
    known->second.state = report->state;
    known->second.detail = report->detail;
    known->second.last_seen = now;
    return Message{};
  }
  if (message.type == "ctxt") {
    const auto c = decode_context(message.payload, &why);
    if (!c) return fail(why);
    Client& client = known->second;
    client.pid = c->pid;
    client.job_id = c->jobid;
    client.last_seen = now;
    std::int32_t zero = 0;
    return Message{"ctxt", std::string(reinterpret_cast<const char*>(&zero), sizeof zero) +
                               std::string(kOpscopeDaemonMark)};
  }
  if (message.type == "req") {
    auto r = decode_request(message.payload, &why);
    if (!r) return fail(why);
    if (r->pids.empty()) return fail("a \"req\" without pids (dynolog drops it too)");
    Client& client = known->second;
    client.job_id = r->jobid;
    client.pid = r->pids.front();
    client.pids = std::move(r->pids);
    client.polled = true;
    client.last_seen = now;
    Message reply{"req", ""};
    // As dynolog: the trace request goes only to a poll that asks for activities.
    if (client.pending && (r->type & kConfigTypeActivities) != 0) {
      reply.payload = std::move(*client.pending);
      client.pending.reset();
      client.delivered = true;
    }
    return reply;
  }
  return fail("unknown message type \"" + message.type + "\"");
}

TraceResult ClientRegistry::request_trace(const TraceRequest& request, uid_t requester,
                                          Clock::time_point now) {
  std::lock_guard lock(mu_);
  forget_silent(now);
  TraceResult result;
  const std::uint64_t request_id = ++next_request_;
  const std::string framed_config = frame_config(request.config, request_id);
  const bool all_pids = request.pids.empty() || std::find(request.pids.begin(), request.pids.end(),
                                                          0) != request.pids.end();
  std::vector<std::int32_t> found;    // requested pids seen in some client's list, any user
  std::vector<std::int32_t> foreign;  // ... of a client of another user
  std::size_t other_jobs = 0;
  std::size_t polling = 0;
  for (auto& [name, client] : clients_) {
    if (!client.polled) continue;
    ++polling;
    bool pid_hit = all_pids;
    for (const std::int32_t p : request.pids) {
      if (p != 0 && std::find(client.pids.begin(), client.pids.end(), p) != client.pids.end()) {
        pid_hit = true;
        found.push_back(p);
      }
    }
    if (!pid_hit) continue;
    if (request.job_id != 0 && client.job_id != request.job_id) {
      if (!all_pids) ++other_jobs;  // a pid that matched, but in another job
      continue;
    }
    if (client.uid != requester) {
      if (!all_pids) {
        for (const std::int32_t p : request.pids) {
          if (std::find(client.pids.begin(), client.pids.end(), p) != client.pids.end()) {
            foreign.push_back(p);
          }
        }
      } else {
        foreign.push_back(client.pid);
      }
      continue;
    }
    result.matched.push_back(client.pid);
    if (client.pending) {
      ++result.busy;
    } else if (static_cast<std::int64_t>(result.triggered.size()) < request.process_limit) {
      client.pending = framed_config;
      client.request_id = request_id;
      client.delivered = false;
      client.state.clear();
      client.detail.clear();
      result.triggered.push_back(client.pid);
      triggered_.push_back({request_id, client.pid, name, requester});
      if (triggered_.size() > kMaxTriggered) triggered_.erase(triggered_.begin());
    }
  }
  std::sort(result.matched.begin(), result.matched.end());
  std::sort(result.triggered.begin(), result.triggered.end());
  if (!result.triggered.empty()) {
    result.request_id = request_id;
    return result;
  }

  // Nothing triggered: say why, in words a user can act on.
  auto& reasons = result.reasons;
  if (polling == 0) {
    reasons.push_back(
        "no process is registered with the daemon (start it with KINETO_USE_DAEMON=1, and "
        "point KINETO_IPC_SOCKET_DIR at the daemon's socket directory if it uses one)");
    return result;
  }
  const auto contains = [](const std::vector<std::int32_t>& v, std::int32_t p) {
    return std::find(v.begin(), v.end(), p) != v.end();
  };
  for (const std::int32_t p : request.pids) {
    if (p == 0) continue;
    if (!contains(found, p)) {
      reasons.push_back("pid " + std::to_string(p) +
                        " is not a registered process nor an ancestor of one");
    } else if (contains(foreign, p)) {
      reasons.push_back("pid " + std::to_string(p) +
                        " belongs to another user's process; only your own can be traced");
    }
  }
  if (all_pids && !foreign.empty()) {
    reasons.push_back(std::to_string(foreign.size()) +
                      " matching process(es) belong to another user; only your own can be traced");
  }
  if (other_jobs > 0) {
    reasons.push_back(std::to_string(other_jobs) +
                      " matching process(es) run under a job id other than " +
                      std::to_string(request.job_id));
  } else if (all_pids && request.job_id != 0 && result.matched.empty() && foreign.empty()) {
    reasons.push_back("no registered process has job id " + std::to_string(request.job_id));
  }
  if (result.busy > 0) {
    reasons.push_back(std::to_string(result.busy) +
                      " matching process(es) have not yet fetched an earlier request");
  }
  if (!result.matched.empty() && result.busy == 0 && request.process_limit == 0) {
    reasons.push_back("process_limit is 0");
  }
  return result;
}

std::vector<TraceStatus> ClientRegistry::trace_status(std::uint64_t request_id, uid_t requester,
                                                      Clock::time_point now) {
  std::lock_guard lock(mu_);
  forget_silent(now);
  std::vector<TraceStatus> out;
  for (const Triggered& t : triggered_) {
    if (t.request_id != request_id || t.uid != requester) continue;
    TraceStatus status;
    status.pid = t.pid;
    const auto it = clients_.find(t.client);
    if (it == clients_.end() || it->second.request_id != request_id) {
      status.known = false;
    } else {
      status.delivered = it->second.delivered;
      status.state = it->second.state;
      status.detail = it->second.detail;
    }
    out.push_back(std::move(status));
  }
  return out;
}

std::size_t ClientRegistry::size(Clock::time_point now) {
  std::lock_guard lock(mu_);
  forget_silent(now);
  return clients_.size();
}

// --- loopback ownership -------------------------------------------------------------------------

std::optional<uid_t> tcp_owner(std::string_view table, std::string_view local,
                               std::string_view remote) {
  std::istringstream in{std::string(table)};
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
    std::istringstream f(line);
    std::string sl, loc, rem, st, queues, timer, retr;
    long long uid = -1;
    if (!(f >> sl >> loc >> rem >> st >> queues >> timer >> retr >> uid)) continue;
    if (loc == local && rem == remote && uid >= 0) return static_cast<uid_t>(uid);
  }
  return std::nullopt;
}

namespace {

// /proc/net/tcp prints an IPv4 address as the 32-bit word in memory order, the port in host
// order; /proc/net/tcp6 prints the 16 bytes of an IPv6 address as four such words.
std::string proc_address(const sockaddr_storage& a) {
  char buf[64];
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    std::snprintf(buf, sizeof buf, "%08X:%04X", static_cast<unsigned>(in.sin_addr.s_addr),
                  static_cast<unsigned>(ntohs(in.sin_port)));
    return buf;
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
  std::uint32_t words[4];
  std::memcpy(words, &in6.sin6_addr, sizeof words);
  std::snprintf(buf, sizeof buf, "%08X%08X%08X%08X:%04X", static_cast<unsigned>(words[0]),
                static_cast<unsigned>(words[1]), static_cast<unsigned>(words[2]),
                static_cast<unsigned>(words[3]), static_cast<unsigned>(ntohs(in6.sin6_port)));
  return buf;
}

// The uid owning the other end of an accepted loopback connection. The peer's socket appears in
// /proc/net/tcp (tcp6 for IPv6) with its local address = our peer address and its remote = our
// local address.
std::optional<uid_t> requester_uid(int fd) {
  sockaddr_storage self{}, peer{};
  socklen_t len = sizeof self;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0) return std::nullopt;
  len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return std::nullopt;
  std::ifstream f(self.ss_family == AF_INET6 ? "/proc/net/tcp6" : "/proc/net/tcp");
  const std::string table((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return tcp_owner(table, proc_address(peer), proc_address(self));
}

// Reads exactly `n` bytes or fails (peer closed, error, or `deadline` passed).
bool read_exactly(int fd, char* out, std::size_t n,
                  std::chrono::steady_clock::time_point deadline) {
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t got = ::recv(fd, out, n, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got <= 0) return false;
    out += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

// Writes all of `data` or fails (peer gone, error, or `deadline` passed): a peer that does not
// read its answer cannot hold the writer past the deadline.
bool write_all(int fd, std::string_view data, std::chrono::steady_clock::time_point deadline) {
  while (!data.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string framed(std::string_view json) {
  const auto size = static_cast<std::int32_t>(json.size());
  std::string out(reinterpret_cast<const char*>(&size), sizeof size);
  out.append(json);
  return out;
}

std::string error_json(std::string_view message) {
  JsonWriter w;
  w.begin_object();
  w.key("error");
  w.string(message);
  w.end_object();
  return w.str();
}

}  // namespace

// --- the transport ------------------------------------------------------------------------------

namespace {

// A listening socket on one loopback address; -1 with `error` set when it cannot be bound.
int listen_on(const sockaddr_storage& address, socklen_t len, std::string* error) {
  const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("cannot create a TCP socket: ") + std::strerror(errno);
    return -1;
  }
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (address.ss_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), len) != 0 || ::listen(fd, 16) != 0) {
    *error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

Daemon::Daemon(DaemonOptions options)
    : options_(std::move(options)),
      registry_(options_.client_timeout),
      endpoint_(options_.ipc_name, options_.socket_dir) {
  if (options_.port < 0 || options_.port > 65535) {
    throw Error("daemon port must be 0 (ephemeral) to 65535, got " + std::to_string(options_.port));
  }
  endpoint_.enable_credentials();
  // Loopback only: the request is unauthenticated. 127.0.0.1 first; its port (chosen by the
  // kernel when options_.port is 0) is then bound on ::1 too.
  sockaddr_storage v4{};
  auto& in = reinterpret_cast<sockaddr_in&>(v4);
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  in.sin_port = htons(static_cast<std::uint16_t>(options_.port));
  std::string why;
  const int fd4 = listen_on(v4, sizeof(sockaddr_in), &why);
  if (fd4 < 0)
    throw Error("cannot listen on 127.0.0.1:" + std::to_string(options_.port) + ": " + why);
  listen_fds_.push_back(fd4);
  socklen_t len = sizeof(sockaddr_in);
  ::getsockname(fd4, reinterpret_cast<sockaddr*>(&v4), &len);
  port_ = ntohs(in.sin_port);
  sockaddr_storage v6{};
  auto& in6 = reinterpret_cast<sockaddr_in6&>(v6);
  in6.sin6_family = AF_INET6;
  in6.sin6_addr = in6addr_loopback;
  in6.sin6_port = htons(static_cast<std::uint16_t>(port_));
  if (const int fd6 = listen_on(v6, sizeof(sockaddr_in6), &why); fd6 >= 0) {
    listen_fds_.push_back(fd6);
  } else {
    // A machine without IPv6 on its loopback: `localhost` resolves to 127.0.0.1 there.
    log("not listening on [::1]:" + std::to_string(port_) + " (" + why + "); 127.0.0.1 only");
  }
  ipc_thread_ = std::thread([this] { serve_ipc(); });
  tcp_thread_ = std::thread([this] { serve_tcp(); });
}

Daemon::~Daemon() {
  stop();
  for (const int fd : listen_fds_) ::close(fd);
}

void Daemon::stop() {
  stopping_.store(true);
  if (ipc_thread_.joinable()) ipc_thread_.join();
  if (tcp_thread_.joinable()) tcp_thread_.join();
  // Connections still being served end by their deadlines.
  std::unique_lock lock(connections_mu_);
  connections_done_.wait(lock, [this] { return connections_ == 0; });
}

void Daemon::log(std::string_view line) {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "opscope daemon: %.*s\n", static_cast<int>(line.size()), line.data());
  }
}

// At most 10 lines a minute, so a flood of garbage cannot fill the log.
void Daemon::log_malformed(const std::string& what) {
  std::lock_guard lock(log_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - log_window_ > std::chrono::minutes(1)) {
    if (suppressed_ > 0) log(std::to_string(suppressed_) + " more malformed messages were dropped");
    log_window_ = now;
    logged_in_window_ = 0;
    suppressed_ = 0;
  }
  if (logged_in_window_ < 10) {
    ++logged_in_window_;
    log("dropped: " + what);
  } else {
    ++suppressed_;
  }
}

void Daemon::serve_ipc() {
  while (!stopping_.load()) {
    std::optional<Received> r;
    try {
      r = endpoint_.receive(std::chrono::milliseconds(100));
    } catch (const std::exception& e) {
      log_malformed(e.what());
      continue;
    }
    if (!r) continue;
    if (!r->message) {
      log_malformed("a datagram from '" + printable_address(r->sender_address) + "': " + r->error);
      continue;
    }
    std::string error;
    const auto reply = registry_.on_message(r->sender_address, *r->message, r->uid,
                                            ClientRegistry::Clock::now(), &error);
    if (!reply) {
      log_malformed("a datagram from '" + printable_address(r->sender_address) + "': " + error);
      continue;
    }
    if (reply->type.empty()) continue;  // a report: nothing to answer
    if (!endpoint_.send_to_address(r->sender_address, reply->type, reply->payload, &error)) {
      log_malformed(error);
    }
  }
}

void Daemon::serve_tcp() {
  std::vector<pollfd> fds;
  for (const int fd : listen_fds_) fds.push_back({fd, POLLIN, 0});
  while (!stopping_.load()) {
    if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
    for (const pollfd& p : fds) {
      if ((p.revents & POLLIN) == 0) continue;
      const int fd = ::accept4(p.fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      // Each connection on a thread of its own, up to kMaxConnections at once and
      // kMaxConnectionsPerUser for one user, so that a silent or non-reading peer holds only its
      // own connection, only until its deadlines, and one user cannot take every slot.
      const std::optional<uid_t> owner = requester_uid(fd);
      const uid_t user = owner.value_or(static_cast<uid_t>(-1));
      {
        std::lock_guard lock(connections_mu_);
        const char* why = connections_ >= kMaxConnections                         ? "in all"
                          : connections_per_user_[user] >= kMaxConnectionsPerUser ? "for this user"
                                                                                  : nullptr;
        if (why != nullptr) {
          log_malformed("a TCP connection refused: the most served at once " + std::string(why) +
                        " are being served already");
          ::close(fd);
          continue;
        }
        ++connections_;
        ++connections_per_user_[user];
      }
      const auto done = [this, user] {
        std::lock_guard lock(connections_mu_);
        if (--connections_per_user_[user] == 0) connections_per_user_.erase(user);
        if (--connections_ == 0) connections_done_.notify_all();
      };
      try {
        std::thread([this, fd, owner, done] {
          serve_connection(fd, owner);
          ::close(fd);
          done();
        }).detach();
      } catch (const std::system_error& e) {  // no thread to be had: serve nothing, stay up
        ::close(fd);
        done();
        log_malformed(std::string("a TCP connection dropped: ") + e.what());
      }
    }
  }
}

// One request per connection, read under a deadline and answered under another, so a silent,
// slow or non-reading peer holds its connection's thread for at most `read_timeout` each way.
void Daemon::serve_connection(int fd, std::optional<uid_t> requester) {
  const auto deadline = std::chrono::steady_clock::now() + options_.read_timeout;
  std::int32_t size = 0;
  if (!read_exactly(fd, reinterpret_cast<char*>(&size), sizeof size, deadline)) {
    log_malformed("a TCP request without its 4-byte length");
    return;
  }
  if (size <= 0 || size > kMaxTcpMessage) {
    log_malformed("a TCP request of " + std::to_string(size) + " bytes");
    write_all(fd,
              framed(error_json("a request must be 1 to " + std::to_string(kMaxTcpMessage) +
                                " bytes, the length prefix says " + std::to_string(size))),
              std::chrono::steady_clock::now() + options_.read_timeout);
    return;
  }
  std::string json(static_cast<std::size_t>(size), '\0');
  if (!read_exactly(fd, json.data(), json.size(), deadline)) {
    log_malformed("a TCP request cut short (" + std::to_string(size) + " bytes announced)");
    return;
  }
  std::string answer = handle_request(json, requester);
  if (answer.size() > static_cast<std::size_t>(kMaxTcpMessage)) {
    answer = error_json("the answer would be " + std::to_string(answer.size()) +
                        " bytes, more than the " + std::to_string(kMaxTcpMessage) + " allowed");
  }
  if (!write_all(fd, framed(answer), std::chrono::steady_clock::now() + options_.read_timeout)) {
    log_malformed("a TCP peer did not take its answer within " +
                  std::to_string(options_.read_timeout.count()) + " ms");
  }
}

std::string Daemon::handle_request(std::string_view json, std::optional<uid_t> requester) {
  using Handler = std::function<std::string(const JsonValue&, std::string_view)>;
  // Dispatch by "fn" through a table (dynolog's own requests that opscope serves).
  const std::map<std::string, Handler, std::less<>> handlers = {
      {std::string(kTraceFn),
       [&](const JsonValue&, std::string_view text) {
         if (!requester) {
           return error_json(
               "cannot tell which user sent the request (no /proc/net/tcp entry), so it is "
               "refused");
         }
         const TraceRequest request = parse_trace_request(text);
         return trace_result_json(
             registry_.request_trace(request, *requester, ClientRegistry::Clock::now()));
       }},
      {std::string(kTraceStatusFn),
       [&](const JsonValue& doc, std::string_view) {
         if (!requester) {
           return error_json("cannot tell which user sent the request (no /proc/net/tcp entry)");
         }
         const std::int64_t id = int_field(doc, "request_id", -1);
         if (id < 1) throw Error("field \"request_id\" must be a request id (an integer >= 1)");
         return trace_status_json(registry_.trace_status(static_cast<std::uint64_t>(id), *requester,
                                                         ClientRegistry::Clock::now()));
       }},
      // dyno status and dyno version: dynolog answers {"status":1} and {"version":"..."}.
      {"getStatus",
       [](const JsonValue&, std::string_view) { return std::string(R"({"status":1})"); }},
      {"getVersion",
       [](const JsonValue&, std::string_view) {
         JsonWriter w;
         w.begin_object();
         w.key("version");
         w.string(daemon_version());
         w.end_object();
         return w.str();
       }},
  };
  try {
    const JsonValue doc = internal::parse_json(json);
    const JsonValue* fn = doc.find("fn");
    if (fn == nullptr || fn->type() != JsonValue::Type::kString) {
      return error_json("the request has no \"fn\" string");
    }
    const auto it = handlers.find(fn->as_string());
    if (it == handlers.end()) {
      std::string served;
      for (const auto& [name, handler] : handlers)
        served += (served.empty() ? "\"" : ", \"") + name + "\"";
      return error_json("unknown fn \"" + fn->as_string() + "\"; this daemon serves " + served);
    }
    return it->second(doc, json);
  } catch (const std::exception& e) {
    log_malformed(std::string("a TCP request: ") + e.what());
    return error_json(e.what());
  }
}

std::string tcp_request(int port, std::string_view json, std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("cannot create a TCP socket: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    throw Error("cannot reach the daemon at 127.0.0.1:" + std::to_string(port) + ": " +
                std::strerror(errno) + " (is `opscope daemon` or dynolog running?)");
  }
  if (!write_all(fd, framed(json), std::chrono::steady_clock::now() + timeout)) {
    throw Error("cannot send the request to the daemon: " + std::string(std::strerror(errno)));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::int32_t size = 0;
  if (!read_exactly(fd, reinterpret_cast<char*>(&size), sizeof size, deadline) || size < 0 ||
      size > kMaxTcpMessage) {
    throw Error("the daemon at 127.0.0.1:" + std::to_string(port) + " gave no valid answer");
  }
  std::string answer(static_cast<std::size_t>(size), '\0');
  if (!read_exactly(fd, answer.data(), answer.size(), deadline)) {
    throw Error("the daemon's answer was cut short");
  }
  return answer;
}

}  // namespace opscope::ondemand
