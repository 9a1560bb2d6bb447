// docs/CONFIGURATION.md's reference table is generated from the settings table: this test fails when they
// differ, and rewrites the document's table when run with KILN_UPDATE_DOCS=1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "config/settings_table.hpp"

namespace kiln {
namespace {

constexpr const char* kBegin = "<!-- settings-table:begin (generated from src/config/settings_table.cpp) -->\n";
constexpr const char* kEnd = "<!-- settings-table:end -->";

TEST(ConfigDocs, ReferenceTableMatchesTheSettingsTable) {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/docs/CONFIGURATION.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();

  const size_t begin = text.find(kBegin);
  const size_t end = text.find(kEnd);
  ASSERT_NE(begin, std::string::npos) << path << " has no '" << kBegin << "' marker";
  ASSERT_NE(end, std::string::npos) << path << " has no '" << kEnd << "' marker";
  const size_t body = begin + std::string(kBegin).size();
  ASSERT_LE(body, end);

  const std::string expected = configuration::settings_markdown();
  const std::string actual = text.substr(body, end - body);
  if (actual != expected) {
    const char* update = std::getenv("KILN_UPDATE_DOCS");
    if (update && std::string(update) == "1") {
      text.replace(body, end - body, expected);
      std::ofstream(path) << text;
      GTEST_SKIP() << "rewrote the table in " << path;
    }
    FAIL() << path << " is out of date; run with KILN_UPDATE_DOCS=1 to regenerate. Expected table:\n"
           << expected;
  }
}

TEST(ConfigDocs, EveryVariableHasItsOwnSection) {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/docs/CONFIGURATION.md";
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  for (const auto& row : configuration::setting_table()) {
    // A heading per setting explains it beyond the one-line table cell.
    EXPECT_NE(text.find(std::string("### `") + row.variable), std::string::npos) << row.variable;
  }
}

}  // namespace
}  // namespace kiln
