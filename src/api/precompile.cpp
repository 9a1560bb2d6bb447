// precompile(): everything plan() lists, built in parallel by a pool of threads calling the JIT runtime's
// build (thread-safe: each key is compiled at most once across threads and processes). Needs no GPU.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "api/planning.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/kiln.hpp"
#include "util/subprocess.hpp"

namespace kiln {

std::vector<KernelReport> precompile(const std::vector<CompileRequest>& requests, const PrecompileOptions& options) {
  if (options.jobs < 0)
    throw Error(ErrorKind::kValueError, "precompile: jobs must be >= 0 (0: one per hardware thread), got " +
                                            std::to_string(options.jobs));
  std::vector<api::PlannedKernel> planned = api::plan_kernels(requests);
  jit::JitRuntime& runtime = jit::runtime();

  const size_t total = planned.size();
  size_t jobs = options.jobs > 0 ? static_cast<size_t>(options.jobs) : std::max(1u, std::thread::hardware_concurrency());
  jobs = std::min(jobs, total);

  std::atomic<size_t> next{0};
  std::atomic<bool> stopped{false};
  std::mutex mutex;  // guards done, first_error, stop_error and the progress callback
  size_t done = 0;
  std::exception_ptr first_error, stop_error;
  // Whether this worker may start another kernel: not once check_stop has thrown, here or in another worker.
  auto may_start = [&] {
    if (stopped.load()) return false;
    if (!options.check_stop) return true;
    try {
      options.check_stop();
      return true;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!stop_error) stop_error = std::current_exception();
      stopped.store(true);
      return false;
    }
  };
  auto work = [&] {
    for (size_t i; may_start() && (i = next.fetch_add(1)) < total;) {
      api::PlannedKernel& p = planned[i];
      PrecompileProgress progress;
      try {
        jit::BuildResult built = runtime.build(p.spec, p.target);
        api::require_stored(built, p.report.op + " " + p.report.spec + " for " + p.report.arch, runtime);
        p.report.hit = built.hit;
        p.report.cached = built.hit;
        p.report.compile_ms = built.compile_ms;
        if (built.binary) {
          p.report.cubin_bytes = built.binary->cubin.size();
          if (!built.binary->meta.kernel_name.empty()) p.report.kernel_name = built.binary->meta.kernel_name;
        }
      } catch (const std::exception& e) {
        progress.error = e.what();
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex);
      progress.done = ++done;
      progress.total = total;
      progress.kernel = &p.report;
      if (options.on_progress) {
        try {
          options.on_progress(progress);
        } catch (...) {
          // A failing progress printer must not stop the builds; report it at the end.
          if (!first_error) first_error = std::current_exception();
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < jobs; ++t) pool.emplace_back(work);
  work();  // the calling thread is one of the workers
  for (std::thread& t : pool) t.join();
  if (stop_error) std::rethrow_exception(stop_error);
  if (first_error) std::rethrow_exception(first_error);

  std::vector<KernelReport> reports;
  reports.reserve(total);
  for (api::PlannedKernel& p : planned) reports.push_back(std::move(p.report));
  return reports;
}

std::vector<KernelReport> precompile(const CompileRequest& request, const PrecompileOptions& options) {
  return precompile(std::vector<CompileRequest>{request}, options);
}

// NVCC and its cicc/ptxas are the only child processes kiln runs (NVRTC compiles in this process).
void kill_compiler_processes() noexcept { util::kill_running_subprocesses(); }

}  // namespace kiln
