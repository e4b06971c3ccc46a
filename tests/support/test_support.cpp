#include "support/test_support.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>

#include "opscope/function_profiler.h"

namespace opscope::testing {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("opscope-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

SocketDir::SocketDir() {
  char name[] = "/tmp/opscope-sock-XXXXXX";
  if (::mkdtemp(name) == nullptr) {
    throw std::runtime_error(std::string("mkdtemp /tmp/opscope-sock-XXXXXX: ") +
                             std::strerror(errno));
  }
  path_ = name;
}

SocketDir::~SocketDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

WarningCapture::WarningCapture() : messages_(std::make_shared<std::vector<std::string>>()) {
  auto sink = messages_;
  auto mu = std::make_shared<std::mutex>();
  previous_ = set_warning_handler([sink, mu](std::string_view m) {
    std::lock_guard<std::mutex> lock(*mu);
    sink->emplace_back(m);
  });
}

WarningCapture::~WarningCapture() { set_warning_handler(std::move(previous_)); }

bool WarningCapture::contains(std::string_view needle) const {
  for (const auto& m : *messages_) {
    if (m.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int send_datagram_as_another_user(const std::string& from, const std::string& to,
                                  const std::string& datagram, int times) {
  const auto address = [](const std::string& bytes, sockaddr_un* a) {
    *a = sockaddr_un{};
    a->sun_family = AF_UNIX;
    std::memcpy(a->sun_path, bytes.data(), std::min(bytes.size(), sizeof a->sun_path));
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + bytes.size());
  };
  sockaddr_un mine, theirs;
  const socklen_t mine_len = address(from, &mine);
  const socklen_t theirs_len = address(to, &theirs);
  const pid_t child = ::fork();
  if (child == 0) {  // only async-signal-safe calls from here: the parent has threads
    constexpr uid_t kThrowaway = 54321;
    if (::setresgid(kThrowaway, kThrowaway, kThrowaway) != 0 ||
        ::setresuid(kThrowaway, kThrowaway, kThrowaway) != 0) {
      ::_exit(10);
    }
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&mine), mine_len) != 0) ::_exit(11);
    for (int i = 0; i < times; ++i) {
      if (::sendto(fd, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&theirs),
                   theirs_len) != static_cast<ssize_t>(datagram.size())) {
        ::_exit(12);
      }
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

std::string read_gzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  if (n < 0) throw std::runtime_error("corrupt gzip " + path);
  return out;
}

RecordedValue recorded_tensor(std::vector<std::int64_t> sizes) {
  RecordedValue v;
  v.kind = ValueKind::kTensor;
  v.sizes = std::move(sizes);
  v.text = "float";
  v.device = "cpu";
  return v;
}

RecordedValue recorded_int(std::int64_t i) {
  RecordedValue v;
  v.kind = ValueKind::kInt;
  v.i = i;
  return v;
}

const std::string& perf_unavailable_reason() {
  static const std::string reason = [] {
    FunctionProfilerOptions options;
    options.stop_at_error = true;
    options.frequency_hz = 4000;
    options.timeout_wait_for_running_sec = 20;
    options.correlate_ranges = false;
    try {
      FunctionProfiler profiler(options);
      profiler.profile([] {
        volatile std::uint64_t x = 0;
        auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        while (std::chrono::steady_clock::now() < end) x = x + 1;
      });
      if (profiler.last_result().profile->total_samples() == 0) {
        return std::string("perf ran but took no samples of a 100 ms busy loop");
      }
      return std::string();
    } catch (const std::exception& e) {
      return "perf cannot sample here: " + std::string(e.what());
    }
  }();
  return reason;
}

}  // namespace opscope::testing
