// An NVTX injection library for tests: NVTX loads it from NVTX_INJECTION64_PATH (as it loads
// Nsight Systems' own) and it appends each RangePushA, RangePop and MarkA it receives to the
// file named by OPSCOPE_NVTX_LOG, one line each: "push <message>", "pop", "mark <message>".
// This is how the legacy profiler's NVTX mode is checked without Nsight.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

std::mutex g_mu;

void log_line(const char* what, const char* message) {
  const char* path = std::getenv("OPSCOPE_NVTX_LOG");
  if (path == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s%s%s\n", what, message != nullptr ? " " : "",
                 message != nullptr ? message : "");
    std::fclose(f);
  }
}

int range_push(const char* message) {
  log_line("push", message);
  return 0;
}
int range_pop() {
  log_line("pop", nullptr);
  return 0;
}
void mark(const char* message) { log_line("mark", message); }

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    const void* (*get_export_table)(uint32_t)) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) ||
      size <= NVTX_CBID_CORE_RangePop) {
    return 0;
  }
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&range_push);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&range_pop);
  *table[NVTX_CBID_CORE_MarkA] = reinterpret_cast<NvtxFunctionPointer>(&mark);
  return 1;
}
