// `kiln doctor`: each thing kiln needs, whether it is there, and what to do when it is not. Every check
// catches its own failure, so one missing piece never hides the report on the others. The doctor reads the
// cache directory but never creates it.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/disk_cache.hpp"
#include "compiler/compiler.hpp"
#include "cuda/driver.hpp"
#include "kiln/kiln.hpp"
#include "ops/registry.hpp"

namespace kiln {

namespace {

namespace fs = std::filesystem;

DoctorCheck ok(std::string what, std::string detail) { return {std::move(what), "ok", std::move(detail), ""}; }
DoctorCheck warning(std::string what, std::string detail, std::string advice) {
  return {std::move(what), "warning", std::move(detail), std::move(advice)};
}
DoctorCheck error(std::string what, std::string detail, std::string advice) {
  return {std::move(what), "error", std::move(detail), std::move(advice)};
}

const Config::Setting* find_setting(const Config& config, const std::string& name) {
  for (const auto& s : config.settings())
    if (s.name == name) return &s;
  return nullptr;
}

// "(from $CUDA_HOME/bin/nvcc)" style suffix for a setting's origin.
std::string origin_note(const Config& config, const std::string& name) {
  const Config::Setting* s = find_setting(config, name);
  if (!s) return "";
  if (s->origin == Origin::kEnvironment) return " (" + (s->detail.empty() ? "set by " + s->variable : s->detail) + ")";
  return s->detail.empty() ? " (default)" : " (default: " + s->detail + ")";
}

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f GiB", double(bytes) / double(int64_t(1) << 30));
  return buf;
}

struct ToolchainProbe {
  std::optional<compiler::ToolchainId> id;
  std::string problem;
};

// Builds the compiler and asks its identity (NVCC: `nvcc --version`; NVRTC: loads the library). Nothing is
// memoised: the doctor should see the toolchain as it is now.
ToolchainProbe probe(Backend backend, const Config& config) {
  ToolchainProbe p;
  try {
    std::unique_ptr<compiler::Compiler> c = compiler::make_compiler(backend, config, {});
    p.id = c->identity();
  } catch (const std::exception& e) {
    p.problem = e.what();
  }
  return p;
}

DoctorCheck check_toolkit(const Config& config) {
  std::error_code ec;
  const std::string home = config.cuda_home.string();
  if (config.cuda_home.empty() || !fs::is_directory(config.cuda_home, ec))
    return warning("CUDA toolkit", "no toolkit at '" + home + "'" + origin_note(config, "cuda_home"),
                   "install the CUDA toolkit (12.8 or newer), or set CUDA_HOME to its root, for example "
                   "/usr/local/cuda");
  return ok("CUDA toolkit", home + origin_note(config, "cuda_home"));
}

DoctorCheck check_nvcc(const Config& config, const ToolchainProbe& p) {
  const bool needed = config.backend == Backend::kNvcc;
  const char* advice =
      "install the CUDA toolkit, or point DG_JIT_NVCC_COMPILER (or CUDA_HOME) at it; or use NVRTC "
      "(DG_JIT_USE_NVRTC=1), which needs no nvcc";
  if (config.nvcc_path.empty()) {
    const Config::Setting* s = find_setting(config, "nvcc_path");
    std::string detail = "not found";
    if (s && !s->detail.empty()) detail += ": " + s->detail;
    return needed ? error("NVCC", detail, advice) : warning("NVCC", detail + " (not needed: the backend is NVRTC)", advice);
  }
  if (!p.id) return needed ? error("NVCC", p.problem, advice) : warning("NVCC", p.problem, advice);
  return ok("NVCC", p.id->version + " at " + config.nvcc_path.string() + origin_note(config, "nvcc_path"));
}

DoctorCheck check_nvrtc(const Config& config, const ToolchainProbe& p) {
  const bool needed = config.backend == Backend::kNvrtc;
  const std::string advice = "NVRTC (libnvrtc.so) ships with the CUDA toolkit: install it, set CUDA_HOME to "
                             "its root, or add its lib64 directory to LD_LIBRARY_PATH";
  if (!p.id) return needed ? error("NVRTC", p.problem, advice) : warning("NVRTC", p.problem + " (not needed: the backend is NVCC)", advice);
  return ok("NVRTC", p.id->version + " (loadable)");
}

DoctorCheck check_backend(const Config& config, const ToolchainProbe& nvcc, const ToolchainProbe& nvrtc) {
  const bool nvcc_ok = !config.nvcc_path.empty() && nvcc.id.has_value();
  const bool nvrtc_ok = nvrtc.id.has_value();
  const std::string chosen = std::string(to_string(config.backend)) + origin_note(config, "backend");
  if (config.backend == Backend::kNvcc) {
    if (nvcc_ok) return ok("compiler backend", chosen + ": " + nvcc.id->text());
    return error("compiler backend", chosen + " cannot compile (see NVCC above)",
                 nvrtc_ok ? "set DG_JIT_USE_NVRTC=1 to compile with NVRTC, which works here"
                          : "install the CUDA toolkit (nvcc and NVRTC)");
  }
  if (nvrtc_ok) return ok("compiler backend", chosen + ": " + nvrtc.id->text());
  return error("compiler backend", chosen + " cannot compile (see NVRTC above)",
               nvcc_ok ? "unset DG_JIT_USE_NVRTC to compile with NVCC, which works here"
                       : "install the CUDA toolkit (nvcc and NVRTC)");
}

// The driver and the GPUs. No driver is a warning, not an error: compiling ahead of time needs neither.
void check_driver_and_gpus(std::vector<DoctorCheck>& checks) {
  std::string version;
  try {
    version = cuda::driver_version();
  } catch (const std::exception& e) {
    checks.push_back(warning("CUDA driver", std::string("missing: ") + e.what(),
                             "kernels can still be compiled ahead of time (kiln compile ... --arch sm_90a); to "
                             "run them, install the NVIDIA driver (libcuda.so.1) on a machine with an H100/H200 "
                             "and check `nvidia-smi`"));
    return;
  }
  checks.push_back(ok("CUDA driver", version));

  const std::vector<DeviceSummary> gpus = devices();
  if (gpus.empty()) {
    checks.push_back(warning("GPUs", "the driver sees no GPU",
                             "check `nvidia-smi` and CUDA_VISIBLE_DEVICES; compiling ahead of time still works"));
    return;
  }
  for (const DeviceSummary& gpu : gpus) {
    const std::string what = "GPU " + std::to_string(gpu.ordinal);
    const std::string detail = gpu.name + ", " + gpu.arch + ", " + std::to_string(gpu.sm_count) + " SMs, " +
                               gib(gpu.memory_bytes);
    if (gpu.arch == "sm_90a")
      checks.push_back(ok(what, detail));
    else
      checks.push_back(warning(what, detail + ": kiln's GEMM kernels are written for Hopper (sm_90a) only",
                               "run on an H100 or H200 (`kiln ops` lists the archs each operation's kernels are "
                               "written for)"));
  }
}

// DG_JIT_ARCH: the operations whose kernels are not written for it (ops::is_written_for), which a build for it would
// refuse.
DoctorCheck check_arch_setting(const std::string& text) {
  // The configuration has already checked the text's form.
  const compiler::Arch arch = compiler::Arch::parse(text);
  std::string refused;
  for (const ops::OpDescriptor& op : ops::all_ops())
    if (!ops::is_written_for(op.arch, arch)) refused += (refused.empty() ? "" : ", ") + op.name;
  const std::string detail = text + " (set by DG_JIT_ARCH)";
  if (refused.empty()) return ok("target arch", detail);
  return warning("target arch",
                 detail + ": the kernels of " + refused + " are not written for it (`kiln ops` shows their targets)",
                 "unset DG_JIT_ARCH to build for the GPU, or set it to sm_90a");
}

// The cache directory: existing and writable, or creatable. Never created here.
DoctorCheck check_cache_dir(const Config& config) {
  const fs::path& dir = config.cache_dir;
  const std::string shown = dir.string() + origin_note(config, "cache_dir");
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec))
      return error("cache directory", shown + " is not a directory", "remove it, or set DG_JIT_CACHE_DIR to a directory");
    const cache::Layout layout = cache::layout_of(dir);
    const fs::path& kiln_dir = layout.base;
    // The rules the cache applies when it opens: each directory of its layout that exists must be a directory
    // (else every command refuses the cache), and trusted (cache::check_directory_trust): one another user owns
    // or can write is refused, so every kernel would fail to load; the root may be sticky and world-writable.
    std::vector<std::pair<fs::path, bool>> checked = {{dir, true}};
    for (const fs::path& sub : layout.directories()) checked.emplace_back(sub, false);
    for (const auto& [path, sticky_ok] : checked) {
      struct stat st{};
      if (::stat(path.c_str(), &st) != 0) continue;
      if (!S_ISDIR(st.st_mode))
        return error("cache directory", shown + ": " + path.string() + " exists and is not a directory, so kiln refuses the cache",
                     "remove " + path.string() + ", or set DG_JIT_CACHE_DIR to another directory");
      const uid_t euid = ::geteuid();
      if (const cache::DirectoryTrust trust = cache::check_directory_trust(st, euid, euid, sticky_ok); !trust.ok())
        return error("cache directory",
                     shown + ": kiln refuses " + path.string() + ", which is " + trust.why +
                         " (another user could plant kernels in it)",
                     trust.problem == cache::DirectoryTrust::Problem::kWritableByOthers
                         ? "run `chmod go-w " + path.string() + "`, or set DG_JIT_CACHE_DIR to a directory only you can write"
                         : "set DG_JIT_CACHE_DIR to a directory you own");
    }
    const fs::path probe_dir = fs::exists(kiln_dir, ec) ? kiln_dir : dir;
    if (::access(probe_dir.c_str(), W_OK | X_OK) != 0)
      return warning("cache directory", shown + " is not writable: kernels compiled now are kept in memory only",
                     "make it writable, or set DG_JIT_CACHE_DIR to a directory you can write");
    return ok("cache directory", shown + ", writable");
  }
  // Missing: it will be created if its nearest existing ancestor is writable.
  fs::path parent = dir.parent_path();
  while (!parent.empty() && !fs::exists(parent, ec) && parent != parent.root_path()) parent = parent.parent_path();
  if (!parent.empty() && fs::is_directory(parent, ec) && ::access(parent.c_str(), W_OK | X_OK) == 0)
    return ok("cache directory", shown + ", not created yet (it will be, private to the user)");
  return warning("cache directory", shown + " does not exist and cannot be created under " + parent.string(),
                 "set DG_JIT_CACHE_DIR to a directory you can write; without one, kernels are kept in memory only");
}

// Only asked for when DG_JIT_DUMP_SASS/ASM is on: the tools the disassembly step will look for (the same
// places: $CUDA_HOME/bin, then PATH). Reading PATH here is a one-off diagnostic, not a hot path.
DoctorCheck check_sass_tools(const Config& config) {
  std::vector<fs::path> dirs = {config.cuda_home / "bin"};
  if (const char* path = std::getenv("PATH")) {
    std::string list = path;
    for (size_t start = 0; start <= list.size();) {
      size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      if (end > start) dirs.emplace_back(list.substr(start, end - start));
      start = end + 1;
    }
  }
  for (const fs::path& dir : dirs)
    for (const char* tool : {"nvdisasm", "cuobjdump"})
      if (::access((dir / tool).c_str(), X_OK) == 0) return ok("SASS disassembler", (dir / tool).string());
  return warning("SASS disassembler", "DG_JIT_DUMP_SASS is on but neither nvdisasm nor cuobjdump is in " +
                                          (config.cuda_home / "bin").string() + " or on PATH",
                 "install the toolkit's nvdisasm/cuobjdump (or `pip install triton` and add "
                 "triton/backends/nvidia/bin to PATH), or turn DG_JIT_DUMP_SASS/DG_JIT_DUMP_ASM off");
}

}  // namespace

std::vector<DoctorCheck> doctor() {
  std::vector<DoctorCheck> checks;
  checks.push_back(ok("kiln", version()));

  const Config* config = nullptr;
  try {
    config = &kiln::config();
    int from_environment = 0;
    for (const auto& s : config->settings()) from_environment += s.origin == Origin::kEnvironment;
    checks.push_back(ok("configuration", std::to_string(from_environment) + " of " +
                                             std::to_string(config->settings().size()) +
                                             " settings from the environment (see `kiln config`)"));
  } catch (const Error& e) {
    checks.push_back(error("configuration", e.what(),
                           "fix or unset the variable named above (docs/CONFIGURATION.md lists what each accepts)"));
  }

  if (config) {
    const ToolchainProbe nvcc = config->nvcc_path.empty() ? ToolchainProbe{} : probe(Backend::kNvcc, *config);
    const ToolchainProbe nvrtc = probe(Backend::kNvrtc, *config);
    checks.push_back(check_toolkit(*config));
    checks.push_back(check_nvcc(*config, nvcc));
    checks.push_back(check_nvrtc(*config, nvrtc));
    checks.push_back(check_backend(*config, nvcc, nvrtc));
    if (config->wants_sass()) checks.push_back(check_sass_tools(*config));
  }
  check_driver_and_gpus(checks);
  if (config) {
    checks.push_back(check_cache_dir(*config));
    if (config->arch) checks.push_back(check_arch_setting(*config->arch));
  } else {
    // Said, not left out: a reader must not take a short report for a healthy one.
    checks.push_back(warning("other checks",
                             "the CUDA toolkit, NVCC, NVRTC, the compiler backend and the cache directory were not "
                             "checked: they depend on the configuration, which has an error (above)",
                             "fix the configuration, then run `kiln doctor` again"));
  }
  return checks;
}

}  // namespace kiln
