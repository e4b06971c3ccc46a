// What a flight recorder dump of tests/support/ondemand_target.cpp must hold once the target
// ran STEPS steps and lingers ("linger"): its last ranges with their names and nesting. Shared
// by the unit tests (SIGUSR2, opscope's daemon) and the peer tests (the real dynolog).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace opscope::testing {

struct DumpedRange {
  std::string name;
  double begin = 0;  // µs
  double end = 0;
  long long tid = 0;
  bool open = false;
};

inline std::vector<DumpedRange> dumped_ranges(const nlohmann::json& trace) {
  std::vector<DumpedRange> out;
  if (!trace.is_object() || !trace.contains("traceEvents")) return out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    DumpedRange r;
    r.name = e.value("name", "");
    r.begin = e.value("ts", 0.0);
    r.end = r.begin + e.value("dur", 0.0);
    r.tid = e.contains("tid") && e.at("tid").is_number() ? e.at("tid").get<long long>() : 0;
    r.open = e.contains("args") && e.at("args").value("open", false);
    out.push_back(r);
  }
  return out;
}

// `inner` lies within `outer` on the same thread (Chrome's µs, rounded to 1 ns).
inline bool nested_in(const DumpedRange& inner, const DumpedRange& outer) {
  return inner.tid == outer.tid && inner.begin >= outer.begin - 1e-3 &&
         inner.end <= outer.end + 1e-3;
}

// The dump of a target that ran `steps` steps and lingers: the last step, step_<steps-1>, is
// there with target::forward nested in it and target::mm in that; every step kept is a run
// that ends with the last (the ring keeps the newest), each with its own nesting; and
// target::linger, still open, is written open after the last step.
inline void expect_last_steps_of_target(const nlohmann::json& trace, int steps) {
  const std::vector<DumpedRange> ranges = dumped_ranges(trace);
  ASSERT_FALSE(ranges.empty()) << trace.dump().substr(0, 2000);
  const auto named = [&](const std::string& name) {
    std::vector<DumpedRange> v;
    for (const auto& r : ranges) {
      if (r.name == name) v.push_back(r);
    }
    return v;
  };
  std::vector<int> kept;
  for (const auto& r : ranges) {
    if (r.name.rfind("step_", 0) == 0) kept.push_back(std::stoi(r.name.substr(5)));
  }
  std::sort(kept.begin(), kept.end());
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.back(), steps - 1) << "the last step is not the newest kept";
  for (std::size_t i = 1; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i], kept[i - 1] + 1) << "steps kept are not one run";
  }
  const std::vector<DumpedRange> forward = named("target::forward");
  const std::vector<DumpedRange> mm = named("target::mm");
  for (const int n : {kept.front(), kept.back()}) {
    const std::vector<DumpedRange> step = named("step_" + std::to_string(n));
    ASSERT_EQ(step.size(), 1u) << n;
    EXPECT_FALSE(step[0].open);
    const auto f = std::find_if(forward.begin(), forward.end(),
                                [&](const DumpedRange& r) { return nested_in(r, step[0]); });
    ASSERT_NE(f, forward.end()) << "no target::forward in step_" << n;
    EXPECT_TRUE(
        std::any_of(mm.begin(), mm.end(), [&](const DumpedRange& r) { return nested_in(r, *f); }))
        << "no target::mm in the target::forward of step_" << n;
  }
  EXPECT_EQ(forward.size(), kept.size());
  EXPECT_EQ(mm.size(), kept.size());
  const std::vector<DumpedRange> linger = named("target::linger");
  ASSERT_EQ(linger.size(), 1u);
  EXPECT_TRUE(linger[0].open);
  EXPECT_GE(linger[0].begin, named("step_" + std::to_string(steps - 1))[0].end - 1e-3);
}

// The dump's "flightRecorder" metadata object.
inline nlohmann::json flight_metadata_of(const nlohmann::json& trace) {
  if (!trace.is_object() || !trace.contains("flightRecorder")) return {};
  const nlohmann::json& m = trace.at("flightRecorder");
  return m.is_string() ? nlohmann::json::parse(m.get<std::string>()) : m;
}

}  // namespace opscope::testing
