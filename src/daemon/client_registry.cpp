#include "daemon/client_registry.h"

#include <algorithm>
#include <utility>

namespace opscope::ondemand {

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

}  // namespace opscope::ondemand
