// Ahead-of-time compilation and the list of operations: the public API over the op registry and the JIT
// runtime. The problem -> kernels mapping is the registry's, the same the run-time path uses, so a kernel
// built here is exactly the one a launch will look for.
#include <set>
#include <string>

#include "api/planning.hpp"
#include "compiler/compiler.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/kiln.hpp"
#include "ops/registry.hpp"

namespace kiln {

namespace {

// Identifies a spec by everything that reaches its source, so a problem needing one kernel twice builds once.
std::string spec_identity(const codegen::KernelSpec& spec) {
  return spec.op + '\n' + spec.header + '\n' + spec.kernel_template + '\n' + spec.params_type + '\n' +
         spec.describe() + '\n' + std::to_string(spec.block_threads) + '/' + std::to_string(spec.min_blocks_per_sm);
}

}  // namespace

std::vector<KernelReport> compile(const CompileRequest& request) {
  const ops::OpDescriptor& op = ops::find_op(request.op);
  const ops::Problem problem = api::problem_of(request);
  ops::validate_problem(op, problem);

  jit::JitRuntime& runtime = jit::runtime();
  const jit::Target target = api::target_of(op, request, runtime);

  const ops::TargetInfo info = api::target_info(target.arch);
  ops::check_target_arch(op, info);

  std::vector<KernelReport> reports;
  std::set<std::string> seen;
  for (const codegen::KernelSpec& spec : op.kernels(problem, info)) {
    if (!seen.insert(spec_identity(spec)).second) continue;
    jit::BuildResult built = runtime.build(spec, target);
    api::require_stored(built, spec.op + " " + spec.describe() + " for " + target.arch.name(), runtime);
    KernelReport report;
    report.op = spec.op;
    report.spec = spec.describe();
    report.key = built.key;
    report.arch = target.arch.name();
    report.backend = target.backend;
    report.hit = built.hit;
    report.compile_ms = built.compile_ms;
    if (built.binary) {
      report.cubin_bytes = built.binary->cubin.size();
      report.kernel_name = built.binary->meta.kernel_name;
    }
    if (report.kernel_name.empty()) report.kernel_name = spec.kernel_name();
    reports.push_back(std::move(report));
  }
  return reports;
}

std::vector<OpInfo> list_ops() {
  std::vector<OpInfo> out;
  for (const ops::OpDescriptor& op : ops::all_ops()) {
    OpInfo info;
    info.name = op.name;
    info.summary = op.summary;
    info.targets = ops::describe_targets(op.arch);
    for (const ops::ProblemParam& param : op.params)
      info.params.emplace_back(param.name, param.required ? param.doc : param.doc + " (optional)");
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace kiln
