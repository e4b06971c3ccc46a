#include "collect/raw_dump.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace opscope::collect::raw {

void RawWriter::section(Section kind, std::uint64_t bytes) noexcept {
  const SectionHead head{static_cast<std::uint32_t>(kind), 0, bytes};
  put(&head, sizeof head);
}

void RawWriter::put(const void* data, std::size_t bytes) noexcept {
  const auto* from = static_cast<const unsigned char*>(data);
  while (bytes != 0) {
    if (used_ == sizeof buffer_ && !flush()) return;
    const std::size_t n = bytes < sizeof buffer_ - used_ ? bytes : sizeof buffer_ - used_;
    std::memcpy(buffer_ + used_, from, n);
    used_ += n;
    from += n;
    bytes -= n;
  }
}

bool RawWriter::flush() noexcept {
  std::size_t done = 0;
  while (ok_ && done < used_) {
    const ssize_t n = ::write(fd_, buffer_ + done, used_ - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok_ = false;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  used_ = 0;
  return ok_;
}

}  // namespace opscope::collect::raw
