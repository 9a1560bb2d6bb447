// File utilities for the cache and the compilers: whole-file reads, atomic writes, self-removing temporary
// files, advisory inter-process locks and private directories. POSIX only (Linux).
//
// Most functions come in a non-throwing form that reports through std::error_code (the cache must keep
// working when the disk misbehaves) and, where useful, a throwing form that raises kiln::Error with the path,
// the operation and strerror in the message.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "kiln/error.hpp"

namespace kiln::util {

// Reads the whole file. Returns nullopt and sets ec (errno category) when it cannot be opened or read.
std::optional<std::string> read_file(const std::filesystem::path& path, std::error_code& ec);

// Reads the whole file; throws Error(kind, "cannot read <path>: <strerror>") on failure.
std::string read_file(const std::filesystem::path& path, ErrorKind kind);

// mkdir -p where every directory created is private to the user (mode 0700 whatever the umask); directories
// that already exist are left as they are. Returns false and sets ec (ENOTDIR when a component is a file,
// EACCES, EROFS, ...) on failure.
bool create_private_directories(const std::filesystem::path& path, std::error_code& ec);

// fsync(2) on a directory, so that a rename into it survives a crash. Sets ec on failure.
void fsync_directory(const std::filesystem::path& dir, std::error_code& ec);

// Whether a file name has the shape TemporaryFile gives its files: "<stem>.XXXXXX.tmp" (XXXXXX: six
// characters of [A-Za-z0-9]). Cleaners use it to recognise temporaries left behind by killed processes.
bool is_temporary_name(std::string_view file_name);

// A uniquely named file "<dir>/<stem>.XXXXXX.tmp" (created with O_EXCL, mode 0600) that removes itself on
// destruction unless commit() renamed it into place. The directory must be on the same filesystem as the
// commit target for the rename to be atomic. Move-only; not thread-safe (one owner).
class TemporaryFile {
 public:
  // Creates the file. Returns nullopt and sets ec when the directory cannot hold it.
  static std::optional<TemporaryFile> create(const std::filesystem::path& dir, std::string_view stem,
                                             std::error_code& ec);

  TemporaryFile(TemporaryFile&& other) noexcept;
  TemporaryFile& operator=(TemporaryFile&& other) noexcept;
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile();  // closes; unlinks the file unless committed

  const std::filesystem::path& path() const { return path_; }
  int fd() const { return fd_; }

  // Appends all the bytes (retrying short writes and EINTR). Returns false and sets ec on failure.
  bool write(std::span<const uint8_t> bytes, std::error_code& ec);
  bool write(std::string_view bytes, std::error_code& ec);

  // fsync(2): the content is on disk before the rename makes it visible.
  bool sync(std::error_code& ec);

  enum class CommitMode {
    kReplace,    // rename(2): an existing target is replaced atomically
    kNoReplace,  // renameat2(RENAME_NOREPLACE): fails with errc::file_exists when the target exists; where the
                 // filesystem cannot do that (EINVAL/ENOSYS) it falls back to kReplace
  };

  // Closes the file and renames it to target. On success the destructor no longer removes anything. On
  // failure (EXDEV, ENOENT, EEXIST for kNoReplace, ...) returns false, sets ec and keeps the file, which the
  // destructor will remove, so the caller may retry with another target.
  bool commit(const std::filesystem::path& target, std::error_code& ec, CommitMode mode = CommitMode::kReplace);

 private:
  TemporaryFile(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  void discard() noexcept;

  std::filesystem::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Atomically replaces target with bytes: a unique temporary in temp_dir (which must be on the same
// filesystem; empty means target's own directory), write, fsync, rename, fsync the target's directory.
// Readers see the old content or the new, never a mixture. Returns false and sets ec on failure.
bool write_file_atomic(const std::filesystem::path& target, std::span<const uint8_t> bytes, std::error_code& ec,
                       const std::filesystem::path& temp_dir = {});
bool write_file_atomic(const std::filesystem::path& target, std::string_view bytes, std::error_code& ec,
                       const std::filesystem::path& temp_dir = {});

// Opens (creating with mode 0600 when missing) a file kiln keeps for itself in its own directory: a lock
// file, the shared counters. Such a path must hold a regular file: a link is not followed (O_NOFOLLOW), a FIFO
// is never waited on (O_NONBLOCK while opening), and either of those or a socket or device node standing there
// is unlinked and the file created afresh. A directory there is an error (EISDIR), as is any other open(2)
// failure; both return -1 with ec set. `flags` are O_RDWR and the like; O_CREAT and O_CLOEXEC are added.
int open_private_file(const std::filesystem::path& path, int flags, std::error_code& ec);

// An exclusive advisory lock, flock(2) on a lock file (opened with open_private_file). Locks belong to
// the open file, so they exclude other threads holding their own FileLock as well as other processes, and
// the kernel releases them when the process dies, however it dies. Move-only.
class FileLock {
 public:
  FileLock() = default;  // holds nothing
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() { unlock(); }

  // Blocks until the lock is held. If another process unlinked or replaced the lock file meanwhile (a
  // cleaner), the lock is taken again on the file now at that path, so the lock always matches the path.
  // Returns a FileLock that holds nothing, with ec set, when the file cannot be opened or locked.
  static FileLock acquire(const std::filesystem::path& path, std::error_code& ec);

  // Like acquire but never blocks: holds nothing (ec clear) when another holder has it.
  static FileLock try_acquire(const std::filesystem::path& path, std::error_code& ec);

  bool locked() const { return fd_ >= 0; }

  // Gives the still-locked descriptor to the caller, who must close it to unlock. Returns -1 if nothing held.
  int release() noexcept;

  // Unlocks and closes; nothing when nothing is held.
  void unlock() noexcept;

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  static FileLock lock_path(const std::filesystem::path& path, bool blocking, std::error_code& ec);

  int fd_ = -1;
};

}  // namespace kiln::util
