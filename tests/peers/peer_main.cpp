// main() of opscope_peer_tests: the tests against the real dynolog and dyno
// (../shared/peers/dynolog), each run in a private network namespace of its own.
//
// dynolog binds TCP port 1778 on every interface and the abstract Unix name "dynolog", both of
// which belong to a network namespace. A namespace per test process keeps the tests from the
// machine's own daemon and from each other (ctest runs them in parallel), and lets every test
// use dynolog's defaults as a user would. It is entered here, before gtest runs anything and
// while the process has one thread, so every process a test starts inherits it.
#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "peers/peer_support.h"

namespace {

bool write_file(const char* path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f.flush());
}

// Brings the namespace's loopback up (it starts down): 127.0.0.1, and ::1 where IPv6 is on.
std::string loopback_up() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  std::string error;
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    error = std::string("SIOCGIFFLAGS lo: ") + std::strerror(errno);
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) {
      error = std::string("SIOCSIFFLAGS lo: ") + std::strerror(errno);
    }
  }
  ::close(fd);
  return error;
}

// Enters a private network namespace: as root (CI) directly; otherwise through a user
// namespace where the kernel allows unprivileged ones. Returns why it could not, or "".
std::string enter_private_network() {
  if (::unshare(CLONE_NEWNET) != 0) {
    const int root_errno = errno;
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
      return std::string("cannot create a private network namespace (") +
             std::strerror(root_errno) + " as this user, " + std::strerror(errno) +
             " through a user namespace); run as root, or allow unprivileged user namespaces "
             "(sysctl kernel.unprivileged_userns_clone=1)";
    }
    // Keep our own uid inside, so files and credentials look the same.
    if (!write_file("/proc/self/setgroups", "deny") ||
        !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
        !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1")) {
      return "entered a user namespace but could not map the uid";
    }
  }
  return loopback_up();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  opscope::peers::set_namespace_error(enter_private_network());
  return RUN_ALL_TESTS();
}
