// `opscope analyze` on jobs longer than the real traces, against Holistic Trace Analysis's
// answers recorded in tests/golden/hta/ by tests/peers/make_hta_goldens.py (which names the HTA
// that made them). The longer jobs are made again here, the same way
// (tests/peers/longer_trace.py: a real job's events repeated with their own times, ids and
// steps), so the goldens hold only HTA's tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli_test_support.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"

namespace opscope {
namespace analyze_golden_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::expect_rows_match;
using tests::kPeers;
using tests::ours;
using tests::scratch;

nlohmann::json read_gzip_json(const fs::path& p) {
  return nlohmann::json::parse(testing::read_gzip_file(p.string()));
}

// Rows in the order of a numeric column (launches by correlation id): both sides then go
// through expect_rows_match's stable order by rank.
nlohmann::json by(nlohmann::json rows, const char* column) {
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    return a[column].template get<double>() < b[column].template get<double>();
  });
  return rows;
}

// The columns of `rows` named in `keep` only.
nlohmann::json only(const nlohmann::json& rows, const std::vector<std::string>& keep) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : rows) {
    nlohmann::json r = nlohmann::json::object();
    for (const std::string& k : keep) r[k] = row[k];
    out.push_back(r);
  }
  return out;
}

void compare_table(const std::string& table, const nlohmann::json& want, const nlohmann::json& got,
                   const std::string& what) {
  if (table == "launch") {
    expect_rows_match(by(want, "correlation"), by(got, "correlation"), what);
  } else if (table == "kernels") {
    // Past num_kernels kernels HTA overwrites a kept kernel's max, min, mean and stddev with
    // its total (analyze_test.cpp shows it on the real traces): the totals are compared.
    const std::vector<std::string> totals = {"name", "sum (us)", "kernel_type", "rank"};
    expect_rows_match(only(want, totals), only(got, totals), what);
  } else if (table == "kernel_type") {
    // HTA labels pieces of no length where one type ends as another starts.
    nlohmann::json nonzero = nlohmann::json::array();
    for (const auto& row : want) {
      if (row["sum"].get<double>() > 0) nonzero.push_back(row);
    }
    expect_rows_match(nonzero, got, what);
  } else {
    expect_rows_match(want, got, what);
  }
}

TEST(AnalyzeAgainstHtaGoldens, LongerJobsGiveHtasTables) {
  const fs::path goldens = fs::path(OPSCOPE_SOURCE_DIR) / "tests/golden/hta";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(goldens)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 2u) << "tests/peers/make_hta_goldens.py writes them";
  for (const fs::path& file : files) {
    const nlohmann::json golden = read_gzip_json(file);
    const std::string source = golden["source"];
    const fs::path src = fs::path(kPeers) / "kineto-traces" / source;
    if (!fs::exists(src)) GTEST_SKIP() << "no " << src << " (../shared/peers)";
    SCOPED_TRACE(file.filename().string() + " (" + golden["made_by"].get<std::string>() + ")");
    const fs::path job = scratch(file.stem().stem().string());
    fs::remove_all(job);
    const auto [code, text] = shell(
        "/usr/bin/python3 " + std::string(OPSCOPE_SOURCE_DIR) + "/tests/peers/longer_trace.py " +
        src.string() + " " + job.string() + " " + std::to_string(golden["copies"].get<int>()));
    ASSERT_EQ(code, 0) << text;
    int compared = 0;
    for (const auto& [report, tables] : golden["reports"].items()) {
      const nlohmann::json got = ours(job.string(), report);
      for (const auto& [table, rows] : tables.items()) {
        ASSERT_TRUE(got.contains(table)) << report << " has no table " << table;
        compare_table(table, rows, got[table], file.filename().string() + " " + table);
        ++compared;
      }
    }
    EXPECT_GE(compared, 8) << file;
    fs::remove_all(job);
  }
}

}  // namespace analyze_golden_test
}  // namespace opscope
