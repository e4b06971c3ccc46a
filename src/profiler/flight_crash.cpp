// The flight recorder's crash dump: on a fatal signal or std::terminate, the ring is written
// raw (src/collect/raw_dump.h) to a file opened when the recorder started, with
// async-signal-safe calls only, and the previous handler runs.
//
// What the handler does: write(2) from memory that is already mapped (the ring, the call
// sites, the interned names, the crashing thread's open ranges), renameat(2) the file to its
// final name, restore the handler it replaced and re-raise. What it does not: allocate, wait
// on a lock (it tries the two name tables' locks and leaves their names out when they are
// held), format JSON, or symbolize; `opscope flight decode` does that later.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "clock/clock.h"
#include "collect/raw_dump.h"
#include "opscope/error.h"
#include "opscope/internal/clock.h"
#include "profiler/flight_state.h"
#include "record/call_sites.h"

namespace opscope::flight {
namespace {

constexpr std::array<int, 5> kCrashSignals = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

// Everything the handler reads, set up at arm time. Plain globals: a handler must not run
// a function-local static's initializer.
struct Armed {
  std::atomic<bool> armed{false};
  std::atomic<bool> fired{false};  // the first fatal signal writes; any later one only chains
  int dir_fd = -1;
  int fd = -1;
  char temp_name[96] = {};   // in dir_fd, while nothing is written
  char final_name[96] = {};  // what the file is renamed to once whole
  double keep_seconds = 0;
  struct sigaction previous[kCrashSignals.size()] = {};
  std::terminate_handler previous_terminate = nullptr;
  void* alt_stack = nullptr;
};
constinit Armed g_armed;

// The writer's buffer is 16 KiB: static, not on a signal stack that may be small.
alignas(collect::raw::RawWriter) unsigned char g_writer_memory[sizeof(collect::raw::RawWriter)];

void write_raw_dump(int signal) noexcept {
  auto* out = new (g_writer_memory) collect::raw::RawWriter(g_armed.fd);
  collect::raw::RawHeader header{};
  std::memcpy(header.magic, collect::raw::kMagic, sizeof header.magic);
  header.version = collect::raw::kVersion;
  header.header_bytes = sizeof(collect::raw::RawHeader);
  header.chunk_bytes = sizeof(collect::raw::RawChunk);
  header.slot_bytes = sizeof(internal::Slot);
  header.pid = static_cast<std::uint64_t>(::getpid());
  header.signal = signal;
  header.keep_seconds = g_armed.keep_seconds;
  // clock_gettime only: calibrate() allocates nothing.
  const clock::TickConverter conv = clock::TickConverter::calibrate(clock::process_anchor());
  header.dump_ticks = internal::ticks();
  header.dump_wall_ns = conv.to_wall_ns(header.dump_ticks);
  header.ns_per_tick = conv.ns_per_tick();
  collect::raw::ring_figures(header);
  out->section(collect::raw::Section::kHeader, sizeof header);
  out->put(&header, sizeof header);
  collect::raw::write_ring_chunks(*out);
  // The crashing thread's open ranges: read from its own thread-local memory.
  const internal::ThreadContext& c = internal::t_ctx;
  const std::uint32_t depth =
      c.open_depth < internal::kOpenRangeDepth ? c.open_depth : internal::kOpenRangeDepth;
  for (std::uint32_t i = 0; i < depth; ++i) {
    collect::raw::RawOpenRange open{};
    open.tid = 0;  // filled by the decoder from the chunk of the same slot, when there is one
    open.slot = c.slot;
    open.range = c.open[i];
    out->section(collect::raw::Section::kOpenRange, sizeof open);
    out->put(&open, sizeof open);
  }
  record::write_call_sites(*out);
  collect::raw::write_interned_names(*out);
  out->section(collect::raw::Section::kEnd, 0);
  if (out->flush()) {
    ::fsync(g_armed.fd);
    ::renameat(g_armed.dir_fd, g_armed.temp_name, g_armed.dir_fd, g_armed.final_name);
  }
  out->~RawWriter();
}

void chain_to_previous(int signal, siginfo_t* info, void* context) noexcept {
  std::size_t i = 0;
  while (i < kCrashSignals.size() && kCrashSignals[i] != signal) ++i;
  if (i == kCrashSignals.size()) return;
  const struct sigaction& before = g_armed.previous[i];
  if ((before.sa_flags & SA_SIGINFO) != 0 && before.sa_sigaction != nullptr) {
    before.sa_sigaction(signal, info, context);
    return;
  }
  if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN &&
      before.sa_handler != nullptr) {
    before.sa_handler(signal);
    return;
  }
  // The default action (an ignored fault would only fault again): ends the process with the
  // signal, so that its parent, a core dump and a shell see what they would have seen.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(signal, &dfl, nullptr);
  ::raise(signal);  // delivered when the handler returns (the signal is blocked until then)
}

void on_fatal_signal(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (g_armed.armed.load(std::memory_order_acquire) &&
      !g_armed.fired.exchange(true, std::memory_order_acq_rel)) {
    write_raw_dump(signal);
  }
  errno = saved_errno;
  chain_to_previous(signal, info, context);
}

void on_terminate() {
  if (g_armed.armed.load(std::memory_order_acquire) &&
      !g_armed.fired.exchange(true, std::memory_order_acq_rel)) {
    write_raw_dump(0);
  }
  if (g_armed.previous_terminate != nullptr) g_armed.previous_terminate();
  std::abort();
}

// Removes the file when nothing was written to it (the program ends without a crash).
void remove_unused_crash_file() noexcept {
  if (g_armed.dir_fd < 0) return;
  if (!g_armed.fired.load(std::memory_order_acquire)) {
    ::unlinkat(g_armed.dir_fd, g_armed.temp_name, 0);
  }
}

}  // namespace

void arm_crash_dump(const std::string& dir, double keep_seconds) {
  if (g_armed.armed.load(std::memory_order_acquire)) return;
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    throw Error("FlightRecorder", "cannot use dump_dir '" + dir + "' for the crash dump: " +
                                      std::strerror(errno) + " (name a directory that exists)");
  }
  const long pid = static_cast<long>(::getpid());
  std::snprintf(g_armed.temp_name, sizeof g_armed.temp_name, "opscope_flight_%ld_crash.raw.part",
                pid);
  std::snprintf(g_armed.final_name, sizeof g_armed.final_name, "opscope_flight_%ld_crash.raw", pid);
  const int fd = ::openat(dir_fd, g_armed.temp_name,
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const int error = errno;
    ::close(dir_fd);
    throw Error("FlightRecorder",
                "cannot create the crash dump's file in '" + dir + "': " + std::strerror(error));
  }
  g_armed.dir_fd = dir_fd;
  g_armed.fd = fd;
  g_armed.keep_seconds = keep_seconds;
  g_armed.fired.store(false, std::memory_order_relaxed);

  // An alternate stack for the arming thread, so that a stack overflow there is dumped too.
  stack_t current{};
  if (::sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) != 0) {
    constexpr std::size_t kAltStack = 64 * 1024;
    if (void* stack = std::malloc(kAltStack)) {
      stack_t mine{};
      mine.ss_sp = stack;
      mine.ss_size = kAltStack;
      if (::sigaltstack(&mine, nullptr) == 0) {
        g_armed.alt_stack = stack;
      } else {
        std::free(stack);
      }
    }
  }
  for (std::size_t i = 0; i < kCrashSignals.size(); ++i) {
    struct sigaction ours {};
    ours.sa_sigaction = on_fatal_signal;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    ::sigemptyset(&ours.sa_mask);
    ::sigaction(kCrashSignals[i], &ours, &g_armed.previous[i]);
  }
  g_armed.previous_terminate = std::set_terminate(on_terminate);
  static bool registered = false;
  if (!registered) {
    registered = std::atexit([] { remove_unused_crash_file(); }) == 0;
  }
  g_armed.armed.store(true, std::memory_order_release);
}

void disarm_crash_dump() noexcept {
  if (!g_armed.armed.exchange(false, std::memory_order_acq_rel)) return;
  for (std::size_t i = 0; i < kCrashSignals.size(); ++i) {
    struct sigaction now {};
    ::sigaction(kCrashSignals[i], nullptr, &now);
    // Put back what was there, unless someone replaced ours since.
    if ((now.sa_flags & SA_SIGINFO) != 0 && now.sa_sigaction == on_fatal_signal) {
      ::sigaction(kCrashSignals[i], &g_armed.previous[i], nullptr);
    }
  }
  if (std::get_terminate() == on_terminate) std::set_terminate(g_armed.previous_terminate);
  remove_unused_crash_file();
  ::close(g_armed.fd);
  ::close(g_armed.dir_fd);
  g_armed.fd = g_armed.dir_fd = -1;
  // The alternate stack stays: a signal may be running on it on another path.
}

}  // namespace opscope::flight
