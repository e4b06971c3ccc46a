// The on-demand daemon's transport: dynolog's IPC service for traced processes plus its TCP
// trace request, served by `opscope daemon` (tools/daemon_command.cpp).
//
// Logic and transport are separate, as dynolog's ServiceHandler is from its server:
// `ClientRegistry` (src/daemon/client_registry.h) knows the traced processes and answers their
// datagrams and the trace requests without touching a socket; `Daemon` is the thin transport:
// an IPC endpoint thread that feeds the registry the datagrams (src/ondemand/ipc.h), and a
// loopback TCP thread that reads one framed request per connection (src/daemon/tcp_frame.h)
// and dispatches it by "fn" through the table of src/daemon/request_handlers.h.
//
//   opscope::ondemand::DaemonOptions options;
//   options.port = 0;                       // ephemeral; daemon.port() says which
//   opscope::ondemand::Daemon daemon(options);
//   ...                                     // clients register, `opscope trace` asks
//   daemon.stop();                          // also done by the destructor
//
// None of it is in libopscope.so, which every traced process loads: the daemon, its registry
// and the command line's client are the static library opscope_daemon, which the `opscope`
// tool links.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon/client_registry.h"
#include "daemon/tcp_frame.h"
#include "ondemand/ipc.h"

namespace opscope::ondemand {

// The most TCP connections served at once (each on a thread, each bounded by its deadlines);
// past it a new connection is closed at once.
inline constexpr int kMaxConnections = 128;
inline constexpr int kMaxConnectionsPerUser = 32;

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

  // One TCP request's answer (dispatch by "fn" through request_handlers()); never throws.
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

}  // namespace opscope::ondemand
