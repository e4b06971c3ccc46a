#include "record/call_sites.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include "collect/collector.h"
#include "collect/raw_dump.h"

namespace opscope {
namespace {

struct CallSites {
  std::mutex mu;
  std::vector<const CallSite*> sites = std::vector<const CallSite*>(1, nullptr);
};

CallSites& call_site_table() {
  static CallSites* t = new CallSites;  // never destroyed: ranges may end after main returns
  return *t;
}

}  // namespace

namespace internal {

std::uint32_t register_call_site(const CallSite& site) noexcept {
  collect::OwnWorkScope own;  // an allocation hook must not report the table's growth
  CallSites& t = call_site_table();
  std::atomic_ref<std::uint32_t> index(site.compact_index);
  try {
    std::lock_guard<std::mutex> lock(t.mu);
    if (const std::uint32_t known = index.load(std::memory_order_acquire); known != 0) {
      return known;  // another thread registered it first
    }
    if (t.sites.size() >= kCompactNameLimit) return 0;
    t.sites.push_back(&site);
    const auto given = static_cast<std::uint32_t>(t.sites.size() - 1);
    // Release: a thread that reads the index finds the site in the table.
    index.store(given, std::memory_order_release);
    return given;
  } catch (...) {
    return 0;  // out of memory: the site's ranges take 32-byte records
  }
}

}  // namespace internal

namespace record {

bool write_call_sites(collect::raw::RawWriter& out) noexcept {
  CallSites& t = call_site_table();
  if (!t.mu.try_lock()) return false;  // held by a thread that will not finish now
  for (std::size_t index = 1; index < t.sites.size(); ++index) {
    const CallSite* site = t.sites[index];
    const std::size_t length = ::strnlen(site->name, 4096);
    const collect::raw::RawCallSite head{reinterpret_cast<std::uint64_t>(site),
                                         static_cast<std::uint32_t>(index),
                                         static_cast<std::uint32_t>(length)};
    out.section(collect::raw::Section::kCallSite, sizeof head + length);
    out.put(&head, sizeof head);
    out.put(site->name, length);
  }
  t.mu.unlock();
  return true;
}

std::vector<const CallSite*> call_sites() {
  CallSites& t = call_site_table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.sites;
}

}  // namespace record
}  // namespace opscope
