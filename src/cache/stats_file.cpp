#include "cache/stats_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/fs.hpp"

namespace kiln::cache {
namespace {

constexpr char kStatsMagic[8] = {'K', 'I', 'L', 'N', 'S', 'T', 'A', 'T'};
constexpr uint32_t kStatsVersion = 1;
constexpr size_t kStatsHeaderBytes = 16;
constexpr size_t kStatsFileBytes = kStatsHeaderBytes + 8 * kCounterCount;

// flock for the duration of a scope; waits through EINTR.
class ScopedFlock {
 public:
  ScopedFlock(int fd, int operation) : fd_(fd) {
    while (::flock(fd_, operation) != 0) {
      if (errno != EINTR) {
        fd_ = -1;  // unlocked access is still better than none: counters are statistics
        break;
      }
    }
  }
  ~ScopedFlock() {
    if (fd_ >= 0) ::flock(fd_, LOCK_UN);
  }
  ScopedFlock(const ScopedFlock&) = delete;
  ScopedFlock& operator=(const ScopedFlock&) = delete;

 private:
  int fd_;
};

}  // namespace

StatsFile::StatsFile(const std::filesystem::path& path, bool writable) : path_(path), want_writable_(writable) {
  open_file();
}

void StatsFile::open_file() const {
  pid_ = ::getpid();
  writable_ = false;
  fd_ = -1;
  if (want_writable_) {
    std::error_code ec;
    fd_ = util::open_private_file(path_, O_RDWR, ec);  // a link or FIFO put there is replaced
    writable_ = fd_ >= 0;
  }
  if (fd_ < 0) {
    // A read-only layer's counters, or ours when they cannot be written. Read-only, nothing there is replaced,
    // but a FIFO must not stop the process (open(2) would wait for a writer forever): O_NONBLOCK, and what is
    // not a regular file is not read (its counters read as zero).
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st{};
    if (fd_ >= 0 && (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))) {
      ::close(fd_);
      fd_ = -1;
    }
  }
}

void StatsFile::reopen_after_fork() const {
  if (pid_ == ::getpid()) return;
  if (fd_ >= 0) ::close(fd_);
  open_file();
}

StatsFile::~StatsFile() {
  if (fd_ >= 0) ::close(fd_);
}

CounterValues StatsFile::read_locked() const {
  CounterValues values{};
  if (fd_ < 0) return values;
  uint8_t buf[kStatsFileBytes];
  ssize_t n;
  while ((n = ::pread(fd_, buf, sizeof buf, 0)) < 0 && errno == EINTR) {
  }
  if (n < static_cast<ssize_t>(kStatsHeaderBytes) || std::memcmp(buf, kStatsMagic, sizeof kStatsMagic) != 0)
    return values;
  uint32_t version = 0;
  for (int i = 3; i >= 0; --i) version = (version << 8) | buf[8 + i];
  if (version != kStatsVersion) return values;
  // Counters past the end of a short file (written by a version with fewer counters) read as zero.
  for (size_t c = 0; c < kCounterCount; ++c) {
    const size_t at = kStatsHeaderBytes + 8 * c;
    if (at + 8 > static_cast<size_t>(n)) break;
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | buf[at + static_cast<size_t>(i)];
    values[c] = v;
  }
  return values;
}

bool StatsFile::write_locked(const CounterValues& values) {
  uint8_t buf[kStatsFileBytes];
  std::memcpy(buf, kStatsMagic, sizeof kStatsMagic);
  const uint32_t count = kCounterCount;
  for (int i = 0; i < 4; ++i) {
    buf[8 + i] = static_cast<uint8_t>(kStatsVersion >> (8 * i));
    buf[12 + i] = static_cast<uint8_t>(count >> (8 * i));
  }
  for (size_t c = 0; c < kCounterCount; ++c)
    for (size_t i = 0; i < 8; ++i) buf[kStatsHeaderBytes + 8 * c + i] = static_cast<uint8_t>(values[c] >> (8 * i));
  ssize_t n;
  while ((n = ::pwrite(fd_, buf, sizeof buf, 0)) < 0 && errno == EINTR) {
  }
  return n == static_cast<ssize_t>(sizeof buf);
}

void StatsFile::add(Counter counter, uint64_t amount) {
  const auto index = static_cast<size_t>(counter);
  if (index >= kCounterCount || amount == 0) return;
  std::lock_guard<std::mutex> guard(mutex_);
  reopen_after_fork();
  if (!shared()) {
    local_[index].fetch_add(amount, std::memory_order_relaxed);
    return;
  }
  ScopedFlock lock(fd_, LOCK_EX);
  CounterValues values = read_locked();
  values[index] += amount;
  if (!write_locked(values)) local_[index].fetch_add(amount, std::memory_order_relaxed);  // disk full: keep it here
}

CounterValues StatsFile::read() const {
  CounterValues values{};
  {
    std::lock_guard<std::mutex> guard(mutex_);
    reopen_after_fork();
    if (fd_ >= 0) {
      ScopedFlock lock(fd_, LOCK_SH);
      values = read_locked();
    }
  }
  for (size_t c = 0; c < kCounterCount; ++c) values[c] += local_[c].load(std::memory_order_relaxed);
  return values;
}

bool StatsFile::reset() {
  for (auto& v : local_) v.store(0, std::memory_order_relaxed);
  std::lock_guard<std::mutex> guard(mutex_);
  reopen_after_fork();
  if (!shared()) return false;
  ScopedFlock lock(fd_, LOCK_EX);
  return write_locked(CounterValues{});
}

}  // namespace kiln::cache
