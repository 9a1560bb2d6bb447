// The NVCC backend with the real nvcc: sm_90a cubins, errors with command and log, paths with spaces, the
// timeout, the ptxas report and check, the header copy, and the memoised identity.
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "codegen/embedded_headers.hpp"
#include "compiler_test_support.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using namespace test_kernels;

void write_script(const fs::path& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
}

int count_lines(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

fs::path real_nvcc() { return detail::resolve_nvcc(Config{}, test_config().cuda_home); }

TEST(Nvcc, CompilesAnSm90aCubin) {
  test::TempDir state;
  auto compiler = make_compiler(Backend::kNvcc, test_config(), state.path());
  EXPECT_EQ(compiler->backend(), Backend::kNvcc);
  CompiledKernel k = compiler->compile(add_input(), sm90a_options());
  EXPECT_TRUE(is_elf(k.cubin));
  EXPECT_TRUE(contains(k.cubin, "kiln_test_add"));
  EXPECT_EQ(k.kernel_name, "kiln_test_add");
  EXPECT_TRUE(has(k.command, "-gencode=arch=compute_90a,code=sm_90a")) << k.command;
  EXPECT_TRUE(has(k.command, "-cubin"));
  EXPECT_TRUE(has(k.command, "-std=c++20"));
  EXPECT_TRUE(has(k.command, "-O3"));
  EXPECT_FALSE(has(k.command, "-Xptxas")) << "no report was asked for";
  EXPECT_FALSE(has(k.command, "-lineinfo"));
  EXPECT_TRUE(k.ptx.empty());
  EXPECT_FALSE(k.resources.known());
  EXPECT_GT(k.compile_ms, 0);
  // The compiles' working directory is private, as the rest of the cache (it holds their sources and outputs).
  struct stat st{};
  ASSERT_EQ(::stat((state.path() / "tmp").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST(Nvcc, ReportPtxAndLineinfoWhenAsked) {
  auto compiler = make_compiler(Backend::kNvcc, test_config(), {});
  CompileOptions o = sm90a_options();
  o.resource_report = true;
  o.keep_ptx = true;
  o.lineinfo = true;
  o.cpp_standard = 17;
  CompiledKernel k = compiler->compile(add_input(), o);
  EXPECT_TRUE(has(k.command, "-lineinfo"));
  EXPECT_TRUE(has(k.command, "-std=c++17"));
  EXPECT_TRUE(has(k.log, "Compiling entry function 'kiln_test_add'")) << k.log;
  ASSERT_TRUE(k.resources.known()) << k.log;
  EXPECT_GT(k.resources.registers, 0);
  EXPECT_FALSE(k.resources.uses_local_memory()) << k.resources.describe();
  EXPECT_TRUE(has(k.ptx, ".target sm_90a")) << k.ptx.substr(0, 400);
  EXPECT_TRUE(has(k.ptx, ".entry kiln_test_add"));
  EXPECT_TRUE(has(k.ptx, "wgmma.fence.sync.aligned"));
}

TEST(Nvcc, SyntaxErrorIsACompileErrorWithCommandAndLog) {
  test::TempDir state;
  auto compiler = make_compiler(Backend::kNvcc, test_config(), state.path());
  try {
    compiler->compile(broken_input(), sm90a_options());
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
    EXPECT_TRUE(has(e.log(), "this_is_not_declared")) << e.log();
    EXPECT_TRUE(has(e.command(), "nvcc"));
    EXPECT_TRUE(has(e.command(), "-cubin"));
    const std::string what = e.what();
    EXPECT_TRUE(has(what, "test_broken")) << what;
    EXPECT_TRUE(has(what, e.command()));
    EXPECT_TRUE(has(what, "this_is_not_declared"));
  }
}

TEST(Nvcc, AKernelNameTheCubinLacksIsACompileError) {
  expect_misnamed_kernel_refused(Backend::kNvcc, "NVCC", "nvcc");
}

TEST(Nvcc, SpillingKernelIsRejectedByTheCheck) {
  auto compiler = make_compiler(Backend::kNvcc, test_config(), {});
  CompileOptions o = sm90a_options();
  o.resource_report = true;
  CompiledKernel k = compiler->compile(spill_input(), o);
  ASSERT_TRUE(k.resources.known()) << k.log;
  EXPECT_TRUE(k.resources.uses_local_memory()) << k.resources.describe();
  try {
    check_resources(k, "test_spill");
    FAIL() << "expected the check to reject a kernel with a stack frame";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "test_spill"));
    EXPECT_TRUE(has(e.what(), "kiln_test_spill"));
    EXPECT_TRUE(has(e.what(), "bytes stack frame")) << e.what();
  }
}

TEST(Nvcc, PathsWithSpaces) {
  test::TempDir dir;
  // A toolkit reached through a directory with spaces (nvcc finds its own tree from where it runs), and a
  // state directory with spaces for the header copy.
  const fs::path toolkit = dir.path() / "cuda home with spaces";
  fs::create_directory_symlink(fs::canonical(test_config().cuda_home), toolkit);
  const fs::path state = dir.path() / "state dir" / "tool chain";
  Config config;
  config.cuda_home = toolkit;
  auto compiler = make_compiler(Backend::kNvcc, config, state);
  CompiledKernel k = compiler->compile(add_input(), sm90a_options());
  EXPECT_TRUE(is_elf(k.cubin));
  EXPECT_TRUE(has(k.command, "'" + (toolkit / "bin" / "nvcc").string() + "'")) << k.command;
  EXPECT_TRUE(has(k.command, "state dir")) << k.command;
  EXPECT_TRUE(fs::is_directory(state / "include" / codegen::all_headers_digest()));
  EXPECT_NE(compiler->identity().version, "");
}

TEST(Nvcc, TimeoutKillsTheCompiler) {
  test::TempDir dir;
  const fs::path slow = dir.path() / "slow nvcc";
  write_script(slow, "sleep 30\n");
  Config config = test_config();
  config.nvcc_path = slow;
  auto compiler = make_compiler(Backend::kNvcc, config, {});
  CompileOptions o = sm90a_options();
  o.timeout_s = 1;
  const auto start = std::chrono::steady_clock::now();
  try {
    compiler->compile(add_input(), o);
    FAIL() << "expected a timeout";
  } catch (const CompileError& e) {
    EXPECT_TRUE(has(e.what(), "timed out")) << e.what();
    EXPECT_TRUE(has(e.what(), "DG_JIT_COMPILE_TIMEOUT"));
    EXPECT_TRUE(has(e.command(), "slow nvcc"));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

TEST(Nvcc, IdentityIsMemoisedSoAWarmStartRunsNothing) {
  test::TempDir dir;
  const fs::path log = dir.path() / "invocations.log";
  const fs::path wrapper = dir.path() / "nvcc wrapper";
  write_script(wrapper, "echo \"$@\" >> '" + log.string() + "'\nexec '" + real_nvcc().string() + "' \"$@\"\n");
  const fs::path state = dir.path() / "state";
  Config config = test_config();
  config.nvcc_path = wrapper;

  detail::clear_process_memo();
  std::string first;
  {
    auto compiler = make_compiler(Backend::kNvcc, config, state);
    first = compiler->identity().text();
    EXPECT_EQ(compiler->identity().text(), first);  // the second call on the same object: memory
  }
  EXPECT_EQ(count_lines(log), 1);
  EXPECT_TRUE(first.starts_with("nvcc 1")) << first;
  EXPECT_EQ(first.find('/'), std::string::npos) << "no path in the identity: " << first;
  EXPECT_TRUE(fs::exists(state / "versions.json"));

  // A fresh process: nothing in memory, the memo on disk answers.
  detail::clear_process_memo();
  {
    auto compiler = make_compiler(Backend::kNvcc, config, state);
    EXPECT_EQ(compiler->identity().text(), first);
  }
  EXPECT_EQ(count_lines(log), 1) << "a warm start ran nvcc";

  // A changed binary (new mtime) is asked again.
  struct timespec times[2] = {{0, UTIME_NOW}, {1'600'000'000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, wrapper.c_str(), times, 0), 0);
  detail::clear_process_memo();
  {
    auto compiler = make_compiler(Backend::kNvcc, config, state);
    EXPECT_EQ(compiler->identity().text(), first);
  }
  EXPECT_EQ(count_lines(log), 2);
}

TEST(Nvcc, ConcurrentMemoWritersLeaveAValidFile) {
  test::TempDir dir;
  const fs::path state = dir.path() / "state";
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i)
        detail::memo_store(state, "key-" + std::to_string(t) + "-" + std::to_string(i), "v");
    });
  for (auto& th : threads) th.join();
  detail::clear_process_memo();
  // Whatever entries survived the races, the file parses and the last write of some thread is there.
  int found = 0;
  for (int t = 0; t < 8; ++t) found += detail::memo_lookup(state, "key-" + std::to_string(t) + "-19").has_value();
  EXPECT_GE(found, 1);
  for (const auto& e : fs::directory_iterator(state))
    EXPECT_FALSE(e.path().filename().string().ends_with(".tmp")) << "temporary left behind: " << e.path();
}

TEST(Nvcc, HeadersAreMaterialisedOnceAndRestoredWhenRemoved) {
  test::TempDir dir;
  const fs::path state = dir.path() / "state";
  auto compiler = make_compiler(Backend::kNvcc, test_config(), state);
  compiler->compile(add_input(), sm90a_options());
  const fs::path include = state / "include" / codegen::all_headers_digest();
  EXPECT_TRUE(fs::exists(include / "kiln" / "ptx" / "types.cuh"));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(state / "include")) {
    ++entries;
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp")) << e.path();
  }
  EXPECT_EQ(entries, 1);

  fs::remove_all(state / "include");  // `kiln cache clear` under a running process
  CompiledKernel k = compiler->compile(add_input(), sm90a_options());
  EXPECT_TRUE(is_elf(k.cubin));
  EXPECT_TRUE(fs::exists(include / "kiln" / "ptx" / "types.cuh"));
}

TEST(Nvcc, LeftoversOfKilledCompilesAreRemoved) {
  test::TempDir dir;
  const fs::path state = dir.path() / "state";
  // What a process killed in the middle of a compile (or of materialising the headers) leaves behind.
  const fs::path stale_work = state / "tmp" / "kiln-nvcc-AbC123";
  const fs::path stale_headers = state / "include" / ".tmp-0123456789abcdef-XyZ789";
  const fs::path fresh_work = state / "tmp" / "kiln-nvcc-Fresh1";
  for (const auto& d : {stale_work, stale_headers, fresh_work}) {
    fs::create_directories(d);
    std::ofstream(d / "kernel.cu") << "partial";
  }
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(48);
  fs::last_write_time(stale_work, old);
  fs::last_write_time(stale_headers, old);

  auto compiler = make_compiler(Backend::kNvcc, test_config(), state);
  EXPECT_TRUE(is_elf(compiler->compile(add_input(), sm90a_options()).cubin));
  EXPECT_FALSE(fs::exists(stale_work));
  EXPECT_FALSE(fs::exists(stale_headers));
  EXPECT_TRUE(fs::exists(fresh_work)) << "a recent directory may belong to a live compile";
  int work_dirs = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(state / "tmp")) ++work_dirs;
  EXPECT_EQ(work_dirs, 1) << "the compile's own directory is removed when it ends";
}

TEST(Nvcc, ConcurrentCompilesShareOneHeaderCopy) {
  test::TempDir dir;
  const fs::path state = dir.path() / "state";
  auto shared = make_compiler(Backend::kNvcc, test_config(), state);
  auto other = make_compiler(Backend::kNvcc, test_config(), state);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      Compiler& c = t == 2 ? *other : *shared;
      if (is_elf(c.compile(add_input(), sm90a_options()).cubin)) ok.fetch_add(1);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 3);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(state / "include")) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(Nvcc, PrintsTheCommandAndTheReportWhenAsked) {
  auto compiler = make_compiler(Backend::kNvcc, test_config(), {});
  CompileOptions o = sm90a_options();
  o.print_command = true;
  o.ptxas_verbose = true;
  testing::internal::CaptureStderr();
  CompiledKernel k = compiler->compile(add_input(), o);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(err, "nvcc command: ")) << err;
  EXPECT_TRUE(has(err, "-gencode=arch=compute_90a,code=sm_90a"));
  EXPECT_TRUE(has(err, "ptxas report for test_add n=1")) << err;
  EXPECT_TRUE(has(err, "Used ")) << err;
  EXPECT_TRUE(k.resources.known()) << "ptxas_verbose implies the report";
}

TEST(Nvcc, MissingOrBadNvccIsAClearError) {
  Config config = test_config();
  config.nvcc_path = "/no/such/dir/nvcc";
  try {
    make_compiler(Backend::kNvcc, config, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfigError);
    EXPECT_TRUE(has(e.what(), "DG_JIT_NVCC_COMPILER"));
    EXPECT_TRUE(has(e.what(), "/no/such/dir/nvcc"));
  }
  // An "nvcc" that is not one: its --version output is not recognised.
  test::TempDir dir;
  const fs::path fake = dir.path() / "nvcc";
  write_script(fake, "echo hello\n");
  config.nvcc_path = fake;
  detail::clear_process_memo();
  auto compiler = make_compiler(Backend::kNvcc, config, {});
  try {
    compiler->identity();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "release X.Y")) << e.what();
    EXPECT_TRUE(has(e.what(), "hello"));
  }
}

}  // namespace
}  // namespace kiln::compiler
