// The cache-tier settings: DG_JIT_CACHE_DIR as a list of layers, DG_JIT_CACHE_COPY_UP, DG_JIT_CACHE_MAX_BYTES
// (and parse_byte_size), DG_JIT_MODE, DG_JIT_REMOTE_CACHE (never showing its password), the remote timeouts.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Vars = std::map<std::string, std::string>;

class TierConfig : public ::testing::Test {
 protected:
  Vars with(Vars extra) const {
    Vars vars = {{"HOME", home_.path().string()}, {"PATH", ""}};
    for (auto& [k, v] : extra) vars[k] = v;
    return vars;
  }
  std::string error_of(const Vars& vars) const {
    try {
      Config::from_variables(vars);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfigError);
      return e.what();
    }
    ADD_FAILURE() << "no ConfigError";
    return "";
  }
  static const Config::Setting& setting(const Config& c, const std::string& variable) {
    for (const auto& s : c.settings())
      if (s.variable == variable) return s;
    throw std::runtime_error("no setting " + variable);
  }
  test::TempDir home_;
};

TEST_F(TierConfig, Defaults) {
  const Config c = Config::from_variables(with({}));
  EXPECT_TRUE(c.cache_layers.empty());
  EXPECT_FALSE(c.cache_copy_up);
  EXPECT_EQ(c.cache_max_bytes, 0u);
  EXPECT_FALSE(c.strict_mode);
  EXPECT_TRUE(c.remote_cache.empty());
  EXPECT_EQ(c.remote_timeout_ms, 100);
  EXPECT_EQ(c.remote_wait_ms, 30000);
  EXPECT_EQ(setting(c, "DG_JIT_MODE").value, "normal");
}

TEST_F(TierConfig, CacheDirListMakesLayers) {
  test::TempDir dir;
  const std::string a = (dir.path() / "a").string(), b = (dir.path() / "b").string();
  const Config c = Config::from_variables(with({{"DG_JIT_CACHE_DIR", a + ":" + b + "/:~/c"}}));
  EXPECT_EQ(c.cache_dir, fs::path(a));
  ASSERT_EQ(c.cache_layers.size(), 2u);
  EXPECT_EQ(c.cache_layers[0], fs::path(b));
  EXPECT_EQ(c.cache_layers[1], home_.path() / "c");
  const auto& s = setting(c, "DG_JIT_CACHE_DIR");
  EXPECT_EQ(s.value, a + ":" + b + ":" + (home_.path() / "c").string());
  EXPECT_NE(s.detail.find("2 read-only"), std::string::npos) << s.detail;
}

TEST_F(TierConfig, BadCacheDirLists) {
  test::TempDir dir;
  const std::string a = (dir.path() / "a").string();
  EXPECT_NE(error_of(with({{"DG_JIT_CACHE_DIR", a + "::" + a + "2"}})).find("empty directory at position 2"),
            std::string::npos);
  EXPECT_NE(error_of(with({{"DG_JIT_CACHE_DIR", a + ":"}})).find("DG_JIT_CACHE_DIR"), std::string::npos);
  EXPECT_NE(error_of(with({{"DG_JIT_CACHE_DIR", a + ":" + a}})).find("twice"), std::string::npos);
  const fs::path file = dir.path() / "file";
  { std::ofstream(file) << "x"; }
  EXPECT_NE(error_of(with({{"DG_JIT_CACHE_DIR", a + ":" + file.string()}})).find("read-only layer"),
            std::string::npos);
}

TEST_F(TierConfig, MaxBytesAcceptsSuffixes) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("1234"), 1234u);
  EXPECT_EQ(parse_byte_size("1K"), 1024u);
  EXPECT_EQ(parse_byte_size(" 2m "), 2u << 20);
  EXPECT_EQ(parse_byte_size("3G"), 3ull << 30);
  EXPECT_EQ(parse_byte_size("3GiB"), 3ull << 30);
  EXPECT_EQ(parse_byte_size("3gb"), 3ull << 30);
  EXPECT_EQ(parse_byte_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_byte_size("5B"), 5u);
  for (const char* bad : {"", "G", "-1", "1.5G", "1X", "12 34", "99999999999999999999", "20000000T"})
    EXPECT_FALSE(parse_byte_size(bad)) << bad;
  EXPECT_EQ(Config::from_variables(with({{"DG_JIT_CACHE_MAX_BYTES", "20G"}})).cache_max_bytes, 20ull << 30);
  EXPECT_NE(error_of(with({{"DG_JIT_CACHE_MAX_BYTES", "lots"}})).find("DG_JIT_CACHE_MAX_BYTES='lots'"),
            std::string::npos);
}

TEST_F(TierConfig, Mode) {
  EXPECT_TRUE(Config::from_variables(with({{"DG_JIT_MODE", "strict"}})).strict_mode);
  EXPECT_TRUE(Config::from_variables(with({{"DG_JIT_MODE", " STRICT "}})).strict_mode);
  EXPECT_FALSE(Config::from_variables(with({{"DG_JIT_MODE", "normal"}})).strict_mode);
  EXPECT_NE(error_of(with({{"DG_JIT_MODE", "paranoid"}})).find("expected normal or strict"), std::string::npos);
}

TEST_F(TierConfig, RemoteCacheIsValidatedAndItsPasswordNeverShown) {
  const Config c = Config::from_variables(
      with({{"DG_JIT_REMOTE_CACHE", "redis://:hunter2@10.0.0.5:6380/1"}, {"DG_JIT_REMOTE_TIMEOUT_MS", "250"},
            {"DG_JIT_REMOTE_WAIT_MS", "0"}, {"DG_JIT_CACHE_COPY_UP", "1"}}));
  EXPECT_EQ(c.remote_cache, "redis://:hunter2@10.0.0.5:6380/1");
  EXPECT_EQ(setting(c, "DG_JIT_REMOTE_CACHE").value, "redis://:***@10.0.0.5:6380/1");
  EXPECT_EQ(c.remote_timeout_ms, 250);
  EXPECT_EQ(c.remote_wait_ms, 0);
  EXPECT_TRUE(c.cache_copy_up);
  const std::string bad = error_of(with({{"DG_JIT_REMOTE_CACHE", "redis://:hunter2@host:port"}}));
  EXPECT_NE(bad.find("DG_JIT_REMOTE_CACHE"), std::string::npos) << bad;
  EXPECT_EQ(bad.find("hunter2"), std::string::npos) << bad;
  EXPECT_NE(error_of(with({{"DG_JIT_REMOTE_CACHE", "memcached://h"}})).find("redis://"), std::string::npos);
  EXPECT_NE(error_of(with({{"DG_JIT_REMOTE_TIMEOUT_MS", "0"}})).find("1 to 600000"), std::string::npos);
  EXPECT_NE(error_of(with({{"DG_JIT_REMOTE_WAIT_MS", "soon"}})).find("DG_JIT_REMOTE_WAIT_MS"), std::string::npos);
}

}  // namespace
}  // namespace kiln
