#include "daemon/tcp_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "daemon/tcp_frame.h"
#include "opscope/error.h"

namespace opscope::ondemand {

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
