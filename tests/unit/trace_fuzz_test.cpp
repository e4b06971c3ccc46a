// Every reader of a trace file, fed mutations of the real traces in ../shared/peers: the
// Chrome/Kineto importer (plain and gzip), merge's splice, the --augment writer's splice, the
// legacy events' bytes and the JSON reader. Each must read the input or refuse it with an
// opscope::Error naming the file; the ASan+UBSan stage runs the same tests, so undefined
// behaviour on any input (an overflowing time, a read past a buffer) fails there.
//
// The mutations are those that found the reader's faults (issue 40): bytes flipped, inserted,
// cut; numbers replaced by extreme or non-JSON ones (9e21, 1e400, NaN, 01000, .5); a second
// traceEvents key, trailing garbage, stray commas and brackets, a BOM, CRLF, invalid UTF-8,
// values of the wrong type. Besides "no crash", three verdicts are checked on every input:
//   - what is not JSON (nlohmann's strict parser is the reference) is refused;
//   - the verdict on a file does not depend on what the read keeps (TraceReadOptions);
//   - merge and --augment write JSON, or nothing.
// About 20 000 inputs in all, 10 s in the Release build. Deterministic (fixed seeds, bounded
// counts), so a failure reproduces; the input that failed
// is also written to fuzz-failures/ under the test's working folder, to become a regression
// file in tests/.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <string>
#include <vector>

#include "export/sink.h"
#include "export/trace_merge.h"
#include "json/json_reader.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/legacy.h"
#include "opscope/report_output.h"
#include "opscope/trace_reader.h"
#include "support/mutation.h"
#include "support/test_support.h"

// Every thread this program starts, counted (TraceFuzzThreads below): this definition comes
// before the C library's in the lookup of every library the program loads, and passes each
// call on. Not under ThreadSanitizer, whose runtime must be the one to see threads start.
#ifndef __SANITIZE_THREAD__
// (static, not in an anonymous namespace: the test files compile in batches, tests/CMakeLists.txt)
static std::atomic<int> g_trace_fuzz_threads_started{0};

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto next = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  g_trace_fuzz_threads_started.fetch_add(1);
  return next(thread, attr, start, arg);
}
#endif

namespace opscope {
namespace trace_fuzz_test {

namespace fs = std::filesystem;
using internal::JsonValue;
using namespace std::string_view_literals;

const std::string kPeers = OPSCOPE_PEERS_DIR;

// --- seeds: the real traces, each cut down to a sample of its events ---------------------------

void write_json(const JsonValue& v, std::string& out);

void write_number(double d, std::string& out) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  out.append(buf, r.ptr);
}

void write_json(const JsonValue& v, std::string& out) {
  switch (v.type()) {
    case JsonValue::Type::kNull: out += "null"; break;
    case JsonValue::Type::kBool: out += v.as_bool() ? "true" : "false"; break;
    case JsonValue::Type::kNumber:
      if (v.is_integer()) {
        out += std::to_string(v.as_int());
      } else {
        write_number(v.as_double(), out);
      }
      break;
    case JsonValue::Type::kString: out += nlohmann::json(v.as_string()).dump(); break;
    case JsonValue::Type::kArray: {
      out += '[';
      for (const JsonValue& e : v.as_array()) {
        if (out.back() != '[') out += ',';
        write_json(e, out);
      }
      out += ']';
      break;
    }
    case JsonValue::Type::kObject: {
      out += '{';
      for (const auto& [k, e] : v.as_object()) {
        if (out.back() != '{') out += ',';
        out += nlohmann::json(k).dump();
        out += ':';
        write_json(e, out);
      }
      out += '}';
      break;
    }
  }
}

std::string file_text(const fs::path& p) {
  return p.extension() == ".gz" ? testing::read_gzip_file(p.string())
                                : testing::read_file(p.string());
}

// The trace at `text` with its top-level keys as they were and, of its events, the first two of
// each (phase, category) pair, at most 48: every kind of event the trace holds, in a seed small
// enough to be read thousands of times.
std::string sample_trace(const std::string& text) {
  const JsonValue doc = internal::parse_json(text);
  JsonValue::Object top;
  for (const auto& [key, value] : doc.as_object()) {
    if (key != "traceEvents") {
      top.emplace_back(key, value);
      continue;
    }
    std::map<std::string, int> seen;
    JsonValue::Array kept;
    for (const JsonValue& e : value.as_array()) {
      const JsonValue* ph = e.find("ph");
      const JsonValue* cat = e.find("cat");
      const std::string kind = (ph && ph->type() == JsonValue::Type::kString ? ph->as_string() : "") +
                               "/" +
                               (cat && cat->type() == JsonValue::Type::kString ? cat->as_string() : "");
      if (++seen[kind] <= 2 && kept.size() < 48) kept.push_back(e);
    }
    top.emplace_back(key, JsonValue(std::move(kept)));
  }
  std::string out;
  write_json(JsonValue(std::move(top)), out);
  return out;
}

// One sample of every distinct Chrome trace in ../shared/peers small enough to parse whole
// quickly (the larger ones repeat the kinds of events of these).
const std::vector<std::string>& trace_seeds() {
  static const std::vector<std::string> seeds = [] {
    std::vector<std::string> out;
    std::set<std::pair<std::string, std::uintmax_t>> seen;  // (name, size): the folders overlap
    for (const char* root : {"kineto-traces", "hta-tests/tests/data"}) {
      const fs::path dir = fs::path(kPeers) / root;
      if (!fs::is_directory(dir)) continue;
      std::vector<fs::path> files;
      for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (!entry.is_regular_file() || entry.file_size() > 200'000) continue;
        if (!name.ends_with(".json") && !name.ends_with(".json.gz")) continue;
        if (!seen.emplace(name, entry.file_size()).second) continue;
        files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& p : files) {
        try {
          const std::string text = file_text(p);
          if (internal::parse_json(text).find("traceEvents") != nullptr) {
            out.push_back(sample_trace(text));
          }
        } catch (const Error&) {  // not a Chrome trace (an execution trace): not a seed
        }
      }
    }
    return out;
  }();
  return seeds;
}

// --- mutations of a trace's text ---------------------------------------------------------------

// Numbers that are not JSON, or are JSON but past what a time in nanoseconds can hold.
constexpr const char* kHostileNumbers[] = {
    "9223372036854775807", "-9223372036854775808", "9223372036854775808",
    "18446744073709551616", "9223372036854775.807", "-9223372036854775.808",
    "9223372036854774", "9e21", "-9e21", "1e400", "-1e400", "1e-400", "1e308", "-0",
    "0.0000001", "NaN", "Infinity", "-Infinity", "01000", ".5", "5.", "1e", "+1", "0x10",
    "1_000", "\"123\"", "null", "true"};
constexpr std::string_view kStrayTokens[] = {
    ",", ",,", "]", "}", "[", "{", "\"", "\\", ":", "\0"sv, "\x01", "\xff", "\xc3", "\xed\xa0\x80",
    "\\ud800", "\\u00", "\r\n", "\xef\xbb\xbf"};
constexpr std::string_view kTrailers[] = {"x", "{}", "]", "\n\n", "\0"sv, "\x1f\x8b\x08",
                                          ",{\"ph\":\"X\"}", "garbage"};

std::size_t pick(std::mt19937_64& rng, std::size_t n) {
  return n == 0 ? 0 : static_cast<std::size_t>(rng() % n);
}

// A random number token of `s`: [begin, end), or begin == end when there is none.
std::pair<std::size_t, std::size_t> some_number(const std::string& s, std::mt19937_64& rng) {
  for (int tries = 0; tries < 16; ++tries) {
    std::size_t at = pick(rng, s.size());
    const auto digit = [&](std::size_t i) { return s[i] >= '0' && s[i] <= '9'; };
    while (at < s.size() && !digit(at)) ++at;
    if (at == s.size()) continue;
    std::size_t b = at;
    while (b > 0 && (digit(b - 1) || s[b - 1] == '.' || s[b - 1] == '-' || s[b - 1] == 'e')) --b;
    std::size_t e = at;
    while (e < s.size() && (digit(e) || s[e] == '.' || s[e] == 'e' || s[e] == '-' || s[e] == '+')) {
      ++e;
    }
    if (b > 0 && s[b - 1] == '"') continue;  // inside a string: a name, not a number
    return {b, e};
  }
  return {0, 0};
}

std::string mutate_trace(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 10) {
      case 0:
      case 1: {  // a number replaced by an extreme or non-JSON one
        const auto [b, end] = some_number(s, rng);
        if (b != end) s.replace(b, end - b, kHostileNumbers[pick(rng, std::size(kHostileNumbers))]);
        break;
      }
      case 2: {  // a stray token
        s.insert(pick(rng, s.size() + 1), kStrayTokens[pick(rng, std::size(kStrayTokens))]);
        break;
      }
      case 3: {  // a second traceEvents key, or another top-level key twice
        const std::size_t at = s.find("\"traceEvents\"");
        if (at == std::string::npos) break;
        s.insert(1, rng() % 2 == 0 ? R"("traceEvents":[{"ph":"X","cat":"cpu_op","name":"twice","pid":1,"tid":1,"ts":1,"dur":1}],)"
                                   : R"("displayTimeUnit":"ms",)");
        break;
      }
      case 4:  // trailing garbage
        s += kTrailers[pick(rng, std::size(kTrailers))];
        break;
      case 5:  // a cut
        s.resize(pick(rng, s.size() + 1));
        break;
      case 6: {  // a value of another type where a number or a string was
        const auto [b, end] = some_number(s, rng);
        static const char* kValues[] = {"\"x\"", "{}", "[]", "null", "{\"a\":[1,2]}", "\"\""};
        if (b != end) s.replace(b, end - b, kValues[pick(rng, std::size(kValues))]);
        break;
      }
      case 7: {  // CRLF line ends, or a byte-order mark
        if (rng() % 2 == 0) {
          s.insert(0, "\xef\xbb\xbf");
        } else {
          for (std::size_t i = s.find(','); i != std::string::npos; i = s.find(',', i + 3)) {
            s.insert(i + 1, "\r\n");
          }
        }
        break;
      }
      default:
        s = testing::mutate_bytes(std::move(s), rng);
        break;
    }
  }
  return s;
}

// --- checks ------------------------------------------------------------------------------------

// The reference for "is JSON": nlohmann's strict parser, with three corrections. It takes a NUL
// byte for the end of its input, where JSON allows none (not as whitespace, not raw inside a
// string); and it refuses a number past a double's range (1e400), which JSON's grammar allows
// (the trace reader refuses such a time by its own rule, not as a syntax error), so those are
// written as 0 before it reads the text; and it refuses a lone surrogate escape ("\ud800"),
// which the grammar allows too.
bool is_json(std::string text) {
  if (text.find('\0') != std::string::npos) return false;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\' && i + 5 < text.size() && text[i + 1] == 'u') {
        // A lone surrogate escape: JSON's grammar allows it (opscope's reader reads U+FFFD),
        // nlohmann refuses it.
        const unsigned cp = static_cast<unsigned>(std::strtoul(text.substr(i + 2, 4).c_str(), nullptr, 16));
        const bool paired = cp >= 0xD800 && cp <= 0xDBFF && i + 11 < text.size() &&
                            text.compare(i + 6, 3, "\\ud") == 0 &&
                            std::string_view("cdefCDEF").find(text[i + 9]) != std::string_view::npos;
        if (cp >= 0xD800 && cp <= 0xDFFF && !paired) text.replace(i + 2, 4, "fffd");
        if (paired) i += 6;
      }
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if ((c == 'e' || c == 'E') && i > 0 && text[i - 1] >= '0' && text[i - 1] <= '9') {
      std::size_t b = i;  // the number's first byte
      while (b > 0 && std::string_view("0123456789.-").find(text[b - 1]) != std::string_view::npos) --b;
      std::size_t e = i + 1;
      while (e < text.size() && std::string_view("0123456789+-").find(text[e]) != std::string_view::npos) ++e;
      if (std::isinf(std::strtod(text.substr(b, e - b).c_str(), nullptr))) {
        text.replace(b, e - b, std::string(e - b, ' ')).replace(b, 1, "0");
      }
      i = e - 1;
    }
  }
  return nlohmann::json::accept(text);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

void write_gzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!text.empty()) gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

std::string gzip_bytes(const std::string& text) {
  testing::TempDir dir;
  write_gzip(dir.file("t.gz"), text);
  return testing::read_file(dir.file("t.gz"));
}

// Keeps the input that broke a check, for a regression file, and says where.
std::string keep_failure(const std::string& what, int round, const std::string& bytes) {
  fs::create_directories("fuzz-failures");
  const std::string path = "fuzz-failures/" + what + "-" + std::to_string(round) + ".bin";
  write_text(path, bytes);
  return " (input kept in " + fs::absolute(path).string() + ")";
}

// read_trace's verdict: "" when the file was read, else the message, which must name it.
std::string read_verdict(const std::string& path, const TraceReadOptions& options) {
  try {
    const std::vector<std::string> paths = {path};
    read_traces(paths, 1, options);
    return "";
  } catch (const Error& e) {
    std::string message = e.what();
    return message.empty() ? "(empty message)" : message;
  }
}

constexpr TraceReadOptions kReadLittle{
    .cpu_range_args = false, .flows = false, .cpu_ranges = false, .other_args = false};

class TraceFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    if (trace_seeds().empty()) GTEST_SKIP() << "no Chrome traces under " << kPeers;
  }
  const std::vector<std::string>& seeds() const { return trace_seeds(); }
  std::string some_seed(std::mt19937_64& rng) const { return seeds()[pick(rng, seeds().size())]; }
  testing::TempDir dir_;
};

TEST_F(TraceFuzz, TheSeedsAreReadWhole) {
  for (const std::string& text : seeds()) {
    write_text(dir_.file("seed.json"), text);
    EXPECT_EQ(read_verdict(dir_.file("seed.json"), {}), "") << text.substr(0, 200);
  }
  EXPECT_GE(seeds().size(), 10u);
}

// The importer, plain and gzip: every mutation is read or refused naming the file, what is not
// JSON is refused, and the verdict is the same whatever the read keeps.
TEST_F(TraceFuzz, ImporterReadsOrRefusesEveryMutation) {
  constexpr int kRounds = 6000;
  std::mt19937_64 rng(40);
  int accepted = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string text = mutate_trace(some_seed(rng), rng);
    const bool gzip = round % 4 == 3;
    const std::string path = dir_.file(gzip ? "t.json.gz" : "t.json");
    gzip ? write_gzip(path, text) : write_text(path, text);
    const std::string full = read_verdict(path, {});
    const std::string little = read_verdict(path, kReadLittle);
    const bool json = is_json(text);
    if (full.empty()) ++accepted;
    EXPECT_TRUE(full.empty() || full.find(path) != std::string::npos)
        << "round " << round << ": the refusal does not name the file: " << full;
    EXPECT_TRUE(json || !full.empty())
        << "round " << round << ": not JSON, read anyway" << keep_failure("importer", round, text);
    EXPECT_EQ(full.empty(), little.empty())
        << "round " << round << ": the verdict depends on what is kept: all: '" << full
        << "', little: '" << little << "'" << keep_failure("importer-options", round, text);
    if (::testing::Test::HasFailure()) break;  // one reproducer is enough
  }
  EXPECT_GT(accepted, kRounds / 20);  // the mutations are not all fatal: the reader is exercised
}

// The gzip layer itself: a valid member's bytes mutated (header, deflate stream, trailer).
TEST_F(TraceFuzz, GzipBytesAreReadOrRefused) {
  constexpr int kRounds = 3000;
  std::mt19937_64 rng(41);
  std::vector<std::string> gz;
  for (const std::string& s : seeds()) gz.push_back(gzip_bytes(s));
  for (int round = 0; round < kRounds; ++round) {
    const std::string bytes = testing::mutate_bytes(gz[pick(rng, gz.size())], rng);
    const std::string path = dir_.file("g.json.gz");
    write_text(path, bytes);
    const std::string full = read_verdict(path, {});
    EXPECT_TRUE(full.empty() || full.find(path) != std::string::npos) << "round " << round << ": " << full;
    EXPECT_EQ(full.empty(), read_verdict(path, kReadLittle).empty())
        << "round " << round << keep_failure("gzip-options", round, bytes);
    if (::testing::Test::HasFailure()) break;
  }
}

// merge splices the inputs' text: its output is JSON, or it refuses and writes nothing.
TEST_F(TraceFuzz, MergeWritesJsonOrRefuses) {
  constexpr int kRounds = 2000;
  std::mt19937_64 rng(42);
  int merged = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string text = mutate_trace(some_seed(rng), rng);
    write_text(dir_.file("a.json"), some_seed(rng));
    write_text(dir_.file("b.json"), text);
    internal::MemorySink sink;
    std::string refusal;
    try {
      internal::merge_traces({dir_.file("a.json"), dir_.file("b.json")}, sink);
    } catch (const Error& e) {
      refusal = e.what();
    }
    if (refusal.empty()) {
      ++merged;
      std::string why;
      EXPECT_TRUE(is_valid_json(sink.data(), &why))
          << "round " << round << ": merge wrote what is not JSON: " << why
          << keep_failure("merge", round, text);
      EXPECT_TRUE(is_json(text))
          << "round " << round << ": merged an input that is not JSON" << keep_failure("merge-input", round, text);
    } else {
      EXPECT_NE(refusal.find(dir_.file("b.json")), std::string::npos) << refusal;
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(merged, kRounds / 20);
}

// --augment copies the file's text and splices counter events in before the end of its
// traceEvents. The file is read first and copied after, so the text copied can differ from the
// one read (a file rewritten in between): what is written is JSON, or nothing.
TEST_F(TraceFuzz, AugmentWritesJsonOrRefuses) {
  constexpr int kRounds = 1500;
  std::mt19937_64 rng(43);
  int written = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string seed = some_seed(rng);
    const std::string in = dir_.file("in.json");
    const std::string out = dir_.file("out.json");
    write_text(in, seed);
    const std::vector<std::shared_ptr<const ProfilerResult>> ranks = {read_trace(in)};
    const std::string text = mutate_trace(seed, rng);
    write_text(in, text);
    fs::remove(out);
    const std::vector<std::string> ins = {in}, outs = {out};
    try {
      write_traces_with_counters(ranks, ins, outs);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(in), std::string::npos) << e.what();
      EXPECT_FALSE(fs::exists(out)) << "round " << round << ": a refused augment left " << out;
      continue;
    }
    ++written;
    std::string why;
    EXPECT_TRUE(is_valid_json(testing::read_file(out), &why))
        << "round " << round << ": --augment wrote what is not JSON: " << why
        << keep_failure("augment", round, text);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(written, kRounds / 20);
}

// The legacy profiler's event bytes (remote events), and what is made of those accepted.
TEST(TraceFuzzLegacy, EventBytesAreReadOrRefused) {
  using Kind = LegacyEventKind;
  std::vector<LegacyEvent> events = {
      LegacyEvent(Kind::kPushRange, "aten::conv2d", 4242, 1'700'000'000'123'456'789, 0x2A,
                  {{1, 3, 224, 224}, {64, 3, 7, 7}, {}}, 3),
      LegacyEvent(Kind::kPopRange, "", 4242, 1'700'000'000'123'999'000, 0x2A, {}, 3),
      LegacyEvent(Kind::kMark, "mark", 7, INT64_MAX),
      LegacyEvent(Kind::kMemoryAlloc, "[memory]", 7, 5)};
  events[3].set_memory_usage(-512, {});
  const std::vector<std::string> seeds = {
      serialize_legacy_events(events), serialize_legacy_events(std::span(events).first(2))};
  std::mt19937_64 rng(44);
  for (int round = 0; round < 20000; ++round) {
    const std::string bytes = testing::mutate_bytes(seeds[pick(rng, seeds.size())], rng);
    std::vector<LegacyEvent> back;
    try {
      back = deserialize_legacy_events(bytes);
    } catch (const Error&) {
      continue;
    }
    if (round % 16 != 0) continue;  // the result and its trace: fewer, they cost more
    const ThreadEventLists lists = {back};
    try {
      legacy_result(lists);
      std::ostringstream trace;
      write_legacy_trace(trace, lists);
      std::string why;
      EXPECT_TRUE(is_valid_json(trace.str(), &why)) << "round " << round << ": " << why;
    } catch (const Error&) {
    }
    if (::testing::Test::HasFailure()) break;
  }
}

// The JSON reader (metadata, requests, config): it and is_valid_json agree with a strict
// reference on every mutation of a trace.
TEST_F(TraceFuzz, JsonReaderAgreesWithAStrictParser) {
  std::mt19937_64 rng(45);
  for (int round = 0; round < 6000; ++round) {
    const std::string text = mutate_trace(some_seed(rng), rng);
    bool parsed = true;
    try {
      internal::parse_json(text);
    } catch (const Error&) {
      parsed = false;
    }
    EXPECT_EQ(parsed, is_valid_json(text)) << "round " << round;
    // RFC 8259 lets a parser ignore a byte-order mark or refuse it; nlohmann ignores it.
    if (text.starts_with("\xef\xbb\xbf")) continue;
    EXPECT_EQ(parsed, is_json(text))
        << "round " << round << keep_failure("json", round, text);
    if (::testing::Test::HasFailure()) break;
  }
}

// scripts/test leaves the TraceFuzz tests whose readers start no thread out of the TSan stage
// (ThreadSanitizer has nothing to find in one thread; the release and ASan stages run them):
// this holds those readers to it, with a read that does start threads beside them to show the
// count works.
TEST_F(TraceFuzz, TheReadersLeftOutOfTsanStartNoThread) {
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "threads are counted by a pthread_create of this program's own, not TSan's";
#else
  std::mt19937_64 rng(46);
  const std::string plain = dir_.file("t.json");
  const std::string gz = dir_.file("t.json.gz");
  std::vector<std::string> texts;
  for (int round = 0; round < 50; ++round) texts.push_back(mutate_trace(some_seed(rng), rng));
  texts.insert(texts.begin(), seeds().begin(), seeds().end());
  const int before = g_trace_fuzz_threads_started.load();
  for (const std::string& text : texts) {
    // ImporterReadsOrRefusesEveryMutation, GzipBytesAreReadOrRefused, TheSeedsAreReadWhole.
    write_text(plain, text);
    write_gzip(gz, text);
    for (const std::string& path : {plain, gz}) {
      read_verdict(path, {});
      read_verdict(path, kReadLittle);
    }
    // MergeWritesJsonOrRefuses.
    write_text(dir_.file("a.json"), texts.front());
    internal::MemorySink sink;
    try {
      internal::merge_traces({dir_.file("a.json"), plain}, sink);
    } catch (const Error&) {
    }
    // JsonReaderAgreesWithAStrictParser.
    try {
      internal::parse_json(text);
    } catch (const Error&) {
    }
  }
  EXPECT_EQ(g_trace_fuzz_threads_started.load(), before);
  // A gzip text read with a core to spare (two threads, one trace) is inflated on a thread of
  // its own.
  write_gzip(gz, seeds().front());
  read_traces(std::vector<std::string>{gz}, 2);
  EXPECT_GT(g_trace_fuzz_threads_started.load(), before) << "the count misses threads";
#endif
}

}  // namespace trace_fuzz_test
}  // namespace opscope
