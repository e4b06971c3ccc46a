// util::FreshPages maps a buffer's pages from its far end on a second thread while the buffer
// is written from its start: the pages get mapped, nothing written is changed, and the thread
// stops when asked, wherever it is. util::release_pages gives unused pages back.
#include "util/fresh_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace opscope::util {
namespace fresh_memory_test {

// A fresh anonymous mapping, unmapped at the end of the test.
struct Mapping {
  explicit Mapping(std::size_t n) : bytes(n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
    // 4 KiB pages, so that residency is counted page by page whatever THP is set to.
    if (data != nullptr) ::madvise(data, n, MADV_NOHUGEPAGE);
  }
  ~Mapping() {
    if (data != nullptr) ::munmap(data, bytes);
  }
  std::size_t resident_pages(std::size_t offset, std::size_t n) const {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in(n / page);
    if (::mincore(data + offset, n, in.data()) != 0) return 0;
    std::size_t count = 0;
    for (unsigned char c : in) count += c & 1;
    return count;
  }
  std::size_t bytes;
  unsigned char* data = nullptr;
};

bool two_cores() { return std::thread::hardware_concurrency() >= 2; }

TEST(FreshPages, MapsTheBufferFromItsEnd) {
  if (!two_cores()) GTEST_SKIP() << "one core: FreshPages starts no thread";
  constexpr std::size_t kBytes = 64u << 20;
  Mapping m(kBytes);
  ASSERT_NE(m.data, nullptr);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  ASSERT_EQ(m.resident_pages(kBytes - (4u << 20), 4u << 20), 0u);
  auto pages = FreshPages::start(m.data, kBytes);
  ASSERT_NE(pages, nullptr);
  // Nothing writes: the thread alone maps every page, the last ones first.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (m.resident_pages(0, kBytes) < kBytes / page &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(m.resident_pages(0, kBytes), kBytes / page);
  pages.reset();
  for (std::size_t i = 0; i < kBytes; i += page) ASSERT_EQ(m.data[i], 0) << i;  // zeros
}

TEST(FreshPages, WritesWhileItMapsKeepEveryByte) {
  constexpr std::size_t kBytes = 96u << 20;
  Mapping m(kBytes);
  ASSERT_NE(m.data, nullptr);
  // Not page-aligned at either end, as a vector's data is not.
  auto pages = FreshPages::start(m.data + 100, kBytes - 300);
  for (std::size_t i = 0; i < kBytes; ++i) m.data[i] = static_cast<unsigned char>(i * 31 + 7);
  pages.reset();
  for (std::size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(m.data[i], static_cast<unsigned char>(i * 31 + 7)) << "byte " << i;
  }
}

TEST(FreshPages, StopsWhenAskedBeforeMappingEverything) {
  if (!two_cores()) GTEST_SKIP() << "one core: FreshPages starts no thread";
  constexpr std::size_t kBytes = 1u << 30;  // about a third of a second to map here
  Mapping m(kBytes);
  ASSERT_NE(m.data, nullptr);
  auto pages = FreshPages::start(m.data, kBytes);
  ASSERT_NE(pages, nullptr);
  // At once: the thread stops after the 2 MiB step it is in. How many steps it took before is
  // up to the scheduler (a few under TSan); mapping all of it takes 0.17 s or more here.
  pages.reset();
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t resident = m.resident_pages(0, kBytes);
  EXPECT_LT(resident, kBytes / page / 2);
  // And it maps nothing once it has stopped.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(m.resident_pages(0, kBytes), resident);
}

TEST(FreshPages, SmallBuffersStartNothing) {
  Mapping m(4u << 20);
  ASSERT_NE(m.data, nullptr);
  EXPECT_EQ(FreshPages::start(m.data, 4u << 20), nullptr);
}

TEST(ReleasePages, GivesBackTheWholePagesInsideTheRange) {
  constexpr std::size_t kBytes = 8u << 20;
  Mapping m(kBytes);
  ASSERT_NE(m.data, nullptr);
  std::memset(m.data, 'x', kBytes);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  release_pages(m.data + 10, kBytes - 10);
  EXPECT_EQ(m.data[9], 'x');  // the partial first page is kept
  EXPECT_EQ(m.resident_pages(0, kBytes), 1u);
  EXPECT_EQ(m.data[page], 0);  // released pages read as zeros
}

}  // namespace fresh_memory_test
}  // namespace opscope::util
