// dynolog's IPC fabric: framing, payloads, endpoints.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "ondemand/ipc.h"
#include "support/test_support.h"

namespace opscope::ondemand {
namespace ondemand_ipc_test {

std::string unique_name(const char* what) {
  return std::string("opscope-test-") + what + "-" + std::to_string(::getpid());
}

TEST(OndemandIpc, FramesAsDynologDoes) {
  const std::string d = encode("req", "abc");
  ASSERT_EQ(d.size(), 43u);
  std::size_t size = 0;
  std::memcpy(&size, d.data(), sizeof size);
  EXPECT_EQ(size, 3u);
  EXPECT_EQ(std::string(d.data() + 8, 3), "req");
  EXPECT_EQ(d[8 + 3], '\0');
  std::string error;
  const auto m = decode(d, &error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(m->type, "req");
  EXPECT_EQ(m->payload, "abc");
  EXPECT_THROW(encode(std::string(32, 't'), ""), Error);
}

TEST(OndemandIpc, MalformedDatagramsSayWhy) {
  std::string error;
  EXPECT_FALSE(decode("short", &error));
  EXPECT_NE(error.find("shorter than the 40-byte header"), std::string::npos) << error;
  std::string d = encode("ctxt", "0123456789abcdef");
  EXPECT_FALSE(decode(d.substr(0, d.size() - 1), &error));
  EXPECT_NE(error.find("the header says 16 payload bytes"), std::string::npos) << error;
  std::memset(d.data() + 8, 'x', 32);
  EXPECT_FALSE(decode(d, &error));
  EXPECT_NE(error.find("not NUL-terminated"), std::string::npos) << error;
}

TEST(OndemandIpc, ContextAndRequestPayloads) {
  const LibkinetoContext c{-1, 4242, 77};
  std::string error;
  const auto back = decode_context(encode_context(c), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->jobid, 77);
  EXPECT_FALSE(decode_context("abc", &error));

  const std::vector<std::int32_t> pids = {10, 9, 1};
  const std::string req = encode_request(kConfigTypeActivities, 5, pids);
  EXPECT_EQ(req.size(), 16u + 12u);
  const auto r = decode_request(req, &error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->jobid, 5);
  EXPECT_EQ(r->pids, pids);
  EXPECT_FALSE(decode_request(req.substr(0, 20), &error));
  EXPECT_NE(error.find("with 3 pids is 28 bytes"), std::string::npos) << error;
  std::string lying = req;
  const std::int32_t huge = 1 << 30;
  std::memcpy(lying.data() + 4, &huge, 4);
  EXPECT_FALSE(decode_request(lying, &error));
  EXPECT_NE(error.find("allowed: 0 to 64"), std::string::npos) << error;
}

TEST(OndemandIpc, AncestorsStartWithThisProcess) {
  const auto pids = pid_and_ancestors();
  ASSERT_FALSE(pids.empty());
  EXPECT_EQ(pids[0], ::getpid());
  if (::getppid() > 1) {
    ASSERT_GE(pids.size(), 2u);
    EXPECT_EQ(pids[1], ::getppid());
  }
}

void round_trip(const std::string& dir) {
  Endpoint server(unique_name("server"), dir);
  server.enable_credentials();
  Endpoint client(unique_name("client"), dir);
  std::string error;
  ASSERT_TRUE(client.send(server.name(), "ctxt", encode_context({0, ::getpid(), 3}), &error))
      << error;
  const auto got = server.receive(std::chrono::milliseconds(2000));
  ASSERT_TRUE(got);
  ASSERT_TRUE(got->message) << got->error;
  EXPECT_EQ(got->message->type, "ctxt");
  EXPECT_EQ(got->sender, client.name());
  ASSERT_TRUE(got->uid);
  EXPECT_EQ(*got->uid, ::getuid());
  EXPECT_EQ(*got->pid, ::getpid());
  // The reply reaches the client by the name the server saw.
  ASSERT_TRUE(server.send(got->sender, "ctxt", std::string(4, '\0'), &error)) << error;
  const auto reply = client.receive(std::chrono::milliseconds(2000));
  ASSERT_TRUE(reply && reply->message);
  EXPECT_EQ(reply->message->type, "ctxt");
  EXPECT_FALSE(client.receive(std::chrono::milliseconds(10))) << "nothing else is queued";
}

TEST(OndemandIpc, EndpointsInTheAbstractNamespace) { round_trip(""); }

TEST(OndemandIpc, EndpointsAsFilesInASocketDir) {
  // Under /tmp, not TMPDIR (TempDir): a deep TMPDIR would not leave room for the names.
  const testing::SocketDir dir;
  round_trip(dir.path());
}

// A socket directory too long for sockaddr_un: no silent fallback (the daemon answers in its
// own directory, which must be the client's), but an error that says what to set and how
// short it must be.
TEST(OndemandIpc, ASocketDirTooLongSaysWhatToSet) {
  const std::string dir = "/tmp/" + std::string(150, 'd');
  const std::string name = unique_name("long");
  const std::string err = testing::error_of([&] { Endpoint e(name, dir); });
  const std::string path = dir + "/" + name;
  EXPECT_NE(
      err.find("IPC socket path too long (" + std::to_string(path.size()) + " bytes, at most 107)"),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("set KINETO_IPC_SOCKET_DIR (the daemon's --socket-dir"), std::string::npos)
      << err;
  EXPECT_NE(err.find("to a directory of at most " + std::to_string(106 - name.size()) + " bytes"),
            std::string::npos)
      << err;
  // What it says fits does fit.
  const testing::SocketDir base;
  std::string fits = base.path() + "/";
  fits.append(106 - name.size() - fits.size(), 'f');
  ASSERT_EQ(fits.size(), 106 - name.size());
  std::filesystem::create_directory(fits);
  EXPECT_NO_THROW({ Endpoint e(name, fits); });
}

TEST(OndemandIpc, AbstractNamesEndWithANul) {
  // A raw socket addressed as dynolog addresses endpoints ("\0name\0") reaches ours.
  Endpoint server(unique_name("nul"), "");
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, server.name().data(), server.name().size());
  const auto len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + server.name().size() + 2);
  const std::string d = encode("req", "");
  ASSERT_EQ(::sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&a), len),
            static_cast<ssize_t>(d.size()));
  ::close(fd);
  const auto got = server.receive(std::chrono::milliseconds(2000));
  ASSERT_TRUE(got && got->message);
  EXPECT_EQ(got->sender, "") << "an unbound sender has no name";
}

TEST(OndemandIpc, TakenNameIsAnErrorNamingIt) {
  Endpoint first(unique_name("taken"), "");
  const std::string err = testing::error_of([&] { Endpoint second(first.name(), ""); });
  EXPECT_NE(err.find("cannot bind IPC endpoint '" + first.name() + "'"), std::string::npos) << err;
}

TEST(OndemandIpc, RandomDatagramsAreRefusedNotCrashed) {
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string d(rng() % 80, '\0');
    for (char& c : d) c = static_cast<char>(rng());
    if (i % 3 == 0 && d.size() >= 40) {
      const std::size_t size = d.size() - 40;
      std::memcpy(d.data(), &size, sizeof size);  // a plausible header, random type
    }
    std::string error;
    if (auto m = decode(d, &error)) {
      ++accepted;
      decode_request(m->payload, &error);
      decode_context(m->payload, &error);
    }
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace ondemand_ipc_test
}  // namespace opscope::ondemand
