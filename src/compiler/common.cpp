// Small helpers shared by the backends: private temporary directories, whole-file I/O, cubin symbol check.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "compiler/internal.hpp"
#include "kiln/error.hpp"

namespace kiln::compiler::detail {

PrivateTempDir::PrivateTempDir(const std::string& prefix, const std::filesystem::path& base) {
  std::string root = base.string();
  if (root.empty()) {
    const char* tmpdir = std::getenv("TMPDIR");
    root = tmpdir && *tmpdir ? tmpdir : "/tmp";
  }
  std::string pattern = root + "/" + prefix + "XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw Error(ErrorKind::kInternal, "cannot create a temporary directory " + pattern + ": " + strerror(errno) +
                                          " (set TMPDIR to a writable directory)");
  path_ = pattern;
}

PrivateTempDir::~PrivateTempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void remove_stale_entries(const std::filesystem::path& dir, std::string_view prefix, int64_t max_age_s) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (!it->path().filename().string().starts_with(prefix)) continue;
    std::error_code entry_ec;
    auto mtime = fs::last_write_time(it->path(), entry_ec);
    if (!entry_ec && now - mtime > std::chrono::seconds(max_age_s)) fs::remove_all(it->path(), entry_ec);
  }
}

void write_whole_file(const std::filesystem::path& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(ErrorKind::kInternal, "cannot create " + path.string() + ": " + strerror(errno));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      throw Error(ErrorKind::kInternal, "cannot write " + path.string() + ": " + strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0)
    throw Error(ErrorKind::kInternal, "cannot write " + path.string() + ": " + strerror(errno));
}

std::optional<std::string> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(s).str();
}

bool cubin_has_symbol(const std::vector<uint8_t>& cubin, const std::string& symbol) {
  if (symbol.empty()) return false;
  // In an ELF string table every name is preceded and followed by a NUL.
  std::string needle;
  needle += '\0';
  needle += symbol;
  needle += '\0';
  auto it = std::search(cubin.begin(), cubin.end(), needle.begin(), needle.end());
  return it != cubin.end();
}

std::string source_stem(const std::string& kernel_name) {
  std::string stem;
  for (char c : kernel_name)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') stem += c;
  return stem.empty() ? "kernel" : stem.substr(0, 100);
}

std::string compile_error_message(const std::string& summary, const std::string& command, const std::string& log) {
  std::string message = summary + "\ncommand: " + command + "\nlog:\n" + log;
  if (!log.empty() && log.back() != '\n') message += '\n';
  return message;
}

void finish_compile(CompiledKernel& out, const char* compiler, const std::string& what, const CompileInput& input,
                    const CompileOptions& options, bool report, std::string command, std::string log,
                    std::chrono::steady_clock::time_point start) {
  if (!cubin_has_symbol(out.cubin, input.kernel_name))
    throw CompileError(compile_error_message("the cubin " + std::string(compiler) + " built for " + what +
                                                 " has no kernel named '" + input.kernel_name +
                                                 "' (is it extern \"C\" __global__?)",
                                             command, log),
                       command, log);
  out.log = std::move(log);
  out.command = std::move(command);
  out.kernel_name = input.kernel_name;
  if (report) out.resources = parse_ptxas_report(out.log, input.kernel_name);
  if (options.ptxas_verbose) std::fprintf(stderr, "[kiln] ptxas report for %s:\n%s", what.c_str(), out.log.c_str());
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace kiln::compiler::detail
