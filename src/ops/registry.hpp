// The operations kiln can compile, by name: how a problem description (m=4096 k=7168) maps to the kernels it
// needs. The same mapping serves `kiln compile`, precompile/plan and the run-time path, so a kernel built
// ahead of time is exactly the one a launch will look for.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"

namespace kiln::ops {

using Problem = std::map<std::string, int64_t>;

// What a kernel choice may depend on besides the problem: the target's SM count and shared memory.
// Ahead of time (no GPU), these default to an H100/H200 (132 SMs, 232448 bytes of opt-in shared memory).
struct TargetInfo {
  int arch_major = 9;
  int arch_minor = 0;
  int sm_count = 132;
  int64_t shared_memory_per_block = 232448;
};

struct ProblemParam {
  std::string name;       // "m"
  std::string doc;        // "rows of x (tokens)"
  bool required = true;
};

struct OpDescriptor {
  std::string name;
  std::string summary;
  std::vector<ProblemParam> params;
  // The distinct kernels the problem needs on the target. Pure and deterministic. Throws
  // Error(kValueError) naming the parameter for an invalid problem (missing, unknown or out of range).
  std::function<std::vector<codegen::KernelSpec>(const Problem&, const TargetInfo&)> kernels;
};

// Every registered operation, sorted by name.
const std::vector<OpDescriptor>& all_ops();
// Throws Error(kNotFound) listing the known operations when `name` is unknown.
const OpDescriptor& find_op(const std::string& name);
// Checks that `problem` names exactly the op's parameters (required present, no unknown ones) and that each
// value is >= 0; throws Error(kValueError) naming the op and parameter otherwise.
void validate_problem(const OpDescriptor& op, const Problem& problem);

}  // namespace kiln::ops
