// The on-demand daemon: dynolog's IPC service for traced processes plus its TCP trace request.
//
// Logic and transport are separate, as dynolog's ServiceHandler is from its server:
// `ClientRegistry` knows the traced processes and answers their datagrams and the trace
// requests without touching a socket (tests drive it with a fake clock and fake uids);
// `Daemon` is the thin transport: an IPC endpoint thread and a loopback TCP thread that feed it.
//
//   opscope::ondemand::DaemonOptions options;
//   options.port = 0;                       // ephemeral; daemon.port() says which
//   opscope::ondemand::Daemon daemon(options);
//   ...                                     // clients register, `opscope trace` asks
//   daemon.stop();                          // also done by the destructor
//
// Semantics, after dynolog's IPCMonitor and LibkinetoConfigManager (DESIGN.md):
// - A client is known by its exact IPC address and the uid the kernel gives for its datagrams
//   (SO_PASSCRED); a message without credentials is refused. "ctxt" {gpu, pid, jobid} registers it
//   and is answered "ctxt" + int32 0. "req" {type, n, jobid, pids[n]} is a poll: it records the pid
//   list (the process and its ancestors, nearest first) and the job id, and only from then on does
//   the client count for a trace request. A client silent for longer than `client_timeout` (60 s)
//   is forgotten.
// - The reply to "req" is the pending config, once, framed as dynolog frames it:
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

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ondemand/ipc.h"

namespace opscope::ondemand {

inline constexpr int kDefaultDaemonPort = 1778;  // dynolog's
inline constexpr std::int64_t kDefaultProcessLimit = 1000;
// The largest TCP request accepted (a config is a few hundred bytes).
inline constexpr std::int32_t kMaxTcpMessage = 1 << 20;
inline constexpr std::string_view kTraceFn = "setKinetOnDemandRequest";
inline constexpr std::string_view kTraceStatusFn = "getTraceStatus";

// The most clients remembered at once: each endpoint name is a client, so a flood of names
// must not grow the table without bound. Newcomers past it are refused until others go silent.
inline constexpr std::size_t kMaxClients = 4096;
// The most clients one user (uid) may have at once, so that one user cannot fill the table and
// lock every other user's processes out.
inline constexpr std::size_t kMaxClientsPerUser = 1024;
// The most TCP connections served at once (each on a thread, each bounded by its deadlines);
// past it a new connection is closed at once.
inline constexpr int kMaxConnections = 128;
inline constexpr int kMaxConnectionsPerUser = 32;
// How many triggered processes getTraceStatus remembers.
inline constexpr std::size_t kMaxTriggered = 4096;

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

// The frame around a delivered config.
std::string frame_config(std::string_view config, std::uint64_t trace_id);

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
std::string trace_status_json(const std::vector<TraceStatus>& statuses);
// Reads a getTraceStatus answer back (for the CLI). Throws opscope::Error like
// parse_trace_result.
std::vector<TraceStatus> parse_trace_status(std::string_view json);

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

// The owner of a loopback TCP connection: the uid column of the /proc/net/tcp line (given as
// `table`) whose local address is `local` and whose remote address is `remote`, each as written
// there ("0100007F:A1B2"). nullopt when no line matches.
std::optional<uid_t> tcp_owner(std::string_view table, std::string_view local,
                               std::string_view remote);

struct DaemonOptions {
  std::string ipc_name = std::string(kDaemonEndpoint);
  std::string socket_dir;         // "" = KINETO_IPC_SOCKET_DIR or the abstract namespace
  int port = kDefaultDaemonPort;  // 0 = ephemeral
  std::chrono::milliseconds client_timeout = std::chrono::seconds(60);
  // Per TCP connection: to read its request, and again to write its answer.
  std::chrono::milliseconds read_timeout = std::chrono::seconds(2);
  // Where log lines go (one line, no newline); stderr when empty.
  std::function<void(std::string_view)> log;
};

// The transport: binds the IPC endpoint and the TCP port on the loopback addresses (127.0.0.1,
// and ::1 where IPv6 is up: `localhost` resolves to ::1 first on many machines, and dyno
// connects to the first address only), then serves them from two threads until stop(). The
// constructor throws opscope::Error when the endpoint or 127.0.0.1:port cannot be bound.
class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  int port() const { return port_; }
  // Whether the port is bound on ::1 too (IPv6 may be off on the machine's loopback).
  bool listens_on_ipv6() const { return listen_fds_.size() > 1; }
  ClientRegistry& registry() { return registry_; }
  void stop();

  // One TCP request's answer (dispatch by "fn" through a table); never throws.
  std::string handle_request(std::string_view json, std::optional<uid_t> requester);

 private:
  void serve_ipc();
  void serve_tcp();
  void serve_connection(int fd, std::optional<uid_t> requester);
  void log_malformed(const std::string& what);
  void log(std::string_view line);

  DaemonOptions options_;
  ClientRegistry registry_;
  Endpoint endpoint_;
  std::vector<int> listen_fds_;  // 127.0.0.1, then ::1 when available
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex connections_mu_;
  std::condition_variable connections_done_;
  int connections_ = 0;  // TCP connections being served
  std::map<uid_t, int> connections_per_user_;
  std::mutex log_mu_;
  std::chrono::steady_clock::time_point log_window_{};
  int logged_in_window_ = 0;
  int suppressed_ = 0;
  std::thread ipc_thread_;
  std::thread tcp_thread_;
};

// opscope's version as getVersion answers it.
std::string daemon_version();

// Sends one framed request to 127.0.0.1:port and returns the answer's JSON. Throws
// opscope::Error when the daemon cannot be reached or the answer is cut short.
std::string tcp_request(int port, std::string_view json,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace opscope::ondemand
