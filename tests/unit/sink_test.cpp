#include "export/sink.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "opscope/error.h"
#include "support/test_support.h"

namespace opscope::internal {
namespace {

namespace fs = std::filesystem;
using opscope::testing::read_file;
using opscope::testing::read_gzip_file;
using opscope::testing::TempDir;

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Several MiB of text with some variety, so compression has work to do.
std::string big_text() {
  std::string s;
  for (int i = 0; s.size() < (5u << 20); ++i) s += "{\"event\":" + std::to_string(i * 7919) + "},\n";
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

}  // namespace
}  // namespace opscope::internal
