// The NVRTC backend with the real NVRTC: sm_90a cubins from memory-only headers, errors with options and log,
// toolkit headers under CUDA 13's include/cccl, thread safety, PCH that does not change the binary, and the
// memoised identity.
#include <atomic>
#include <thread>

#include "compiler_test_support.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using namespace test_kernels;

TEST(Nvrtc, CompilesAnSm90aCubin) {
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), {});
  EXPECT_EQ(compiler->backend(), Backend::kNvrtc);
  CompiledKernel k = compiler->compile(add_input(), sm90a_options());
  EXPECT_TRUE(is_elf(k.cubin));
  EXPECT_TRUE(contains(k.cubin, "kiln_test_add"));
  EXPECT_EQ(k.kernel_name, "kiln_test_add");
  EXPECT_TRUE(k.command.starts_with("nvrtc --gpu-architecture=sm_90a -std=c++20 -default-device")) << k.command;
  EXPECT_FALSE(has(k.command, "--ptxas-options=-v"));
  EXPECT_TRUE(k.ptx.empty());
  EXPECT_FALSE(k.resources.known());
  EXPECT_GT(k.compile_ms, 0);
}

TEST(Nvrtc, ReportPtxAndLineinfoWhenAsked) {
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), {});
  CompileOptions o = sm90a_options();
  o.resource_report = true;
  o.keep_ptx = true;
  o.lineinfo = true;
  o.cpp_standard = 17;
  CompiledKernel k = compiler->compile(add_input(), o);
  EXPECT_TRUE(has(k.command, "-lineinfo"));
  EXPECT_TRUE(has(k.command, "-std=c++17"));
  EXPECT_TRUE(has(k.command, "--ptxas-options=-v"));
  ASSERT_TRUE(k.resources.known()) << k.log;
  EXPECT_GT(k.resources.registers, 0);
  EXPECT_FALSE(k.resources.uses_local_memory()) << k.resources.describe();
  EXPECT_TRUE(has(k.ptx, ".target sm_90a")) << k.ptx.substr(0, 400);
  EXPECT_TRUE(has(k.ptx, ".entry kiln_test_add"));
  EXPECT_NE(k.ptx.back(), '\0');
}

TEST(Nvrtc, SyntaxErrorIsACompileErrorWithOptionsAndLog) {
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), {});
  try {
    compiler->compile(broken_input(), sm90a_options());
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
    EXPECT_TRUE(has(e.log(), "this_is_not_declared")) << e.log();
    EXPECT_TRUE(has(e.command(), "nvrtc --gpu-architecture=sm_90a"));
    const std::string what = e.what();
    EXPECT_TRUE(has(what, "test_broken")) << what;
    EXPECT_TRUE(has(what, "NVRTC_ERROR_COMPILATION")) << what;
    EXPECT_TRUE(has(what, "this_is_not_declared"));
  }
}

TEST(Nvrtc, AKernelNameTheCubinLacksIsACompileError) {
  expect_misnamed_kernel_refused(Backend::kNvrtc, "NVRTC", "nvrtc");
}

TEST(Nvrtc, SpillingKernelIsRejectedByTheCheck) {
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), {});
  CompileOptions o = sm90a_options();
  o.resource_report = true;
  CompiledKernel k = compiler->compile(spill_input(), o);
  ASSERT_TRUE(k.resources.known()) << k.log;
  EXPECT_GT(k.resources.stack_frame_bytes, 0) << k.resources.describe();
  try {
    check_resources(k, "test_spill");
    FAIL() << "expected the check to reject a kernel with a stack frame";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "kiln_test_spill"));
    EXPECT_TRUE(has(e.what(), "bytes stack frame")) << e.what();
  }
}

TEST(Nvrtc, ToolkitHeadersUnderCuda13Layout) {
  // libcu++ lives under include/cccl in CUDA 13; cuda_bf16.h under include. Neither is a kiln header.
  const CompileInput input{R"(#include <cuda/std/cstdint>
#include <cuda_bf16.h>
extern "C" __global__ void kiln_test_toolkit(__nv_bfloat16* out, cuda::std::uint32_t n) {
  if (threadIdx.x < n) out[threadIdx.x] = __float2bfloat16(1.5f);
}
)",
                           "kiln_test_toolkit", "test_toolkit"};
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), {});
  CompiledKernel k = compiler->compile(input, sm90a_options());
  EXPECT_TRUE(is_elf(k.cubin));
  EXPECT_TRUE(has(k.command, "/include/cccl")) << k.command;
}

TEST(Nvrtc, ConcurrentCompilesOnOneCompiler) {
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), {});
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      CompileInput input = t % 2 ? spill_input() : add_input();
      CompiledKernel k = compiler->compile(input, sm90a_options());
      if (is_elf(k.cubin) && contains(k.cubin, input.kernel_name)) ok.fetch_add(1);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 4);
}

// NVRTC 12.9+ keeps a cache of its own (under ~/.nv, where a driver is installed): on a hit there ptxas does not
// run and the log has no resource report: on the H200 a second process compiling the same source failed
// fp8_gemm_test's compile check that way (DG_JIT_PTXAS_CHECK would refuse the kernel too). Kiln's cache is the one
// cache, so NVRTC's stays off, and every repeated compile that asks for a report gets one.
TEST(Nvrtc, OwnCacheOffSoEveryCompileReportsItsResources) {
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), {});
  CompileOptions o = sm90a_options();
  o.resource_report = true;
  for (int i = 0; i < 2; ++i) {
    CompiledKernel k = compiler->compile(add_input(), o);
    EXPECT_TRUE(has(k.command, " --no-cache")) << "NVRTC 13 has its own cache: " << k.command;
    EXPECT_TRUE(k.resources.known()) << "compile " << i << ": " << k.log;
  }
}

TEST(Nvrtc, PrecompiledHeadersDoNotChangeTheBinary) {
  auto with_pch = detail::make_nvrtc_compiler(test_config(), {}, {.use_pch = true});
  auto without = detail::make_nvrtc_compiler(test_config(), {}, {.use_pch = false});
  CompiledKernel a = without->compile(add_input(), sm90a_options());
  CompiledKernel b = with_pch->compile(add_input(), sm90a_options());
  CompiledKernel c = with_pch->compile(add_input(), sm90a_options());  // may use the PCH made by b
  EXPECT_FALSE(has(a.command, "-pch"));
  EXPECT_TRUE(has(b.command, " -pch")) << "NVRTC 13 supports PCH: " << b.command;
  EXPECT_EQ(a.cubin, b.cubin);
  EXPECT_EQ(a.cubin, c.cubin);
  EXPECT_FALSE(has(c.log, "precompiled header")) << "PCH messages are kept out of the log: " << c.log;
}

TEST(Nvrtc, IdentityIsTheExactVersionAndMemoised) {
  test::TempDir dir;
  const fs::path state = dir.path() / "state";
  detail::clear_process_memo();
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), state);
  const ToolchainId& id = compiler->identity();
  EXPECT_EQ(id.name, "nvrtc");
  // nvrtcVersion's "13.0", refined to the library's own "13.0.88" when it records one.
  EXPECT_TRUE(id.version.starts_with("1")) << id.version;
  EXPECT_GE(std::count(id.version.begin(), id.version.end(), '.'), 1);
  EXPECT_EQ(id.text().find('/'), std::string::npos);
  auto memo = detail::read_whole_file(state / "versions.json");
  ASSERT_TRUE(memo.has_value());
  EXPECT_TRUE(has(*memo, "\"" + id.version + "\"")) << *memo;

  detail::clear_process_memo();
  auto again = make_compiler(Backend::kNvrtc, test_config(), state);
  EXPECT_EQ(again->identity().text(), id.text());
}

TEST(Nvrtc, LibraryCandidatesPreferTheToolkit) {
  auto names = detail::nvrtc_library_candidates("/opt/cuda");
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names[0], "/opt/cuda/lib64/libnvrtc.so.13");
  EXPECT_EQ(names.back(), "libnvrtc.so");
  EXPECT_EQ(detail::nvrtc_library_candidates("").front(), "libnvrtc.so.13");
}

TEST(Nvrtc, ToolkitVersionFromTheLibrary) {
  const fs::path lib = test_config().cuda_home / "lib64" / "libnvrtc.so.13";
  if (!fs::exists(lib)) GTEST_SKIP() << lib << " not present";
  auto version = detail::embedded_toolkit_version(lib);
  ASSERT_TRUE(version.has_value());
  EXPECT_EQ(std::count(version->begin(), version->end(), '.'), 2) << *version;
  EXPECT_FALSE(detail::embedded_toolkit_version("/etc/hostname").has_value());
}

}  // namespace
}  // namespace kiln::compiler
