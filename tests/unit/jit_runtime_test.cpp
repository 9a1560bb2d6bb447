// The JIT composer: keys, the tiers, single compiles across threads and processes, faults.
#include "jit/jit_runtime.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include "cache_test_support.hpp"
#include "kiln/error.hpp"
#include "selftest_spec.hpp"
#include "test_support.hpp"

namespace kiln::jit {
namespace {

namespace fs = std::filesystem;
using test::selftest_spec;


Config test_config(const fs::path& cache_dir, Backend backend = Backend::kNvrtc) {
  Config c = Config::from_variables({});
  c.cache_dir = cache_dir;
  c.backend = backend;
  return c;
}

const Target kSm90a{compiler::Arch::parse("sm_90a"), Backend::kNvrtc};

TEST(JitKeys, StableAndCoverWhatChangesTheBinary) {
  test::TempDir dir;
  JitRuntime rt(test_config(dir.path() / "a"));
  const std::string key = rt.key_of(selftest_spec(1), kSm90a);
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key, rt.key_of(selftest_spec(1), kSm90a));
  EXPECT_NE(key, rt.key_of(selftest_spec(2), kSm90a));
  EXPECT_NE(key, rt.key_of(selftest_spec(1), Target{compiler::Arch::parse("sm_90"), Backend::kNvrtc}));
  EXPECT_NE(key, rt.key_of(selftest_spec(1), Target{compiler::Arch::parse("sm_90a"), Backend::kNvcc}));

  codegen::KernelSpec register_hungry = selftest_spec(1);
  register_hungry.register_usage_level = 10;  // same source, another ptxas option: another binary
  EXPECT_NE(key, rt.key_of(register_hungry, kSm90a));

  Config lineinfo = test_config(dir.path() / "a");
  lineinfo.with_lineinfo = true;
  EXPECT_NE(key, JitRuntime(lineinfo).key_of(selftest_spec(1), kSm90a));
  Config cpp17 = test_config(dir.path() / "a");
  cpp17.cpp_standard = 17;
  EXPECT_NE(key, JitRuntime(cpp17).key_of(selftest_spec(1), kSm90a));

  // Diagnostics and the cache's location never change the key: moving the cache must not recompile.
  Config noisy = test_config(dir.path() / "moved elsewhere");
  noisy.debug = noisy.ptxas_verbose = noisy.print_compiler_command = noisy.print_load_time = true;
  noisy.dump_ptx = noisy.dump_sass = noisy.print_configs = noisy.ptxas_check = true;
  EXPECT_EQ(key, JitRuntime(noisy).key_of(selftest_spec(1), kSm90a));
}

// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// nvcc reads NVCC_PREPEND_FLAGS and NVCC_APPEND_FLAGS from the environment kiln's child inherits; a kernel built
// under `-Xptxas -O0` must not be served to a process without it (the cache audit of the fifty-ninth session found
// both builds under one key). NVRTC reads neither.
TEST(JitKeys, NvccEnvironmentFlagsAreInTheKey) {
  test::TempDir dir;
  const Target nvcc{compiler::Arch::parse("sm_90a"), Backend::kNvcc};
  JitRuntime rt(test_config(dir.path(), Backend::kNvcc));
  if (rt.config().nvcc_path.empty()) GTEST_SKIP() << "no nvcc on this machine";
  ::unsetenv("NVCC_PREPEND_FLAGS");
  ::unsetenv("NVCC_APPEND_FLAGS");
  const std::string plain = rt.key_of(selftest_spec(1), nvcc);
  const std::string plain_nvrtc = rt.key_of(selftest_spec(1), kSm90a);
  {
    ScopedEnv empty("NVCC_APPEND_FLAGS", "");  // adds nothing to nvcc's command line: the same key
    EXPECT_EQ(plain, rt.key_of(selftest_spec(1), nvcc));
  }
  std::string appended, prepended;
  {
    ScopedEnv flags("NVCC_APPEND_FLAGS", "-Xptxas -O0");
    appended = rt.key_of(selftest_spec(1), nvcc);
    EXPECT_EQ(plain_nvrtc, rt.key_of(selftest_spec(1), kSm90a));
  }
  {
    ScopedEnv flags("NVCC_PREPEND_FLAGS", "-Xptxas -O0");
    prepended = rt.key_of(selftest_spec(1), nvcc);
  }
  EXPECT_NE(plain, appended);
  EXPECT_NE(plain, prepended);
  EXPECT_NE(appended, prepended);
  EXPECT_EQ(plain, rt.key_of(selftest_spec(1), nvcc));  // unset again: the plain key
}

// The switches that only print or check must not change the bytes stored under a key either: ptxas records -v in
// the cubin's notes, so every compile asks for the report (before, DG_JIT_PTXAS_VERBOSE's build differed).
TEST(JitBuild, DiagnosticSwitchesLeaveTheCubinAlone) {
  for (const Backend backend : {Backend::kNvrtc, Backend::kNvcc}) {
    test::TempDir dir;
    Config quiet = test_config(dir.path() / "quiet", backend);
    if (backend == Backend::kNvcc && quiet.nvcc_path.empty()) continue;
    Config noisy = test_config(dir.path() / "noisy", backend);
    noisy.ptxas_verbose = true;
    const Target target{compiler::Arch::parse("sm_90a"), backend};
    BuildResult a = JitRuntime(quiet).build(selftest_spec(9), target);
    testing::internal::CaptureStderr();  // the verbose build prints its report
    BuildResult b = JitRuntime(noisy).build(selftest_spec(9), target);
    testing::internal::GetCapturedStderr();
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.binary->cubin, b.binary->cubin) << to_string(backend);
    EXPECT_GT(a.binary->meta.registers, 0) << "every entry carries ptxas's figures";
  }
}

// DG_JIT_PTXAS_CHECK applies to a kernel the cache serves, by the figures its compile stored: turning the check on
// after kernels were cached must not let a spilling one through. An entry without figures (older kilns) passes.
TEST(JitBuild, PtxasCheckAppliesToCachedKernelsByTheirStoredFigures) {
  test::TempDir dir;
  JitRuntime writer(test_config(dir.path()));
  const std::string spilling_key = writer.key_of(selftest_spec(21), kSm90a);
  const std::string unknown_key = writer.key_of(selftest_spec(22), kSm90a);
  cache::Entry spilling = test::make_entry(spilling_key);
  spilling.meta.op = "selftest";
  spilling.meta.spill_bytes = 16;
  cache::Entry unknown = test::make_entry(unknown_key);
  unknown.meta.registers = unknown.meta.stack_frame_bytes = unknown.meta.spill_bytes = -1;
  ASSERT_TRUE(writer.disk().publish(spilling));
  ASSERT_TRUE(writer.disk().publish(unknown));

  Config checking = test_config(dir.path());
  checking.ptxas_check = true;
  JitRuntime rt(checking);
  try {
    rt.build(selftest_spec(21), kSm90a);
    FAIL() << "a cached kernel that spills passed DG_JIT_PTXAS_CHECK";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
    EXPECT_NE(std::string(e.what()).find("(from the cache)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16 bytes spill stores"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(rt.build(selftest_spec(22), kSm90a).hit);
  EXPECT_TRUE(JitRuntime(test_config(dir.path())).build(selftest_spec(21), kSm90a).hit) << "unchecked: served";
}

TEST(JitBuild, CompilesOnceThenHitsInMemoryThenOnDisk) {
  test::TempDir dir;
  {
    JitRuntime rt(test_config(dir.path()));
    BuildResult first = rt.build(selftest_spec(3), kSm90a);
    EXPECT_FALSE(first.hit);
    EXPECT_TRUE(first.binary->stored);
    EXPECT_GT(first.compile_ms, 0.0);
    ASSERT_TRUE(first.binary);
    ASSERT_GT(first.binary->cubin.size(), 4u);
    EXPECT_EQ(first.binary->cubin[0], 0x7f);  // ELF
    EXPECT_EQ(first.binary->meta.kernel_name, "kiln_selftest");
    EXPECT_EQ(first.binary->meta.arch, "sm_90a");
    EXPECT_EQ(first.binary->meta.backend, "nvrtc");

    BuildResult again = rt.build(selftest_spec(3), kSm90a);
    EXPECT_TRUE(again.hit);
    EXPECT_EQ(again.key, first.key);
    EXPECT_EQ(rt.memory_hits(), 1u);
  }
  JitRuntime fresh(test_config(dir.path()));  // a new process's view: the disk tier
  BuildResult from_disk = fresh.build(selftest_spec(3), kSm90a);
  EXPECT_TRUE(from_disk.hit);
  EXPECT_TRUE(from_disk.binary->stored);
  EXPECT_EQ(from_disk.compile_ms, 0.0);
  cache::Stats stats = fresh.disk().stats();
  EXPECT_EQ(stats.compiles, 1u);
  EXPECT_EQ(stats.entries, 1u);
  // One miss (the compile), one hit (the fresh runtime's); memory hits are not the shared counters' business.
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 1u);
}

TEST(JitBuild, NvccBackendBuildsTheSameKernel) {
  test::TempDir dir;
  JitRuntime rt(test_config(dir.path(), Backend::kNvcc));
  if (rt.config().nvcc_path.empty()) GTEST_SKIP() << "no nvcc on this machine";
  BuildResult r = rt.build(selftest_spec(5), Target{compiler::Arch::parse("sm_90a"), Backend::kNvcc});
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(r.binary->meta.backend, "nvcc");
  EXPECT_EQ(r.binary->cubin[0], 0x7f);
}

TEST(JitBuild, FailedCompileIsReportedAndNeverCached) {
  test::TempDir dir;
  JitRuntime rt(test_config(dir.path()));
  codegen::KernelSpec broken = selftest_spec(1);
  broken.args[0].value = "this_is_not_a_constant";
  try {
    rt.build(broken, kSm90a);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("this_is_not_a_constant"), std::string::npos) << e.what();
    EXPECT_FALSE(e.log().empty());
  }
  cache::Stats stats = rt.disk().stats();
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_EQ(stats.compiles, 0u);
  // And the failure is not remembered in memory either: the next attempt compiles again (and fails again).
  EXPECT_THROW(rt.build(broken, kSm90a), CompileError);
}

TEST(JitBuild, ThreadsAskingForOneKeyCompileItOnce) {
  test::TempDir dir;
  JitRuntime rt(test_config(dir.path()));
  std::vector<std::thread> threads;
  std::atomic<int> compiled{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      if (!rt.build(selftest_spec(7), kSm90a).hit) compiled.fetch_add(1);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(compiled.load(), 1);
  EXPECT_EQ(rt.disk().stats().compiles, 1u);
}

TEST(JitBuild, UnwritableCacheWorksFromMemory) {
  test::TempDir dir;
  // A cache directory below a regular file can never be created, even by root.
  std::ofstream(dir.path() / "plain-file") << "x";
  // NVCC where there is one: without a state directory NVRTC's in-process compile left LeakSanitizer's end-of-process
  // scan a dynamic TLS block it crashed on (CI's `make sanitize`, fifty-ninth session); the test is about the cache.
  Config config = test_config(dir.path() / "plain-file" / "cache", Backend::kNvcc);
  if (config.nvcc_path.empty()) config.backend = Backend::kNvrtc;
  const Target target{compiler::Arch::parse("sm_90a"), config.backend};
  JitRuntime rt(config);
  EXPECT_FALSE(rt.disk().writable());
  BuildResult first = rt.build(selftest_spec(11), target);
  EXPECT_FALSE(first.hit);
  EXPECT_FALSE(first.binary->stored);  // what precompile refuses to call a success
  BuildResult again = rt.build(selftest_spec(11), target);
  EXPECT_TRUE(again.hit);
  EXPECT_FALSE(again.binary->stored);
}

// 8 processes x 4 threads ask cold for the same 3 keys: exactly one compile per key, every entry valid.
TEST(JitProcesses, RaceCompilesEachKeyOnce) {
  test::TempDir dir;
  const std::string cache_env = "DG_JIT_CACHE_DIR=" + (dir.path() / "cache").string();
  std::vector<std::thread> procs;
  std::vector<test::ProgramResult> results(8);
  for (int p = 0; p < 8; ++p)
    procs.emplace_back([&, p] {
      results[p] = test::run_program({test::helper_path(), "build", "4", "sm_90a", "21", "22", "23"},
                                     {cache_env, "DG_JIT_USE_NVRTC=1"});
    });
  for (auto& t : procs) t.join();
  int compiled = 0;
  for (const auto& r : results) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    int c = 0, h = 0, f = 0;
    ASSERT_EQ(std::sscanf(r.output.c_str() + r.output.find("compiled="), "compiled=%d hits=%d failures=%d", &c, &h, &f), 3)
        << r.output;
    compiled += c;
  }
  EXPECT_EQ(compiled, 3);
  JitRuntime rt(test_config(dir.path() / "cache"));
  cache::Stats stats = rt.disk().stats();
  EXPECT_EQ(stats.compiles, 3u);
  EXPECT_EQ(stats.entries, 3u);
  cache::VerifyReport verify = rt.disk().verify();
  EXPECT_EQ(verify.checked, 3u);
  EXPECT_EQ(verify.corrupt, 0u);
}

// A process killed with SIGKILL in the middle of a compile leaves no visible entry, holds no lock, and the
// next process builds the kernel normally.
TEST(JitProcesses, SigkillDuringCompileLeavesNothingBroken) {
  test::TempDir dir;
  Config probe = test_config(dir.path());
  if (probe.nvcc_path.empty()) GTEST_SKIP() << "no nvcc on this machine";
  // A slow "nvcc": announces itself, then sleeps before running the real one.
  const fs::path slow = dir.path() / "slow nvcc";
  const fs::path marker = dir.path() / "started";
  {
    std::ofstream s(slow);
    s << "#!/bin/sh\n"
      << "if [ \"$1\" != \"--version\" ]; then touch '" << marker.string() << "'; sleep 30; fi\n"
      << "exec '" << probe.nvcc_path.string() << "' \"$@\"\n";
  }
  fs::permissions(slow, fs::perms::owner_all);
  const std::string cache_dir = (dir.path() / "cache").string();

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("DG_JIT_CACHE_DIR", cache_dir.c_str(), 1);
    setenv("DG_JIT_NVCC_COMPILER", slow.c_str(), 1);
    unsetenv("DG_JIT_USE_NVRTC");
    execl(test::helper_path().c_str(), "kiln_test_helper", "build", "1", "sm_90a", "31", (char*)nullptr);
    _exit(127);
  }
  for (int i = 0; i < 600 && !fs::exists(marker); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(marker)) << "the slow compiler never started";
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  {
    JitRuntime rt(test_config(dir.path() / "cache", Backend::kNvcc));
    EXPECT_EQ(rt.disk().stats().entries, 0u);
  }
  // The killed process's lock died with it: the next one proceeds at once and compiles.
  auto t0 = std::chrono::steady_clock::now();
  test::ProgramResult next = test::run_program({test::helper_path(), "build", "1", "sm_90a", "31"},
                                               {"DG_JIT_CACHE_DIR=" + cache_dir, "DG_JIT_USE_NVRTC=0"});
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("compiled=1"), std::string::npos) << next.output;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(25));
  JitRuntime rt(test_config(dir.path() / "cache", Backend::kNvcc));
  EXPECT_EQ(rt.disk().stats().entries, 1u);
  EXPECT_EQ(rt.disk().verify().corrupt, 0u);
}

}  // namespace
}  // namespace kiln::jit
