// dynolog's IPC fabric, as the traced process and the daemon speak it.
//
// One message is one datagram on a Unix datagram socket: a Metadata header {size_t size;
// char type[32]} then `size` bytes of payload (a trivially-copyable struct, or text). Sockets
// are named in the abstract namespace as "\0" + name + "\0" (the trailing NUL is part of the
// name, as dynolog writes it; /proc/net/unix shows "@dynolog@"); when KINETO_IPC_SOCKET_DIR is
// set, ordinary socket files in that directory are used instead.
//
// Message types (dynolog/src/tracing/IPCMonitor.cpp, libkineto's IpcFabricConfigClient):
//   "ctxt"  client -> daemon: LibkinetoContext (registration); answered "ctxt" + int32
//   "req"   client -> daemon: LibkinetoRequest + pids (a poll); answered "req" + config text
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::ondemand {

inline constexpr std::size_t kTypeBytes = 32;
struct Metadata {
  std::size_t size;
  char type[kTypeBytes];
};
static_assert(sizeof(Metadata) == 40, "dynolog's header is 40 bytes on x86-64");

struct LibkinetoContext {
  std::int32_t gpu;
  pid_t pid;
  std::int64_t jobid;
};
static_assert(sizeof(LibkinetoContext) == 16);

// The kinds of config a poll asks for: bits of LibkinetoRequestHeader::type (dynolog's
// LibkinetoConfigType). dynolog hands an activity-profiler config (a trace request) only to a
// poll whose type has kActivities set, as libkineto's polls have.
inline constexpr std::int32_t kConfigTypeEvents = 1;
inline constexpr std::int32_t kConfigTypeActivities = 2;

struct LibkinetoRequestHeader {
  std::int32_t type;  // kConfigType* bits: what the poll asks for
  std::int32_t n;     // number of pids that follow
  std::int64_t jobid;
  // std::int32_t pids[n] follow
};
static_assert(sizeof(LibkinetoRequestHeader) == 16);

// The largest datagram either side accepts (a config text is a few hundred bytes).
inline constexpr std::size_t kMaxDatagram = 64 * 1024;
// The most pids a request may carry (the process and its ancestors).
inline constexpr std::int32_t kMaxRequestPids = 64;

inline constexpr std::string_view kDaemonEndpoint = "dynolog";

// A message as sent or received.
struct Message {
  std::string type;  // at most 31 bytes
  std::string payload;
};

// Header + payload. Throws opscope::Error when `type` does not fit.
std::string encode(std::string_view type, std::string_view payload);
// Validates and splits a datagram. On a malformed one returns nullopt and says why in `error`
// (shorter than the header, size field disagreeing with the length, type not NUL-terminated).
std::optional<Message> decode(std::string_view datagram, std::string* error);

std::string encode_context(const LibkinetoContext& c);
std::optional<LibkinetoContext> decode_context(std::string_view payload, std::string* error);
// A poll: `type` is kConfigType* bits (opscope's client asks for kConfigTypeActivities).
std::string encode_request(std::int32_t type, std::int64_t jobid,
                           std::span<const std::int32_t> pids);
struct Request {
  std::int32_t type = 0;
  std::int64_t jobid = 0;
  std::vector<std::int32_t> pids;
};
std::optional<Request> decode_request(std::string_view payload, std::string* error);
// The "req" answer that delivers a trace request: its config framed as dynolog frames it,
// "\n    <config>\n    REQUEST_TRACE_ID=<trace id>\n" (parse_capture_config reads it).
std::string frame_config(std::string_view config, std::uint64_t trace_id);

// opscope's extension of the fabric, which dynolog never sees: opscope's daemon appends
// kOpscopeDaemonMark to its "ctxt" answer (libkineto reads only the int32 before it), and a
// client that saw it reports what became of each request it was given in kReportType
// datagrams, which the daemon does not answer.
inline constexpr std::string_view kOpscopeDaemonMark = "opscope-daemon";
inline constexpr std::string_view kReportType = "opsreport";
struct OutcomeReport {
  std::uint64_t request_id = 0;  // REQUEST_TRACE_ID of the config
  std::string state;             // accepted, refused, recording, written, failed
  std::string detail;            // the reason, or the file written (at most 4096 bytes)
};
// "<request id>\n<state>\n<detail>"
std::string encode_report(const OutcomeReport& report);
std::optional<OutcomeReport> decode_report(std::string_view payload, std::string* error);

// The calling process's pid and its ancestors' (from /proc/<pid>/stat), nearest first, at most
// kMaxRequestPids, stopping before pid 1... as libkineto sends them.
std::vector<std::int32_t> pid_and_ancestors();

// One received datagram.
struct Received {
  std::string sender;  // the sender's endpoint name (without the NULs), empty when unnamed: for
                       // messages only; peers are told apart by sender_address
  std::string sender_address;      // the sender's exact address (sun_path bytes, NULs included)
  std::optional<Message> message;  // nullopt when malformed; `error` says why
  std::string error;
  std::optional<uid_t> uid;  // the sender's uid (enable_credentials())
  std::optional<pid_t> pid;  // the sender's pid (enable_credentials())
};

// A bound datagram socket.
class Endpoint {
 public:
  // Binds `name` (abstract, or a file in KINETO_IPC_SOCKET_DIR / `socket_dir` when not empty).
  // Throws opscope::Error naming the endpoint and the reason (name taken, ...).
  explicit Endpoint(std::string name, std::string socket_dir = "");
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const std::string& name() const { return name_; }
  int fd() const { return fd_; }

  // Asks the kernel for each sender's credentials (SO_PASSCRED); Received::uid/pid are set.
  void enable_credentials();
  // Sends one message to endpoint `to` without blocking. False when it could not be sent
  // (no such endpoint, its queue full); `error` says why when given.
  bool send(std::string_view to, std::string_view type, std::string_view payload,
            std::string* error = nullptr) const noexcept;
  // As send(), to an exact address as Received::sender_address gives it: a reply goes to the
  // socket that sent, not to whichever socket has a similar name.
  bool send_to_address(std::string_view address, std::string_view type, std::string_view payload,
                       std::string* error = nullptr) const noexcept;
  // The exact address of endpoint `name` (abstract "\0" name "\0", or the socket file in this
  // endpoint's directory), to compare with Received::sender_address.
  std::string address_of_name(std::string_view name) const;
  // Waits up to `timeout` for one datagram. nullopt on timeout.
  std::optional<Received> receive(std::chrono::milliseconds timeout) const;

 private:
  std::string name_;
  std::string dir_;
  int fd_ = -1;
};

// An address as /proc/net/unix shows it: an abstract one with '@' for each NUL.
std::string printable_address(std::string_view address);

// The socket directory in effect: `socket_dir` when not empty, else KINETO_IPC_SOCKET_DIR,
// else "" (the abstract namespace).
std::string socket_dir_or_env(const std::string& socket_dir);

}  // namespace opscope::ondemand
