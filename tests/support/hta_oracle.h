// Holistic Trace Analysis as the oracle of `opscope analyze`'s tests: HTA itself
// (../shared/peers/hta, run live by tests/peers/hta_report.py on Debian's pandas) and opscope's
// command line run on the same trace directory, and their JSON rows compared.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_test_support.h"
#include "support/test_support.h"

namespace opscope::tests {

using cli::tests::shell;
namespace fs = std::filesystem;

inline const std::string kPeers = OPSCOPE_PEERS_DIR;
inline const std::string kCli = OPSCOPE_CLI;

// A file in this test process's scratch directory, removed with it when the process exits.
inline fs::path scratch(const std::string& name) {
  static const testing::TempDir dir;
  return dir.path() / name;
}

inline nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// HTA's report on `dir` as JSON rows, or a skip reason in `why` when HTA cannot run here.
// HTA_DISABLE_NS_ROUNDING=1 is HTA's own switch to keep the nanoseconds of float timestamps:
// by default it rounds each event inward to whole microseconds (start up, end down), so every
// event loses up to 1 us, which on the AMD trace is 15 % of its compute time. opscope keeps
// the nanoseconds; with the switch HTA does too, and the definitions can be compared exactly.
// `hta_rounding`: HTA as it runs by default, rounding (opscope analyze --times hta).
inline nlohmann::json hta(const std::string& dir, const std::string& report, std::string& why,
                          bool hta_rounding = false) {
  const fs::path out = scratch("hta_" + report + ".json");
  fs::remove(out);
  const std::string env =
      hta_rounding ? "env -u HTA_DISABLE_NS_ROUNDING " : "HTA_DISABLE_NS_ROUNDING=1 ";
  const auto [code, text] = shell(env + "/usr/bin/python3 " + std::string(OPSCOPE_SOURCE_DIR) +
                                  "/tests/peers/hta_report.py " + kPeers + "/hta " + dir + " " +
                                  report + " " + out.string());
  if (code == 3) {
    why = text;
    return {};
  }
  EXPECT_EQ(code, 0) << text;
  return code == 0 ? read_json(out) : nlohmann::json{};
}

// `extra`: more flags for `opscope analyze` (report settings).
inline nlohmann::json ours(const std::string& dir, const std::string& report,
                           const std::string& extra = "") {
  const fs::path out = scratch("ours_" + report + ".json");
  const auto [code, text] = shell(kCli + " analyze " + dir + " --report " + report +
                                  " --format json --output " + out.string() + " " + extra);
  EXPECT_EQ(code, 0) << text;
  return code == 0 ? read_json(out) : nlohmann::json{};
}

// Numbers agree within 0.5 % or 1 us (HTA computes in floating-point microseconds);
// percentages, rounded to two places by both, within 0.01.
// Rows in the order of their rank, stream and category (HTA lists streams in the order they
// first appear in its DataFrame, opscope by number).
inline nlohmann::json in_key_order(nlohmann::json rows) {
  const auto key = [](const nlohmann::json& row) {
    std::string k;
    for (const char* column : {"rank", "stream", "idle_category", "kernel_type", "name"}) {
      if (row.contains(column)) k += row[column].dump() + "/";
    }
    return k;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const nlohmann::json& a, const nlohmann::json& b) {
    return key(a) < key(b);
  });
  return rows;
}

inline void expect_rows_match(const nlohmann::json& want_rows, const nlohmann::json& got_rows,
                              const std::string& what) {
  const nlohmann::json want = in_key_order(want_rows);
  const nlohmann::json got = in_key_order(got_rows);
  ASSERT_EQ(got.size(), want.size()) << what << "\nHTA: " << want << "\nopscope: " << got;
  for (std::size_t i = 0; i < want.size(); ++i) {
    for (const auto& [column, value] : want[i].items()) {
      SCOPED_TRACE(what + " row " + std::to_string(i) + " column " + column);
      ASSERT_TRUE(got[i].contains(column)) << got[i];
      if (!value.is_number()) {  // strings, and null where HTA divides by zero
        EXPECT_EQ(got[i][column], value);
        continue;
      }
      const double w = value.get<double>();
      const double g = got[i][column].get<double>();
      const double tolerance =
          column.ends_with("_pctg") ? 0.0101 : std::max(1.0, 0.005 * std::abs(w));
      EXPECT_NEAR(g, w, tolerance);
    }
  }
}

}  // namespace opscope::tests
