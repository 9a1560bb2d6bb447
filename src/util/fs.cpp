#include "util/fs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace kiln::util {
namespace fs = std::filesystem;

namespace {

std::error_code errno_code(int err) { return {err, std::generic_category()}; }

// close(2) and keep errno as it was: cleanup must not hide the error being reported.
void close_quietly(int fd) noexcept {
  if (fd < 0) return;
  int saved = errno;
  ::close(fd);
  errno = saved;
}

bool write_all(int fd, const uint8_t* data, size_t size, std::error_code& ec) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      ec = errno_code(errno);
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool is_temp_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

constexpr std::string_view kTempSuffix = ".tmp";
constexpr size_t kTempUniqueChars = 6;

}  // namespace

std::optional<std::string> read_file(const fs::path& path, std::error_code& ec) {
  ec.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ec = errno_code(errno);
    return std::nullopt;
  }
  std::string out;
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  // Read until EOF rather than trusting st_size: the file may be growing or be a pseudo-file (/proc).
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ec = errno_code(errno);
      close_quietly(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string read_file(const fs::path& path, ErrorKind kind) {
  std::error_code ec;
  auto content = read_file(path, ec);
  if (!content) throw Error(kind, "cannot read " + path.string() + ": " + ec.message());
  return std::move(*content);
}

bool create_private_directories(const fs::path& path, std::error_code& ec) {
  ec.clear();
  if (path.empty()) {
    ec = errno_code(ENOENT);
    return false;
  }
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    ec = errno_code(ENOTDIR);
    return false;
  }
  if (errno != ENOENT) {
    ec = errno_code(errno);
    return false;
  }
  const fs::path parent = path.parent_path();
  if (!parent.empty() && parent != path && !create_private_directories(parent, ec)) return false;
  if (::mkdir(path.c_str(), 0700) != 0) {
    if (errno == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return true;  // lost a race
    ec = errno_code(errno);
    return false;
  }
  // mkdir's mode is filtered by the umask; a umask such as 0277 would make a directory we cannot use.
  ::chmod(path.c_str(), 0700);
  return true;
}

void fsync_directory(const fs::path& dir, std::error_code& ec) {
  ec.clear();
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    ec = errno_code(errno);
    return;
  }
  // Some filesystems refuse fsync on a directory (EINVAL); there is nothing more to do there.
  if (::fsync(fd) != 0 && errno != EINVAL) ec = errno_code(errno);
  ::close(fd);
}

bool is_temporary_name(std::string_view name) {
  if (name.size() < 1 + 1 + kTempUniqueChars + kTempSuffix.size()) return false;
  if (name.substr(name.size() - kTempSuffix.size()) != kTempSuffix) return false;
  const size_t unique_at = name.size() - kTempSuffix.size() - kTempUniqueChars;
  if (name[unique_at - 1] != '.') return false;
  for (size_t i = 0; i < kTempUniqueChars; ++i)
    if (!is_temp_char(name[unique_at + i])) return false;
  return true;
}

// ---- TemporaryFile ----

std::optional<TemporaryFile> TemporaryFile::create(const fs::path& dir, std::string_view stem, std::error_code& ec) {
  ec.clear();
  std::string pattern = (dir / std::string(stem)).string();
  pattern += ".XXXXXX";
  pattern += kTempSuffix;
  // mkostemps: O_EXCL creation with a unique name, mode 0600, close-on-exec so a compiler child does not
  // inherit it.
  int fd = ::mkostemps(pattern.data(), static_cast<int>(kTempSuffix.size()), O_CLOEXEC);
  if (fd < 0) {
    ec = errno_code(errno);
    return std::nullopt;
  }
  return TemporaryFile(fs::path(pattern), fd);
}

TemporaryFile::TemporaryFile(TemporaryFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), committed_(other.committed_) {
  other.fd_ = -1;
  other.committed_ = true;  // the moved-from object owns nothing to remove
  other.path_.clear();
}

TemporaryFile& TemporaryFile::operator=(TemporaryFile&& other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    committed_ = other.committed_;
    other.fd_ = -1;
    other.committed_ = true;
    other.path_.clear();
  }
  return *this;
}

TemporaryFile::~TemporaryFile() { discard(); }

void TemporaryFile::discard() noexcept {
  close_quietly(fd_);
  fd_ = -1;
  if (!committed_ && !path_.empty()) {
    int saved = errno;
    ::unlink(path_.c_str());
    errno = saved;
  }
  committed_ = true;
}

bool TemporaryFile::write(std::span<const uint8_t> bytes, std::error_code& ec) {
  ec.clear();
  if (fd_ < 0) {
    ec = errno_code(EBADF);
    return false;
  }
  return write_all(fd_, bytes.data(), bytes.size(), ec);
}

bool TemporaryFile::write(std::string_view bytes, std::error_code& ec) {
  return write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), ec);
}

bool TemporaryFile::sync(std::error_code& ec) {
  ec.clear();
  if (fd_ < 0) {
    ec = errno_code(EBADF);
    return false;
  }
  while (::fsync(fd_) != 0) {
    if (errno == EINTR) continue;
    ec = errno_code(errno);
    return false;
  }
  return true;
}

bool TemporaryFile::commit(const fs::path& target, std::error_code& ec, CommitMode mode) {
  ec.clear();
  if (committed_ || path_.empty()) {
    ec = errno_code(EBADF);
    return false;
  }
  if (fd_ >= 0) {
    // close(2) reports deferred write errors on some filesystems (NFS); a file that failed to close is not
    // published.
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0 && errno != EINTR) {
      ec = errno_code(errno);
      return false;
    }
  }
  int rc = -1;
  if (mode == CommitMode::kNoReplace) {
    rc = ::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) rc = ::rename(path_.c_str(), target.c_str());
  } else {
    rc = ::rename(path_.c_str(), target.c_str());
  }
  if (rc != 0) {
    ec = errno_code(errno);
    return false;
  }
  committed_ = true;
  return true;
}

bool write_file_atomic(const fs::path& target, std::span<const uint8_t> bytes, std::error_code& ec,
                       const fs::path& temp_dir) {
  const fs::path dir = temp_dir.empty() ? target.parent_path() : temp_dir;
  auto temp = TemporaryFile::create(dir.empty() ? fs::path(".") : dir, target.filename().string(), ec);
  if (!temp) return false;
  if (!temp->write(bytes, ec) || !temp->sync(ec) || !temp->commit(target, ec)) return false;
  // Make the rename itself durable; a failure here does not undo a rename that already happened.
  std::error_code sync_ec;
  fsync_directory(target.parent_path(), sync_ec);
  return true;
}

bool write_file_atomic(const fs::path& target, std::string_view bytes, std::error_code& ec,
                       const fs::path& temp_dir) {
  return write_file_atomic(
      target, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), ec, temp_dir);
}

// ---- FileLock ----

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    unlock();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

int open_private_file(const fs::path& path, int flags, std::error_code& ec) {
  ec.clear();
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::open(path.c_str(), flags | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    struct stat st{};
    if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    // ELOOP: a link O_NOFOLLOW refused; ENXIO: a socket; EISDIR: a directory; an open FIFO or device fails fstat's
    // check. Whatever is not a regular file (a directory aside) is removed and the file made again.
    const int err = fd >= 0 ? 0 : errno;
    close_quietly(fd);
    if (err != 0 && err != ELOOP && err != ENXIO) {
      ec = errno_code(err);
      return -1;
    }
    if (::lstat(path.c_str(), &st) != 0) continue;  // gone meanwhile: try again
    if (S_ISDIR(st.st_mode)) {
      ec = errno_code(EISDIR);
      return -1;
    }
    if (S_ISREG(st.st_mode)) continue;  // replaced by a regular file meanwhile
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      ec = errno_code(errno);
      return -1;
    }
  }
  ec = errno_code(EAGAIN);  // something not a regular file came back twice
  return -1;
}

FileLock FileLock::acquire(const fs::path& path, std::error_code& ec) { return lock_path(path, true, ec); }

FileLock FileLock::try_acquire(const fs::path& path, std::error_code& ec) { return lock_path(path, false, ec); }

FileLock FileLock::lock_path(const fs::path& path, bool blocking, std::error_code& ec) {
  ec.clear();
  // A cleaner may unlink a lock file while we wait for it; the lock we then get is on an orphaned inode that
  // the next process will not see. Check after locking that the path still names our file, else start over.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = open_private_file(path, O_RDWR, ec);
    if (fd < 0) return FileLock();
    int rc;
    while ((rc = ::flock(fd, blocking ? LOCK_EX : LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    if (rc != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return FileLock();  // held elsewhere; not an error
      ec = errno_code(err);
      return FileLock();
    }
    struct stat by_fd{}, by_path{};
    if (::fstat(fd, &by_fd) == 0 && ::stat(path.c_str(), &by_path) == 0 && by_fd.st_dev == by_path.st_dev &&
        by_fd.st_ino == by_path.st_ino)
      return FileLock(fd);
    ::close(fd);  // the file was replaced or removed while we waited: lock the one there now
  }
  ec = errno_code(EAGAIN);
  return FileLock();
}

int FileLock::release() noexcept {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void FileLock::unlock() noexcept {
  if (fd_ < 0) return;
  // LOCK_UN before close: a child forked without exec shares the open file and would otherwise keep it.
  ::flock(fd_, LOCK_UN);
  close_quietly(fd_);
  fd_ = -1;
}

}  // namespace kiln::util
