// Kernels and helpers shared by the compiler tests. The kernels are tiny so each real compile takes a
// fraction of a second; they include only embedded kiln headers (or, where a test says so, toolkit ones).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/compiler.hpp"
#include "compiler/internal.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"

namespace kiln::compiler::test_kernels {

// Uses wgmma.fence and setmaxnreg, which exist only on sm_90a: proves the arch-specific target is used.
inline constexpr const char* kAddSource = R"(// test kernel
#include "kiln/ptx/types.cuh"

struct AddParams { kiln::u32* out; kiln::u32 n; };

extern "C" __global__ void __launch_bounds__(128, 1) kiln_test_add(const __grid_constant__ AddParams params) {
  const kiln::u32 i = blockIdx.x * 128 + threadIdx.x;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  if (threadIdx.x >= 128) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  if (i < params.n) {
    kiln::u32 v;
    asm volatile("add.u32 %0, %1, 7;" : "=r"(v) : "r"(i));
    params.out[i] = v;
  }
}
)";

inline constexpr const char* kSyntaxErrorSource = R"(#include "kiln/ptx/types.cuh"
extern "C" __global__ void kiln_test_broken(kiln::u32* out) {
  out[0] = this_is_not_declared + 1;
}
)";

// A big local array indexed at run time cannot live in registers: ptxas gives it a stack frame.
inline constexpr const char* kSpillSource = R"(#include "kiln/ptx/types.cuh"
struct SpillParams { float* out; const int* idx; int n; };
extern "C" __global__ void __launch_bounds__(128, 1) kiln_test_spill(const __grid_constant__ SpillParams p) {
  float local[256];
  for (int i = 0; i < 256; ++i) local[i] = p.out[i * p.n + threadIdx.x];
  p.out[threadIdx.x] = local[p.idx[threadIdx.x] & 255] + local[p.idx[threadIdx.x + 1] & 255];
}
)";

inline CompileInput add_input() { return {kAddSource, "kiln_test_add", "test_add n=1"}; }
inline CompileInput broken_input() { return {kSyntaxErrorSource, "kiln_test_broken", "test_broken"}; }
inline CompileInput spill_input() { return {kSpillSource, "kiln_test_spill", "test_spill"}; }
// kAddSource under a kernel name it does not define (a generator and its kernel name out of step).
inline CompileInput misnamed_input() { return {kAddSource, "kiln_test_absent", "test_misnamed"}; }

inline CompileOptions sm90a_options() {
  CompileOptions o;
  o.arch = Arch::parse("sm_90a");
  o.timeout_s = 300;
  return o;
}

// A Config with the toolkit this machine has; nothing read from the environment.
inline Config test_config() {
  Config c;
  c.cuda_home = detail::resolve_cuda_home(Config{});
  return c;
}

inline bool is_elf(const std::vector<uint8_t>& bytes) {
  return bytes.size() > 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F';
}

inline bool contains(const std::vector<uint8_t>& bytes, const std::string& text) {
  return std::search(bytes.begin(), bytes.end(), text.begin(), text.end()) != bytes.end();
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The backend refuses a cubin that lacks the kernel it was asked for: a CompileError naming the compiler
// ("NVCC"), the source's display name and the missing kernel, with the command (whose first word is
// `command_word`) in the message and on the error.
inline void expect_misnamed_kernel_refused(Backend backend, const std::string& compiler_name,
                                           const std::string& command_word) {
  auto compiler = make_compiler(backend, test_config(), {});
  try {
    compiler->compile(misnamed_input(), sm90a_options());
    ADD_FAILURE() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
    const std::string what = e.what();
    EXPECT_TRUE(has(what, "the cubin " + compiler_name +
                              " built for test_misnamed has no kernel named 'kiln_test_absent'"))
        << what;
    EXPECT_TRUE(has(e.command(), command_word)) << e.command();
    EXPECT_TRUE(has(what, e.command())) << what;
  }
}

// Whether this process has libnvrtc mapped (from /proc/self/maps), however it was loaded.
inline bool nvrtc_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libnvrtc.so") != std::string::npos || line.find("libnvrtc.alt.so") != std::string::npos) return true;
  return false;
}

}  // namespace kiln::compiler::test_kernels
