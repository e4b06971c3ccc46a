#include "export/sink.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "opscope/error.h"
#include "support/test_support.h"

namespace opscope::internal {
namespace sink_test {

namespace fs = std::filesystem;
using opscope::testing::read_file;
using opscope::testing::read_gzip_file;
using opscope::testing::TempDir;

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

using opscope::testing::error_of;

// `n` bytes that no compressor can shrink and no shifted copy would match.
std::string random_bytes(std::size_t n) {
  std::mt19937_64 rng(42);
  std::string s(n, '\0');
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t x = rng();
    std::memcpy(s.data() + i, &x, 8);
  }
  return s;
}

// Piece sizes that straddle the sink's buffers in every way: tiny, odd, exactly a buffer,
// several buffers.
constexpr std::size_t kBuffer = BufferPipeline::kBufferBytes;
constexpr std::size_t kPieces[] = {1, 4093, 65'537, 300'007, kBuffer, 7, 3 * kBuffer + 11};

// The sinks' writer threads alive in this process. Counted by name, not in total: sanitizer
// runtimes start threads of their own at moments of their choosing.
std::size_t thread_count() {
  std::size_t n = 0;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    n += name == "opscope-writer";
  }
  return n;
}

// A thread that was joined leaves /proc/self/task a moment after join() returns.
bool thread_count_returns_to(std::size_t n) {
  for (int i = 0; i < 1000 && thread_count() != n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return thread_count() == n;
}

// A 1 MiB tmpfs, to run a file system out of space. Mounting needs root (CAP_SYS_ADMIN);
// where it is not allowed, mounted() is false and the caller skips.
class SmallFileSystem {
 public:
  SmallFileSystem()
      : mounted_(::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, "size=1m") == 0),
        reason_(mounted_ ? "" : std::strerror(errno)) {}
  ~SmallFileSystem() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);  // before dir_ is removed
  }
  bool mounted() const { return mounted_; }
  const std::string& reason() const { return reason_; }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  bool mounted_;
  std::string reason_;
};

// Several MiB of text with some variety, so compression has work to do.
std::string big_text() {
  std::string s;
  for (int i = 0; s.size() < (5u << 20); ++i)
    s += "{\"event\":" + std::to_string(i * 7919) + "},\n";
  return s;
}

TEST(Sink, MemorySinkCollects) {
  MemorySink sink;
  sink.write("ab");
  sink.write("");
  sink.write("c");
  EXPECT_FALSE(sink.committed());
  sink.commit();
  EXPECT_TRUE(sink.committed());
  EXPECT_EQ(sink.data(), "abc");
  EXPECT_EQ(sink.take(), "abc");
}

TEST(Sink, FileAppearsOnlyAtCommit) {
  TempDir dir;
  const std::string path = dir.file("out.json");
  FileSink sink(path);
  sink.write("{\"a\":");
  sink.write(std::string(3 << 20, ' '));  // a block larger than the sink's buffer
  sink.write("1}");
  EXPECT_FALSE(fs::exists(path));
  // The temporary sits next to the destination (so rename cannot cross filesystems).
  ASSERT_EQ(entries(dir.path()).size(), 1u);
  EXPECT_EQ(fs::path(sink.temp_path()).parent_path(), dir.path());
  EXPECT_EQ(entries(dir.path())[0].rfind("out.json.tmp." + std::to_string(::getpid()) + ".", 0),
            0u);
  sink.commit();
  EXPECT_EQ(read_file(path), "{\"a\":" + std::string(3 << 20, ' ') + "1}");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"out.json"});
}

TEST(Sink, UncommittedSinkLeavesNothing) {
  TempDir dir;
  {
    FileSink sink(dir.file("a.json"));
    sink.write("partial");
  }
  {
    GzipFileSink sink(dir.file("b.json.gz"));
    sink.write("partial");
  }
  EXPECT_TRUE(entries(dir.path()).empty());
}

TEST(Sink, ExistingFileIsReplacedOnlyAtCommit) {
  TempDir dir;
  const std::string path = dir.file("t.json");
  std::ofstream(path) << "old";
  FileSink sink(path);
  sink.write("new");
  EXPECT_EQ(read_file(path), "old");
  sink.commit();
  EXPECT_EQ(read_file(path), "new");
}

TEST(Sink, MissingDirectoryIsNamed) {
  const std::string msg =
      error_of([] { FileSink("/nonexistent-opscope/x.json", {.what = "Chrome trace"}); });
  EXPECT_EQ(msg,
            "cannot write Chrome trace to '/nonexistent-opscope/x.json': directory does not exist");
}

TEST(Sink, UnwritableDestinationsAreNamed) {
  TempDir dir;
  const std::string file = dir.file("plain");
  std::ofstream(file) << "x";
  EXPECT_EQ(error_of([&] { open_file_sink(file + "/x.json"); }),
            "cannot write file to '" + file + "/x.json': Not a directory");
  EXPECT_EQ(error_of([&] { open_file_sink(dir.path().string()); }),
            "cannot write file to '" + dir.path().string() + "': it is a directory");
}

// A device or a FIFO is written in place, never replaced by a regular file; /dev/full's
// failure is reported; other kinds of file are refused.
TEST(Sink, DevicesAndFifosAreWrittenInPlace) {
  const std::string full = error_of([] {
    auto sink = open_file_sink("/dev/full");
    sink->write(std::string(1 << 20, 'x'));
    sink->commit();
  });
  EXPECT_EQ(full, "cannot write file to '/dev/full': No space left on device");
  struct stat st;
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/full is still a device";
  {
    auto sink = open_file_sink("/dev/null");
    sink->write("nothing");
    sink->commit();
  }
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));

  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { open_file_sink(fifo); }),
            "cannot write file to '" + fifo + "': it is a FIFO that nobody reads");
  std::string got;
  std::thread reader([&] { got = read_file(fifo); });
  for (int i = 0; i < 200; ++i) {
    try {
      auto sink = open_file_sink(fifo);
      sink->write("through the pipe");
      sink->commit();
      break;
    } catch (const Error&) {  // the reader has not opened its end yet
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO is still a FIFO";
  // A link to a device counts as the device.
  const std::string link = dir.file("to-null");
  std::filesystem::create_symlink("/dev/null", link);
  open_file_sink(link)->commit();
  EXPECT_TRUE(std::filesystem::is_symlink(link));

  // A socket is refused, by name.
  const std::string socket_path = dir.file("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, socket_path.c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_NE(error_of([&] { open_file_sink(socket_path); }).find("it is a socket"),
            std::string::npos);
  ::close(fd);
}

// In an open directory (FileSinkOptions::dir_fd) the file is created and renamed there, with
// the mode asked for, whatever the directory's path turns into meanwhile.
TEST(Sink, AFileInAnOpenDirectoryStaysThere) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("real"));
  std::filesystem::create_directory(dir.file("elsewhere"));
  const int dfd = ::open(dir.file("real").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  FileSinkOptions o;
  o.dir_fd = dfd;
  o.mode = 0600;
  auto sink = std::make_unique<FileSink>("t.json", o);
  sink->write("{}");
  // The directory's path now leads elsewhere: the file still lands in the directory opened.
  std::filesystem::rename(dir.file("real"), dir.file("moved"));
  std::filesystem::create_directory_symlink(dir.file("elsewhere"), dir.file("real"));
  sink->commit();
  ::close(dfd);
  EXPECT_EQ(read_file(dir.file("moved/t.json")), "{}");
  EXPECT_FALSE(std::filesystem::exists(dir.file("elsewhere/t.json")));
  struct stat st;
  ASSERT_EQ(::stat(dir.file("moved/t.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(error_of([&] { FileSink("a/b.json", o); }).find("may not contain '/'"),
            std::string::npos);
}

TEST(Sink, ReadOnlyDirectoryIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes to read-only directories";
  TempDir dir;
  const std::string locked = dir.file("locked");
  fs::create_directory(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_EQ(error_of([&] { open_file_sink(locked + "/x.json.gz"); }),
            "cannot write file to '" + locked + "/x.json.gz': Permission denied");
}

TEST(Sink, WriteFailureRemovesTemporary) {
  TempDir dir;
  // A file size limit makes write() fail with EFBIG once the file reaches 1 MiB.
  struct rlimit old;
  ::getrlimit(RLIMIT_FSIZE, &old);
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 1 << 20;
  ::setrlimit(RLIMIT_FSIZE, &small);
  const std::string msg = error_of([&] {
    FileSink sink(dir.file("big.json"));
    sink.write(std::string(4 << 20, 'x'));
    sink.commit();
  });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  EXPECT_EQ(msg, "cannot write file to '" + dir.file("big.json") + "': File too large");
  EXPECT_TRUE(entries(dir.path()).empty());
}

TEST(Sink, LargeWriteRoundTripsInUnevenPieces) {
  TempDir dir;
  const std::string text = random_bytes(50'000'000);
  const std::string path = dir.file("large.json");
  FileSink sink(path);
  std::size_t offset = 0;
  for (std::size_t i = 0; offset < text.size(); ++i) {
    const std::size_t n = std::min(kPieces[i % std::size(kPieces)], text.size() - offset);
    sink.write(std::string_view(text).substr(offset, n));
    offset += n;
  }
  EXPECT_FALSE(fs::exists(path));
  sink.commit();
  EXPECT_TRUE(read_file(path) == text);  // not EXPECT_EQ: a mismatch would print 50 MB
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"large.json"});
}

TEST(Sink, SmallOutputStartsNoThread) {
  TempDir dir;
  const std::size_t before = thread_count();
  FileSink sink(dir.file("small.json"));
  for (int i = 0; i < 1000; ++i) sink.write("{\"event\":1},\n");
  EXPECT_EQ(thread_count(), before);
  sink.commit();  // writes the 13 KB here, on this thread
  EXPECT_EQ(read_file(dir.file("small.json")).size(), 13'000u);
}

TEST(Sink, LargeOutputStopsItsThread) {
  TempDir dir;
  const std::string text = random_bytes(8 << 20);
  const std::size_t before = thread_count();
  auto sink = open_file_sink(dir.file("t.json.gz"));
  sink->write(text);
  EXPECT_EQ(thread_count(), before + 1);  // a full buffer started the writer
  sink->commit();
  EXPECT_TRUE(thread_count_returns_to(before));
  EXPECT_TRUE(read_gzip_file(dir.file("t.json.gz")) == text);
}

TEST(Sink, DestroyedMidStreamLeavesNothing) {
  TempDir dir;
  const std::string piece = random_bytes(300'007);
  const std::size_t before = thread_count();
  for (const char* name : {"a.json", "b.json.gz"}) {
    auto sink = open_file_sink(dir.file(name));
    for (int i = 0; i < 40; ++i) sink->write(piece);  // 12 MB: buffers are in flight
    EXPECT_EQ(thread_count(), before + 1) << name;
    sink.reset();
    EXPECT_TRUE(entries(dir.path()).empty()) << name;
    EXPECT_TRUE(thread_count_returns_to(before)) << name;
  }
}

TEST(Sink, FullFileSystemFailsTheWriteAndLeavesNothing) {
  SmallFileSystem small;
  if (!small.mounted()) GTEST_SKIP() << "cannot mount a 1 MiB tmpfs: " << small.reason();
  // Incompressible, so that the gzip sink runs out of space too.
  const std::string piece = random_bytes(256 << 10);
  for (const char* name : {"full.json", "full.json.gz"}) {
    const std::string path = small.dir().file(name);
    std::size_t written = 0;
    const std::string msg = error_of([&] {
      auto sink = open_file_sink(path);
      for (; written < (64u << 20); written += piece.size()) sink->write(piece);
      sink->commit();
    });
    EXPECT_EQ(msg, "cannot write file to '" + path + "': No space left on device") << name;
    // The writer thread fails on the first or second buffer; the caller can fill only the
    // buffers in rotation before it must wait, and learns of the failure then: from write().
    EXPECT_LT(written, 8u << 20) << name;
    EXPECT_TRUE(entries(small.dir().path()).empty()) << name;
  }
}

TEST(Sink, GzipRoundTrip) {
  TempDir dir;
  const std::string text = big_text();
  const std::string path = dir.file("t.json.gz");
  auto sink = open_file_sink(path);
  for (std::size_t i = 0; i < text.size(); i += 100'000) sink->write(text.substr(i, 100'000));
  EXPECT_FALSE(fs::exists(path));
  sink->commit();
  const std::string raw = read_file(path);
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(raw[0]), 0x1F);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(raw[1]), 0x8B);
  EXPECT_LT(raw.size(), text.size() / 4);
  EXPECT_EQ(read_gzip_file(path), text);
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"t.json.gz"});
}

TEST(Sink, EmptyGzipIsValid) {
  TempDir dir;
  GzipFileSink sink(dir.file("e.gz"));
  sink.commit();
  EXPECT_EQ(read_gzip_file(dir.file("e.gz")), "");
}

TEST(Sink, PlainPathIsNotCompressed) {
  TempDir dir;
  auto sink = open_file_sink(dir.file("t.json"), {.fsync = true});
  sink->write("[]");
  sink->commit();
  EXPECT_EQ(read_file(dir.file("t.json")), "[]");
}

}  // namespace sink_test
// A large output is mapped ahead of the writes (MemorySink::populate_ahead): what comes out
// is still exactly what went in, reserved or not, across the 16 MiB steps and regrowth.
TEST(MemorySink, LargeOutputsKeepEveryByte) {
  for (const bool reserved : {true, false}) {
    opscope::internal::MemorySink sink;
    if (reserved) sink.reserve(40u << 20);
    std::string expected;
    std::string block;
    for (std::size_t i = 0; expected.size() < (36u << 20); ++i) {
      block.assign(1 + (i * 7919) % 70000, static_cast<char>('a' + i % 26));
      sink.write(block);
      expected += block;
    }
    sink.commit();
    ASSERT_EQ(sink.data().size(), expected.size());
    EXPECT_TRUE(sink.data() == expected) << (reserved ? "reserved" : "not reserved");
  }
}

// A reservation is mapped from its end on a second thread while the output is written
// (util::FreshPages): what comes out is what went in, and the pages of the reservation the
// output did not fill are given back when it is taken.
TEST(MemorySink, UnusedReservedPagesAreGivenBack) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  MemorySink sink;
  sink.reserve(64u << 20);
  std::string expected;
  for (std::size_t i = 0; expected.size() < (20u << 20); ++i) {
    const std::string block(4096 + i % 977, static_cast<char>('A' + i % 26));
    sink.write(block);
    expected += block;
  }
  sink.commit();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the thread map some
  const std::string out = sink.take();
  ASSERT_EQ(out.size(), expected.size());
  EXPECT_TRUE(out == expected);
  // From the first whole page after the output to the end of the reservation.
  const auto begin =
      (reinterpret_cast<std::uintptr_t>(out.data()) + out.size() + 1 + page - 1) & ~(page - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(out.data()) + (64u << 20)) & ~(page - 1);
  std::vector<unsigned char> in((end - begin) / page);
  ASSERT_EQ(::mincore(reinterpret_cast<void*>(begin), end - begin, in.data()), 0);
  std::size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  EXPECT_EQ(resident, 0u) << "of " << in.size() << " pages past the output";
}

}  // namespace opscope::internal
