// The public API's compile, ops, cache and doctor functions, through the process-wide runtime. The
// configuration is read once per process, so a global environment points it at a private cache (with
// NVRTC, the faster compiler) before any test runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "kiln/kiln.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

[[maybe_unused]] ::testing::Environment* const kPrivateCache =
    ::testing::AddGlobalTestEnvironment(new test::PrivateCacheEnvironment);

CompileRequest per_token(int64_t k) { return {"per_token_cast_to_fp8", {{"m", 4096}, {"k", k}}, "sm_90a", std::nullopt}; }

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no kiln::Error thrown";
  return ErrorKind::kInternal;
}

TEST(ApiCompile, MissThenHitWithTheSameKey) {
  std::vector<KernelReport> first = compile(per_token(1024));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_FALSE(first[0].hit);
  EXPECT_GT(first[0].compile_ms, 0);
  EXPECT_GT(first[0].cubin_bytes, 0u);
  EXPECT_EQ(first[0].backend, Backend::kNvrtc);  // the configured backend
  EXPECT_EQ(first[0].arch, "sm_90a");
  EXPECT_EQ(first[0].op, "per_token_cast_to_fp8");
  EXPECT_THAT(first[0].spec, HasSubstr("k=1024"));
  EXPECT_EQ(first[0].key.size(), 32u);
  EXPECT_FALSE(first[0].kernel_name.empty());

  std::vector<KernelReport> second = compile(per_token(1024));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_TRUE(second[0].hit);
  EXPECT_EQ(second[0].compile_ms, 0);
  EXPECT_EQ(second[0].key, first[0].key);
  EXPECT_EQ(second[0].cubin_bytes, first[0].cubin_bytes);
}

TEST(ApiCompile, CacheFunctionsSeeTheEntry) {
  const std::vector<KernelReport> built = compile(per_token(2048));
  ASSERT_EQ(built.size(), 1u);
  const std::string& key = built[0].key;

  bool listed = false;
  for (const CacheEntryInfo& e : cache_list()) {
    if (e.key != key) continue;
    listed = true;
    EXPECT_EQ(e.op, "per_token_cast_to_fp8");
    EXPECT_EQ(e.arch, "sm_90a");
    EXPECT_EQ(e.backend, "nvrtc");
    EXPECT_THAT(e.compiler, HasSubstr("nvrtc"));
    EXPECT_GE(e.bytes, built[0].cubin_bytes);
    EXPECT_GT(e.created_unix, 0);
  }
  EXPECT_TRUE(listed);

  CacheStats stats = cache_stats();
  EXPECT_EQ(stats.directory, test::PrivateCacheEnvironment::cache_dir());
  EXPECT_TRUE(stats.writable);
  EXPECT_GE(stats.entries, 1u);
  EXPECT_GE(stats.compiles, 1u);

  CacheVerifyReport report = cache_verify();
  EXPECT_EQ(report.checked, stats.entries);
  EXPECT_EQ(report.corrupt, 0u);
  EXPECT_EQ(report.removed, 0u);
}

TEST(ApiCompile, BackendOverrideGivesAnotherKey) {
  CompileRequest request = per_token(1024);
  const std::string nvrtc_key = compile(request).at(0).key;
  request.backend = Backend::kNvcc;
  std::vector<KernelReport> nvcc = compile(request);
  EXPECT_EQ(nvcc.at(0).backend, Backend::kNvcc);
  EXPECT_NE(nvcc.at(0).key, nvrtc_key);
}

TEST(ApiCompile, ErrorsHaveTheirKinds) {
  EXPECT_EQ(kind_of([] { compile({"no_such_op", {}, "sm_90a", std::nullopt}); }), ErrorKind::kNotFound);
  EXPECT_EQ(kind_of([] { compile({"per_token_cast_to_fp8", {{"m", 1}}, "sm_90a", std::nullopt}); }),
            ErrorKind::kValueError);
  EXPECT_EQ(kind_of([] { compile({"per_token_cast_to_fp8", {{"m", 1}, {"k", 128}, {"x", 1}}, "sm_90a", std::nullopt}); }),
            ErrorKind::kValueError);
  EXPECT_EQ(kind_of([] { compile({"per_token_cast_to_fp8", {{"m", 1}, {"k", 128}}, "banana", std::nullopt}); }),
            ErrorKind::kValueError);
  try {
    compile({"per_token_cast_to_fp8", {{"m", 1}, {"k", 128}}, "banana", std::nullopt});
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("banana"));
  }
  // A target the kernels are not written for: a ValueError naming it, before any compile.
  const CacheStats before = cache_stats();
  EXPECT_EQ(kind_of([] { compile({"fp8_gemm_nt", {{"m", 1}, {"n", 4096}, {"k", 7168}}, "sm_100a", std::nullopt}); }),
            ErrorKind::kValueError);
  EXPECT_EQ(kind_of([] { compile({"per_token_cast_to_fp8", {{"m", 1}, {"k", 128}}, "sm_80", std::nullopt}); }),
            ErrorKind::kValueError);
  EXPECT_EQ(cache_stats().compiles, before.compiles);
}

TEST(ApiOps, ListsEveryOperationWithItsParameters) {
  std::vector<OpInfo> ops = list_ops();
  std::set<std::string> names;
  for (const OpInfo& op : ops) {
    names.insert(op.name);
    EXPECT_FALSE(op.summary.empty()) << op.name;
    EXPECT_FALSE(op.params.empty()) << op.name;
    EXPECT_THAT(op.targets, HasSubstr(op.name.find("gemm") != std::string::npos ? "sm_90a only" : "sm_90 and later"))
        << op.name;
  }
  EXPECT_TRUE(names.count("per_token_cast_to_fp8"));
  EXPECT_TRUE(names.count("per_block_cast_to_fp8"));
}

TEST(ApiDoctor, ReportsEveryCheckWithoutThrowing) {
  std::vector<DoctorCheck> checks = doctor();
  std::set<std::string> what;
  for (const DoctorCheck& c : checks) {
    what.insert(c.what);
    EXPECT_TRUE(c.status == "ok" || c.status == "warning" || c.status == "error") << c.what << ": " << c.status;
    if (c.status != "ok") EXPECT_FALSE(c.advice.empty()) << c.what;
  }
  for (const char* expected : {"kiln", "configuration", "CUDA toolkit", "NVCC", "NVRTC", "compiler backend",
                               "CUDA driver", "cache directory"})
    EXPECT_TRUE(what.count(expected)) << expected;
}

}  // namespace
}  // namespace kiln
