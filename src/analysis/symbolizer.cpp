// Symbolization of native return addresses, at export only.
//
// Two sources, best first:
// - libdw (elfutils), when opscope was built with its headers (OPSCOPE_HAVE_LIBDW) and the
//   library is there when a stack is first symbolized (loaded then, with dlopen: linked, it
//   and the four libraries it needs cost every process that loads libopscope 0.2-0.4 ms at
//   start, bench/RESULTS.md, whether or not it ever records a stack): reads the
//   process's own ELF files in-process, so it knows static functions (.symtab, which dladdr
//   cannot see), file:line from DWARF, and which calls were inlined. An address inside inlined
//   code is reported at the line of the outermost inlined call, the line in the function that
//   is named ("train.cpp(42): step()" rather than "stl_vector.h(1287): step()"), and each
//   function inlined there becomes a frame of its own (SymbolizedFrame::inlined), so a range
//   opened in a small function the compiler inlined into its caller still starts at that
//   function and line; opscope's own inlined code (RecordFunction) is left out of the texts.
// - dladdr, when libdw is absent or does not know the address: the object and its load base,
//   the function when it is in the dynamic symbol table (shared libraries; executables only
//   with -rdynamic).
//
// Separate debug files are looked up by build id in the standard local directories
// (/usr/lib/debug/.build-id), never through debuginfod: an export must not reach the network
// (elfutils' standard lookup does when DEBUGINFOD_URLS is set).
//
// Cost. elfutils' own per-address lookups are linear: dwfl_module_addrinfo scans the whole
// symbol table (160 us per address in libstdc++ on this machine) and dwarf_getscopes the
// whole compile unit (280 us in libc with its debug info), so an export with a few thousand
// distinct frames took seconds. Instead each module's function symbols are read once into a
// sorted table, and each compile unit's outermost inlined calls once into another (the price
// of one dwarf_getscopes per unit), and an address is a binary search in both: 1.4 us per
// address in libstdc++; in libc, where nearly every address opens a new unit and its line
// table, 100 us. A Symbolizer opens the process's modules once (reading /proc/self/maps,
// 0.25 ms) and caches every address it resolved (a hit costs 4 ns), so an export pays per
// distinct address, not per event (bench/stack_bench.cpp).
#include "analysis/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#ifndef OPSCOPE_HAVE_LIBDW
#define OPSCOPE_HAVE_LIBDW 0
#endif
#if OPSCOPE_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif

namespace opscope::analysis {
namespace {

// A symbol's name for people: demangled, without the symbol version that .symtab names of
// shared libraries carry ("__libc_start_main@@GLIBC_2.34"; mangled names never contain '@').
std::string demangle(const char* name) {
  if (name == nullptr || *name == '\0') return {};
  std::string plain(name);
  if (const std::size_t at = plain.find('@'); at != std::string::npos && at > 0) {
    plain.resize(at);
  }
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(plain.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out != nullptr ? std::string(out.get()) : plain;
}

// The last two components of a path: "/src/opscope/src/record/x.cpp" -> "record/x.cpp".
// Enough to tell files apart without the build machine's directories.
std::string_view short_path(std::string_view path) {
  const std::size_t last = path.rfind('/');
  if (last == std::string_view::npos || last == 0) return path;
  const std::size_t before = path.rfind('/', last - 1);
  return before == std::string_view::npos ? path : path.substr(before + 1);
}

std::string_view base_name(std::string_view path) {
  const std::size_t last = path.rfind('/');
  return last == std::string_view::npos ? path : path.substr(last + 1);
}

std::string hex(std::uint64_t v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "0x%llx", static_cast<unsigned long long>(v));
  return buffer;
}

#if OPSCOPE_HAVE_LIBDW
// The libdw functions the symbolizer calls, resolved from libdw.so.1 (elfutils' soname since
// 0.1xx) on first use. Listed once: each is a member of LibDw named as libdw names it (so that
// a call reads as it would linked) and is looked up by that same name.
// clang-format off
#define OPSCOPE_LIBDW_FUNCTIONS(X) \
  X(dwfl_begin) \
  X(dwfl_end) \
  X(dwfl_report_begin) \
  X(dwfl_report_end) \
  X(dwfl_linux_proc_report) \
  X(dwfl_linux_proc_find_elf) \
  X(dwfl_build_id_find_debuginfo) \
  X(dwfl_addrmodule) \
  X(dwfl_module_info) \
  X(dwfl_module_getsymtab) \
  X(dwfl_module_getsym_info) \
  X(dwfl_module_getsrc) \
  X(dwfl_lineinfo) \
  X(dwfl_module_addrdie) \
  X(dwarf_dieoffset) \
  X(dwarf_getsrcfiles) \
  X(dwarf_filesrc) \
  X(dwarf_child) \
  X(dwarf_siblingof) \
  X(dwarf_tag) \
  X(dwarf_attr) \
  X(dwarf_attr_integrate) \
  X(dwarf_formstring) \
  X(dwarf_formudata) \
  X(dwarf_ranges)
// clang-format on

struct LibDw {
#define OPSCOPE_LIBDW_MEMBER(name) decltype(&::name) name = nullptr;
  OPSCOPE_LIBDW_FUNCTIONS(OPSCOPE_LIBDW_MEMBER)
#undef OPSCOPE_LIBDW_MEMBER
  // Separate debug info is looked up by build id in the local debug directories only (see
  // the top comment): dwfl_build_id_find_debuginfo, unlike dwfl_standard_find_debuginfo,
  // never asks a debuginfod server.
  Dwfl_Callbacks callbacks{};
};

char* g_debuginfo_path = nullptr;  // nullptr: elfutils' default directories

// libdw, loaded on first use (kept for the process's life); nullptr when it is not there or
// lacks a function: stacks then get what dladdr knows.
const LibDw* load_libdw() {
  void* lib = ::dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return nullptr;
  auto dw = std::make_unique<LibDw>();
  bool all = true;
#define OPSCOPE_LIBDW_RESOLVE(name)                                     \
  dw->name = reinterpret_cast<decltype(dw->name)>(::dlsym(lib, #name)); \
  all = all && dw->name != nullptr;
  OPSCOPE_LIBDW_FUNCTIONS(OPSCOPE_LIBDW_RESOLVE)
#undef OPSCOPE_LIBDW_RESOLVE
  if (!all) {
    ::dlclose(lib);
    return nullptr;
  }
  dw->callbacks = {
      .find_elf = dw->dwfl_linux_proc_find_elf,
      .find_debuginfo = dw->dwfl_build_id_find_debuginfo,
      .section_address = nullptr,
      .debuginfo_path = &g_debuginfo_path,
  };
  return dw.release();
}

const LibDw* libdw() {
  static const LibDw* const loaded = load_libdw();
  return loaded;
}

// libdw, for code that runs only once a session was opened (so it was loaded).
const LibDw& dw() { return *libdw(); }
#undef OPSCOPE_LIBDW_FUNCTIONS

// A function symbol: [start, end) in process addresses. Names point into libdw's copy of
// the string table, valid while the Dwfl is open.
struct Symbol {
  GElf_Addr start;
  GElf_Addr end;
  const char* name;
  int rank;  // at one address: global before weak before local
};

int binding_rank(const GElf_Sym& sym) {
  switch (GELF_ST_BIND(sym.st_info)) {
    case STB_GLOBAL:
      return 0;
    case STB_WEAK:
      return 1;
    default:
      return 2;
  }
}

// The function symbols of `mod` (.symtab when the file or its debug file has one, else
// .dynsym), sorted by address, one per address.
std::vector<Symbol> read_symbols(Dwfl_Module* mod) {
  std::vector<Symbol> out;
  const int n = dw().dwfl_module_getsymtab(mod);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    const char* name = dw().dwfl_module_getsym_info(mod, i, &sym, &addr, nullptr, nullptr, nullptr);
    const int type = GELF_ST_TYPE(sym.st_info);
    if (name == nullptr || *name == '\0' || sym.st_shndx == SHN_UNDEF ||
        (type != STT_FUNC && type != STT_GNU_IFUNC)) {
      continue;
    }
    out.push_back({addr, addr + sym.st_size, name, binding_rank(sym)});
  }
  std::sort(out.begin(), out.end(), [](const Symbol& a, const Symbol& b) {
    if (a.start != b.start) return a.start < b.start;
    if ((a.end > a.start) != (b.end > b.start)) return a.end > a.start;  // sized first
    return a.rank < b.rank;
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Symbol& a, const Symbol& b) { return a.start == b.start; }),
            out.end());
  return out;
}

// The symbol whose range holds `addr`; a symbol without a size only at its own address.
const Symbol* find_symbol(const std::vector<Symbol>& symbols, GElf_Addr addr) {
  auto it = std::upper_bound(symbols.begin(), symbols.end(), addr,
                             [](GElf_Addr a, const Symbol& s) { return a < s.start; });
  // A few steps back: a small symbol inside a larger one (a local label typed as a function)
  // may start after the function that holds `addr`.
  for (int steps = 0; it != symbols.begin() && steps < 8; ++steps) {
    --it;
    if (addr < it->end || addr == it->start) return &*it;
  }
  return nullptr;
}

// An inlined call: which function's code is at [lo, hi), where it was called in the function
// around it, and the calls inlined inside it (sorted by address). Addresses are DWARF
// addresses (without the bias).
struct InlinedCall {
  Dwarf_Addr lo;
  Dwarf_Addr hi;
  const char* file;
  int line;
  std::string function;  // demangled
  std::vector<InlinedCall> inner;
};

void sort_calls(std::vector<InlinedCall>& calls) {
  std::sort(calls.begin(), calls.end(),
            [](const InlinedCall& a, const InlinedCall& b) { return a.lo < b.lo; });
}

// The name of the function an inlined_subroutine DIE is an instance of: its linkage name
// demangled ("opscope::RecordFunction::RecordFunction(...)", "work()"), else its plain name.
std::string inlined_function(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  for (const int name : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dw().dwarf_attr_integrate(die, name, &attr) != nullptr) {
      if (const char* mangled = dw().dwarf_formstring(&attr)) return demangle(mangled);
    }
  }
  if (dw().dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) {
    if (const char* plain = dw().dwarf_formstring(&attr)) return plain;
  }
  return {};
}

// Tags whose children may hold code: what the walk below descends into. Types and their
// members, the bulk of a C++ unit, are skipped.
bool may_hold_code(int tag) {
  switch (tag) {
    case DW_TAG_subprogram:
    case DW_TAG_lexical_block:
    case DW_TAG_namespace:
    case DW_TAG_module:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
      return true;
    default:
      return false;
  }
}

// Collects the inlined calls under `die`, each with the calls inlined inside it.
void collect_inlined_calls(Dwarf_Die* die, Dwarf_Files* files, std::size_t file_count,
                           std::vector<InlinedCall>& out) {
  Dwarf_Die child;
  if (dw().dwarf_child(die, &child) != 0) return;
  do {
    const int tag = dw().dwarf_tag(&child);
    if (tag == DW_TAG_inlined_subroutine) {
      Dwarf_Attribute attr;
      Dwarf_Word file_index = 0;
      Dwarf_Word call_line = 0;
      const char* file = nullptr;
      if (dw().dwarf_formudata(dw().dwarf_attr(&child, DW_AT_call_file, &attr), &file_index) == 0 &&
          dw().dwarf_formudata(dw().dwarf_attr(&child, DW_AT_call_line, &attr), &call_line) == 0 &&
          call_line != 0 && file_index < file_count) {
        file = dw().dwarf_filesrc(files, file_index, nullptr, nullptr);
      }
      if (file == nullptr) {
        // No call site: the address keeps the line of its own code; calls inside still count.
        collect_inlined_calls(&child, files, file_count, out);
        continue;
      }
      std::vector<InlinedCall> inner;
      collect_inlined_calls(&child, files, file_count, inner);
      sort_calls(inner);
      const std::string function = inlined_function(&child);
      Dwarf_Addr base = 0, start = 0, end = 0;
      for (std::ptrdiff_t offset = 0;
           (offset = dw().dwarf_ranges(&child, offset, &base, &start, &end)) > 0;) {
        // GCC emits empty ranges for inlined code that became no instruction (an empty asm).
        if (start >= end) continue;
        InlinedCall call{start, end, file, static_cast<int>(call_line), function, {}};
        for (const InlinedCall& c : inner) {
          if (c.lo >= start && c.hi <= end) call.inner.push_back(c);
        }
        out.push_back(std::move(call));
      }
    } else if (may_hold_code(tag)) {
      collect_inlined_calls(&child, files, file_count, out);
    }
  } while (dw().dwarf_siblingof(&child, &child) == 0);
}

// The inlined calls of one compile unit, sorted by address.
std::vector<InlinedCall> read_inlined_calls(Dwarf_Die* cu) {
  std::vector<InlinedCall> out;
  Dwarf_Files* files = nullptr;
  std::size_t file_count = 0;
  if (dw().dwarf_getsrcfiles(cu, &files, &file_count) != 0) return out;
  collect_inlined_calls(cu, files, file_count, out);
  sort_calls(out);
  return out;
}

// What one module's lookups need, read on first use.
struct ModuleTables {
  bool symbols_read = false;
  std::vector<Symbol> symbols;
  std::unordered_map<Dwarf_Off, std::vector<InlinedCall>> inlined_by_unit;  // by CU offset
};
#endif

}  // namespace

struct Symbolizer::Impl {
#if OPSCOPE_HAVE_LIBDW
  Dwfl* dwfl = nullptr;
  bool opened = false;
  std::unordered_map<Dwfl_Module*, ModuleTables> modules;

  // Opens the process's modules on first use; nullptr when libdw cannot.
  Dwfl* session() {
    if (!opened) {
      opened = true;
      dwfl = libdw() != nullptr ? dw().dwfl_begin(&dw().callbacks) : nullptr;
      if (dwfl != nullptr) {
        dw().dwfl_report_begin(dwfl);
        const bool ok = dw().dwfl_linux_proc_report(dwfl, getpid()) == 0 &&
                        dw().dwfl_report_end(dwfl, nullptr, nullptr) == 0;
        if (!ok) {
          dw().dwfl_end(dwfl);
          dwfl = nullptr;
        }
      }
    }
    return dwfl;
  }

  const Symbol* symbol(Dwfl_Module* mod, GElf_Addr addr) {
    ModuleTables& t = modules[mod];
    if (!t.symbols_read) {
      t.symbols = read_symbols(mod);
      t.symbols_read = true;
    }
    return find_symbol(t.symbols, addr);
  }

  // The inlined calls containing `addr`, outermost first; empty when it is not in inlined
  // code.
  std::vector<const InlinedCall*> inlined_chain(Dwfl_Module* mod, GElf_Addr addr) {
    std::vector<const InlinedCall*> chain;
    Dwarf_Addr bias = 0;
    Dwarf_Die* cu = dw().dwfl_module_addrdie(mod, addr, &bias);
    if (cu == nullptr) return chain;
    auto [it, added] = modules[mod].inlined_by_unit.try_emplace(dw().dwarf_dieoffset(cu));
    if (added) it->second = read_inlined_calls(cu);
    const Dwarf_Addr a = addr - bias;
    const std::vector<InlinedCall>* level = &it->second;
    while (level != nullptr && !level->empty()) {
      auto c = std::upper_bound(level->begin(), level->end(), a,
                                [](Dwarf_Addr x, const InlinedCall& call) { return x < call.lo; });
      const InlinedCall* found = nullptr;
      // The ranges of calls at one level do not overlap; a few steps back tolerate producers
      // whose ranges do.
      for (int steps = 0; c != level->begin() && steps < 8; ++steps) {
        --c;
        if (a < c->hi) {
          found = &*c;
          break;
        }
      }
      if (found == nullptr) break;
      chain.push_back(found);
      level = &found->inner;
    }
    return chain;
  }

  // Resolves `addr` (pc - 1) with libdw. False when no module holds it.
  bool resolve(std::uint64_t pc, std::uint64_t addr, SymbolizedFrame& f) {
    Dwfl* d = session();
    if (d == nullptr) return false;
    Dwfl_Module* mod = dw().dwfl_addrmodule(d, addr);
    if (mod == nullptr) return false;
    Dwarf_Addr start = 0;
    const char* path = nullptr;
    const char* name =
        dw().dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, &path, nullptr);
    // The file's real path (/proc/self/maps), where dladdr would name the program argv[0].
    if (path != nullptr) {
      f.object = path;
    } else if (name != nullptr) {
      f.object = name;
    }
    f.offset = pc - start;
    if (const Symbol* s = symbol(mod, addr); s != nullptr) f.function = demangle(s->name);
    std::string file;  // the address's own line, in the innermost function there
    int line = 0;
    if (Dwfl_Line* l = dw().dwfl_module_getsrc(mod, addr); l != nullptr) {
      int lineno = 0;
      const char* src = dw().dwfl_lineinfo(l, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (src != nullptr && lineno > 0) {
        file = src;
        line = lineno;
      }
    }
    const std::vector<const InlinedCall*> chain = inlined_chain(mod, addr);
    if (chain.empty()) {
      f.file = std::move(file);
      f.line = line;
      return true;
    }
    // The named function's line is where the outermost inlined call was made; each inlined
    // function's, where it called the next inner one; the innermost's, the address's own.
    f.file = chain.front()->file;
    f.line = chain.front()->line;
    for (std::size_t k = chain.size(); k-- > 0;) {
      InlinedFrame frame;
      frame.function = chain[k]->function;
      if (k + 1 == chain.size()) {
        frame.file = file;
        frame.line = line;
      } else {
        frame.file = chain[k + 1]->file;
        frame.line = chain[k + 1]->line;
      }
      f.inlined.push_back(std::move(frame));
    }
    return true;
  }

  ~Impl() {
    if (dwfl != nullptr) dw().dwfl_end(dwfl);
  }
#else
  bool resolve(std::uint64_t, std::uint64_t, SymbolizedFrame&) { return false; }
#endif
};

Symbolizer::Symbolizer() : impl_(new Impl) {}

Symbolizer::~Symbolizer() { delete impl_; }

const SymbolizedFrame& Symbolizer::resolve(std::uint64_t pc) {
  if (auto it = cache_.find(pc); it != cache_.end()) return it->second;
  SymbolizedFrame f;
  // A return address points after the call; the call itself is one byte before.
  const std::uint64_t addr = pc > 0 ? pc - 1 : 0;
  if (addr != 0 && !impl_->resolve(pc, addr, f)) {
    // dladdr too scans a symbol table per call, but only runs without libdw or for an address
    // libdw's view of the process does not hold (a library loaded after the Symbolizer).
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(addr), &info) != 0) {
      if (info.dli_fname != nullptr) f.object = info.dli_fname;
      f.offset = pc - reinterpret_cast<std::uint64_t>(info.dli_fbase);
      if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
        f.function = demangle(info.dli_sname);
      }
    }
  }
  return cache_.emplace(pc, std::move(f)).first->second;
}

bool Symbolizer::reads_debug_info() {
#if OPSCOPE_HAVE_LIBDW
  return libdw() != nullptr;
#else
  return false;
#endif
}

namespace {

// "file(line): function", or the function alone without a line.
std::string frame_text(std::string_view file, int line, const std::string& function) {
  if (line <= 0 || file.empty()) return function;
  std::string out(short_path(file));
  out += '(';
  out += std::to_string(line);
  out += "): ";
  out += function;
  return out;
}

}  // namespace

void Symbolizer::append_texts(const StackFrame& frame, std::vector<std::string>& out) {
  if (frame.is_native()) {
    for (const InlinedFrame& i : resolve(frame.pc).inlined) {
      // opscope's own inlined code (the RecordFunction constructor) is machinery, not the
      // program; so is a frame without a name.
      if (i.function.empty() || std::string_view(i.function).starts_with("opscope::")) continue;
      out.push_back(frame_text(i.file, i.line, i.function));
    }
  }
  out.push_back(text(frame));
}

std::string Symbolizer::text(const StackFrame& frame) {
  if (!frame.is_native()) return std::string(frame.label);
  const SymbolizedFrame& f = resolve(frame.pc);
  if (!f.function.empty()) return frame_text(f.file, f.line, f.function);
  if (!f.object.empty()) {
    std::string out(base_name(f.object));
    out += '+';
    out += hex(f.offset);
    return out;
  }
  return hex(frame.pc);
}

}  // namespace opscope::analysis
