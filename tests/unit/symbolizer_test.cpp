// Symbolizer (src/analysis/symbolizer.h): return addresses to demangled names and file:line,
// once per address.
#include "analysis/symbolizer.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "record/stack_capture.h"
#if defined(OPSCOPE_CLI)
#include "support/cli_test_support.h"
#endif

// Outside namespace opscope so that the symbolized names are unambiguous.
namespace opscope_symbolizer_test {

struct Capture {
  std::array<std::uint64_t, opscope::record::kMaxStackFrames> words{};
  std::size_t n = 0;
};

inline void keep_frame() { asm volatile("" ::: "memory"); }

// Where the captures below are made, for the line checks.
constexpr int kCaptureLine = __LINE__ + 3;
[[gnu::noipa]] void capture_here(Capture& c, int unused) {
  static_cast<void>(unused);
  c.n = opscope::record::capture_stack(c.words.data(), c.words.size(), 0, false);
  keep_frame();
}

// Two levels of inlining between the capture and the function that is named: the frame is
// reported at the line in that function, not in a helper it inlined.
constexpr int kInnerCaptureLine = __LINE__ + 2;
[[gnu::always_inline]] inline void inlined_inner(Capture& c) {
  c.n = opscope::record::capture_stack(c.words.data(), c.words.size(), 0, false);
  keep_frame();
}
constexpr int kOuterCallLine = __LINE__ + 3;
[[gnu::always_inline]] inline void inlined_outer(Capture& c) {
  keep_frame();
  inlined_inner(c);
  keep_frame();
}
constexpr int kInlinedCallLine = __LINE__ + 3;
[[gnu::noipa]] void calls_inlined(Capture& c) {
  keep_frame();
  inlined_outer(c);
  keep_frame();
}

}  // namespace opscope_symbolizer_test

namespace opscope {
namespace symbolizer_test {

using analysis::SymbolizedFrame;
using analysis::Symbolizer;
using opscope_symbolizer_test::Capture;

bool ends_with(const std::string& s, std::string_view suffix) {
  return std::string_view(s).ends_with(suffix);
}

// Whether this test binary was compiled with debug info (-g; Release builds have none): the
// source lines of its functions can only be known then. Function names need libdw alone.
bool has_line_info() {
  Symbolizer s;
  return s.resolve(reinterpret_cast<std::uint64_t>(&opscope_symbolizer_test::capture_here) + 1)
             .line > 0;
}

#define SKIP_WITHOUT_LIBDW()                               \
  if (!Symbolizer::reads_debug_info())                     \
  GTEST_SKIP() << "built without libdw: static functions " \
                  "have no name, no frame has a line"
#define SKIP_WITHOUT_LINES() \
  SKIP_WITHOUT_LIBDW();      \
  if (!has_line_info()) GTEST_SKIP() << "the test binary has no debug info (built without -g)"

TEST(Symbolizer, NamesStaticAndNamespacedFunctionsDemangled) {
  SKIP_WITHOUT_LIBDW();
  Capture c;
  opscope_symbolizer_test::capture_here(c, 1);
  ASSERT_GE(c.n, 2u);
  Symbolizer s;
  const SymbolizedFrame& f = s.resolve(c.words[0]);
  EXPECT_EQ(f.function,
            "opscope_symbolizer_test::capture_here(opscope_symbolizer_test::Capture&, int)");
  EXPECT_NE(f.object.find("opscope_tests"), std::string::npos) << f.object;
  EXPECT_GT(f.offset, 0u);
  // The caller: this test's body, in an anonymous namespace (a local symbol dladdr cannot see).
  EXPECT_NE(s.resolve(c.words[1]).function.find("NamesStaticAndNamespacedFunctionsDemangled"),
            std::string::npos)
      << s.resolve(c.words[1]).function;
}

TEST(Symbolizer, NamesTheSourceLine) {
  SKIP_WITHOUT_LINES();
  Capture c;
  opscope_symbolizer_test::capture_here(c, 1);
  ASSERT_GE(c.n, 2u);
  Symbolizer s;
  const SymbolizedFrame& f = s.resolve(c.words[0]);
  EXPECT_TRUE(ends_with(f.file, "unit/symbolizer_test.cpp")) << f.file;
  EXPECT_EQ(f.line, opscope_symbolizer_test::kCaptureLine);
  // The caller: this test's body, a few lines above.
  const SymbolizedFrame& caller = s.resolve(c.words[1]);
  EXPECT_TRUE(ends_with(caller.file, "symbolizer_test.cpp")) << caller.file;
  EXPECT_GT(caller.line, opscope_symbolizer_test::kInlinedCallLine);
  EXPECT_LT(caller.line, __LINE__);
}

TEST(Symbolizer, TextIsFunctionAloneWithoutLines) {
  SKIP_WITHOUT_LIBDW();
  if (has_line_info()) GTEST_SKIP() << "the test binary has debug info: see the next test";
  Capture c;
  opscope_symbolizer_test::capture_here(c, 1);
  Symbolizer s;
  EXPECT_EQ(s.text({c.words[0], {}}),
            "opscope_symbolizer_test::capture_here(opscope_symbolizer_test::Capture&, int)");
}

TEST(Symbolizer, TextIsFileLineAndFunctionAsPyTorchWritesIt) {
  SKIP_WITHOUT_LINES();
  Capture c;
  opscope_symbolizer_test::capture_here(c, 1);
  Symbolizer s;
  EXPECT_EQ(s.text({c.words[0], {}}),
            "unit/symbolizer_test.cpp(" + std::to_string(opscope_symbolizer_test::kCaptureLine) +
                "): opscope_symbolizer_test::capture_here(opscope_symbolizer_test::Capture&, int)");
}

TEST(Symbolizer, InlinedCodeIsReportedAtTheCallInTheNamedFunction) {
  SKIP_WITHOUT_LINES();
  Capture c;
  opscope_symbolizer_test::calls_inlined(c);
  ASSERT_GE(c.n, 1u);
  Symbolizer s;
  const SymbolizedFrame& f = s.resolve(c.words[0]);
  EXPECT_EQ(f.function,
            "opscope_symbolizer_test::calls_inlined(opscope_symbolizer_test::Capture&)");
  EXPECT_EQ(f.line, opscope_symbolizer_test::kInlinedCallLine);
  EXPECT_TRUE(ends_with(f.file, "symbolizer_test.cpp")) << f.file;
}

// Each inlined function is a frame of its own, innermost first, at the line where it is: the
// capture's own line in inlined_inner, the call of inlined_inner in inlined_outer, then the
// function that is named, at its call of inlined_outer.
TEST(Symbolizer, InlinedFunctionsAreFramesOfTheirOwn) {
  SKIP_WITHOUT_LINES();
  Capture c;
  opscope_symbolizer_test::calls_inlined(c);
  ASSERT_GE(c.n, 1u);
  Symbolizer s;
  const SymbolizedFrame& f = s.resolve(c.words[0]);
  ASSERT_EQ(f.inlined.size(), 2u);
  EXPECT_NE(f.inlined[0].function.find("inlined_inner"), std::string::npos)
      << f.inlined[0].function;
  EXPECT_EQ(f.inlined[0].line, opscope_symbolizer_test::kInnerCaptureLine);
  EXPECT_NE(f.inlined[1].function.find("inlined_outer"), std::string::npos)
      << f.inlined[1].function;
  EXPECT_EQ(f.inlined[1].line, opscope_symbolizer_test::kOuterCallLine);
  std::vector<std::string> texts;
  s.append_texts({c.words[0], {}}, texts);
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_TRUE(ends_with(
      texts[0], "): opscope_symbolizer_test::inlined_inner(opscope_symbolizer_test::Capture&)"))
      << texts[0];
  EXPECT_EQ(texts[2], s.text({c.words[0], {}}));
}

// libdw is loaded when a stack is first symbolized, not when libopscope is: a process that
// never symbolizes (the command line printing its version) does not load it, and one that
// does has it loaded afterwards.
TEST(Symbolizer, LibdwIsLoadedOnlyToSymbolize) {
#if __has_include(<elfutils/libdwfl.h>)
  // opscope was built with libdw's headers (its build finds them where this test's does): where
  // libdw.so.1 can be loaded, the symbolizer must have loaded it, not quietly gone without.
  if (void* lib = ::dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL); lib != nullptr) {
    ::dlclose(lib);
    ASSERT_TRUE(Symbolizer::reads_debug_info()) << "libdw.so.1 loads, yet the symbolizer has none";
  }
#endif
  SKIP_WITHOUT_LIBDW();
  Symbolizer s;
  s.resolve(reinterpret_cast<std::uint64_t>(&opscope_symbolizer_test::capture_here) + 1);
  void* loaded = ::dlopen("libdw.so.1", RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(loaded, nullptr) << "a stack was symbolized, yet libdw.so.1 is not loaded";
  if (loaded != nullptr) ::dlclose(loaded);
#if defined(OPSCOPE_CLI)
  // The loader lists every object it loads (LD_DEBUG=files), libopscope's dependencies too.
  const auto [code, out] = cli::tests::shell("LD_DEBUG=files " OPSCOPE_CLI " --version");
  ASSERT_EQ(code, 0) << out;
  ASSERT_NE(out.find("libopscope"), std::string::npos) << "the loader listed nothing:\n" << out;
  EXPECT_EQ(out.find("libdw"), std::string::npos) << out;
#endif
}

TEST(Symbolizer, SharedLibraryFunctionsHaveTheirNameAndObject) {
  // An address inside getpid, as a return address one byte in would be.
  const auto pc = reinterpret_cast<std::uint64_t>(&getpid) + 1;
  Symbolizer s;
  const SymbolizedFrame& f = s.resolve(pc);
  EXPECT_NE(f.object.find("libc.so"), std::string::npos) << f.object;
  EXPECT_NE(f.function.find("getpid"), std::string::npos) << f.function;
  EXPECT_EQ(f.function.find('@'), std::string::npos) << f.function;  // no symbol version
}

TEST(Symbolizer, ResolvesEachAddressOnce) {
  Capture c;
  opscope_symbolizer_test::capture_here(c, 1);
  Symbolizer s;
  const SymbolizedFrame* first = &s.resolve(c.words[0]);
  // Other addresses in between do not move or change the cached entry.
  for (std::size_t i = 1; i < c.n; ++i) s.resolve(c.words[i]);
  for (std::uint64_t pc = 0x1000; pc < 0x1000 + 64; ++pc) s.resolve(pc);
  const SymbolizedFrame* again = &s.resolve(c.words[0]);
  EXPECT_EQ(first, again);
}

TEST(Symbolizer, LabelsAndUnknownAddresses) {
  Symbolizer s;
  EXPECT_EQ(s.text({0, "nn.Module: Linear_0"}), "nn.Module: Linear_0");
  // Nothing is mapped at 0x10: the address itself, in hex.
  EXPECT_EQ(s.text({0x10, {}}), "0x10");
  const SymbolizedFrame& f = s.resolve(0x10);
  EXPECT_TRUE(f.function.empty());
  EXPECT_TRUE(f.object.empty());
  EXPECT_EQ(f.line, 0);
}

}  // namespace symbolizer_test
}  // namespace opscope
