#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "daemon/request_handlers.h"
#include "daemon/requests.h"
#include "json/json_reader.h"
#include "opscope/error.h"

namespace opscope::ondemand {

using internal::JsonValue;

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
  try {
    const JsonValue doc = internal::parse_json(json);
    const JsonValue* fn = doc.find("fn");
    if (fn == nullptr || fn->type() != JsonValue::Type::kString) {
      return error_json("the request has no \"fn\" string");
    }
    const RequestHandler* handler = find_request_handler(fn->as_string());
    if (handler == nullptr) {
      std::string served;
      for (const RequestHandler& h : request_handlers())
        served += (served.empty() ? "\"" : ", \"") + std::string(h.fn) + "\"";
      return error_json("unknown fn \"" + fn->as_string() + "\"; this daemon serves " + served);
    }
    return handler->answer(json, RequestContext{registry_, requester});
  } catch (const std::exception& e) {
    log_malformed(std::string("a TCP request: ") + e.what());
    return error_json(e.what());
  }
}

}  // namespace opscope::ondemand
