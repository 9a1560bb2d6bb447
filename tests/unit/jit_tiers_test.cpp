// The JIT over the cache tiers: strict mode, the after-warm-up counter, packs and layers serving a fresh
// process with zero compiles, and "machines" (separate processes with their own cache directories) sharing a
// real redis-server: one compiles, the others fetch; Redis stopped, corrupted or slow degrades to local
// compiles without failing anything.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <thread>

#include "cache/pack.hpp"
#include "cache/redis_tier.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/error.hpp"
#include "redis_test_support.hpp"
#include "selftest_spec.hpp"
#include "test_support.hpp"

namespace kiln::jit {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::selftest_spec;

const Target kSm90a{compiler::Arch::parse("sm_90a"), Backend::kNvrtc};

Config test_config(const fs::path& cache_dir) {
  Config c = Config::from_variables({});
  c.cache_dir = cache_dir;
  c.backend = Backend::kNvrtc;
  c.arch = "sm_90a";
  return c;
}

// compiled=<n> from the helper's output, or -1.
int compiled_of(const test::ProgramResult& r) {
  std::smatch m;
  return std::regex_search(r.output, m, std::regex("compiled=([0-9]+)")) ? std::stoi(m[1]) : -1;
}

test::ProgramResult helper(const std::vector<std::string>& env, const std::vector<std::string>& scales,
                           int threads = 2) {
  std::vector<std::string> argv = {test::helper_path(), "build", std::to_string(threads), "sm_90a"};
  argv.insert(argv.end(), scales.begin(), scales.end());
  std::vector<std::string> full_env = env;
  full_env.push_back("DG_JIT_USE_NVRTC=1");
  return test::run_program(argv, full_env);
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

uint64_t counter(const fs::path& dir, cache::Counter c) { return cache::DiskCache(dir).stats().counter(c); }

// ---- Strict mode and the warm-up counter ---------------------------------------------------------------------

TEST(StrictMode, AMissingKernelOnTheServingPathIsAnErrorNamingItAndTheCommand) {
  test::TempDir dir;
  Config config = test_config(dir.path());
  config.strict_mode = true;
  JitRuntime rt(config);
  const std::string key = rt.key_of(selftest_spec(501), kSm90a);
  try {
    rt.build(selftest_spec(501), kSm90a, Purpose::kServing);
    FAIL() << "expected Error(kNotFound)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    const std::string message = e.what();
    for (const std::string& part : {std::string("selftest"), std::string("scale=501"), std::string("sm_90a"),
                                    std::string("nvrtc"), key, std::string("DG_JIT_MODE=strict"),
                                    std::string("kiln compile selftest"), std::string("kiln precompile selftest"),
                                    dir.path().string()})
      EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in: " << message;
  }
  EXPECT_EQ(rt.disk().stats().compiles, 0u) << "nothing compiled on the serving path";

  // The launch path is the serving path too; it refuses before touching any GPU.
  try {
    rt.kernel(selftest_spec(501), 0, nullptr);
    FAIL() << "expected Error(kNotFound)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound) << e.what();
  }

  // Ahead of time, strict mode compiles; then the serving path finds the kernel.
  BuildResult aot = rt.build(selftest_spec(501), kSm90a);
  EXPECT_FALSE(aot.hit);
  JitRuntime fresh(config);
  EXPECT_TRUE(fresh.build(selftest_spec(501), kSm90a, Purpose::kServing).hit);
}

TEST(StrictMode, NormalModeCompilesOnTheServingPath) {
  test::TempDir dir;
  JitRuntime rt(test_config(dir.path()));
  EXPECT_FALSE(rt.build(selftest_spec(502), kSm90a, Purpose::kServing).hit);
}

TEST(Warmup, CompilesAfterTheDeclaredWarmupAreCounted) {
  test::TempDir dir;
  JitRuntime rt(test_config(dir.path()));
  rt.build(selftest_spec(511), kSm90a);  // warm-up
  EXPECT_EQ(rt.compiles_after_warmup(), 0u);
  EXPECT_FALSE(rt.warmup_done());
  rt.declare_warmup_done();
  EXPECT_TRUE(rt.warmup_done());
  rt.build(selftest_spec(511), kSm90a);  // a hit: not counted
  rt.build(selftest_spec(512), kSm90a);  // a compile after warm-up
  EXPECT_EQ(rt.compiles_after_warmup(), 1u);
  const cache::Stats stats = rt.disk().stats();
  EXPECT_EQ(stats.compiles, 2u);
  EXPECT_EQ(stats.counter(cache::Counter::kCompilesAfterWarmup), 1u) << "shared with `kiln cache stats`";
}

// ---- Packs and layers: zero compiles in a fresh process -------------------------------------------------------

TEST(PacksAndLayers, AFreshProcessCompilesNothingAfterImportOrWithALayer) {
  test::TempDir dir;
  const std::vector<std::string> scales = {"521", "522", "523"};
  const auto ci = helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "ci").string()}, scales);
  ASSERT_EQ(compiled_of(ci), 3) << ci.output;

  // A pack, exported on the "CI machine" and imported on a fresh one.
  cache::DiskCache ci_cache(dir.path() / "ci");
  cache::export_pack({&ci_cache}, dir.path() / "warmup.pack", {});
  cache::DiskCache gpu(dir.path() / "gpu");
  EXPECT_EQ(cache::import_pack(dir.path() / "warmup.pack", gpu).imported, 3u);
  const auto served = helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "gpu").string()}, scales);
  EXPECT_EQ(served.exit_code, 0) << served.output;
  EXPECT_EQ(compiled_of(served), 0) << served.output;

  // The CI cache as a read-only layer under an empty writable directory.
  const auto layered =
      helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "empty").string() + ":" + (dir.path() / "ci").string()}, scales);
  EXPECT_EQ(compiled_of(layered), 0) << layered.output;
  EXPECT_EQ(counter(dir.path() / "empty", cache::Counter::kLayerHits), 3u);
  EXPECT_EQ(cache::DiskCache(dir.path() / "empty").stats().entries, 0u) << "served in place";
}

// ---- Redis ----------------------------------------------------------------------------------------------------

#define REQUIRE_REDIS(server)                                                                     \
  if (!cache::redis_supported()) GTEST_SKIP() << "kiln was built without hiredis";                \
  if (test::redis_server_path().empty()) GTEST_SKIP() << "redis-server is not installed";         \
  test::RedisServer server;                                                                        \
  ASSERT_TRUE(server.running()) << "redis-server did not start"

#if KILN_HAVE_HIREDIS

TEST(RemoteCache, SecondMachineGetsEveryKernelFromRedisWithZeroCompiles) {
  REQUIRE_REDIS(redis);
  test::TempDir dir;
  const std::vector<std::string> scales = {"531", "532", "533", "534"};
  const std::string remote = "DG_JIT_REMOTE_CACHE=" + redis.url();
  const auto a = helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "a").string(), remote}, scales);
  ASSERT_EQ(compiled_of(a), 4) << a.output;
  EXPECT_EQ(counter(dir.path() / "a", cache::Counter::kRemotePublishes), 4u);

  const auto t0 = Clock::now();
  const auto b = helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "b").string(), remote}, scales);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(compiled_of(b), 0) << b.output;
  EXPECT_LT(seconds, 2.0);
  EXPECT_EQ(counter(dir.path() / "b", cache::Counter::kRemoteHits), 4u);
  EXPECT_EQ(cache::DiskCache(dir.path() / "b").stats().entries, 4u) << "remote hits are stored locally";
}

TEST(RemoteCache, MachinesRacingForTheSameKernelsCompileEachOnce) {
  REQUIRE_REDIS(redis);
  test::TempDir dir;
  const std::vector<std::string> scales = {"541", "542", "543"};
  const std::string remote = "DG_JIT_REMOTE_CACHE=" + redis.url();
  test::ProgramResult results[3];
  std::vector<std::thread> machines;
  for (int m = 0; m < 3; ++m)
    machines.emplace_back([&, m] {
      results[m] = helper({"DG_JIT_CACHE_DIR=" + (dir.path() / ("m" + std::to_string(m))).string(), remote}, scales);
    });
  for (auto& t : machines) t.join();
  int compiled = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    compiled += compiled_of(r);
  }
  EXPECT_EQ(compiled, 3) << "one machine compiles each kernel; the others wait for it";
}

TEST(RemoteCache, CorruptedValueIsIgnoredCountedAndOverwritten) {
  REQUIRE_REDIS(redis);
  test::TempDir dir;
  const std::string remote = "DG_JIT_REMOTE_CACHE=" + redis.url();
  ASSERT_EQ(compiled_of(helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "a").string(), remote}, {"551"})), 1);
  const std::string key = JitRuntime(test_config(dir.path() / "a")).key_of(selftest_spec(551), kSm90a);
  const std::string name = "kiln:v1:entry:" + key;
  std::string value = test::redis_do(redis.port(), {"GET", name});
  ASSERT_FALSE(value.empty());
  value[value.size() / 2] ^= 0x20;  // one flipped bit in the cubin
  ASSERT_EQ(test::redis_do(redis.port(), {"SET", name, value}), "OK");

  const auto b = helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "b").string(), remote}, {"551"});
  EXPECT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(compiled_of(b), 1) << "a bad value is never loaded:\n" << b.output;
  EXPECT_NE(b.output.find("unusable value"), std::string::npos) << b.output;
  EXPECT_EQ(counter(dir.path() / "b", cache::Counter::kRemoteCorrupt), 1u);

  const auto c = helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "c").string(), remote}, {"551"});
  EXPECT_EQ(compiled_of(c), 0) << "the compile overwrote the bad value:\n" << c.output;
}

TEST(RemoteCache, DownFromTheStartCostsNothingAndWarnsOnce) {
  if (!cache::redis_supported()) GTEST_SKIP() << "kiln was built without hiredis";
  test::TempDir dir;
  const int port = test::free_loopback_port();  // nothing listens there
  const auto r = helper({"DG_JIT_CACHE_DIR=" + (dir.path() / "a").string(),
                         "DG_JIT_REMOTE_CACHE=redis://127.0.0.1:" + std::to_string(port)},
                        {"561", "562"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(compiled_of(r), 2) << r.output;
  EXPECT_EQ(count_of(r.output, "cannot be used"), 1u) << r.output;
  EXPECT_EQ(counter(dir.path() / "a", cache::Counter::kRemoteErrors), 1u);
}

TEST(RemoteCache, RedisStoppedInTheMiddleOfAProcess) {
  REQUIRE_REDIS(redis);
  test::TempDir dir;
  Config config = test_config(dir.path() / "a");
  config.remote_cache = redis.url();
  JitRuntime rt(config);
  EXPECT_FALSE(rt.build(selftest_spec(571), kSm90a).hit);
  ASSERT_TRUE(rt.tiers().remote()->available());
  redis.stop();
  testing::internal::CaptureStderr();
  const auto t0 = Clock::now();
  BuildResult second = rt.build(selftest_spec(572), kSm90a);  // the remote lookup fails: compiled here
  BuildResult third = rt.build(selftest_spec(573), kSm90a);   // the remote is skipped
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(second.hit);
  EXPECT_FALSE(third.hit);
  EXPECT_TRUE(second.binary && third.binary);
  EXPECT_FALSE(rt.tiers().remote()->available());
  EXPECT_EQ(count_of(err, "cannot be used"), 1u) << err;
  EXPECT_EQ(rt.disk().stats().counter(cache::Counter::kRemoteErrors), 1u);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  EXPECT_TRUE(rt.build(selftest_spec(571), kSm90a).hit) << "nothing is lost: the local tiers still serve";
}

TEST(RemoteCache, SlowRedisCostsOneTimeoutThenIsSkipped) {
  REQUIRE_REDIS(redis);
  test::TempDir dir;
  Config config = test_config(dir.path() / "a");
  config.remote_cache = redis.url();
  config.remote_timeout_ms = 100;
  JitRuntime rt(config);
  rt.build(selftest_spec(581), kSm90a);  // connected and working
  test::redis_send_and_forget(redis.port(), {"DEBUG", "SLEEP", "1.5"});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the server is now asleep
  testing::internal::CaptureStderr();
  auto t0 = Clock::now();
  ASSERT_FALSE(rt.tiers().lookup(rt.key_of(selftest_spec(582), kSm90a), false));
  const auto first = Clock::now() - t0;
  t0 = Clock::now();
  BuildResult built = rt.build(selftest_spec(583), kSm90a);
  const auto second_lookup = Clock::now() - t0 - std::chrono::duration<double, std::milli>(built.compile_ms);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_GE(first, std::chrono::milliseconds(90));
  EXPECT_LT(first, std::chrono::milliseconds(600)) << "one timeout of 100 ms, not the server's 1.5 s";
  EXPECT_LT(second_lookup, std::chrono::milliseconds(90)) << "no second timeout";
  EXPECT_TRUE(built.binary);
  EXPECT_NE(err.find("no answer within 100 ms"), std::string::npos) << err;
  EXPECT_EQ(count_of(err, "cannot be used"), 1u) << err;
}

#endif  // KILN_HAVE_HIREDIS

TEST(RemoteCache, WithoutHiredisTheSettingIsAClearError) {
  if (cache::redis_supported()) GTEST_SKIP() << "kiln was built with hiredis";
  test::TempDir dir;
  Config config = test_config(dir.path());
  config.remote_cache = "redis://127.0.0.1:6379";
  try {
    JitRuntime rt(config);
    FAIL() << "expected Error(kConfigError)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfigError);
    EXPECT_NE(std::string(e.what()).find("built without hiredis"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::jit
