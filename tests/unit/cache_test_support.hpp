// Helpers shared by the cache tests: keys, entries, file surgery and child processes.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"
#include "util/sha256.hpp"

namespace kiln::test {

// A valid cache key derived from a name.
inline std::string key_of(const std::string& name) { return util::sha256_hex(name).substr(0, 32); }

// Bytes that depend on the key (and a variant), so a wrong payload is noticed.
inline std::vector<uint8_t> cubin_for(const std::string& key, size_t size = 4096, int variant = 0) {
  std::vector<uint8_t> bytes(size);
  uint32_t x = 2166136261u ^ static_cast<uint32_t>(variant);
  for (char c : key) x = (x ^ static_cast<uint8_t>(c)) * 16777619u;
  for (auto& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return bytes;
}

inline cache::Entry make_entry(const std::string& key, size_t size = 4096, int variant = 0) {
  cache::Entry e;
  e.meta.key = key;
  e.meta.op = "test_op";
  e.meta.spec = "variant=" + std::to_string(variant);
  e.meta.arch = "sm_90a";
  e.meta.backend = "nvrtc";
  e.meta.compiler = "nvrtc 13.0.88";
  e.meta.kernel_name = "kiln_test_op";
  e.meta.kiln_version = "0.1.0";
  e.meta.compile_ms = 10.0 + variant;
  e.meta.created_unix = 1764460800;
  e.meta.registers = 40;
  e.meta.shared_bytes = 0;
  e.meta.stack_frame_bytes = 0;
  e.meta.spill_bytes = 0;
  e.cubin = cubin_for(key, size, variant);
  return e;
}

inline std::filesystem::path entry_path(const std::filesystem::path& root, const std::string& key) {
  return root / "kiln" / "entries" / key.substr(0, 2) / (key + ".kiln");
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Sets a file's modification time to `seconds_ago` before now.
inline void age_file(const std::filesystem::path& path, int64_t seconds_ago) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= static_cast<time_t>(seconds_ago);
  times[1] = times[0];
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);
}

inline int64_t mtime_of(const std::filesystem::path& path) {
  struct stat st{};
  ::stat(path.c_str(), &st);
  return static_cast<int64_t>(st.st_mtime);
}

// Runs fn in a forked child, which exits with fn's result (99 for an exception). The child never returns
// into the test framework.
inline pid_t fork_child(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: exception: %s\n", e.what());
    } catch (...) {
    }
    std::fflush(stderr);
    ::_exit(rc);
  }
  return pid;
}

// Waits for a child: its exit code, or -signal when a signal killed it.
inline int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1000;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

}  // namespace kiln::test
