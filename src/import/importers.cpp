// The importer table (importer.h): one row per format, asked in this order.
#include <span>

#include "import/importer.h"

namespace opscope::import {
namespace {

constexpr Importer kImporters[] = {
    {"PyTorch execution trace (Chakra)", sniff_execution_trace, refuse_execution_trace},
    {"raw memory timeline", sniff_raw_memory_timeline, refuse_raw_memory_timeline},
    // Last: it takes every text no row above knows.
    {"Kineto / Chrome trace JSON", sniff_kineto, read_kineto},
};

}  // namespace

std::span<const Importer> importers() { return kImporters; }

const Importer& importer_for(std::string_view head) {
  for (const Importer& importer : kImporters) {
    if (importer.sniff(head)) return importer;
  }
  return kImporters[std::size(kImporters) - 1];
}

}  // namespace opscope::import
