// What plan(), precompile() and compile() share: a request as the registry's problem, its target, and the
// distinct kernels it needs. Internal to the api component.
#pragma once

#include <vector>

#include "codegen/kernel_spec.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/kiln.hpp"
#include "ops/registry.hpp"

namespace kiln::api {

// request.problem and request.ranges as one ops::Problem. Throws Error(kValueError) for a parameter given
// both as a value and as a range. (The registry checks names, signs and which parameters take ranges.)
ops::Problem problem_of(const CompileRequest& request);

// An arch given as an argument (a request's, `cache export --arch`): a bad name is a kValueError "arch: ...", a bad
// argument rather than the bad environment Arch::parse's kConfigError would say.
compiler::Arch parse_arch_argument(const std::string& text);

// The request's arch (its own, else the runtime's default; a bad name is a kValueError "arch: ...") and
// backend (its own, else the configured one). Without its own arch, a DG_JIT_ARCH the op's kernels are not written for
// is a kConfigError naming the variable (ops::check_dg_jit_arch).
jit::Target target_of(const ops::OpDescriptor& op, const CompileRequest& request, jit::JitRuntime& runtime);

// The target's SM count and shared memory: a GPU of this arch when one is present, else an H100/H200.
ops::TargetInfo target_info(const compiler::Arch& arch);

struct PlannedKernel {
  codegen::KernelSpec spec;
  jit::Target target;
  KernelReport report;  // op, spec, key, arch, backend, kernel_name, range_param, ranges, detail
};

// Ahead-of-time builds exist to be found later: a kernel this call compiled that no cache tier could store (a
// read-only, full or unwritable cache directory and no remote) is an Error(kCacheError) naming it, the directory and
// the remedy, rather than a success a later process would undo by compiling again.
void require_stored(const jit::BuildResult& built, const std::string& what, jit::JitRuntime& runtime);

// Every distinct kernel (by cache key) the requests need, in request order, then in order of first use.
// A kernel needed by two requests appears once, with both requests' ranges.
std::vector<PlannedKernel> plan_kernels(const std::vector<CompileRequest>& requests);

}  // namespace kiln::api
