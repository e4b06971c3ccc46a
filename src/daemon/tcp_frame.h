// dynolog's TCP framing, which the daemon's transport (src/daemon/daemon.cpp) and the command
// line's client (src/daemon/tcp_client.cpp) both speak: one connection carries one request and
// its answer, each a native-endian int32 length then that many bytes of JSON
// (src/daemon/requests.h).
//
// The reads and writes are bounded by a deadline, so that a silent or non-reading peer holds
// its side of the connection only until then.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace opscope::ondemand {

inline constexpr int kDefaultDaemonPort = 1778;  // dynolog's
// The largest TCP request accepted (a config is a few hundred bytes).
inline constexpr std::int32_t kMaxTcpMessage = 1 << 20;

// The length prefix, then `json`.
std::string framed(std::string_view json);

// Reads exactly `n` bytes or fails (peer closed, error, or `deadline` passed).
bool read_exactly(int fd, char* out, std::size_t n, std::chrono::steady_clock::time_point deadline);

// Writes all of `data` or fails (peer gone, error, or `deadline` passed): a peer that does not
// read its answer cannot hold the writer past the deadline.
bool write_all(int fd, std::string_view data, std::chrono::steady_clock::time_point deadline);

}  // namespace opscope::ondemand
