// The counters shared by every process that uses a cache directory: kiln/stats.
//
// File format (integers little-endian): "KILNSTAT" u32 version(1) u32 count, then `count` u64 counters in the
// order of enum Counter (whose numbers are stable). A missing, short or foreign file reads as zeros and is
// rewritten whole by the next update. Updates are read-modify-write (pread/pwrite) under flock(LOCK_EX) on
// the file, plus a mutex for the threads of this process (flock does not exclude threads that share one open
// file).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>

#include <sys/types.h>

#include "cache/disk_cache.hpp"

namespace kiln::cache {

inline constexpr size_t kCounterCount = static_cast<size_t>(Counter::kCount);
using CounterValues = std::array<uint64_t, kCounterCount>;

class StatsFile {
 public:
  // Opens path read-write (creating it, mode 0600) when writable, else read-only if it exists. Never throws:
  // when the file cannot be written, counts are kept in this process's memory instead and added to what the
  // file says when read.
  StatsFile(const std::filesystem::path& path, bool writable);
  ~StatsFile();
  StatsFile(const StatsFile&) = delete;
  StatsFile& operator=(const StatsFile&) = delete;

  // Adds to one counter; thread- and process-safe.
  void add(Counter counter, uint64_t amount);

  // The current values (the file's, plus this process's unsaved counts).
  CounterValues read() const;

  // Sets every counter to zero. Returns false when the file cannot be written.
  bool reset();

  // Whether counts reach the shared file.
  bool shared() const { return fd_ >= 0 && writable_; }

 private:
  CounterValues read_locked() const;
  bool write_locked(const CounterValues& values);
  void open_file() const;
  void reopen_after_fork() const;  // under mutex_

  std::filesystem::path path_;
  bool want_writable_ = false;
  // Mutable: a process forked after opening shares the open file (and so its flock) with its parent; the
  // child reopens the file on first use so that the lock excludes the parent again.
  mutable int fd_ = -1;
  mutable bool writable_ = false;
  mutable pid_t pid_ = 0;
  mutable std::mutex mutex_;
  std::array<std::atomic<uint64_t>, kCounterCount> local_{};
};

}  // namespace kiln::cache
