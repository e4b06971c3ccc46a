// Traces that are not JSON, or not files, or too large for the memory a process may take
// (issue 40): every reader gives one verdict, refuses with the file, the byte and what is
// wrong, and never hangs, aborts or leaves a temporary behind. Every input is made here from a
// small valid trace, by the mutation the issue found accepted or badly told.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "import/json_check.h"
#include "import/kineto_importer.h"
#include "json/json_reader.h"
#include "opscope/error.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"

extern char** environ;

namespace opscope {
namespace hostile_trace_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::kCli;

// A valid trace with what each report reads and what some leave out: a CPU op with args
// (left out by `--report temporal`), a kernel, a flow, metadata, deviceProperties before the
// events and a key after them.
const std::string kBase =
    R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}, {"id": 1}],
 "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 8, "ts": 100, "dur": 50, "args": {"External id": 3, "Input Dims": [[2, 3], [3, 4]], "Sequence number": 11}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 20, "args": {"correlation": 5, "device": 0, "stream": 7}},
  {"ph": "s", "cat": "ac2g", "id": 5, "pid": 7, "tid": 8, "ts": 110, "name": "launch"},
  {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "python"}}
 ],
 "traceName": "t"})";

// One mutation of kBase: `from` (its first occurrence) becomes `to`, whose byte `bad` is the
// first that is not JSON; `what` is a part of the message.
struct Mutation {
  const char* name;
  std::string from;
  std::string to;
  std::size_t bad;
  const char* what;
};

const std::vector<Mutation>& mutations() {
  static const std::vector<Mutation> m = {
      {"leading_zero_in_skipped_args", "[[2, 3]", "[[2, 03]", 5, "leading zero"},
      {"fraction_without_digit", "\"Sequence number\": 11", "\"Sequence number\": .5", 19,
       "expected a value"},
      {"nan_pid", "\"pid\": 7, \"tid\": 8, \"ts\": 100", "\"pid\": NaN, \"tid\": 8, \"ts\": 100", 7,
       "expected a value"},
      {"nul_in_pid", "\"pid\": 7, \"tid\": 8, \"ts\": 100",
       std::string("\"pid\": 7\0, \"tid\": 8, \"ts\": 100", 30), 8, "in a number"},
      {"control_byte_in_tid", "\"tid\": 8, \"ts\": 100", "\"tid\": 8\x01, \"ts\": 100", 8,
       "in a number"},
      {"backslash_in_tid", "\"tid\": 8, \"ts\": 100", "\"tid\": 8\\9, \"ts\": 100", 8,
       "in a number"},
      {"missing_comma_in_args", "\"External id\": 3, \"Input Dims\"",
       "\"External id\": 3 \"Input Dims\"", 17, "expected ',' or '}'"},
      {"double_comma_in_device_properties", "\"GPU\"}, {\"id\": 1}", "\"GPU\"},, {\"id\": 1}", 7,
       "expected a value"},
      {"bracket_of_the_wrong_kind", "[[2, 3]", "[[2, 3}", 6, "expected ',' or ']'"},
      {"double_comma_between_events", "}},\n  {\"ph\": \"X\", \"cat\": \"kernel\"",
       "}},,\n  {\"ph\": \"X\", \"cat\": \"kernel\"", 3, "expected a value"},
      {"trailing_comma_in_events", "{\"name\": \"python\"}}\n ]", "{\"name\": \"python\"}},\n ]",
       22, "expected a value"},
      {"bad_escape", "\"name\": \"launch\"", "\"name\": \"la\\qunch\"", 11, "escape"},
      {"infinity_dur", "\"dur\": 50", "\"dur\": Infinity", 7, "expected a value"},
      {"leading_zero_ts", "\"ts\": 120", "\"ts\": 0120", 6, "leading zero"},
      {"lone_minus", "\"correlation\": 5", "\"correlation\": -", 16, "digit"},
      {"misspelled_literal", "\"stream\": 7", "\"stream\": tru", 10, "expected a value"},
      {"second_trace_events", "\"traceName\": \"t\"", "\"traceEvents\": [], \"traceName\": \"t\"",
       0, "second top-level \"traceEvents\""},
      {"duplicate_top_level_key", "\"traceName\": \"t\"",
       "\"traceName\": \"t\", \"traceName\": \"u\"", 18, "a second time"},
      {"bad_escape_in_top_level_key", "\"traceName\": \"t\"", "\"trace\\qName\": \"t\"", 6,
       "escape"},
      {"trailing_garbage", "\"traceName\": \"t\"}", "\"traceName\": \"t\"} x", 18,
       "unexpected text after"},
  };
  return m;
}

struct Made {
  std::string text;
  std::size_t bad;  // the byte of the text where it stops being JSON
};

Made apply(const Mutation& m) {
  const std::size_t at = kBase.find(m.from);
  EXPECT_NE(at, std::string::npos) << m.name;
  std::string text = kBase;
  text.replace(at, m.from.size(), m.to);
  return {text, at + m.bad};
}

class Scratch {
 public:
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = dir_.file(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string file(const std::string& name) const { return dir_.file(name); }
  const fs::path& path() const { return dir_.path(); }

 private:
  testing::TempDir dir_;
};

std::string error_of(const std::function<void()>& fn) { return testing::error_of(fn); }

// Whether `message` names byte `n` ("at byte N " or "at byte N:").
bool names_byte(const std::string& message, std::size_t n) {
  const std::string at = "at byte " + std::to_string(n);
  const std::size_t i = message.find(at);
  return i != std::string::npos && i + at.size() < message.size() &&
         (message[i + at.size()] == ' ' || message[i + at.size()] == ':');
}

TEST(HostileTrace, TheBaseIsATrace) {
  const Scratch dir;
  const auto r = read_trace(dir.write("base.json", kBase));
  EXPECT_GE(r->events().size(), 2u);  // the op and the kernel
}

// Each mutation is refused at its byte, whatever is read of the trace: everything, what
// `--report temporal` reads (which leaves out the CPU op's args and the flows), in pieces of
// one event or many, on one thread or two. The message is the same whichever read found it.
TEST(HostileTrace, WhatIsNotJsonIsRefusedAtItsByteWhateverIsRead) {
  const Scratch dir;
  const std::vector<std::string> temporal = {"temporal"};
  for (const Mutation& m : mutations()) {
    SCOPED_TRACE(m.name);
    const Made made = apply(m);
    const std::string path = dir.write(std::string(m.name) + ".json", made.text);
    const std::string whole = error_of([&] { read_trace(path); });
    EXPECT_NE(whole.find("cannot read trace " + path + ": "), std::string::npos) << whole;
    EXPECT_TRUE(names_byte(whole, made.bad)) << whole << " want byte " << made.bad;
    EXPECT_NE(whole.find(m.what), std::string::npos) << whole;
    const std::vector<std::string> paths = {path};
    EXPECT_EQ(error_of([&] { read_traces(paths, 1, what_reports_read(temporal)); }), whole);
    TraceReadOptions nothing;
    nothing.cpu_range_args = nothing.flows = nothing.cpu_ranges = nothing.other_args = false;
    EXPECT_EQ(error_of([&] { read_traces(paths, 1, nothing); }), whole);
    // The streamed read alone (what a text past 256 MiB gets: no second, whole read) names the
    // same byte.
    for (const std::size_t batch : {std::size_t{1}, std::size_t{64}, std::size_t{65536}}) {
      for (const bool helper : {false, true}) {
        const std::string streamed = error_of(
            [&] { import::read_trace_streaming(path, batch, batch, false, helper, nothing); });
        EXPECT_TRUE(names_byte(streamed, made.bad))
            << streamed << " batch " << batch << " want byte " << made.bad;
      }
    }
  }
}

// check_json (over simdjson's index) and the strict recursive parser (is_valid_json) give the
// same verdict on thousands of random edits of a trace: bytes inserted from JSON's troublemakers
// (",,", "01", ".5", "NaN", "\\q", a NUL, ...), erased, overwritten, or the text cut. Texts that
// simdjson's stage 1 refuses itself never reach check_json and are left out.
TEST(HostileTrace, CheckJsonAgreesWithTheStrictParser) {
  std::mt19937_64 rng(40);
  const std::vector<std::string> pieces = {",", ",,", "[", "]", "{", "}", ":", "\"", "\\",
                                           "0", "01", ".5", "-", "NaN", "1e", "tru", "null",
                                           "\x01", std::string(1, '\0'), " ", "\\u12G4",
                                           "\\q", "e5", "+1"};
  int checked = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string t = kBase;
    for (int e = 1 + static_cast<int>(rng() % 3); e > 0; --e) {
      const std::size_t pos = rng() % (t.size() + 1);
      switch (rng() % 4) {
        case 0: t.insert(pos, pieces[rng() % pieces.size()]); break;
        case 1: if (pos < t.size()) t.erase(pos, 1 + rng() % 3); break;
        case 2: t.resize(pos); break;
        default: if (pos < t.size()) t[pos] = static_cast<char>(rng()); break;
      }
    }
    const simdjson::padded_string padded(t);
    simdjson::ondemand::parser parser;
    if (parser.iterate(padded).error() != simdjson::SUCCESS) continue;
    ++checked;
    import::JsonFault fault;
    const bool ok = import::check_json(parser, t, false, fault);
    std::string why;
    const bool valid = is_valid_json(t, &why);
    EXPECT_EQ(ok, valid) << t << "\ncheck_json: " << fault.at << " " << fault.what
                         << "\nstrict: " << why;
  }
  EXPECT_GT(checked, 1000);
}

// Past the whole-text limit the read is streamed only: an error inside an event still names
// the byte and the event.
TEST(HostileTrace, StreamedErrorsNameTheByteAndTheEvent) {
  const Scratch dir;
  const Made made = apply(mutations()[0]);  // in the first event's args
  const std::string path = dir.write("in_event.json", made.text);
  const std::size_t event = made.text.find("{\"ph\": \"X\", \"cat\": \"cpu_op\"");
  for (const std::size_t batch : {std::size_t{1}, std::size_t{65536}}) {
    const std::string e = error_of([&] { import::read_trace_streaming(path, batch, batch); });
    EXPECT_NE(e.find("malformed JSON at byte " + std::to_string(made.bad) +
                     " (in the event that starts at byte " + std::to_string(event) + ")"),
              std::string::npos)
        << e;
  }
}

// A trace cut short says so, and where it ends; an empty file, or one of whitespace, says that.
TEST(HostileTrace, TruncatedAndEmptyFilesSaySo) {
  const Scratch dir;
  for (const char* cut_after : {"\"aten::m", "\"ts\": 12", "\"args\": {", "}},\n", "\"traceNa",
                                "\"traceName\": \"t\"", "\"schemaVersion\": 1"}) {
    SCOPED_TRACE(cut_after);
    const std::string text = kBase.substr(0, kBase.find(cut_after) + std::strlen(cut_after));
    const std::string path = dir.write("cut.json", text);
    const std::string e = error_of([&] { read_trace(path); });
    EXPECT_NE(e.find("cannot read trace " + path + ": truncated at byte " +
                     std::to_string(text.size()) + " (the text ends there"),
              std::string::npos)
        << e;
    const std::string streamed = error_of([&] { import::read_trace_streaming(path, 64, 64); });
    EXPECT_NE(streamed.find("truncated at byte " + std::to_string(text.size())), std::string::npos)
        << streamed;
  }
  const std::string empty = dir.write("empty.json", "");
  EXPECT_NE(error_of([&] { read_trace(empty); }).find(empty + ": the file is empty"),
            std::string::npos)
      << error_of([&] { read_trace(empty); });
  const std::string blank = dir.write("blank.json", " \n\t ");
  EXPECT_NE(error_of([&] { read_trace(blank); }).find(blank + ": the text is only whitespace"),
            std::string::npos);
}

// The model numbers categories in 16 bits: a trace with more is refused naming the file.
TEST(HostileTrace, TooManyCategoriesNamesTheFile) {
  const Scratch dir;
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 70000; ++i) {
    if (i > 0) text += ',';
    text += R"({"ph":"X","cat":"c)" + std::to_string(i) + R"(","name":"n","pid":1,"tid":1,"ts":)" +
            std::to_string(i) + R"(,"dur":1})";
  }
  text += "]}";
  const std::string path = dir.write("categories.json", text);
  const std::string e = error_of([&] { read_trace(path); });
  EXPECT_NE(e.find("cannot read trace " + path + ": "), std::string::npos) << e;
  EXPECT_NE(e.find("65535 distinct event categories"), std::string::npos) << e;
}

// What follows "cannot read trace " in a command's output: the file and the refusal.
std::string refusal(const std::string& output) {
  const std::size_t at = output.find("cannot read trace ");
  if (at == std::string::npos) return "(none in: " + output + ")";
  return output.substr(at, output.find('\n', at) - at);
}

// analyze (whatever the report), merge, analyze diff and --augment give one verdict on each
// file, in the same words, with exit code 1; merge writes nothing.
TEST(HostileTrace, EveryCommandGivesTheSameVerdictInTheSameWords) {
  const Scratch dir;
  const std::string good = dir.write("good.json", kBase);
  std::vector<std::pair<std::string, std::string>> files;  // path, what the message holds
  for (const Mutation& m : mutations()) {
    files.emplace_back(dir.write(std::string(m.name) + ".json", apply(m).text), m.what);
  }
  files.emplace_back(dir.write("truncated.json", kBase.substr(0, 200)), "truncated at byte 200");
  files.emplace_back(dir.write("empty.json", ""), "the file is empty");
  for (const auto& [path, what] : files) {
    SCOPED_TRACE(path);
    const std::string out = dir.file("merged.json");
    const std::vector<std::string> commands = {
        kCli + " analyze " + path + " --report temporal",
        kCli + " analyze " + path + " --report ops",
        kCli + " merge " + path + " " + good + " -o " + out,
        kCli + " analyze diff " + good + " " + path,
        kCli + " analyze " + path + " --augment " + dir.file("augmented"),
    };
    std::string first;
    for (const std::string& command : commands) {
      const auto [code, text] = shell(command);
      EXPECT_EQ(code, 1) << command << "\n" << text;
      const std::string r = refusal(text);
      EXPECT_NE(r.find(path), std::string::npos) << command << "\n" << text;
      EXPECT_NE(r.find(what), std::string::npos) << command << "\n" << text;
      if (first.empty()) first = r;
      EXPECT_EQ(r, first) << command;
    }
    EXPECT_FALSE(fs::exists(out)) << "merge wrote what is not JSON";
  }
}

// A FIFO with no writer, a directory, a device: refused at once, saying what they are, by every
// command and by read_trace (a FIFO once blocked open() forever).
TEST(HostileTrace, OnlyRegularFilesAreRead) {
  const Scratch dir;
  const std::string fifo = dir.file("x.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string good = dir.write("good.json", kBase);
  for (const std::string& command :
       {kCli + " analyze " + fifo, kCli + " merge " + fifo + " -o " + dir.file("m.json"),
        kCli + " analyze diff " + good + " " + fifo}) {
    // `timeout`: a hang fails the test rather than the suite.
    const auto [code, text] = shell("timeout 20 " + command);
    EXPECT_EQ(code, 1) << command << "\n" << text;
    EXPECT_NE(text.find("cannot read trace " + fifo + ": it is a FIFO (named pipe)"),
              std::string::npos)
        << command << "\n"
        << text;
  }
  EXPECT_NE(error_of([&] { read_trace(fifo); }).find("a FIFO (named pipe)"), std::string::npos);
  EXPECT_NE(error_of([&] { read_trace(dir.path().string()); }).find("it is a directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_trace("/dev/null"); }).find("it is a character device"),
            std::string::npos);
}

// The address-space limit the issue ran under (containers, batch jobs). AddressSanitizer and
// ThreadSanitizer map terabytes of shadow memory at start, so a sanitized build runs without it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
const std::string kUnderOneGb;
#else
constexpr bool kSanitized = false;
const std::string kUnderOneGb = "ulimit -v 1000000; ";
#endif

// Under a memory limit a trace that needs more than it is refused naming the file, exit code 1,
// not an abort (std::bad_alloc once escaped: exit 134).
TEST(HostileTrace, AllocationFailuresAreErrorsNamingTheFile) {
  if (kSanitized) GTEST_SKIP() << "needs ulimit -v, which a sanitizer's shadow memory exceeds";
  const Scratch dir;
  // One event whose args hold a 160 MB string: its piece, simdjson's index of it and its copy
  // in the model take well over the 1 GB of address space allowed.
  const std::string path = dir.file("large_event.json");
  {
    std::ofstream out(path, std::ios::binary);
    out << R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, )"
        << R"("ts": 1, "dur": 1, "args": {"blob": ")";
    const std::string block(1 << 20, 'a');
    for (int i = 0; i < 160; ++i) out << block;
    out << R"("}}]})";
  }
  for (const std::string& command :
       {kCli + " analyze " + path + " --max-event-size 0",  // past the 64 MiB an event may hold
        kCli + " merge " + path + " -o " + dir.file("m.json")}) {
    const auto [code, text] = shell(kUnderOneGb + command);
    EXPECT_EQ(code, 1) << command << "\n" << text;
    EXPECT_NE(text.find("cannot read trace " + path + ": out of memory while reading it"),
              std::string::npos)
        << text;
  }
}

// A corrupt .json.gz whose last four bytes (the gzip trailer's size field) claim 4 GB: the size
// once reserved room for that many events, and under a memory limit std::bad_alloc escaped
// every catch (SIGABRT, exit 134). Whatever the reader makes of the claim, the file is refused
// with exit code 1 and its name.
TEST(HostileTrace, AGzipTrailerClaimingGigabytesIsNoAbort) {
  const Scratch dir;
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 20000; ++i) {
    if (i > 0) text += ',';
    text += R"({"ph":"X","cat":"kernel","name":"k)" + std::to_string(i % 97) +
            R"(","pid":0,"tid":7,"ts":)" + std::to_string(i * 3) + R"(,"dur":2})";
  }
  text += "]}";
  const std::string whole = dir.file("whole.json.gz");
  gzFile gz = gzopen(whole.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  std::string bytes = testing::read_file(whole);
  bytes.resize(bytes.size() / 2);
  const std::uint32_t claim = 0xF0000000u;
  std::memcpy(bytes.data() + bytes.size() - 4, &claim, 4);
  const std::string path = dir.write("claims_4gb.json.gz", bytes);
  for (const std::string& command :
       {kCli + " analyze " + path + " --threads 1", kCli + " analyze " + path,
        kCli + " merge " + path + " -o " + dir.file("m.json")}) {
    const auto [code, out] = shell(kUnderOneGb + command);
    EXPECT_EQ(code, 1) << command << "\n" << out;
    EXPECT_NE(out.find("cannot read trace " + path + ": "), std::string::npos) << out;
  }
}

// SIGTERM or SIGINT to a merge removes its temporary and ends it by the signal.
TEST(HostileTrace, AnInterruptedMergeLeavesNoTemporary) {
  const Scratch dir;
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 400000; ++i) {
    if (i > 0) text += ',';
    text += R"({"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":)" + std::to_string(i) +
            R"(,"dur":1,"args":{"External id":)" + std::to_string(i) + "}}";
  }
  text += "]}";
  const std::string input = dir.write("big.json", text);
  for (const int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig);
    const std::string out = dir.file("merged.json");
    // One file four times, for a merge long enough to interrupt: allowed explicitly.
    std::vector<std::string> args = {
        kCli, "merge", input, input, input, input, "-o", out, "--allow-duplicate-ranks"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The signals' default actions in the child, whatever this process inherited (a shell
    // starts background jobs with SIGINT ignored, which merge respects).
    posix_spawnattr_t attr;
    ::posix_spawnattr_init(&attr);
    sigset_t defaults;
    ::sigemptyset(&defaults);
    ::sigaddset(&defaults, SIGTERM);
    ::sigaddset(&defaults, SIGINT);
    ::posix_spawnattr_setsigdefault(&attr, &defaults);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    ASSERT_EQ(::posix_spawn(&pid, kCli.c_str(), nullptr, &attr, argv.data(), environ), 0);
    ::posix_spawnattr_destroy(&attr);
    // The temporary exists from the start (the output is opened before the inputs are read).
    const auto has_temporary = [&] {
      for (const auto& e : fs::directory_iterator(dir.path())) {
        if (e.path().filename().string().starts_with("merged.json.tmp.")) return true;
      }
      return false;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!has_temporary() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(has_temporary()) << "merge made no temporary";
    ::kill(pid, sig);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "merge ended before the signal: make the input larger";
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_FALSE(has_temporary());
    EXPECT_FALSE(fs::exists(out));
  }
}

}  // namespace hostile_trace_test
}  // namespace opscope
