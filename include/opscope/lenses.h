// opscope/lenses.h: the five lenses, declared once.
//
// A lens adds detail to what a session records besides each range's times. Every place that
// names lenses uses this one set: ProfilerConfig and LegacyProfilerConfig ask for them, a
// finished ProfilerResult says which it recorded with, an on-demand request carries them as
// Kineto's PROFILE_* keys (src/ondemand/config.cpp maps each Lens to its key), and
// `opscope trace` turns `--record-shapes` and the others into that request.
//
//   opscope::Profiler prof({.lenses = {.record_shapes = true, .with_stack = true}});
//   for (const opscope::LensField& f : opscope::kLensFields)
//     std::cout << f.name << " = " << (prof.config().lenses.*f.member) << "\n";
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace opscope {

struct LensSet {
  bool record_shapes = false;   // inputs given to ranges: "Input Dims", "Input Shapes" column
  bool profile_memory = false;  // allocation reports: "[memory]" events, "CPU Mem" columns
  bool with_stack = false;      // call stack at range begin: "Call stack", export_stacks
  bool with_flops = false;      // FLOPs from inputs or set_flops(): "Total ...FLOPs" column
  bool with_modules = false;    // module path of each range, module frames in stacks

  bool any() const {
    return record_shapes || profile_memory || with_stack || with_flops || with_modules;
  }
  friend bool operator==(const LensSet&, const LensSet&) = default;
};

// One lens. Values reach logs and files: never reuse one.
enum class Lens : std::uint8_t {
  kRecordShapes = 0,
  kProfileMemory = 1,
  kWithStack = 2,
  kWithFlops = 3,
  kWithModules = 4,
};

// A lens's name (torch.profiler's argument and LensSet's field) and its field.
struct LensField {
  Lens lens;
  std::string_view name;
  bool LensSet::*member;
  std::string_view what;  // what it records, for help texts
};

inline constexpr std::array<LensField, 5> kLensFields = {{
    {Lens::kRecordShapes, "record_shapes", &LensSet::record_shapes, "record input shapes"},
    {Lens::kProfileMemory, "profile_memory", &LensSet::profile_memory, "record allocations"},
    {Lens::kWithStack, "with_stack", &LensSet::with_stack, "record call stacks"},
    {Lens::kWithFlops, "with_flops", &LensSet::with_flops, "estimate FLOPs"},
    {Lens::kWithModules, "with_modules", &LensSet::with_modules, "record module paths"},
}};

}  // namespace opscope
