// Finding the toolkit and nvcc, and the memoised toolchain identity (versions.json) that lets a warm start
// key its kernels without running `nvcc --version` or loading NVRTC.
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "compiler/internal.hpp"
#include "kiln/error.hpp"
#include "util/subprocess.hpp"

#ifndef KILN_DEFAULT_CUDA_HOME
#define KILN_DEFAULT_CUDA_HOME ""
#endif

namespace kiln::compiler::detail {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMemoFile = "versions.json";
constexpr int kMemoFormat = 1;
constexpr int64_t kVersionTimeoutMs = 60'000;

using util::is_executable_file;

// The process-wide copy of the memo: a second compiler object (or a process without a state dir) asks the
// toolchain at most once per process.
std::mutex& process_memo_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::string>& process_memo() {
  static std::map<std::string, std::string> m;
  return m;
}

nlohmann::json read_memo(const fs::path& file) {
  auto text = read_whole_file(file);
  if (!text) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", 0) != kMemoFormat || !j.contains("entries") || !j["entries"].is_object())
    return nlohmann::json::object();  // damaged or another format: treated as empty, rewritten on store
  return j;
}

// mkdir -p, each directory created private to the user.
bool make_private_dirs(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return true;
  if (dir.has_parent_path() && dir.parent_path() != dir && !make_private_dirs(dir.parent_path())) return false;
  return ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST;
}

}  // namespace

fs::path resolve_cuda_home(const Config& config) {
  if (!config.cuda_home.empty()) return config.cuda_home;
  if (std::strlen(KILN_DEFAULT_CUDA_HOME) > 0) return fs::path(KILN_DEFAULT_CUDA_HOME);
  std::error_code ec;
  if (fs::is_directory("/usr/local/cuda", ec)) return "/usr/local/cuda";
  fs::path nvcc = util::find_in_path("nvcc");
  if (!nvcc.empty()) {
    fs::path real = fs::weakly_canonical(nvcc, ec);
    if (!ec) return real.parent_path().parent_path();
  }
  return {};
}

fs::path resolve_nvcc(const Config& config, const fs::path& cuda_home) {
  if (!config.nvcc_path.empty()) {
    if (is_executable_file(config.nvcc_path)) return config.nvcc_path;
    throw Error(ErrorKind::kConfigError, "DG_JIT_NVCC_COMPILER: '" + config.nvcc_path.string() +
                                             "' is not an executable file; expected the path of nvcc");
  }
  std::string looked;
  if (!cuda_home.empty()) {
    fs::path candidate = cuda_home / "bin" / "nvcc";
    if (is_executable_file(candidate)) return candidate;
    looked = candidate.string() + ", ";
  }
  fs::path on_path = util::find_in_path("nvcc");
  if (!on_path.empty()) return on_path;
  throw Error(ErrorKind::kNotFound,
              "nvcc not found: looked for " + looked +
                  "and nvcc on PATH; set DG_JIT_NVCC_COMPILER or CUDA_HOME, install the CUDA toolkit, or compile "
                  "with NVRTC (DG_JIT_USE_NVRTC=1)");
}

std::optional<std::string> parse_nvcc_version(std::string_view output) {
  static const std::regex kFull(R"(release (\d+\.\d+), V(\d+\.\d+\.\d+))");
  static const std::regex kShort(R"(release (\d+\.\d+))");
  std::string text(output);
  std::smatch m;
  if (std::regex_search(text, m, kFull)) return m[2].str();
  if (std::regex_search(text, m, kShort)) return m[1].str();
  return std::nullopt;
}

std::optional<std::string> file_stamp(const fs::path& file) {
  char* real = ::realpath(file.c_str(), nullptr);
  if (!real) return std::nullopt;
  std::string canonical(real);
  std::free(real);
  struct stat st {};
  if (::stat(canonical.c_str(), &st) != 0) return std::nullopt;
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return canonical + "|" + std::to_string(st.st_size) + "|" + std::to_string(mtime_ns);
}

std::optional<std::string> memo_lookup(const fs::path& state_dir, const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(process_memo_mutex());
    auto it = process_memo().find(key);
    if (it != process_memo().end()) return it->second;
  }
  if (state_dir.empty()) return std::nullopt;
  nlohmann::json memo = read_memo(state_dir / kMemoFile);
  if (!memo.contains("entries")) return std::nullopt;
  auto it = memo["entries"].find(key);
  if (it == memo["entries"].end() || !it->is_string()) return std::nullopt;
  std::string value = it->get<std::string>();
  std::lock_guard<std::mutex> lock(process_memo_mutex());
  process_memo()[key] = value;
  return value;
}

void memo_store(const fs::path& state_dir, const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(process_memo_mutex());
    process_memo()[key] = value;
  }
  if (state_dir.empty() || !make_private_dirs(state_dir)) return;  // the memo is an optimisation only
  nlohmann::json memo = read_memo(state_dir / kMemoFile);
  if (!memo.contains("entries")) memo = {{"format", kMemoFormat}, {"entries", nlohmann::json::object()}};
  memo["entries"][key] = value;
  const std::string text = memo.dump(2) + "\n";

  // Unique temporary beside the target, then rename: readers and racing writers see a whole file.
  std::string tmp = (state_dir / kMemoFile).string() + ".XXXXXX.tmp";
  int fd = ::mkstemps(tmp.data(), 4);
  if (fd < 0) return;
  bool ok = true;
  size_t done = 0;
  while (ok && done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), (state_dir / kMemoFile).c_str()) != 0) ::unlink(tmp.c_str());
}

void clear_process_memo() {
  std::lock_guard<std::mutex> lock(process_memo_mutex());
  process_memo().clear();
}

std::optional<std::string> embedded_toolkit_version(const fs::path& elf_file) {
  int fd = ::open(elf_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  auto read_at = [fd](void* dst, size_t size, uint64_t offset) {
    return ::pread(fd, dst, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
  };
  Elf64_Ehdr eh{};
  if (!read_at(&eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum)
    return std::nullopt;
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (!read_at(sections.data(), sections.size() * sizeof(Elf64_Shdr), eh.e_shoff)) return std::nullopt;
  const Elf64_Shdr& names_header = sections[eh.e_shstrndx];
  if (names_header.sh_size > (1u << 20)) return std::nullopt;
  std::string names(names_header.sh_size, '\0');
  if (!read_at(names.data(), names.size(), names_header.sh_offset)) return std::nullopt;

  for (const Elf64_Shdr& s : sections) {
    if (s.sh_name >= names.size() || std::strcmp(names.c_str() + s.sh_name, ".rodata") != 0) continue;
    if (s.sh_type != SHT_PROGBITS || s.sh_size > (256u << 20)) return std::nullopt;
    std::string data(s.sh_size, '\0');
    if (!read_at(data.data(), data.size(), s.sh_offset)) return std::nullopt;
    static constexpr std::string_view kMarker = "Cuda compilation tools, release ";
    size_t at = data.find(kMarker);
    while (at != std::string::npos) {
      // "Cuda compilation tools, release 13.0, V13.0.88"
      size_t v = data.find(", V", at + kMarker.size());
      if (v != std::string::npos && v - at < 64) {
        size_t begin = v + 3, end = begin;
        while (end < data.size() && (std::isdigit(static_cast<unsigned char>(data[end])) || data[end] == '.')) ++end;
        std::string version = data.substr(begin, end - begin);
        if (std::count(version.begin(), version.end(), '.') == 2) return version;
      }
      at = data.find(kMarker, at + 1);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

ToolchainId nvcc_identity(const fs::path& nvcc, const fs::path& state_dir) {
  // Which nvcc runs is a setting: say where to change it.
  static constexpr const char* kWhichNvcc =
      " (the nvcc is DG_JIT_NVCC_COMPILER's, else $CUDA_HOME/bin/nvcc or nvcc on PATH: `kiln config` shows which)";
  auto stamp = file_stamp(nvcc);
  if (!stamp)
    throw Error(ErrorKind::kNotFound, "nvcc not found at '" + nvcc.string() + "': " + strerror(errno) +
                                          "; set DG_JIT_NVCC_COMPILER or CUDA_HOME");
  // The path is only the memo's key; the identity is the version alone, so moving the toolkit or the cache
  // never changes a cache key.
  const std::string key = "nvcc|" + *stamp;
  if (auto version = memo_lookup(state_dir, key)) return {"nvcc", *version};

  util::SubprocessOptions run;
  run.argv = {nvcc.string(), "--version"};
  run.timeout_ms = kVersionTimeoutMs;
  util::SubprocessResult r = util::run_subprocess(run);
  if (!r.succeeded())
    throw Error(ErrorKind::kCompileError, "cannot get the version of nvcc: `" + util::join_command(run.argv) +
                                              "` " + r.describe_status() + kWhichNvcc + "; output:\n" + r.output);
  auto version = parse_nvcc_version(r.output);
  if (!version)
    throw Error(ErrorKind::kCompileError, "cannot get the version of nvcc: `" + util::join_command(run.argv) +
                                              "` printed no \"release X.Y, VX.Y.Z\" line" + kWhichNvcc +
                                              "; output:\n" + r.output);
  memo_store(state_dir, key, *version);
  return {"nvcc", *version};
}

}  // namespace kiln::compiler::detail

namespace kiln::compiler {

std::unique_ptr<Compiler> make_compiler(Backend backend, const Config& config, const std::filesystem::path& state_dir) {
  switch (backend) {
    case Backend::kNvcc: return detail::make_nvcc_compiler(config, state_dir);
    case Backend::kNvrtc: return detail::make_nvrtc_compiler(config, state_dir);
  }
  throw Error(ErrorKind::kInternal, "make_compiler: unknown backend " + std::to_string(static_cast<int>(backend)));
}

}  // namespace kiln::compiler
