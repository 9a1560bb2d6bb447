// plan(): the kernels a problem needs and their cache keys, without compiling anything. It must map a request
// to kernels exactly as compile() does (src/api/compile.cpp): same arch default, same target description, same
// de-duplication. The Python tests check that plan's keys equal precompile's for the same request.
#include <set>
#include <string>

#include "compiler/compiler.hpp"
#include "cuda/driver.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/kiln.hpp"
#include "ops/registry.hpp"

namespace kiln {
namespace {

compiler::Arch planned_arch(const CompileRequest& request, jit::JitRuntime& runtime) {
  if (!request.arch) return runtime.default_arch();
  try {
    return compiler::Arch::parse(*request.arch);
  } catch (const Error& e) {
    // A bad argument, not a bad environment (as compile() reports it).
    throw Error(ErrorKind::kValueError, std::string("arch: ") + e.what());
  }
}

// A GPU of this arch when one is present, else an H100/H200: what compile() assumes.
ops::TargetInfo planned_target(const compiler::Arch& arch) {
  ops::TargetInfo info;
  info.arch_major = arch.major;
  info.arch_minor = arch.minor;
  const int count = cuda::device_count();  // 0 without a driver; never throws
  for (int i = 0; i < count; ++i) {
    try {
      const cuda::DeviceInfo device = cuda::device_info(i);
      if (device.cc_major == arch.major && device.cc_minor == arch.minor) {
        info.sm_count = device.sm_count;
        info.shared_memory_per_block = device.shared_memory_per_block_optin;
        break;
      }
    } catch (const Error&) {
      // A device that cannot be queried is not a target; the defaults stand.
    }
  }
  return info;
}

}  // namespace

std::vector<KernelReport> plan(const CompileRequest& request) {
  const ops::OpDescriptor& op = ops::find_op(request.op);
  ops::validate_problem(op, request.problem);

  jit::JitRuntime& runtime = jit::runtime();
  jit::Target target;
  target.arch = planned_arch(request, runtime);
  target.backend = request.backend.value_or(runtime.config().backend);

  std::vector<KernelReport> reports;
  std::set<std::string> seen;
  for (const codegen::KernelSpec& spec : op.kernels(request.problem, planned_target(target.arch))) {
    std::string key = runtime.key_of(spec, target);
    if (!seen.insert(key).second) continue;  // the same kernel twice is built (and listed) once
    KernelReport report;
    report.op = spec.op;
    report.spec = spec.describe();
    report.key = std::move(key);
    report.arch = target.arch.name();
    report.backend = target.backend;
    report.kernel_name = spec.kernel_name();
    reports.push_back(std::move(report));
  }
  return reports;
}

}  // namespace kiln
