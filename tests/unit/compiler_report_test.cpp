// Pure functions of the compiler component: the key text, ptxas report parsing (from recorded nvcc and NVRTC
// logs), ResourceUsage::describe, check_resources, nvcc --version parsing and the cubin symbol check.
#include <gtest/gtest.h>

#include "compiler/compiler.hpp"
#include "compiler/internal.hpp"
#include "kiln/error.hpp"

namespace kiln::compiler {
namespace {

// Recorded from `nvcc -cubin -Xptxas -v` 13.0.88 (a spilling kernel after a clean one, and a non-inlined
// device function whose properties block must not be mistaken for the kernel's).
constexpr const char* kNvccLog = R"(ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperPf
    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'kiln_clean' for 'sm_90a'
ptxas info    : Function properties for kiln_clean
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 9.887 ms
ptxas info    : Compiling entry function 'kiln_spill' for 'sm_90a'
ptxas info    : Function properties for kiln_spill
    1024 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 1024 bytes cumulative stack size, 4096 bytes smem
ptxas info    : Compile time = 23.828 ms
)";

// Recorded from NVRTC 13.0 with --ptxas-options=-v: the properties line has its own prefix.
constexpr const char* kNvrtcLog = R"(ptxas info    : 28 bytes gmem
ptxas info    : Compiling entry function 'kiln_fp8_gemm' for 'sm_90a'
ptxas info    : Function properties for kiln_fp8_gemm
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 2 barriers
ptxas info    : Compile time = 22.736 ms
)";

// The CUDA 11/12 shape of the Used line, with lmem and cmem.
constexpr const char* kOlderLog = R"(ptxas info    : Compiling entry function 'kiln_old' for 'sm_90a'
ptxas info    : Function properties for kiln_old
    16 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 255 registers, 16 bytes lmem, 49152 bytes smem, 560 bytes cmem[0]
)";

TEST(PtxasReport, ParsesNvccLog) {
  ResourceUsage clean = parse_ptxas_report(kNvccLog, "kiln_clean");
  EXPECT_EQ(clean.registers, 8);
  EXPECT_EQ(clean.shared_bytes, 0);
  EXPECT_EQ(clean.stack_frame_bytes, 0);
  EXPECT_EQ(clean.spill_store_bytes, 0);
  EXPECT_EQ(clean.spill_load_bytes, 0);
  EXPECT_EQ(clean.local_bytes, 0);
  EXPECT_TRUE(clean.known());
  EXPECT_FALSE(clean.uses_local_memory());

  ResourceUsage spill = parse_ptxas_report(kNvccLog, "kiln_spill");
  EXPECT_EQ(spill.registers, 128);
  EXPECT_EQ(spill.shared_bytes, 4096);
  EXPECT_EQ(spill.stack_frame_bytes, 1024);
  EXPECT_TRUE(spill.uses_local_memory());
}

TEST(PtxasReport, ParsesNvrtcLog) {
  ResourceUsage r = parse_ptxas_report(kNvrtcLog, "kiln_fp8_gemm");
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.shared_bytes, 0);
  EXPECT_EQ(r.stack_frame_bytes, 0);
  EXPECT_EQ(r.spill_store_bytes, 0);
  EXPECT_EQ(r.spill_load_bytes, 0);
  EXPECT_FALSE(r.uses_local_memory());
}

TEST(PtxasReport, ParsesOlderToolkitShape) {
  ResourceUsage r = parse_ptxas_report(kOlderLog, "kiln_old");
  EXPECT_EQ(r.registers, 255);
  EXPECT_EQ(r.local_bytes, 16);
  EXPECT_EQ(r.shared_bytes, 49152);
  EXPECT_EQ(r.spill_store_bytes, 12);
  EXPECT_EQ(r.spill_load_bytes, 20);
}

TEST(PtxasReport, UnknownKernelOrEmptyLogIsUnknown) {
  EXPECT_FALSE(parse_ptxas_report(kNvccLog, "kiln_other").known());
  EXPECT_FALSE(parse_ptxas_report("", "kiln_clean").known());
  // A prefix of a real name is not that kernel.
  EXPECT_FALSE(parse_ptxas_report(kNvccLog, "kiln_cle").known());
  EXPECT_EQ(ResourceUsage{}.describe(), "no ptxas resource report");
}

TEST(PtxasReport, DescribeNamesEveryFigure) {
  ResourceUsage r = parse_ptxas_report(kNvccLog, "kiln_spill");
  EXPECT_EQ(r.describe(),
            "128 registers, 4096 bytes shared memory, 1024 bytes stack frame, 0 bytes spill stores, "
            "0 bytes spill loads, 0 bytes local memory");
}

TEST(CheckResources, RejectsLocalMemoryNamingKernelAndFigures) {
  CompiledKernel k;
  k.kernel_name = "kiln_spill";
  k.resources = parse_ptxas_report(kNvccLog, "kiln_spill");
  try {
    check_resources(k, "spill_op m=1");
    FAIL() << "expected a rejection";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
    std::string msg = e.what();
    EXPECT_NE(msg.find("DG_JIT_PTXAS_CHECK"), std::string::npos);
    EXPECT_NE(msg.find("spill_op m=1"), std::string::npos);
    EXPECT_NE(msg.find("kiln_spill"), std::string::npos);
    EXPECT_NE(msg.find("1024 bytes stack frame"), std::string::npos);
    EXPECT_NE(msg.find("128 registers"), std::string::npos);
  }
  k.resources = parse_ptxas_report(kOlderLog, "kiln_old");
  EXPECT_THROW(check_resources(k, "old"), Error);
}

TEST(CheckResources, AcceptsACleanKernelAndRefusesAMissingReport) {
  CompiledKernel k;
  k.kernel_name = "kiln_clean";
  k.resources = parse_ptxas_report(kNvccLog, "kiln_clean");
  EXPECT_NO_THROW(check_resources(k, "clean"));
  k.resources = ResourceUsage{};
  try {
    check_resources(k, "clean");
    FAIL() << "a missing report must not pass the check";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
    EXPECT_NE(std::string(e.what()).find("no ptxas resource report"), std::string::npos);
  }
}

TEST(KeyText, HasBinaryChangingOptionsOnly) {
  CompileOptions base;
  base.arch = Arch::parse("sm_90a");
  const std::string key = base.key_text();
  EXPECT_NE(key.find("sm_90a"), std::string::npos);
  EXPECT_NE(key.find("c++20"), std::string::npos);
  EXPECT_NE(key.find("-O3"), std::string::npos);
  EXPECT_NE(key.find("--expt-relaxed-constexpr"), std::string::npos);

  CompileOptions noisy = base;
  noisy.ptxas_verbose = true;
  noisy.print_command = true;
  noisy.keep_ptx = true;
  noisy.resource_report = true;
  noisy.timeout_s = 5;
  EXPECT_EQ(noisy.key_text(), key);
  EXPECT_EQ(key.find("-v"), std::string::npos);
  EXPECT_EQ(key.find('/'), std::string::npos);  // never a path

  CompileOptions lineinfo = base;
  lineinfo.lineinfo = true;
  EXPECT_NE(lineinfo.key_text(), key);
  CompileOptions cpp17 = base;
  cpp17.cpp_standard = 17;
  EXPECT_NE(cpp17.key_text(), key);
  CompileOptions sm90 = base;
  sm90.arch = Arch::parse("sm_90");
  EXPECT_NE(sm90.key_text(), key);
  CompileOptions register_hungry = base;
  register_hungry.register_usage_level = 10;
  EXPECT_NE(register_hungry.key_text(), key);
  EXPECT_NE(register_hungry.key_text().find("register-usage-level=10"), std::string::npos);
  // ptxas's default is not spelled out: the keys of kernels that never asked stay as they were.
  EXPECT_EQ(key.find("register-usage-level"), std::string::npos);
}

TEST(RegisterUsageLevel, OptionOrRangeError) {
  CompileOptions o;
  EXPECT_EQ(detail::register_usage_level_option(o), "");
  o.register_usage_level = 10;
  EXPECT_EQ(detail::register_usage_level_option(o), "--register-usage-level=10");
  for (int bad : {-1, 11}) {
    o.register_usage_level = bad;
    try {
      detail::register_usage_level_option(o);
      FAIL() << "register_usage_level " << bad << " must be refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kValueError);
      EXPECT_NE(std::string(e.what()).find("1..10, got " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

TEST(Arch, RunsOnTheGpusItsCubinsLoadOn) {
  EXPECT_TRUE(Arch::parse("sm_90a").runs_on(9, 0));
  EXPECT_FALSE(Arch::parse("sm_90a").runs_on(10, 0));
  EXPECT_FALSE(Arch::parse("sm_100a").runs_on(9, 0));
  EXPECT_TRUE(Arch::parse("sm_90").runs_on(9, 0));
  EXPECT_TRUE(Arch::parse("sm_80").runs_on(8, 9));   // same major, a later minor
  EXPECT_FALSE(Arch::parse("sm_89").runs_on(8, 0));  // an earlier minor
  EXPECT_FALSE(Arch::parse("sm_80").runs_on(9, 0));  // another major
  EXPECT_FALSE(Arch::parse("sm_120a").runs_on(12, 1));
}

// A GPU's own target: arch-specific from Hopper on, and it loads there.
TEST(Arch, OfADeviceIsItsOwnArchSpecificFromHopperOn) {
  EXPECT_EQ(Arch::of_device(9, 0), Arch::parse("sm_90a"));
  EXPECT_EQ(Arch::of_device(10, 0), Arch::parse("sm_100a"));
  EXPECT_EQ(Arch::of_device(8, 9), Arch::parse("sm_89"));
  for (const auto& [major, minor] : {std::pair{8, 0}, {8, 9}, {9, 0}, {12, 1}})
    EXPECT_TRUE(Arch::of_device(major, minor).runs_on(major, minor));
}

TEST(Arch, ParsesAndNames) {
  Arch a = Arch::parse("sm_90a");
  EXPECT_EQ(a.name(), "sm_90a");
  EXPECT_EQ(a.compute_name(), "compute_90a");
  EXPECT_EQ(Arch::parse("sm_100a").name(), "sm_100a");
  EXPECT_EQ(Arch::parse("sm_100a").major, 10);
  EXPECT_EQ(Arch::parse("sm_120a").compute_name(), "compute_120a");
  EXPECT_EQ(Arch::parse("sm_90a").major, 9);
  EXPECT_FALSE(Arch::parse("sm_90").arch_specific);
  EXPECT_THROW(Arch::parse("compute_90a"), Error);
  EXPECT_THROW(Arch::parse("sm90a"), Error);
  for (const char* bad : {"", "sm_", "sm_9", "sm_9a", "sm_90b", "sm_9x0", "sm_90aa", "sm_12345a", " sm_90a", "sm_9999a",
                          "sm_1000", "sm_090a", "sm_00"})
    EXPECT_THROW(Arch::parse(bad), Error) << bad;
}

TEST(NvccVersion, ParsesTheFullVersion) {
  EXPECT_EQ(detail::parse_nvcc_version("nvcc: NVIDIA (R) Cuda compiler driver\n"
                                       "Cuda compilation tools, release 13.0, V13.0.88\n"
                                       "Build cuda_13.0.r13.0/compiler.36424714_0\n"),
            "13.0.88");
  EXPECT_EQ(detail::parse_nvcc_version("Cuda compilation tools, release 12.8\n"), "12.8");
  EXPECT_FALSE(detail::parse_nvcc_version("gcc (Debian 12.2.0-14) 12.2.0").has_value());
}

TEST(CubinSymbol, MatchesWholeNamesOnly) {
  static const char kTable[] = "\0.text.kiln_add\0kiln_add\0kiln_add_more\0";
  std::string table(kTable, sizeof kTable - 1);
  std::vector<uint8_t> bytes(table.begin(), table.end());
  EXPECT_TRUE(detail::cubin_has_symbol(bytes, "kiln_add"));
  EXPECT_TRUE(detail::cubin_has_symbol(bytes, "kiln_add_more"));
  EXPECT_FALSE(detail::cubin_has_symbol(bytes, "kiln_ad"));
  EXPECT_FALSE(detail::cubin_has_symbol(bytes, ""));
}

TEST(SourceStem, KeepsIdentifierCharacters) {
  EXPECT_EQ(detail::source_stem("kiln_per_token_cast"), "kiln_per_token_cast");
  EXPECT_EQ(detail::source_stem("a/b c"), "abc");
  EXPECT_EQ(detail::source_stem(""), "kernel");
}

}  // namespace
}  // namespace kiln::compiler
