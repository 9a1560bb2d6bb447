// plan(): the kernels a problem needs and their cache keys, without compiling anything. It maps a request to
// kernels exactly as compile() and precompile() do (same arch default, same target description, same
// de-duplication), so the keys plan lists are the keys precompile builds and a launch looks for.
#include <algorithm>
#include <map>
#include <string>

#include "api/planning.hpp"
#include "compiler/compiler.hpp"
#include "cuda/driver.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/kiln.hpp"
#include "ops/registry.hpp"

namespace kiln {
namespace api {

ops::Problem problem_of(const CompileRequest& request) {
  ops::Problem problem;
  for (const auto& [name, value] : request.problem) problem.emplace(name, value);
  for (const auto& [name, range] : request.ranges) {
    if (problem.contains(name))
      throw Error(ErrorKind::kValueError, request.op + ": parameter " + name + " is given both as a value (" +
                                              std::to_string(request.problem.at(name)) + ") and as a range (" +
                                              std::to_string(range.lo) + ".." + std::to_string(range.hi) + ")");
    problem.emplace(name, ops::ProblemValue::range(range.lo, range.hi));
  }
  return problem;
}

compiler::Arch parse_arch_argument(const std::string& text) {
  try {
    return compiler::Arch::parse(text);
  } catch (const Error& e) {
    throw Error(ErrorKind::kValueError, std::string("arch: ") + e.what());
  }
}

jit::Target target_of(const ops::OpDescriptor& op, const CompileRequest& request, jit::JitRuntime& runtime) {
  jit::Target target;
  if (!request.arch) {
    ops::check_dg_jit_arch(op.name, op.arch, runtime.config().arch);
    target.arch = runtime.default_arch();
  } else {
    target.arch = parse_arch_argument(*request.arch);
  }
  target.backend = request.backend.value_or(runtime.config().backend);
  return target;
}

ops::TargetInfo target_info(const compiler::Arch& arch) {
  ops::TargetInfo info;
  info.arch_major = arch.major;
  info.arch_minor = arch.minor;
  info.arch_specific = arch.arch_specific;
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

std::vector<PlannedKernel> plan_kernels(const std::vector<CompileRequest>& requests) {
  jit::JitRuntime& runtime = jit::runtime();
  std::vector<PlannedKernel> planned;
  std::map<std::string, size_t> by_key;
  // Validate every request before planning any, so a bad one fails the whole call early.
  std::vector<ops::Problem> problems;
  for (const CompileRequest& request : requests) {
    const ops::OpDescriptor& op = ops::find_op(request.op);
    problems.push_back(problem_of(request));
    ops::validate_problem(op, problems.back());
  }
  for (size_t r = 0; r < requests.size(); ++r) {
    const CompileRequest& request = requests[r];
    const ops::OpDescriptor& op = ops::find_op(request.op);
    const jit::Target target = target_of(op, request, runtime);
    for (ops::KernelUse& use : ops::kernel_uses(op, problems[r], target_info(target.arch))) {
      std::string key = runtime.key_of(use.spec, target);
      auto [it, fresh] = by_key.emplace(key, planned.size());
      if (!fresh) {  // the same kernel again: built (and listed) once, serving both ranges
        KernelReport& report = planned[it->second].report;
        report.ranges.insert(report.ranges.end(), use.ranges.begin(), use.ranges.end());
        std::sort(report.ranges.begin(), report.ranges.end());
        // The union: requests that repeat a shape (or meet) must not list a piece twice.
        std::vector<std::pair<int64_t, int64_t>> merged;
        for (const auto& piece : report.ranges) {
          if (!merged.empty() && piece.first <= merged.back().second + 1)
            merged.back().second = std::max(merged.back().second, piece.second);
          else
            merged.push_back(piece);
        }
        report.ranges = std::move(merged);
        continue;
      }
      PlannedKernel p;
      p.report.op = use.spec.op;
      p.report.spec = use.spec.describe();
      p.report.key = std::move(key);
      p.report.arch = target.arch.name();
      p.report.backend = target.backend;
      p.report.kernel_name = use.spec.kernel_name();
      p.report.range_param = use.range_param;
      p.report.ranges = std::move(use.ranges);
      p.report.detail = std::move(use.detail);
      p.spec = std::move(use.spec);
      p.target = target;
      planned.push_back(std::move(p));
    }
  }
  return planned;
}

void require_stored(const jit::BuildResult& built, const std::string& what, jit::JitRuntime& runtime) {
  if (!built.binary || built.binary->stored) return;
  const cache::DiskCache& disk = runtime.disk();
  throw Error(ErrorKind::kCacheError,
              what + " (key " + built.key + ") was compiled, but no cache tier could store it (the kiln cache " +
                  disk.root().string() + (disk.writable() ? " refused the entry" : " cannot be written") +
                  ": see the warning above), so a later process would compile it again. Make the directory writable "
                  "(with room for the kernels) or point DG_JIT_CACHE_DIR at one that is");
}

}  // namespace api

std::vector<KernelReport> plan(const std::vector<CompileRequest>& requests) {
  std::vector<KernelReport> reports;
  jit::JitRuntime& runtime = jit::runtime();
  for (api::PlannedKernel& p : api::plan_kernels(requests)) {
    // Whether the writable directory or a read-only layer holds a verified entry: a read, never a compile,
    // counted neither as a hit nor a miss, and no network round trip to a remote tier.
    p.report.cached =
        runtime.tiers().lookup(p.report.key, /*count_stats=*/false, /*include_remote=*/false).has_value();
    reports.push_back(std::move(p.report));
  }
  return reports;
}

std::pair<int64_t, int64_t> KernelReport::range_span() const {
  if (ranges.empty()) return {0, 0};
  std::pair<int64_t, int64_t> span = ranges.front();
  for (const auto& [lo, hi] : ranges) span = {std::min(span.first, lo), std::max(span.second, hi)};
  return span;
}

std::vector<KernelReport> plan(const CompileRequest& request) { return plan(std::vector<CompileRequest>{request}); }

}  // namespace kiln
