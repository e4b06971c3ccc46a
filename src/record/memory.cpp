// Allocation reports (opscope/memory.h): devices, categories, and the slow path that writes a
// report into the calling thread's buffer.
//
// report_memory_slow and report_hooked_memory are called from inside allocators (the hook
// library calls the latter from malloc and operator new), so they allocate nothing once the
// thread's buffer exists: a report is one 64-byte blob appended by the collector. A thread's
// first report registers it and maps its first chunk, which does allocate; t_in_report keeps
// those allocations, when they reach an allocator that reports, from re-entering.
#include "opscope/memory.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>

#include "collect/collector.h"
#include "record/hook_abi.h"
#include "opscope/internal/clock.h"
#include "record/memory_record.h"

namespace opscope {
namespace {

// The calling thread's MemoryCategoryScope. Trivial initial-exec thread_locals: reading them
// from inside malloc must not call __tls_get_addr (which may allocate) or a TLS wrapper.
constinit thread_local std::uint8_t t_category __attribute__((tls_model(OPSCOPE_TLS_MODEL))) =
    static_cast<std::uint8_t>(MemoryCategory::kUnknown);
// Set while the thread records a report. What opscope allocates meanwhile (registering the
// thread, its first chunk) may come back as a report, from the hook or from an allocator
// that reports itself; recording that one would re-enter the collector half-way through.
constinit thread_local bool t_in_report __attribute__((tls_model(OPSCOPE_TLS_MODEL))) = false;

constexpr std::string_view kCategoryNames[kNumMemoryCategories] = {
    "PARAMETER",  "OPTIMIZER_STATE", "INPUT",           "TEMPORARY",
    "ACTIVATION", "GRADIENT",        "AUTOGRAD_DETAIL", "UNKNOWN"};

// Whether a report made now on this thread may be recorded at all: not from inside another
// report, nor from inside the collector's slow paths (registering, taking a chunk, a new
// epoch), which allocate while they hold the thread's buffer lock with its cursor half
// updated: recording there would deadlock on that lock (tests/memhook shows it).
bool may_report() noexcept { return !t_in_report && !collect::in_slow_path(); }

class ReportScope {
 public:
  ReportScope() noexcept { t_in_report = true; }
  ~ReportScope() { t_in_report = false; }
  ReportScope(const ReportScope&) = delete;
  ReportScope& operator=(const ReportScope&) = delete;
};

// The epoch the calling thread records reports into, registering the thread on its first
// report; 0 when no session records this thread (or it cannot record: exiting, no memory).
std::uint32_t recording_epoch() noexcept {
  const std::uint32_t state = internal::g_state.load(std::memory_order_relaxed);
  const std::uint32_t epoch = internal::epoch_of(state);
  // Tested again: the caller's test of g_lenses may be from before this window, one without
  // profile_memory, began.
  if (epoch == 0 ||
      (internal::g_lenses.load(std::memory_order_relaxed) & internal::kLensMemory) == 0) {
    return 0;
  }
  internal::ThreadContext& c = internal::t_ctx;
  const bool wanted = (state & internal::kStateRecordAllThreads) ||
                      ((state & internal::kStateRecordSomeThreads) && c.member_epoch == epoch);
  if (!wanted || c.exiting) return 0;
  // The header's (thread, id) must be unique across threads, like a range's handle.
  if (!c.registered) collect::ensure_registered(/*from_allocator=*/true);
  return c.registered ? epoch : 0;  // not registered: exiting, or out of memory
}

// Appends one kMemory blob for the calling thread (recording_epoch() said it records).
void append_report(std::uint32_t epoch, const void* ptr, std::int64_t bytes,
                   std::int64_t total_allocated, std::int64_t total_reserved, Device device,
                   std::uint8_t category, MemoryAction action) noexcept {
  internal::ThreadContext& c = internal::t_ctx;
  record::MemoryPayload payload{};
  payload.bytes = bytes;
  payload.total_allocated = total_allocated;
  payload.total_reserved = total_reserved;
  payload.device_type = static_cast<std::int8_t>(device.type);
  payload.device_index = device.index;
  internal::Record header{};
  header.start = internal::ticks();
  header.name = reinterpret_cast<std::uintptr_t>(ptr);
  header.id = internal::take_other_id(c);
  header.thread = c.slot;
  header.scope = category < kNumMemoryCategories
                     ? category
                     : static_cast<std::uint8_t>(MemoryCategory::kUnknown);
  header.kind = static_cast<std::uint8_t>(internal::RecordKind::kMemory);
  header.flags = static_cast<std::uint8_t>(action);
  internal::append_blob(header, &payload, sizeof payload, epoch);
}

// --- the hook's totals -------------------------------------------------------------------
// The hook keeps no table of addresses, so it cannot know the process's live bytes by
// itself. Its total starts, at the first report of each window, from what glibc counts in
// use (mallinfo2: every arena's chunks in use plus mmapped ones, headers included, so it is
// within a few percent), and then moves by exactly the bytes reported. The sum of a
// window's Bytes is therefore always its last Total Allocated minus its first one's start,
// and frees of blocks allocated before the window do not drive it negative.
//
// One word holds the window's epoch (top 24 bits) and the bytes (low 40 bits, saturating at
// 1 TiB), so that the first report of a window replaces the old window's count without a
// race between a reset and concurrent updates.
constexpr int kCountBits = 40;
constexpr std::uint64_t kCountMask = (std::uint64_t{1} << kCountBits) - 1;
std::atomic<std::uint64_t> g_hook_total{0};

// Heap bytes in use by glibc's allocator. mallinfo2 takes each arena's lock and walks its
// free lists (microseconds; more on a fragmented heap): read once per window, never per
// report. It allocates nothing, and the hook calls it with no allocator lock held.
std::int64_t heap_in_use() noexcept {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  return static_cast<std::int64_t>(info.uordblks + info.hblkhd);
#else
  return 0;  // no mallinfo2: the total is the change since the window's first report
#endif
}

// Adds `delta` to `epoch`'s total and returns the new total.
std::int64_t add_to_hook_total(std::uint32_t epoch, std::int64_t delta) noexcept {
  std::uint64_t old = g_hook_total.load(std::memory_order_relaxed);
  std::int64_t start = -1;  // the window's starting point, read at most once per call
  for (;;) {
    std::int64_t base;
    if ((old >> kCountBits) == epoch) {
      base = static_cast<std::int64_t>(old & kCountMask);
    } else {
      // glibc's count already holds the block this report allocates (the delta adds it) and
      // still holds the one it frees (the delta takes it out).
      if (start < 0) {
        start = std::max<std::int64_t>(heap_in_use() - std::max<std::int64_t>(delta, 0), 0);
      }
      base = start;
    }
    const std::int64_t count =
        std::clamp<std::int64_t>(base + delta, 0, static_cast<std::int64_t>(kCountMask));
    const std::uint64_t next =
        (std::uint64_t{epoch} << kCountBits) | static_cast<std::uint64_t>(count);
    if (g_hook_total.compare_exchange_weak(old, next, std::memory_order_relaxed)) return count;
  }
}

}  // namespace

std::optional<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device{DeviceType::kCPU, -1};
  if (text == "cuda") return Device{DeviceType::kCUDA, -1};
  constexpr std::string_view kCudaPrefix = "cuda:";
  if (text.size() > kCudaPrefix.size() && text.substr(0, kCudaPrefix.size()) == kCudaPrefix) {
    const std::string_view digits = text.substr(kCudaPrefix.size());
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    // Device indices are int8 (c10::DeviceIndex); " 1" and "1x" are not devices.
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && index <= 127) {
      return Device{DeviceType::kCUDA, static_cast<std::int8_t>(index)};
    }
  }
  return std::nullopt;
}

std::string device_name(Device device) {
  std::string name = device.type == DeviceType::kCUDA ? "cuda" : "cpu";
  // CPU has one device; "cpu:0" would only confuse a reader comparing names.
  if (device.type != DeviceType::kCPU && device.index >= 0) {
    name += ':';
    name += std::to_string(device.index);
  }
  return name;
}

std::string_view memory_category_name(MemoryCategory category) noexcept {
  const auto i = static_cast<std::size_t>(category);
  return i < kNumMemoryCategories ? kCategoryNames[i] : kCategoryNames[kNumMemoryCategories - 1];
}

MemoryCategoryScope::MemoryCategoryScope(MemoryCategory category) noexcept : previous_(t_category) {
  t_category = static_cast<std::uint8_t>(category);
}

MemoryCategoryScope::~MemoryCategoryScope() { t_category = previous_; }

namespace internal {

void report_memory_slow(const void* ptr, std::int64_t bytes, std::int64_t total_allocated,
                        std::int64_t total_reserved, Device device,
                        std::optional<MemoryCategory> category) noexcept {
  if (!may_report()) return;
  ReportScope scope;
  const std::uint32_t epoch = recording_epoch();
  if (epoch == 0) return;
  const std::uint8_t cat = category ? static_cast<std::uint8_t>(*category) : t_category;
  append_report(epoch, ptr, bytes, total_allocated, total_reserved, device, cat,
                bytes >= 0 ? MemoryAction::kAllocate : MemoryAction::kFree);
}

void report_memory_version_slow(const void* ptr, std::int64_t bytes, Device device) noexcept {
  if (!may_report()) return;
  ReportScope scope;
  const std::uint32_t epoch = recording_epoch();
  if (epoch == 0) return;
  // A version report carries no totals: the bytes were overwritten, not allocated. The
  // category is the thread's; the timeline prefers the one of the live allocation at `ptr`.
  append_report(epoch, ptr, bytes, 0, 0, device, t_category, MemoryAction::kVersion);
}

void report_hooked_memory(const void* ptr, std::int64_t bytes) noexcept {
  if (!may_report()) return;
  ReportScope scope;
  const std::uint32_t epoch = recording_epoch();
  if (epoch == 0) return;  // not counted either: the total is only read from reports
  // Counted with the epoch the report goes to, so a window's totals are its own.
  const std::int64_t total = add_to_hook_total(epoch, bytes);
  append_report(epoch, ptr, bytes, total, total, Device{}, t_category,
                bytes >= 0 ? MemoryAction::kAllocate : MemoryAction::kFree);
}

}  // namespace internal
}  // namespace opscope
