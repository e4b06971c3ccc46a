// `opscope activities`: what this machine lets opscope record, and for CUDA what the probe
// found (the driver, the devices, the CUPTI library and how it was found, or everything tried),
// so that a machine where CUDA is not recorded says why without writing a program.
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda_probe.h"
#include "backend/registry.h"
#include "cli.h"
#include "cli_args.h"
#include "json/json_writer.h"
#include "opscope/profiler.h"
#include "opscope/types.h"

namespace opscope::cli {
namespace {

std::string activities_help() {
  return R"(usage: opscope activities [--json]

Says, for each activity (cpu, cuda), whether this process can record it and if not why, as
opscope::activity_unavailable_reason() and Python's
opscope.profiler.activity_unavailable_reason() answer in a program on this machine with the
same environment (OPSCOPE_CUPTI_LIBRARY, CUDA_HOME, VIRTUAL_ENV, LD_LIBRARY_PATH), and whether ranges can be timed with CUDA events. Then the CUDA probe's
details: the driver's version, the devices, and the CUPTI library chosen and how it was found
(already loaded, pip layout, soname, toolkit, OPSCOPE_CUPTI_LIBRARY), or everything that was
tried. The probe looks for CUPTI only once a driver and a device are found; without them this
command runs the same CUPTI search itself, and says so.

  --json    one JSON object instead of text: "activities" (name, recordable, reason),
            "cuda_range_timing" (available, reason) and "cuda" (driver_version, devices,
            cupti: path, found_by, tried, looked_up_by "probe" or "this command", and
            search: every place the search looks, in order, each with its path and how)
  --help    this text

Exit codes: 0 (whatever can be recorded), 2 usage error.
)";
}

struct ActivityRow {
  std::string_view name;
  ActivityType activity;
};
constexpr ActivityRow kActivities[] = {{"cpu", ActivityType::kCPU}, {"cuda", ActivityType::kCUDA}};

// The CUPTI search's outcome: the probe's when it looked, else this command's own.
struct CuptiReport {
  backend::CuptiLookup lookup;
  bool by_probe = false;
};

CuptiReport cupti_report(const backend::CudaProbe& probe) {
  CuptiReport r;
  if (!probe.cupti_path.empty() || !probe.cupti_tried.empty()) {
    r.lookup = {probe.cupti_path, probe.cupti_source, probe.cupti_tried};
    r.by_probe = true;
  } else {
    // Loads CUPTI into this short-lived process only: nothing else here uses it.
    r.lookup = backend::find_cupti(backend::default_cuda_libraries());
  }
  return r;
}

// "13000 (CUDA 13.0)": cuDriverGetVersion's 1000 * major + 10 * minor.
std::string driver_text(int version) {
  if (version == 0) return "none initialized";
  return std::to_string(version) + " (CUDA " + std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10) + ")";
}

void print_text(const backend::CudaProbe& probe, const CuptiReport& cupti,
                const std::string& range_timing, std::ostream& out) {
  out << "activity  recordable here\n";
  for (const ActivityRow& a : kActivities) {
    const std::string why = activity_unavailable_reason(a.activity);
    std::string name(a.name);
    name.resize(10, ' ');
    out << name << (why.empty() ? "yes" : "no: " + why) << "\n";
  }
  out << "\nranges timed with CUDA events: "
      << (range_timing.empty() ? "yes" : "no: " + range_timing) << "\n";
  out << "\nCUDA probe:\n"
      << "  driver    " << driver_text(probe.driver_version) << "\n"
      << "  devices   " << probe.devices << "\n";
  const backend::CuptiLookup& l = cupti.lookup;
  out << "  CUPTI     "
      << (l.path.empty()
              ? "none loaded"
              : l.path + " (found by: " + std::string(backend::cupti_source_name(l.source)) + ")")
      << "\n";
  if (!cupti.by_probe) {
    out << "            (looked up by this command: the probe looks for CUPTI only once a "
           "driver and a device are found)\n";
  }
  for (std::size_t i = 0; i < l.tried.size(); ++i) {
    out << (i == 0 ? "  tried     " : "            ") << l.tried[i] << "\n";
  }
}

void print_json(const backend::CudaProbe& probe, const CuptiReport& cupti,
                const std::string& range_timing, std::ostream& out) {
  internal::JsonWriter w;
  w.begin_object();
  w.key("activities");
  w.begin_array();
  for (const ActivityRow& a : kActivities) {
    const std::string why = activity_unavailable_reason(a.activity);
    w.begin_object();
    w.key("name");
    w.string(a.name);
    w.key("recordable");
    w.boolean(why.empty());
    w.key("reason");
    w.string(why);
    w.end_object();
  }
  w.end_array();
  w.key("cuda_range_timing");
  w.begin_object();
  w.key("available");
  w.boolean(range_timing.empty());
  w.key("reason");
  w.string(range_timing);
  w.end_object();
  w.key("cuda");
  w.begin_object();
  w.key("driver_version");
  w.integer(probe.driver_version);
  w.key("devices");
  w.integer(probe.devices);
  w.key("cupti");
  w.begin_object();
  w.key("path");
  w.string(cupti.lookup.path);
  w.key("found_by");
  w.string(backend::cupti_source_name(cupti.lookup.source));
  w.key("tried");
  w.begin_array();
  for (const std::string& t : cupti.lookup.tried) w.string(t);
  w.end_array();
  w.key("looked_up_by");
  w.string(cupti.by_probe ? "probe" : "this command");
  // The whole search in its order, after a CUPTI already loaded: where the default search
  // looks on this machine, beyond where it stopped.
  w.key("search");
  w.begin_array();
  for (const backend::CuptiCandidate& c : backend::default_cuda_libraries().cupti) {
    w.begin_object();
    w.key("path");
    w.string(c.path);
    w.key("how");
    w.string(backend::cupti_source_name(c.source));
    w.end_object();
  }
  w.end_array();
  w.end_object();
  w.end_object();
  w.end_object();
  out << w.view() << "\n";
}

int run_activities(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  bool json = false;
  Args a(args, 1);
  while (!a.done()) {
    const std::string f = a.next_flag();
    if (f == "--json") {
      a.no_value(f);
      json = true;
    } else {
      throw UsageError("unknown flag " + f + " for `opscope activities`; allowed: --json, --help");
    }
  }
  // The public answers first: they probe (once per process), and what follows reads the probe.
  const std::string range_timing = backend::range_timing_unavailable_reason(ActivityType::kCUDA);
  (void)activity_unavailable_reason(ActivityType::kCUDA);
  const backend::CudaProbe& probe = backend::cuda_probe();
  const CuptiReport cupti = cupti_report(probe);
  if (json) {
    print_json(probe, cupti, range_timing, out);
  } else {
    print_text(probe, cupti, range_timing, out);
  }
  return kExitOk;
}

}  // namespace

const Subcommand& activities_subcommand() {
  static const Subcommand s{"activities",
                            "what can be recorded here and why not; CUDA's driver and CUPTI",
                            activities_help, nullptr, run_activities};
  return s;
}

}  // namespace opscope::cli
