// The operations kiln can compile, by name: how a problem description (m=4096 k=7168) maps to the kernels it
// needs. The same mapping serves `kiln compile`, precompile/plan and the run-time path, so a kernel built
// ahead of time is exactly the one a launch will look for.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"

namespace kiln::compiler {
struct Arch;
}
namespace kiln::cuda {
struct DeviceInfo;
}

namespace kiln::ops {

// A problem parameter's value: one number, or an inclusive range lo..hi (m=1..16384) for parameters that
// accept one (ahead of time: the kernels every value in the range needs). Implicitly built from a number.
struct ProblemValue {
  int64_t lo = 0;
  int64_t hi = 0;
  ProblemValue() = default;
  ProblemValue(int64_t value) : lo(value), hi(value) {}  // NOLINT(google-explicit-constructor): {"m", 4096}
  static ProblemValue range(int64_t lo, int64_t hi) {
    ProblemValue v;
    v.lo = lo;
    v.hi = hi;
    return v;
  }
  bool is_range() const { return lo != hi; }
  bool operator==(const ProblemValue&) const = default;
  std::string text() const;  // "4096" or "1..16384"
};

using Problem = std::map<std::string, ProblemValue>;

// What a kernel choice may depend on besides the problem: the target's SM count and shared memory.
// Ahead of time (no GPU), these default to an H100/H200 (132 SMs, 232448 bytes of opt-in shared memory).
struct TargetInfo {
  int arch_major = 9;
  int arch_minor = 0;
  int sm_count = 132;
  int64_t shared_memory_per_block = 232448;
  bool arch_specific = true;  // the "a" of sm_90a
};

// A launch's target: the device's arch and opt-in shared memory, and the `sm_count` SMs its kernels may use
// (the device's, or fewer where set_num_sms() leaves some for communication).
TargetInfo device_target(const cuda::DeviceInfo& info, int sm_count);

struct ProblemParam {
  std::string name;       // "m"
  std::string doc;        // "rows of x (tokens)"
  bool required = true;
  bool accepts_range = false;  // may be given as lo..hi
};

// One kernel a problem needs and, when the problem has a range, the part of it the kernel serves (for an op
// whose kernel does not depend on the ranged parameter: the whole range). `ranges` lists that part as
// inclusive [lo, hi] pieces in increasing order (a kernel may serve several disjoint pieces).
struct KernelUse {
  codegen::KernelSpec spec;
  std::string range_param;                          // "m"; empty when the problem has no range
  std::vector<std::pair<int64_t, int64_t>> ranges;  // empty when the problem has no range
  std::string detail;                               // e.g. the launch geometry, for people
};

// The targets an operation's kernels are written for (OpDescriptor::arch): every arch from sm_<min_major><min_minor>
// on, or with `sm90a_only` sm_90a alone (WGMMA and setmaxnreg exist nowhere else, not in sm_90 without its "a" nor in
// later GPUs). `uses` names what sets the bound, for the error (check_target_arch).
struct ArchNeeds {
  int min_major = 9;
  int min_minor = 0;
  bool sm90a_only = false;
  std::string uses;
};
// The GEMMs' (fp8_gemm_nt, bf16_gemm_nt): their kernels use WGMMA, setmaxnreg and TMA.
inline const ArchNeeds kWgmmaArchNeeds{9, 0, true, "WGMMA, setmaxnreg and TMA"};

struct OpDescriptor {
  std::string name;
  std::string summary;
  std::vector<ProblemParam> params;
  ArchNeeds arch;
  // The distinct kernels the problem needs on the target. Pure and deterministic. Throws
  // Error(kValueError) naming the parameter for an invalid problem (missing, unknown or out of range).
  std::function<std::vector<codegen::KernelSpec>(const Problem&, const TargetInfo&)> kernels;
  // Optional: the same kernels with the part of the problem's range each serves. When absent,
  // kernel_uses() below derives it from `kernels` (every kernel serves the whole range).
  std::function<std::vector<KernelUse>(const Problem&, const TargetInfo&)> uses;
};

// Every registered operation, sorted by name.
const std::vector<OpDescriptor>& all_ops();
// Throws Error(kNotFound) listing the known operations when `name` is unknown.
const OpDescriptor& find_op(const std::string& name);
// Checks that `problem` names exactly the op's parameters (required present, no unknown ones), that each
// value is >= 0, and that ranges are lo <= hi and given only for parameters that accept one; throws
// Error(kValueError) naming the op and parameter otherwise.
void validate_problem(const OpDescriptor& op, const Problem& problem);

// A 0/1 problem parameter of `op` (false when absent); `allowed` says what each value means, for the error otherwise:
// Error(kValueError) "<op>: parameter <name> must be <allowed>, got <value>".
bool problem_flag(const char* op, const Problem& problem, const char* name, const char* allowed);

// The targets of `needs` for people: "sm_90a only (they use WGMMA, setmaxnreg and TMA)" or "sm_90 and later (...)".
std::string describe_targets(const ArchNeeds& needs);
// Whether `arch` is one of the archs kernels with `needs` (an OpDescriptor::arch) are written for.
bool is_written_for(const ArchNeeds& needs, const compiler::Arch& arch);
// Throws Error(kValueError) naming the op, the archs its kernels are written for, what they use and the target's arch
// when `target` is not one of them: before a plan or an ahead-of-time compile, rather than ptxas's error after it.
void check_target_arch(const OpDescriptor& op, const TargetInfo& target);
// When `dg_jit_arch` (Config::arch, DG_JIT_ARCH) is set, the arch it names must be one of `needs` (the op's
// OpDescriptor::arch); otherwise throws Error(kConfigError) naming the variable, `function` and the archs its kernels
// are written for. Checked before a launch's first build (its miss path) and by plan/compile when no arch is given:
// the JIT's own check (Arch::runs_on) cannot tell, as sm_90 runs on an H100 but has no WGMMA, and ptxas refused the
// GEMMs' sources after a compile's worth of time.
void check_dg_jit_arch(const std::string& function, const ArchNeeds& needs,
                       const std::optional<std::string>& dg_jit_arch);

// The distinct kernels the problem needs, each with the part of the range it serves (op.uses when set,
// else op.kernels with the whole range). Checks the target (check_target_arch) and validates the problem as
// op.kernels does.
std::vector<KernelUse> kernel_uses(const OpDescriptor& op, const Problem& problem, const TargetInfo& target);

}  // namespace kiln::ops
