// The NVCC backend: nvcc as a child process (argv, never a shell), one private temporary directory per
// compile, and the embedded kiln headers materialised once per header digest under the state directory.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "codegen/embedded_headers.hpp"
#include "compiler/internal.hpp"
#include "kiln/error.hpp"
#include "util/fs.hpp"
#include "util/subprocess.hpp"

namespace kiln::compiler::detail {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Temporaries older than this under the state directory are leftovers of killed processes (a compile is
// killed after DG_JIT_COMPILE_TIMEOUT, 600 s by default, so a live one is never this old).
constexpr int64_t kStaleTemporaryAgeS = 6 * 3600;

void write_headers(const fs::path& root) {
  for (const auto& h : codegen::embedded_headers()) {
    fs::path target = root / fs::path(std::string(h.path));
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw Error(ErrorKind::kInternal, "cannot create " + target.parent_path().string() + ": " + ec.message());
    write_whole_file(target, h.content);
  }
}

// The headers in a directory private to this process, for when there is no usable state directory.
const fs::path& process_private_headers() {
  static std::once_flag once;
  static std::unique_ptr<PrivateTempDir> dir;
  std::call_once(once, [] {
    auto d = std::make_unique<PrivateTempDir>("kiln-include-");
    write_headers(d->path());
    dir = std::move(d);
  });
  return dir->path();
}

// <state_dir>/include/<digest>: written into a unique temporary directory beside it, then renamed into
// place, so the directory exists only when complete. A process that loses the rename race uses the
// winner's copy (same digest, same content). Returns nullopt when the state directory cannot hold it.
std::optional<fs::path> shared_headers(const fs::path& state_dir) {
  const fs::path root = state_dir / "include";
  const fs::path final_dir = root / codegen::all_headers_digest();
  std::error_code ec;
  if (fs::is_directory(final_dir, ec)) return final_dir;
  fs::create_directories(root, ec);
  if (ec) return std::nullopt;
  remove_stale_entries(root, ".tmp-", kStaleTemporaryAgeS);
  std::string tmp = (root / (".tmp-" + codegen::all_headers_digest().substr(0, 16) + "-XXXXXX")).string();
  if (!::mkdtemp(tmp.data())) return std::nullopt;
  try {
    write_headers(tmp);
  } catch (const Error&) {
    fs::remove_all(tmp, ec);
    return std::nullopt;
  }
  // The directory is read by other users' nvcc only if the state dir is shared; keep mkdtemp's 0700.
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    const int err = errno;
    fs::remove_all(tmp, ec);
    if (!(err == EEXIST || err == ENOTEMPTY) || !fs::is_directory(final_dir, ec)) return std::nullopt;
  }
  return final_dir;
}

class NvccCompiler final : public Compiler {
 public:
  NvccCompiler(fs::path nvcc, fs::path state_dir) : nvcc_(std::move(nvcc)), state_dir_(std::move(state_dir)) {}

  Backend backend() const override { return Backend::kNvcc; }

  const ToolchainId& identity() override {
    return identity_.get([&] { return nvcc_identity(nvcc_, state_dir_); });
  }

  std::string environment_key_text() const override {
    std::string text;
    for (const char* name : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"}) {
      // Set but empty adds nothing to nvcc's command line, as unset.
      const char* value = std::getenv(name);
      if (value != nullptr && *value != '\0') text += std::string(name) + "=" + value + ";";
    }
    return text;
  }

  CompiledKernel compile(const CompileInput& input, const CompileOptions& options) override {
    const auto start = Clock::now();
    const fs::path include_dir = headers_dir();
    PrivateTempDir work("kiln-nvcc-", work_root());
    const std::string stem = source_stem(input.kernel_name);
    const fs::path source = work.path() / (stem + ".cu");
    const fs::path cubin_path = work.path() / (stem + ".cubin");
    write_whole_file(source, input.source);

    const bool report = options.resource_report || options.ptxas_verbose;
    std::vector<std::string> argv = {nvcc_.string(), "-cubin",
                                     // The explicit -gencode pair: the -arch=sm_90a shorthand has been seen
                                     // to run a plain sm_90 pass as well (HOPPER-GEMM-NOTES.md).
                                     "-gencode=arch=" + options.arch.compute_name() + ",code=" + options.arch.name(),
                                     "-std=c++" + std::to_string(options.cpp_standard)};
    for (auto flag : kNvccFixedFlags) argv.emplace_back(flag);
    if (options.lineinfo) argv.emplace_back("-lineinfo");
    if (const std::string level = register_usage_level_option(options); !level.empty()) {
      argv.emplace_back("-Xptxas");
      argv.emplace_back(level);
    }
    if (report) {
      argv.emplace_back("-Xptxas");
      argv.emplace_back("-v");
    }
    if (options.keep_ptx) {
      // -keep leaves cicc's PTX (<stem>.ptx) in the private directory: the PTX of this very compile, at no
      // extra cost, where a second `-ptx` pass would run the front end and cicc again.
      argv.emplace_back("-keep");
      argv.emplace_back("--keep-dir");
      argv.emplace_back(work.path().string());
    }
    argv.emplace_back("-I" + include_dir.string());
    argv.emplace_back("-o");
    argv.emplace_back(cubin_path.string());
    argv.emplace_back(source.string());

    const std::string command = util::join_command(argv);
    if (options.print_command) std::fprintf(stderr, "[kiln] nvcc command: %s\n", command.c_str());

    util::SubprocessOptions run;
    run.argv = argv;
    run.working_directory = work.path();  // any stray output lands in the private directory
    run.timeout_ms = options.timeout_s > 0 ? int64_t{options.timeout_s} * 1000 : 0;
    util::SubprocessResult r = util::run_subprocess(run);

    const std::string what = input.display_name.empty() ? input.kernel_name : input.display_name;
    if (r.timed_out)
      throw CompileError(compile_error_message("NVCC timed out compiling " + what + " for " + options.arch.name() +
                                                   ": killed after " + std::to_string(options.timeout_s) +
                                                   " s (DG_JIT_COMPILE_TIMEOUT)",
                                               command, r.output),
                         command, r.output);
    if (!r.succeeded())
      throw CompileError(compile_error_message("NVCC failed to compile " + what + " for " + options.arch.name() + " (" +
                                                   r.describe_status() + ")",
                                               command, r.output),
                         command, r.output);

    CompiledKernel out;
    auto bytes = read_whole_file(cubin_path);
    if (!bytes || bytes->empty())
      throw CompileError(compile_error_message("NVCC reported success compiling " + what + " but wrote no cubin at " +
                                                   cubin_path.string(),
                                               command, r.output),
                         command, r.output);
    out.cubin.assign(bytes->begin(), bytes->end());
    if (options.keep_ptx) out.ptx = read_whole_file(work.path() / (stem + ".ptx")).value_or("");
    finish_compile(out, "NVCC", what, input, options, report, command, std::move(r.output), start);
    return out;
  }

 private:
  // Where nvcc finds the kiln headers. Checked on each compile (one stat) because `kiln cache clear` may
  // remove the state directory under a running process; materialised again when gone.
  fs::path headers_dir() {
    std::lock_guard<std::mutex> lock(headers_mutex_);
    std::error_code ec;
    if (!headers_.empty() && fs::is_directory(headers_, ec)) return headers_;
    std::optional<fs::path> shared = state_dir_.empty() ? std::nullopt : shared_headers(state_dir_);
    headers_ = shared ? *shared : process_private_headers();
    return headers_;
  }

  // Where each compile's private directory goes: <state_dir>/tmp, so that the directories of processes
  // killed mid-compile (Ctrl-C, SIGKILL: no destructor runs) are found and removed later; $TMPDIR when there
  // is no usable state directory.
  fs::path work_root() {
    if (state_dir_.empty()) return {};
    std::error_code ec;
    const fs::path root = state_dir_ / "tmp";
    // Every time: `kiln cache clear` may have removed it. Private (0700), as the rest of the cache: the compiles'
    // sources and outputs are there.
    util::create_private_directories(root, ec);
    if (ec || ::access(root.c_str(), W_OK) != 0) return {};
    std::call_once(swept_, [&] { remove_stale_entries(root, "kiln-nvcc-", kStaleTemporaryAgeS); });
    return root;
  }

  const fs::path nvcc_;
  const fs::path state_dir_;
  std::once_flag swept_;
  LazyIdentity identity_;
  std::mutex headers_mutex_;
  fs::path headers_;
};

}  // namespace

std::unique_ptr<Compiler> make_nvcc_compiler(const Config& config, const fs::path& state_dir) {
  return std::make_unique<NvccCompiler>(resolve_nvcc(config, resolve_cuda_home(config)), state_dir);
}

}  // namespace kiln::compiler::detail
