// The on-demand daemon's logic: who is registered, and what each traced process gets at its
// next poll, as dynolog's LibkinetoConfigManager keeps it.
//
// `ClientRegistry` answers the traced processes' datagrams (src/ondemand/ipc.h) and the trace
// requests (src/daemon/requests.h) without touching a socket, so tests drive it with a fake
// clock and fake uids; the transport (src/daemon/daemon.h) feeds it.
//
//   ClientRegistry registry;
//   auto reply = registry.on_message(sender, message, uid, ClientRegistry::Clock::now(), &why);
//   TraceResult result = registry.request_trace(request, requester, ClientRegistry::Clock::now());
//
// Semantics, after dynolog's IPCMonitor and LibkinetoConfigManager (DESIGN.md):
// - A client is known by its exact IPC address and the uid the kernel gives for its datagrams
//   (SO_PASSCRED); a message without credentials is refused. "ctxt" {gpu, pid, jobid} registers it
//   and is answered "ctxt" + int32 0. "req" {type, n, jobid, pids[n]} is a poll: it records the pid
//   list (the process and its ancestors, nearest first) and the job id, and only from then on does
//   the client count for a trace request. A client silent for longer than `client_timeout` (60 s)
//   is forgotten.
// - The reply to "req" is the pending config, once, framed as dynolog frames it (frame_config):
//   "\n    <config>\n    REQUEST_TRACE_ID=<request id>\n"; otherwise an empty "req". As in
//   dynolog, only a poll whose type has the activities bit (kConfigTypeActivities) receives
//   it; a poll without pids is dropped unanswered.
// - Delivery is tracked per request: a trace request gets an id ("opscopeRequestId" in the
//   answer, REQUEST_TRACE_ID in the config), and getTraceStatus tells for each triggered
//   process whether it fetched the config and what it reported since. opscope's client
//   reports ("opsreport" datagrams: accepted, refused and why, written, failed) only to a
//   daemon whose "ctxt" answer carries kOpscopeDaemonMark, never to dynolog.
// - A trace request matches a client when its job id matches (job_id 0 means any job: dynolog
//   keys its table by job id and processes without a job register as job 0, so with opscope a
//   plain `--pid` request finds a process whatever its job) and the request's pids are empty or
//   [0] (all such processes) or one of them is the client's pid or one of its ancestors (so a
//   launcher's pid reaches its workers).
// - Same user only: a client's uid comes from the datagram's credentials (SO_PASSCRED); a
//   request matches only clients of the requester's uid. A client without credentials never
//   matches.
// - Matched clients are all listed in processesMatched. A client with a config not yet
//   delivered counts as busy; the others are triggered, up to `process_limit`.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/requests.h"
#include "ondemand/ipc.h"

namespace opscope::ondemand {

// The most clients remembered at once: each endpoint name is a client, so a flood of names
// must not grow the table without bound. Newcomers past it are refused until others go silent.
inline constexpr std::size_t kMaxClients = 4096;
// The most clients one user (uid) may have at once, so that one user cannot fill the table and
// lock every other user's processes out.
inline constexpr std::size_t kMaxClientsPerUser = 1024;
// How many triggered processes getTraceStatus remembers.
inline constexpr std::size_t kMaxTriggered = 4096;

// Who is registered, and what each gets at its next poll. Thread-safe (one mutex).
class ClientRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ClientRegistry(std::chrono::milliseconds client_timeout = std::chrono::seconds(60),
                          std::size_t max_clients = kMaxClients,
                          std::size_t max_per_user = kMaxClientsPerUser);

  // One well-formed message from the exact address `sender` (Received::sender_address) whose
  // credentials said `uid` (refused without them). Returns the
  // reply to send back, or nullopt (unknown type, malformed payload: `error` says why).
  std::optional<Message> on_message(const std::string& sender, const Message& message,
                                    std::optional<uid_t> uid, Clock::time_point now,
                                    std::string* error);

  // Handles one trace request from a user with uid `requester`.
  TraceResult request_trace(const TraceRequest& request, uid_t requester, Clock::time_point now);

  // What became of request `request_id` in each process it triggered, for the user `requester`
  // (another user's processes are left out).
  std::vector<TraceStatus> trace_status(std::uint64_t request_id, uid_t requester,
                                        Clock::time_point now);

  // Clients not forgotten (registered or polling).
  std::size_t size(Clock::time_point now);

 private:
  struct Client {
    uid_t uid = 0;
    std::int32_t pid = 0;
    std::int64_t job_id = 0;
    std::vector<std::int32_t> pids;  // the process, then its ancestors
    bool polled = false;
    Clock::time_point last_seen;
    std::optional<std::string> pending;  // framed config to deliver at the next poll
    std::uint64_t request_id = 0;        // the last request that triggered it
    bool delivered = false;              // ... fetched at a poll
    std::string state;                   // ... and the client's last report on it
    std::string detail;
  };
  // Processes triggered by recent requests, kept after their clients are forgotten so that
  // getTraceStatus can say so.
  struct Triggered {
    std::uint64_t request_id;
    std::int32_t pid;
    std::string client;
    uid_t uid;
  };
  void forget_silent(Clock::time_point now);
  std::map<std::string, Client>::iterator erase_client(std::map<std::string, Client>::iterator it);

  std::mutex mu_;
  std::chrono::milliseconds client_timeout_;
  std::size_t max_clients_;
  std::size_t max_per_user_;
  std::map<std::string, Client> clients_;  // by exact address
  std::map<uid_t, std::size_t> per_user_;  // clients per uid
  std::uint64_t next_request_ = 0;
  std::vector<Triggered> triggered_;  // the last kMaxTriggered
};

}  // namespace opscope::ondemand
