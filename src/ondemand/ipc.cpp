#include "ondemand/ipc.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ondemand/config.h"
#include "opscope/error.h"

namespace opscope::ondemand {
namespace {

// The socket address of endpoint `name`; its length in `len`.
sockaddr_un address_of(std::string_view name, const std::string& dir, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (dir.empty()) {
    // "\0" + name + "\0": the trailing NUL is part of the name, as dynolog writes it.
    if (name.size() + 2 > sizeof a.sun_path) {
      throw Error("IPC endpoint name too long (" + std::to_string(name.size()) +
                  " bytes, at most " + std::to_string(sizeof a.sun_path - 2) +
                  "): " + std::string(name));
    }
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 2);
  } else {
    const std::string path = dir + "/" + std::string(name);
    if (path.size() + 1 > sizeof a.sun_path) {
      // No fallback to a shorter directory: the daemon answers a client by its name in the
      // daemon's own socket directory, so both must use the same one. Say what to change.
      const std::size_t fits =
          name.size() + 2 < sizeof a.sun_path ? sizeof a.sun_path - 2 - name.size() : 0;
      throw Error("IPC socket path too long (" + std::to_string(path.size()) + " bytes, at most " +
                  std::to_string(sizeof a.sun_path - 1) + "): " + path +
                  "; the socket directory leaves too little room for the endpoint name '" +
                  std::string(name) + "': set KINETO_IPC_SOCKET_DIR (the daemon's --socket-dir, " +
                  "the same directory for both) to a directory of at most " + std::to_string(fits) +
                  " bytes (e.g. one made by mktemp -d under /tmp), or unset it for Linux's "
                  "abstract socket namespace");
    }
    std::memcpy(a.sun_path, path.data(), path.size());
    *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  }
  return a;
}

// The endpoint name in a sender's address.
std::string name_of(const sockaddr_un& a, socklen_t len) {
  const std::size_t n =
      len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  if (n == 0) return {};
  if (a.sun_path[0] == '\0') {
    std::string name(a.sun_path + 1, n - 1);
    while (!name.empty() && name.back() == '\0') name.pop_back();
    return name;
  }
  std::string path(a.sun_path, strnlen(a.sun_path, n));
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

template <typename T>
std::string bytes_of(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

std::string socket_dir_or_env(const std::string& socket_dir) {
  if (!socket_dir.empty()) return socket_dir;
  const char* env = std::getenv("KINETO_IPC_SOCKET_DIR");
  return env != nullptr ? std::string(env) : std::string();
}

std::string encode(std::string_view type, std::string_view payload) {
  if (type.size() >= kTypeBytes) {
    throw Error("IPC message type too long (at most " + std::to_string(kTypeBytes - 1) +
                " bytes): " + std::string(type));
  }
  Metadata m{};
  m.size = payload.size();
  std::memcpy(m.type, type.data(), type.size());
  std::string out = bytes_of(m);
  out.append(payload);
  return out;
}

std::optional<Message> decode(std::string_view datagram, std::string* error) {
  if (datagram.size() < sizeof(Metadata)) {
    *error = "a datagram of " + std::to_string(datagram.size()) + " bytes is shorter than the " +
             std::to_string(sizeof(Metadata)) + "-byte header";
    return std::nullopt;
  }
  Metadata m;
  std::memcpy(&m, datagram.data(), sizeof m);
  if (m.size != datagram.size() - sizeof m) {
    *error = "the header says " + std::to_string(m.size) + " payload bytes, the datagram has " +
             std::to_string(datagram.size() - sizeof m);
    return std::nullopt;
  }
  const std::size_t type_len = strnlen(m.type, kTypeBytes);
  if (type_len == kTypeBytes) {
    *error = "the message type is not NUL-terminated within 32 bytes";
    return std::nullopt;
  }
  return Message{std::string(m.type, type_len), std::string(datagram.substr(sizeof m))};
}

std::string encode_context(const LibkinetoContext& c) { return bytes_of(c); }

std::optional<LibkinetoContext> decode_context(std::string_view payload, std::string* error) {
  if (payload.size() != sizeof(LibkinetoContext)) {
    *error = "a \"ctxt\" payload is " + std::to_string(sizeof(LibkinetoContext)) +
             " bytes, this one " + std::to_string(payload.size());
    return std::nullopt;
  }
  LibkinetoContext c;
  std::memcpy(&c, payload.data(), sizeof c);
  return c;
}

std::string encode_request(std::int32_t type, std::int64_t jobid,
                           std::span<const std::int32_t> pids) {
  LibkinetoRequestHeader h{type, static_cast<std::int32_t>(pids.size()), jobid};
  std::string out = bytes_of(h);
  out.append(reinterpret_cast<const char*>(pids.data()), pids.size_bytes());
  return out;
}

std::optional<Request> decode_request(std::string_view payload, std::string* error) {
  if (payload.size() < sizeof(LibkinetoRequestHeader)) {
    *error = "a \"req\" payload of " + std::to_string(payload.size()) +
             " bytes is shorter than its 16-byte header";
    return std::nullopt;
  }
  LibkinetoRequestHeader h;
  std::memcpy(&h, payload.data(), sizeof h);
  if (h.n < 0 || h.n > kMaxRequestPids) {
    *error = "a \"req\" names " + std::to_string(h.n) + " pids; allowed: 0 to " +
             std::to_string(kMaxRequestPids);
    return std::nullopt;
  }
  const std::size_t want = sizeof h + static_cast<std::size_t>(h.n) * sizeof(std::int32_t);
  if (payload.size() != want) {
    *error = "a \"req\" with " + std::to_string(h.n) + " pids is " + std::to_string(want) +
             " bytes, this one " + std::to_string(payload.size());
    return std::nullopt;
  }
  Request r;
  r.type = h.type;
  r.jobid = h.jobid;
  r.pids.resize(static_cast<std::size_t>(h.n));
  if (!r.pids.empty()) {  // memcpy with an empty vector's null data() is undefined
    std::memcpy(r.pids.data(), payload.data() + sizeof h, r.pids.size() * sizeof(std::int32_t));
  }
  return r;
}

std::string frame_config(std::string_view config, std::uint64_t trace_id) {
  return "\n    " + std::string(config) + "\n    REQUEST_TRACE_ID=" + std::to_string(trace_id) +
         "\n";
}

std::string encode_report(const OutcomeReport& report) {
  return std::to_string(report.request_id) + "\n" + report.state + "\n" + report.detail;
}

std::optional<OutcomeReport> decode_report(std::string_view payload, std::string* error) {
  const std::size_t a = payload.find('\n');
  const std::size_t b = a == std::string_view::npos ? a : payload.find('\n', a + 1);
  const auto id =
      a == std::string_view::npos ? std::nullopt : parse_non_negative(payload.substr(0, a));
  if (b == std::string_view::npos || !id) {
    if (error != nullptr) *error = "a report is \"<request id>\\n<state>\\n<detail>\"";
    return std::nullopt;
  }
  OutcomeReport r;
  r.request_id = static_cast<std::uint64_t>(*id);
  r.state = std::string(payload.substr(a + 1, b - a - 1));
  r.detail = std::string(payload.substr(b + 1));
  constexpr std::string_view kStates[] = {"accepted", "refused", "recording", "written", "failed"};
  if (std::find(std::begin(kStates), std::end(kStates), r.state) == std::end(kStates)) {
    if (error != nullptr) *error = "a report with the unknown state \"" + r.state + "\"";
    return std::nullopt;
  }
  if (r.detail.size() > 4096) r.detail.resize(4096);
  return r;
}

std::vector<std::int32_t> pid_and_ancestors() {
  std::vector<std::int32_t> pids;
  pid_t pid = ::getpid();
  while (pid > 1 && pids.size() < static_cast<std::size_t>(kMaxRequestPids)) {
    pids.push_back(pid);
    // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) break;
    const std::size_t close = line.rfind(')');
    if (close == std::string::npos) break;
    std::istringstream rest(line.substr(close + 1));
    char state = 0;
    pid_t parent = 0;
    if (!(rest >> state >> parent)) break;
    pid = parent;
  }
  return pids;
}

Endpoint::Endpoint(std::string name, std::string socket_dir)
    : name_(std::move(name)), dir_(socket_dir_or_env(socket_dir)) {
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw Error("cannot create an IPC socket: " + std::string(std::strerror(errno)));
  socklen_t len = 0;
  try {
    const sockaddr_un a = address_of(name_, dir_, &len);
    if (!dir_.empty()) ::unlink(a.sun_path);  // a stale file of an earlier run
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
      throw Error("cannot bind IPC endpoint '" + name_ + "'" +
                  (dir_.empty() ? " (abstract namespace)" : " in " + dir_) + ": " +
                  std::strerror(errno));
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

Endpoint::~Endpoint() {
  ::close(fd_);
  if (!dir_.empty()) ::unlink((dir_ + "/" + name_).c_str());
}

void Endpoint::enable_credentials() {
  const int on = 1;
  if (::setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    throw Error("cannot ask for senders' credentials on IPC endpoint '" + name_ +
                "': " + std::strerror(errno));
  }
}

std::string Endpoint::address_of_name(std::string_view name) const {
  socklen_t len = 0;
  const sockaddr_un a = address_of(name, dir_, &len);
  return std::string(a.sun_path, len - offsetof(sockaddr_un, sun_path));
}

std::string printable_address(std::string_view address) {
  std::string out(address);
  if (!out.empty() && out.front() == '\0') {
    std::replace(out.begin(), out.end(), '\0', '@');
  } else {
    out.resize(strnlen(out.c_str(), out.size()));
  }
  return out;
}

bool Endpoint::send_to_address(std::string_view address, std::string_view type,
                               std::string_view payload, std::string* error) const noexcept {
  try {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (address.empty() || address.size() > sizeof a.sun_path) {
      if (error != nullptr) *error = "cannot send to an unnamed or oversized address";
      return false;
    }
    std::memcpy(a.sun_path, address.data(), address.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
    const std::string datagram = encode(type, payload);
    const ssize_t n = ::sendto(fd_, datagram.data(), datagram.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                               reinterpret_cast<const sockaddr*>(&a), len);
    if (n == static_cast<ssize_t>(datagram.size())) return true;
    if (error != nullptr) {
      *error = "cannot send to IPC address '" + printable_address(address) +
               "': " + (n < 0 ? std::strerror(errno) : "short write");
    }
  } catch (const std::exception& e) {
    if (error != nullptr) *error = e.what();
  }
  return false;
}

bool Endpoint::send(std::string_view to, std::string_view type, std::string_view payload,
                    std::string* error) const noexcept {
  try {
    return send_to_address(address_of_name(to), type, payload, error);
  } catch (const std::exception& e) {  // a name too long for an address
    if (error != nullptr) *error = e.what();
  }
  return false;
}

std::optional<Received> Endpoint::receive(std::chrono::milliseconds timeout) const {
  pollfd p{fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return std::nullopt;

  std::string buf(kMaxDatagram + 1, '\0');
  sockaddr_un from{};
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
  msghdr msg{};
  msg.msg_name = &from;
  msg.msg_namelen = sizeof from;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_TRUNC);
  if (n < 0) return std::nullopt;

  Received r;
  r.sender = name_of(from, msg.msg_namelen);
  if (msg.msg_namelen > offsetof(sockaddr_un, sun_path)) {
    r.sender_address.assign(from.sun_path, msg.msg_namelen - offsetof(sockaddr_un, sun_path));
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      ucred cred;
      std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
      r.uid = cred.uid;
      r.pid = cred.pid;
    }
  }
  if (static_cast<std::size_t>(n) > kMaxDatagram) {
    r.error = "a datagram of " + std::to_string(n) + " bytes is larger than the " +
              std::to_string(kMaxDatagram) + " accepted";
    return r;
  }
  r.message = decode(std::string_view(buf.data(), static_cast<std::size_t>(n)), &r.error);
  return r;
}

}  // namespace opscope::ondemand
