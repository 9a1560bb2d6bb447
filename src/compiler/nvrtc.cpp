// The NVRTC backend: NVRTC loaded lazily (dlopen, once per process, never for NVCC users), the kiln headers
// passed from memory, CUBIN straight from nvrtcGetCUBIN, automatic precompiled headers on NVRTC 12.8+.
#include <dlfcn.h>
#include <nvrtc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "codegen/embedded_headers.hpp"
#include "compiler/internal.hpp"
#include "kiln/error.hpp"
#include "util/dynlib.hpp"

namespace kiln::compiler::detail {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// The NVRTC entry points kiln uses; the PCH ones are null before NVRTC 12.8.
struct NvrtcApi {
  std::unique_ptr<util::DynamicLibrary> library;
  fs::path file;  // the library file the dynamic loader actually mapped
  int major = 0;
  int minor = 0;
  decltype(&::nvrtcGetErrorString) get_error_string = nullptr;
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcCreateProgram) create_program = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy_program = nullptr;
  decltype(&::nvrtcCompileProgram) compile_program = nullptr;
  decltype(&::nvrtcGetProgramLogSize) get_program_log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) get_program_log = nullptr;
  decltype(&::nvrtcGetCUBINSize) get_cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) get_cubin = nullptr;
  decltype(&::nvrtcGetPTXSize) get_ptx_size = nullptr;
  decltype(&::nvrtcGetPTX) get_ptx = nullptr;
  decltype(&::nvrtcGetPCHCreateStatus) get_pch_create_status = nullptr;

  bool supports_pch() const { return get_pch_create_status != nullptr && (major > 12 || (major == 12 && minor >= 8)); }
  // NVRTC 12.9 added its own cache of PTX and CUBINs (beside the driver's, under ~/.nv) and --no-cache.
  bool has_own_cache() const { return major > 12 || (major == 12 && minor >= 9); }
  const char* error_name(nvrtcResult r) const { return get_error_string ? get_error_string(r) : "unknown NVRTC error"; }
};

std::mutex g_load_mutex;
std::atomic<const NvrtcApi*> g_api{nullptr};

template <typename Fn>
void bind(const util::DynamicLibrary& lib, Fn& fn, const char* symbol) {
  fn = reinterpret_cast<Fn>(lib.require(symbol));
}

// Loads NVRTC the first time it is needed; later calls are one atomic load. The first successful load wins
// for the whole process (NVRTC keeps process-wide state). A failed load is retried on the next call.
const NvrtcApi& nvrtc_api(const fs::path& cuda_home) {
  if (const NvrtcApi* api = g_api.load(std::memory_order_acquire)) return *api;
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (const NvrtcApi* api = g_api.load(std::memory_order_acquire)) return *api;

  auto api = std::make_unique<NvrtcApi>();
  api->library = std::make_unique<util::DynamicLibrary>(
      nvrtc_library_candidates(cuda_home),
      "NVRTC is needed to compile kernels with DG_JIT_USE_NVRTC=1 (install the CUDA toolkit's NVRTC, set "
      "CUDA_HOME to a toolkit that has lib64/libnvrtc.so.13, or use NVCC by unsetting DG_JIT_USE_NVRTC)");
  const util::DynamicLibrary& lib = *api->library;
  bind(lib, api->get_error_string, "nvrtcGetErrorString");
  bind(lib, api->version, "nvrtcVersion");
  bind(lib, api->create_program, "nvrtcCreateProgram");
  bind(lib, api->destroy_program, "nvrtcDestroyProgram");
  bind(lib, api->compile_program, "nvrtcCompileProgram");
  bind(lib, api->get_program_log_size, "nvrtcGetProgramLogSize");
  bind(lib, api->get_program_log, "nvrtcGetProgramLog");
  bind(lib, api->get_cubin_size, "nvrtcGetCUBINSize");
  bind(lib, api->get_cubin, "nvrtcGetCUBIN");
  bind(lib, api->get_ptx_size, "nvrtcGetPTXSize");
  bind(lib, api->get_ptx, "nvrtcGetPTX");
  api->get_pch_create_status = reinterpret_cast<decltype(api->get_pch_create_status)>(lib.find("nvrtcGetPCHCreateStatus"));
  if (api->version(&api->major, &api->minor) != NVRTC_SUCCESS)
    throw Error(ErrorKind::kCudaError, "nvrtcVersion failed in " + lib.name());
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(api->version), &info) != 0 && info.dli_fname) api->file = info.dli_fname;
  else api->file = lib.name();

  const NvrtcApi* loaded = api.release();  // lives for the process, like the library itself
  g_api.store(loaded, std::memory_order_release);
  return *loaded;
}

// The embedded headers as NUL-terminated arrays for nvrtcCreateProgram, built once per process.
struct HeaderArrays {
  std::vector<std::string> names, contents;
  std::vector<const char*> name_ptrs, content_ptrs;
};
const HeaderArrays& header_arrays() {
  static const HeaderArrays arrays = [] {
    HeaderArrays a;
    for (const auto& h : codegen::embedded_headers()) {
      a.names.emplace_back(h.path);
      a.contents.emplace_back(h.content);
    }
    for (size_t i = 0; i < a.names.size(); ++i) {
      a.name_ptrs.push_back(a.names[i].c_str());
      a.content_ptrs.push_back(a.contents[i].c_str());
    }
    return a;
  }();
  return arrays;
}

// Destroys the program on every path out of compile().
struct ProgramGuard {
  const NvrtcApi& api;
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) api.destroy_program(&program);
  }
};

std::string version_text(const NvrtcApi& api) {
  // nvrtcVersion gives major.minor only; the library's own build string gives the patch level, which can
  // change code generation, when it agrees with nvrtcVersion.
  std::string short_version = std::to_string(api.major) + "." + std::to_string(api.minor);
  if (auto full = embedded_toolkit_version(api.file); full && full->starts_with(short_version + ".")) return *full;
  return short_version;
}

class NvrtcCompiler final : public Compiler {
 public:
  NvrtcCompiler(fs::path cuda_home, fs::path state_dir, NvrtcSettings settings)
      : cuda_home_(std::move(cuda_home)), state_dir_(std::move(state_dir)), settings_(settings) {
    // CUDA 13 moved libcu++/CUB/Thrust under include/cccl; both directories go on the include path so a
    // kernel that does include toolkit headers compiles (kiln's own headers need neither).
    std::error_code ec;
    for (fs::path dir : {cuda_home_ / "include", cuda_home_ / "include" / "cccl"})
      if (!cuda_home_.empty() && fs::is_directory(dir, ec)) include_options_.push_back("-I" + dir.string());
  }

  Backend backend() const override { return Backend::kNvrtc; }

  const ToolchainId& identity() override {
    return identity_.get([&] { return nvrtc_identity(cuda_home_, state_dir_); });
  }

  CompiledKernel compile(const CompileInput& input, const CompileOptions& options) override {
    const auto start = Clock::now();
    const NvrtcApi& api = nvrtc_api(cuda_home_);
    const bool report = options.resource_report || options.ptxas_verbose;

    std::vector<std::string> opts = {"--gpu-architecture=" + options.arch.name(),  // sm_XX: a CUBIN, not PTX
                                     "-std=c++" + std::to_string(options.cpp_standard)};
    for (auto flag : kNvrtcFixedFlags) opts.emplace_back(flag);
    if (options.lineinfo) opts.emplace_back("-lineinfo");
    if (const std::string level = register_usage_level_option(options); !level.empty())
      opts.emplace_back("--ptxas-options=" + level);
    if (report) opts.emplace_back("--ptxas-options=-v");
    // NVRTC's own cache stays off. On a hit there (seen on the H200: a second process compiling the same source,
    // NVRTC 13.0 with a driver) ptxas does not run, so the log carries no resource report and DG_JIT_PTXAS_CHECK,
    // DG_JIT_PTXAS_VERBOSE and the compile time would all be wrong; and kiln's content-addressed cache already
    // stores every CUBIN once, in the directory the user chose. The CUBIN is the same either way, so the flag
    // is not part of the key.
    if (api.has_own_cache()) opts.emplace_back("--no-cache");
    for (const auto& inc : include_options_) opts.push_back(inc);
    if (settings_.use_pch && api.supports_pch()) {
      // Automatic PCH: NVRTC keeps the parsed header prefix in a per-process directory it removes at exit,
      // and reuses it for later sources with the same includes. Same cubin, byte for byte (measured), so it
      // is not part of the key. Its messages are kept out of the log.
      opts.emplace_back("-pch");
      opts.emplace_back("--pch-messages=false");
      opts.emplace_back("--pch-verbose=false");
    }
    const std::string program_name = source_stem(input.kernel_name) + ".cu";
    std::string command = "nvrtc";
    for (const auto& o : opts) command += " " + o;
    command += " " + program_name;
    if (options.print_command) std::fprintf(stderr, "[kiln] nvrtc options: %s\n", command.c_str());

    const HeaderArrays& headers = header_arrays();
    ProgramGuard guard{api};
    const std::string what = input.display_name.empty() ? input.kernel_name : input.display_name;
    nvrtcResult rc = api.create_program(&guard.program, input.source.c_str(), program_name.c_str(),
                                        static_cast<int>(headers.names.size()), headers.content_ptrs.data(),
                                        headers.name_ptrs.data());
    if (rc != NVRTC_SUCCESS)
      throw CompileError(compile_error_message("nvrtcCreateProgram failed for " + what + ": " + api.error_name(rc),
                                               command, ""),
                         command, "");

    std::vector<const char*> opt_ptrs;
    for (const auto& o : opts) opt_ptrs.push_back(o.c_str());
    rc = api.compile_program(guard.program, static_cast<int>(opt_ptrs.size()), opt_ptrs.data());
    std::string log = program_log(api, guard.program);
    if (rc != NVRTC_SUCCESS)
      throw CompileError(compile_error_message("NVRTC failed to compile " + what + " for " + options.arch.name() + " (" +
                                                   api.error_name(rc) + ")",
                                               command, log),
                         command, log);

    CompiledKernel out;
    size_t size = 0;
    rc = api.get_cubin_size(guard.program, &size);
    if (rc == NVRTC_SUCCESS && size > 0) {
      out.cubin.resize(size);
      rc = api.get_cubin(guard.program, reinterpret_cast<char*>(out.cubin.data()));
    }
    if (rc != NVRTC_SUCCESS || out.cubin.empty())
      throw CompileError(compile_error_message("NVRTC compiled " + what + " but returned no CUBIN (" +
                                                   std::string(rc == NVRTC_SUCCESS ? "empty" : api.error_name(rc)) +
                                                   "); the target must be a real architecture such as sm_90a",
                                               command, log),
                         command, log);
    if (options.keep_ptx) {
      size_t ptx_size = 0;
      if (api.get_ptx_size(guard.program, &ptx_size) == NVRTC_SUCCESS && ptx_size > 1) {
        std::string ptx(ptx_size, '\0');
        if (api.get_ptx(guard.program, ptx.data()) == NVRTC_SUCCESS) {
          ptx.resize(ptx_size - 1);  // drop the terminating NUL
          out.ptx = std::move(ptx);
        }
      }
    }
    finish_compile(out, "NVRTC", what, input, options, report, std::move(command), std::move(log), start);
    return out;
  }

 private:
  static std::string program_log(const NvrtcApi& api, nvrtcProgram program) {
    size_t size = 0;
    if (api.get_program_log_size(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
    std::string log(size, '\0');
    if (api.get_program_log(program, log.data()) != NVRTC_SUCCESS) return {};
    log.resize(size - 1);
    return log;
  }

  const fs::path cuda_home_;
  const fs::path state_dir_;
  const NvrtcSettings settings_;
  std::vector<std::string> include_options_;
  LazyIdentity identity_;
};

}  // namespace

std::vector<std::string> nvrtc_library_candidates(const fs::path& cuda_home) {
  std::vector<std::string> names;
  if (!cuda_home.empty()) {
    names.push_back((cuda_home / "lib64" / "libnvrtc.so.13").string());
    names.push_back((cuda_home / "lib64" / "libnvrtc.so.12").string());
  }
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) names.emplace_back(n);
  return names;
}

bool nvrtc_loaded() noexcept { return g_api.load(std::memory_order_acquire) != nullptr; }

ToolchainId nvrtc_identity(const fs::path& cuda_home, const fs::path& state_dir) {
  // Already loaded (a compile came first): ask the loaded library; nothing to guess.
  const std::string resolved_key = "nvrtc-resolved|" + cuda_home.string();
  auto identity_from_api = [&](const NvrtcApi& api) {
    auto stamp = file_stamp(api.file);
    if (stamp)
      if (auto version = memo_lookup(state_dir, "nvrtc|" + *stamp)) return ToolchainId{"nvrtc", *version};
    std::string version = version_text(api);
    if (stamp) {
      memo_store(state_dir, "nvrtc|" + *stamp, version);
      std::error_code ec;
      fs::path canonical = fs::canonical(api.file, ec);
      if (!ec) memo_store(state_dir, resolved_key, canonical.string());
    }
    return ToolchainId{"nvrtc", version};
  };
  if (const NvrtcApi* api = g_api.load(std::memory_order_acquire)) return identity_from_api(*api);

  // Warm start, without loading anything: the library dlopen would take is the first absolute candidate
  // that exists; failing that (NVRTC found through the loader's search path), the file found last time.
  std::optional<std::string> stamp;
  for (const auto& candidate : nvrtc_library_candidates(cuda_home)) {
    if (candidate.find('/') == std::string::npos) break;
    if ((stamp = file_stamp(candidate))) break;
  }
  if (!stamp)
    if (auto last = memo_lookup(state_dir, resolved_key)) stamp = file_stamp(*last);
  if (stamp)
    if (auto version = memo_lookup(state_dir, "nvrtc|" + *stamp)) return {"nvrtc", *version};

  // Cold: load NVRTC and remember what it said.
  return identity_from_api(nvrtc_api(cuda_home));
}

std::unique_ptr<Compiler> make_nvrtc_compiler(const Config& config, const fs::path& state_dir, NvrtcSettings settings) {
  return std::make_unique<NvrtcCompiler>(resolve_cuda_home(config), state_dir, settings);
}

}  // namespace kiln::compiler::detail
