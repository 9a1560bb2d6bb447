#include "ops/registry.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "compiler/compiler.hpp"
#include "cuda/driver.hpp"
#include "kiln/error.hpp"
#include "ops/bf16_gemm.hpp"
#include "ops/fp8_gemm.hpp"
#include "ops/quantize.hpp"

namespace kiln::ops {
namespace {

// Every operation's descriptor. Adding an op: expose `OpDescriptor <op>_descriptor()` from its .cpp (and
// its header), include that header above and add one line here.
using DescriptorFactory = OpDescriptor (*)();
constexpr DescriptorFactory kOps[] = {
    per_token_cast_descriptor,
    per_block_cast_descriptor,
    mn_major_scales_descriptor,
    fp8_gemm_nt_descriptor,
    bf16_gemm_nt_descriptor,
};

std::string known_names(const std::vector<OpDescriptor>& ops) {
  std::string s;
  for (const auto& op : ops) s += (s.empty() ? "" : ", ") + op.name;
  return s;
}

std::string param_names(const OpDescriptor& op) {
  std::string s;
  for (const auto& p : op.params) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

std::string range_names(const OpDescriptor& op) {
  std::string s;
  for (const auto& p : op.params)
    if (p.accepts_range) s += (s.empty() ? "" : ", ") + p.name;
  return s.empty() ? "none" : s;
}

}  // namespace

std::string ProblemValue::text() const {
  return is_range() ? std::to_string(lo) + ".." + std::to_string(hi) : std::to_string(lo);
}

const std::vector<OpDescriptor>& all_ops() {
  static const std::vector<OpDescriptor> ops = [] {
    std::vector<OpDescriptor> v;
    for (DescriptorFactory make : kOps) v.push_back(make());
    std::sort(v.begin(), v.end(), [](const OpDescriptor& a, const OpDescriptor& b) { return a.name < b.name; });
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i].name == v[i - 1].name)
        throw Error(ErrorKind::kInternal, "ops registry: operation " + v[i].name + " is registered twice");
    return v;
  }();
  return ops;
}

const OpDescriptor& find_op(const std::string& name) {
  const auto& ops = all_ops();
  auto it = std::lower_bound(ops.begin(), ops.end(), name,
                             [](const OpDescriptor& op, const std::string& n) { return op.name < n; });
  if (it == ops.end() || it->name != name)
    throw Error(ErrorKind::kNotFound, "unknown operation '" + name + "'; known operations: " + known_names(ops));
  return *it;
}

bool problem_flag(const char* op, const Problem& problem, const char* name, const char* allowed) {
  const auto it = problem.find(name);
  const int64_t v = it == problem.end() ? 0 : it->second.lo;
  if (v != 0 && v != 1)
    throw Error(ErrorKind::kValueError,
                std::string(op) + ": parameter " + name + " must be " + allowed + ", got " + std::to_string(v));
  return v == 1;
}

void validate_problem(const OpDescriptor& op, const Problem& problem) {
  for (const auto& [name, value] : problem) {
    auto it = std::find_if(op.params.begin(), op.params.end(), [&](const ProblemParam& p) { return p.name == name; });
    if (it == op.params.end())
      throw Error(ErrorKind::kValueError, op.name + ": unknown parameter '" + name + "'; its parameters are " +
                                              param_names(op));
    if (value.lo < 0)
      throw Error(ErrorKind::kValueError, op.name + ": parameter " + name + " must be >= 0, got " + value.text());
    if (value.hi < value.lo)
      throw Error(ErrorKind::kValueError, op.name + ": parameter " + name +
                                              " must be a range lo..hi with lo <= hi, got " + value.text());
    // Every parameter is a size, a count or a flag, and the kernels and their launches take them as 32-bit integers.
    if (value.hi > INT32_MAX)
      throw Error(ErrorKind::kValueError, op.name + ": parameter " + name + " must be at most 2147483647, got " +
                                              value.text());
    if (value.is_range() && !it->accepts_range)
      throw Error(ErrorKind::kValueError, op.name + ": parameter " + name + " must be a single value, got the range " +
                                              value.text() + " (" + op.name + " accepts ranges for: " +
                                              range_names(op) + ")");
  }
  for (const auto& p : op.params)
    if (p.required && !problem.contains(p.name))
      throw Error(ErrorKind::kValueError,
                  op.name + ": missing parameter " + p.name + " (" + p.doc + "); its parameters are " + param_names(op));
}

TargetInfo device_target(const cuda::DeviceInfo& info, int sm_count) {
  TargetInfo t;
  const compiler::Arch arch = compiler::Arch::of_device(info.cc_major, info.cc_minor);  // as the JIT builds for it
  t.arch_major = arch.major;
  t.arch_minor = arch.minor;
  t.arch_specific = arch.arch_specific;
  t.sm_count = sm_count;
  t.shared_memory_per_block = info.shared_memory_per_block_optin;
  return t;
}

std::string describe_targets(const ArchNeeds& needs) {
  const std::string archs = needs.sm90a_only
                                ? "sm_90a only"
                                : compiler::Arch{needs.min_major, needs.min_minor, false}.name() + " and later";
  return archs + " (they use " + needs.uses + ")";
}

bool is_written_for(const ArchNeeds& needs, const compiler::Arch& arch) {
  return needs.sm90a_only ? arch.major == 9 && arch.minor == 0 && arch.arch_specific
                          : std::pair{arch.major, arch.minor} >= std::pair{needs.min_major, needs.min_minor};
}

void check_target_arch(const OpDescriptor& op, const TargetInfo& target) {
  const compiler::Arch given{target.arch_major, target.arch_minor, target.arch_specific};
  if (is_written_for(op.arch, given)) return;
  throw Error(ErrorKind::kValueError,
              op.name + ": its kernels are written for " + describe_targets(op.arch) + ", got " + given.name());
}

void check_dg_jit_arch(const std::string& function, const ArchNeeds& needs,
                       const std::optional<std::string>& dg_jit_arch) {
  if (!dg_jit_arch || is_written_for(needs, compiler::Arch::parse(*dg_jit_arch))) return;
  throw Error(ErrorKind::kConfigError, function + ": DG_JIT_ARCH=" + *dg_jit_arch +
                                           " is not an arch its kernels are written for: " + describe_targets(needs) +
                                           "; set DG_JIT_ARCH to one of those, or unset it to build for each device's own arch");
}

std::vector<KernelUse> kernel_uses(const OpDescriptor& op, const Problem& problem, const TargetInfo& target) {
  check_target_arch(op, target);
  if (op.uses) return op.uses(problem, target);
  std::vector<codegen::KernelSpec> specs = op.kernels(problem, target);
  std::string param;
  std::pair<int64_t, int64_t> range{0, 0};
  for (const auto& [name, value] : problem)
    if (value.is_range()) {
      param = name;
      range = {value.lo, value.hi};
    }
  std::vector<KernelUse> uses;
  for (codegen::KernelSpec& spec : specs) {
    KernelUse use;
    use.spec = std::move(spec);
    use.range_param = param;
    if (!param.empty()) use.ranges.push_back(range);
    uses.push_back(std::move(use));
  }
  return uses;
}

}  // namespace kiln::ops
