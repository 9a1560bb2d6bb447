#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "cache/entry_format.hpp"
#include "cache/stats_file.hpp"
#include "kiln/error.hpp"
#include "util/fs.hpp"
#include "util/warn.hpp"

namespace kiln::cache {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kEntrySuffix = ".kiln";
constexpr std::string_view kLockSuffix = ".lock";
// A temporary lives for the milliseconds between its creation and its rename; one this old was left by a
// process that died, and may be removed.
constexpr int64_t kStaleTemporarySeconds = 10 * 60;
// The last-use time is refreshed at most this often, so hot entries do not cost a metadata write per load.
constexpr int64_t kTouchIntervalSeconds = 60;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void check_key(const std::string& key, const char* operation) {
  if (!is_valid_key(key))
    throw Error(ErrorKind::kValueError, std::string("DiskCache::") + operation +
                                            ": key must be 32 lowercase hexadecimal characters, got \"" + key + "\"");
}

// Reads an open regular file of `size` bytes (its fstat), straight into out (no bounce buffer: this is on the
// warm-start path), and never more than one byte past that size: a file that grew since is noticed by its
// length, not read without end.
bool read_fd(int fd, std::vector<uint8_t>& out, size_t size) {
  out.resize(size + 1);
  size_t used = 0;
  while (used < out.size()) {
    ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  out.resize(used);
  return true;
}

// What something found where a file or directory of the cache belongs is, for messages.
std::string file_type_text(mode_t mode) {
  if (S_ISREG(mode)) return "a file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Everything in a directory with its lstat, without throwing; entries vanishing during the scan are skipped.
void for_each_name(const fs::path& dir, const std::function<void(const fs::path&, const struct stat&)>& fn) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    struct stat st{};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    fn(it->path(), st);
  }
}

// Regular files of a directory, without throwing; entries vanishing during the scan are skipped.
void for_each_file(const fs::path& dir, const std::function<void(const fs::path&, const struct stat&)>& fn) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    struct stat st{};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    fn(it->path(), st);
  }
}

bool is_fanout_name(const std::string& name) { return name.size() == 2 && is_valid_key(name + std::string(30, '0')); }

// Something with a fan-out directory's name that is not a directory (a file named "5f"): every key starting so
// misses and cannot be stored while it is there.
struct FanoutBlocker {
  fs::path path;
  struct stat st{};  // its lstat
};

// The fan-out directories under entries/ (two lowercase hex characters), and in *blockers, when given, the
// names of that shape that are not directories.
std::vector<fs::path> fanout_dirs(const fs::path& entries, std::vector<FanoutBlocker>* blockers = nullptr) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  fs::directory_iterator it(entries, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_fanout_name(name)) continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      dirs.push_back(it->path());
    } else if (FanoutBlocker b{it->path()}; blockers && ::lstat(b.path.c_str(), &b.st) == 0) {
      blockers->push_back(std::move(b));
    }
  }
  std::sort(dirs.begin(), dirs.end());
  if (blockers)
    std::sort(blockers->begin(), blockers->end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return dirs;
}

std::string blocker_reason(const FanoutBlocker& b) {
  return file_type_text(b.st.st_mode) + " where kiln keeps the directory of the entries whose keys start with " +
         b.path.filename().string();
}

// Why something that is not a regular file at an entry path is not an entry.
std::string not_a_file_reason(mode_t mode) {
  return file_type_text(mode) + ", not an entry file" +
         (S_ISLNK(mode) ? " (kiln never makes links in its own directory)" : "");
}

int64_t now_unix() { return static_cast<int64_t>(std::time(nullptr)); }

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Whether this process has not reported this bad entry yet (its path, identity and why it is bad). A bad entry
// that stays where it is (in a read-only layer or directory, or a directory kiln does not delete) is reported and
// counted once per process, not at every lookup of its kernel (the JIT looks twice before it compiles).
bool first_report(const fs::path& path, const struct stat& st, const std::string& reason) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> lock(mutex);
  return reported
      .insert(path.string() + '\0' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + '\0' + reason)
      .second;
}

std::string octal_mode(mode_t mode) {
  char text[16];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Refuses a directory of the writable cache that another user could plant kernels in (check_directory_trust).
void require_trusted(const fs::path& dir, const struct stat& st, uid_t euid, bool sticky_ok) {
  const DirectoryTrust trust = check_directory_trust(st, euid, euid, sticky_ok);
  if (trust.ok()) return;
  std::string fix = "set DG_JIT_CACHE_DIR to a directory you own that only you can write (a missing one is created "
                    "private to you)";
  if (trust.problem == DirectoryTrust::Problem::kWritableByOthers)
    fix = "run `chmod go-w " + dir.string() + "`, or " + fix;
  throw Error(ErrorKind::kConfigError, "kiln refuses the kernel cache directory " + dir.string() + ": it is " +
                                           trust.why + ", so another user could plant kernels in it that kiln "
                                           "would load and run; " + fix);
}

}  // namespace

Layout layout_of(const fs::path& root) {
  const fs::path base = root / "kiln";
  return Layout{base, base / "entries", base / "locks", base / "tmp", base / "toolchain"};
}

DirectoryTrust check_directory_trust(const struct stat& st, uid_t euid, uid_t owner, bool sticky_ok) {
  DirectoryTrust trust;
  if (st.st_uid != euid && st.st_uid != 0 && st.st_uid != owner) {
    trust.problem = DirectoryTrust::Problem::kOwner;
    trust.why = "owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(euid) + ")";
    trust.why += owner != euid && owner != 0
                     ? ", root or the layer's owner (uid " + std::to_string(owner) + ", who owns its kiln directory)"
                     : " or root";
    return trust;
  }
  const bool group = (st.st_mode & S_IWGRP) != 0, others = (st.st_mode & S_IWOTH) != 0;
  if ((group || others) && !(sticky_ok && (st.st_mode & S_ISVTX))) {
    trust.problem = DirectoryTrust::Problem::kWritableByOthers;
    trust.why = std::string("writable by ") +
                (group && others ? "its group and by others" : group ? "its group" : "others") + " (mode " +
                octal_mode(st.st_mode) + (sticky_ok ? ", no sticky bit)" : ")");
  }
  return trust;
}

struct DiskCache::Impl {
  fs::path root;       // as configured, made absolute
  fs::path base;       // root/kiln
  fs::path entries;    // base/entries
  fs::path locks;      // base/locks
  fs::path tmp;        // base/tmp
  fs::path toolchain;  // base/toolchain
  bool writable = false;
  DiskCacheOptions options;
  std::unique_ptr<StatsFile> stats;
  // A layer's availability, as last seen (a network directory may vanish and come back).
  mutable std::mutex state_mutex;
  mutable std::string unavailable_reason;  // empty while available
  // A layer is trusted as far as its owner (the owner of its kiln/, as last checked): while others could write
  // it, it is not read at all.
  uid_t euid = ::geteuid();
  mutable std::atomic<uid_t> layer_owner{static_cast<uid_t>(-1)};
  mutable std::atomic<bool> distrusted{false};

  // Records that a read-only layer cannot be used (one warning per layer and process), or that it can.
  void set_unavailable(const std::string& why) const {
    {
      std::lock_guard<std::mutex> lock(state_mutex);
      unavailable_reason = why;
    }
    util::warn_once("layer:" + root.string(), "the read-only cache layer " + root.string() + " (" + options.name +
                                                  ") cannot be used (" + why + "); it is skipped");
  }
  void set_available() const {
    std::lock_guard<std::mutex> lock(state_mutex);
    unavailable_reason.clear();
  }
  std::string unavailable() const {
    std::lock_guard<std::mutex> lock(state_mutex);
    return unavailable_reason;
  }
  // Whether a layer's entries directory can be searched and trusted; records the answer.
  bool check_layer() const {
    if (::access(entries.c_str(), R_OK | X_OK) != 0) {
      const int err = errno;
      set_unavailable(err == ENOENT ? "it does not exist or has disappeared" : std::strerror(err));
      return false;
    }
    if (const std::string why = layer_distrust(); !why.empty()) {
      distrusted = true;
      set_unavailable(why);
      return false;
    }
    distrusted = false;
    set_available();
    return true;
  }

  // Why a layer's directories cannot be trusted, or empty. A layer may belong to another user (a team's share,
  // an image's pack): it is trusted as its owner, so its root, kiln/ and kiln/entries must be owned by the owner
  // of kiln/, root or this process's user, and writable by none but their owner (the root may be writable by
  // others when it has the sticky bit, as /tmp). Fan-out directories and entries are checked as they are read.
  std::string layer_distrust() const {
    struct stat base_st{};
    if (::stat(base.c_str(), &base_st) != 0) return {};  // vanished since access(2): the next read says so
    layer_owner = base_st.st_uid;
    for (const auto& [dir, sticky_ok] : {std::pair{root, true}, std::pair{base, false}, std::pair{entries, false}}) {
      struct stat st{};
      if (::stat(dir.c_str(), &st) != 0) continue;
      const DirectoryTrust trust = check_directory_trust(st, euid, base_st.st_uid, sticky_ok);
      if (!trust.ok())
        return "its directory " + dir.string() + " is " + trust.why +
               ", so others could plant kernels in it; a layer is read only when no one but its owner can write it";
    }
    return {};
  }

  // Why an entry file of a layer (its fstat) in its fan-out directory cannot be trusted, or empty: the same rule
  // as for the layer's directories, since a file others can write, or a directory others can add files to, lets
  // them plant a kernel with a valid checksum.
  std::string layer_entry_distrust(const fs::path& path, const struct stat& st) const {
    const uid_t owner = layer_owner.load();
    if (const DirectoryTrust trust = check_directory_trust(st, euid, owner, /*sticky_ok=*/false); !trust.ok())
      return "not trusted: the file is " + trust.why + ", so it could have been planted";
    struct stat dir_st{};
    if (::stat(path.parent_path().c_str(), &dir_st) == 0) {
      if (const DirectoryTrust trust = check_directory_trust(dir_st, euid, owner, /*sticky_ok=*/false); !trust.ok())
        return "not trusted: its directory " + path.parent_path().string() + " is " + trust.why +
               ", so it could have been planted";
    }
    return {};
  }

  fs::path entry_dir(const std::string& key) const { return entries / key.substr(0, 2); }
  fs::path entry_path(const std::string& key) const {
    return entry_dir(key) / (key + std::string(kEntrySuffix));
  }

  // Removes temporaries older than kStaleTemporarySeconds from dir (all of them when max_age is 0).
  uint64_t remove_stale_temporaries(const fs::path& dir, int64_t max_age = kStaleTemporarySeconds) const {
    const int64_t now = now_unix();
    uint64_t removed = 0;
    for_each_file(dir, [&](const fs::path& path, const struct stat& st) {
      if (util::is_temporary_name(path.filename().string()) && now - static_cast<int64_t>(st.st_mtime) >= max_age &&
          ::unlink(path.c_str()) == 0)
        ++removed;
    });
    return removed;
  }

  // Entries and bytes (entries and their dumps; not temporaries) by scanning.
  void scan_size(uint64_t* entry_count, uint64_t* byte_count) const {
    *entry_count = *byte_count = 0;
    for (const fs::path& dir : fanout_dirs(entries)) {
      for_each_file(dir, [&](const fs::path& path, const struct stat& st) {
        const std::string name = path.filename().string();
        if (util::is_temporary_name(name)) return;
        if (ends_with(name, kEntrySuffix)) ++*entry_count;
        *byte_count += static_cast<uint64_t>(st.st_size);
      });
    }
  }

  PruneReport clean(uint64_t max_bytes, uint64_t target_bytes, bool wait, const std::string* keep);

  // What a scan of one fan-out directory found in an entry file (its name's key, the read's result, the file's
  // identity and open(2)'s error as read_entry reports them).
  struct ScannedEntry {
    const fs::path& path;
    std::string key;
    DecodeResult result;
    struct stat st{};
    int open_errno = 0;
  };

  // Reads everything named as an entry in `dir` (a fan-out directory), whatever it is, without touching it, for
  // list and verify: a FIFO, a link or a directory there is reported like any bad entry.
  void scan_entries(const fs::path& dir, const std::function<void(ScannedEntry&)>& fn) const {
    for_each_name(dir, [&](const fs::path& path, const struct stat&) {
      const std::string name = path.filename().string();
      if (!ends_with(name, kEntrySuffix)) return;
      ScannedEntry e{path, name.substr(0, name.size() - kEntrySuffix.size()), {}};
      e.result = read_entry(path, e.key, &e.st, &e.open_errno, /*touch=*/false);
      fn(e);
    });
  }

  // Reads and verifies the entry at path (expected_key from the lookup). *open_errno is the open(2) error
  // (ENOENT: no entry), 0 when the file was opened; *st receives the file's identity for a later removal.
  // Something is at an entry's path that is not an entry file; *st is its identity for a later removal.
  static DecodeResult not_a_file(const struct stat& st) {
    DecodeResult result;
    result.error = DecodeError::kNotAFile;
    result.reason = not_a_file_reason(st.st_mode);
    return result;
  }

  DecodeResult read_entry(const fs::path& path, const std::string& expected_key, struct stat* st, int* open_errno,
                          bool touch) const {
    DecodeResult result;
    // O_NONBLOCK: a FIFO at the path must not stop the process (open(2) would wait for a writer forever); what
    // is not a regular file is refused by fstat before anything is read. O_NOFOLLOW in kiln's own directory,
    // where kiln never makes a link, so one there was put by someone else and may lead anywhere (/dev/zero); a
    // read-only layer may be assembled with links (unpacked into a content store), and what they lead to is
    // checked the same way.
    const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (options.read_only_layer ? 0 : O_NOFOLLOW);
    int fd = ::open(path.c_str(), flags);
    if (fd < 0) {
      const int err = errno;
      // ELOOP is a link that O_NOFOLLOW refused, ENXIO a socket: not entries, reported as bad ones.
      if ((err == ELOOP || err == ENXIO) && ::lstat(path.c_str(), st) == 0 && !S_ISREG(st->st_mode)) {
        *open_errno = 0;
        return not_a_file(*st);
      }
      *open_errno = err;
      result.error = DecodeError::kTruncated;
      result.reason = std::string("cannot open: ") + std::strerror(err);
      return result;
    }
    *open_errno = 0;
    std::vector<uint8_t> bytes;
    if (::fstat(fd, st) != 0) {
      const int err = errno;
      ::close(fd);
      result.error = DecodeError::kTruncated;
      result.reason = std::string("cannot read: ") + std::strerror(err);
      return result;
    }
    if (!S_ISREG(st->st_mode)) {
      ::close(fd);
      return not_a_file(*st);
    }
    if (options.read_only_layer) {
      if (std::string why = layer_entry_distrust(path, *st); !why.empty()) {
        ::close(fd);
        result.error = DecodeError::kUntrusted;
        result.reason = std::move(why);
        return result;
      }
    }
    if (static_cast<uint64_t>(st->st_size) > kMaxEntryBytes) {
      ::close(fd);
      result.error = DecodeError::kLengthMismatch;
      result.reason = "it is " + std::to_string(st->st_size) + " bytes, more than any entry can be (at most " +
                      std::to_string(kMaxEntryBytes) + ")";
      return result;
    }
    if (!read_fd(fd, bytes, static_cast<size_t>(std::max<off_t>(st->st_size, 0)))) {
      const int err = errno;
      ::close(fd);
      result.error = DecodeError::kTruncated;
      result.reason = std::string("cannot read: ") + std::strerror(err);
      return result;
    }
    result = decode_entry(bytes, expected_key);
    if (result.ok() && touch && writable && now_unix() - static_cast<int64_t>(st->st_mtime) >= kTouchIntervalSeconds) {
      // The entry's mtime is its last use (for `kiln cache ls` and eviction); the file itself is not rewritten.
      const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
      ::futimens(fd, times);
    }
    ::close(fd);
    return result;
  }

  // Removes what was found bad at path (`bad` is its identity) if the path still names it (a concurrent
  // publisher may have replaced it with a good entry meanwhile). A file, link, FIFO, socket or device node is
  // unlinked (never what a link leads to), an empty directory removed. A directory with something in it is left
  // alone: it is not anything kiln made, and kiln deletes no tree it did not make. Returns whether it was
  // removed, else says why not in *why_not.
  bool remove_bad(const fs::path& path, const struct stat& bad, std::string* why_not) const {
    if (!writable) {
      *why_not = options.read_only_layer ? "a read-only layer is never changed" : "the cache cannot be written";
      return false;
    }
    struct stat now{};
    if (::lstat(path.c_str(), &now) != 0 || !same_file(now, bad)) {
      *why_not = "it was replaced meanwhile";
      return false;
    }
    if (S_ISDIR(now.st_mode) ? ::rmdir(path.c_str()) == 0 : ::unlink(path.c_str()) == 0) return true;
    const int err = errno;
    *why_not = S_ISDIR(now.st_mode) && (err == ENOTEMPTY || err == EEXIST)
                   ? "it is a directory with files in it, which kiln does not delete: remove it by hand (rm -r " +
                         path.string() + ")"
                   : std::string("cannot remove it: ") + std::strerror(err);
    return false;
  }

  // When the entry for `key` cannot be opened because its fan-out directory's name is taken by something else
  // (open(2) said ENOTDIR), that thing; entries/ itself must be a directory (else the cache is what is broken).
  std::optional<FanoutBlocker> fanout_blocker(const std::string& key) const {
    FanoutBlocker b{entry_dir(key)};
    struct stat followed{};
    if (::lstat(b.path.c_str(), &b.st) != 0 || (::stat(b.path.c_str(), &followed) == 0 && S_ISDIR(followed.st_mode)))
      return std::nullopt;
    if (::stat(entries.c_str(), &followed) != 0 || !S_ISDIR(followed.st_mode)) return std::nullopt;
    return b;
  }

  // Writes bytes to a temporary and renames it to target. For entries (entry_key set) an existing valid entry
  // is kept (the winner of a race stays) and an existing bad one is replaced. Never throws.
  bool install(const fs::path& target, std::span<const uint8_t> bytes, const std::string* entry_key,
               bool* created = nullptr) {
    if (created) *created = false;
    std::error_code ec;
    const fs::path dir = target.parent_path();
    const auto mode =
        entry_key ? util::TemporaryFile::CommitMode::kNoReplace : util::TemporaryFile::CommitMode::kReplace;
    // A concurrent `clear` may remove the fan-out directory (the rename is retried after recreating it) or
    // the temporary itself (written again); a temporary directory on another filesystem (EXDEV) is replaced
    // by the target's own directory.
    bool temp_beside_target = false;
    fs::path failed_at;       // the fan-out directory or the target itself, when the failure is theirs alone
    std::string in_the_way;   // why what stands at the target could not be removed
    for (int attempt = 0; attempt < 3; ++attempt) {
      const fs::path temp_dir = temp_beside_target ? dir : tmp;
      if (!util::create_private_directories(temp_dir, ec)) break;
      auto temp = util::TemporaryFile::create(temp_dir, target.filename().string(), ec);
      if (!temp || !temp->write(bytes, ec) || !temp->sync(ec)) break;
      for (int rename_try = 0; rename_try < 20; ++rename_try) {
        if (!util::create_private_directories(dir, ec)) {
          failed_at = dir;
          break;
        }
        if (temp->commit(target, ec, mode)) {
          std::error_code sync_ec;
          util::fsync_directory(dir, sync_ec);
          if (created) *created = true;
          return true;
        }
        if (ec == std::errc::file_exists) {
          // Lost the race. Keep the winner if it is good; replace it if not. (On a filesystem that cannot
          // yet show us the winner, we replace it with our own equally valid bytes; the caller uses its own.)
          struct stat st{};
          int open_errno = 0;
          if (read_entry(target, *entry_key, &st, &open_errno, /*touch=*/false).ok())
            return true;  // our temporary is removed by its destructor; *created stays false
          // rename(2) replaces a file, a link or a FIFO, but not a directory (EISDIR): an empty one is removed
          // first; one with something in it stays, and the warning below names it.
          if (struct stat in_way{}; ::lstat(target.c_str(), &in_way) == 0 && S_ISDIR(in_way.st_mode))
            remove_bad(target, in_way, &in_the_way);
          if (temp->commit(target, ec, util::TemporaryFile::CommitMode::kReplace)) {
            std::error_code sync_ec;
            util::fsync_directory(dir, sync_ec);
            if (created) *created = true;  // our bytes replaced a bad entry: stored by us
            return true;
          }
        }
        if (ec != std::errc::no_such_file_or_directory) failed_at = target;
        // ENOENT with the temporary still there: the target directory vanished; make it again and retry.
        if (ec != std::errc::no_such_file_or_directory || ::access(temp->path().c_str(), F_OK) != 0) break;
      }
      if (ec == std::errc::cross_device_link) {
        temp_beside_target = true;
        continue;
      }
      if (ec != std::errc::no_such_file_or_directory) break;  // else the temporary was removed: write it again
    }
    // Name what failed: the whole cache (a full disk, a read-only mount), or only this file's place in it.
    if (failed_at == target) {
      util::warn_once("publish:" + target.string() + ":" + ec.message(),
                      "cannot store " + target.string() + " (" + ec.message() +
                          (in_the_way.empty() ? "" : ": " + in_the_way) + "); " +
                          (entry_key ? "the kernel is kept in memory only" : "it is not written"));
    } else if (failed_at == dir) {
      util::warn_once("publish:" + dir.string() + ":" + ec.message(),
                      "cannot store " + target.string() + ": its directory " + dir.string() + " cannot be made (" +
                          ec.message() + "; `kiln cache verify` removes what has its name); " +
                          (entry_key ? "the kernel is kept in memory only" : "it is not written"));
    } else {
      util::warn_once("publish:" + base.string() + ":" + ec.message(),
                      "cannot write into the kiln cache " + base.string() + " (" + ec.message() +
                          "); kernels that cannot be stored are kept in memory only");
    }
    return false;
  }
};

DiskCache::KeyLock& DiskCache::KeyLock::operator=(KeyLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

DiskCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

DiskCache::DiskCache(fs::path root, DiskCacheOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.options = std::move(options);
  if (root.empty())
    throw Error(ErrorKind::kConfigError,
                "the cache directory is empty; set DG_JIT_CACHE_DIR to a directory (default $HOME/.deep_gemm)");
  std::error_code ec;
  fs::path absolute = fs::absolute(root, ec);
  d.root = (ec ? root : absolute).lexically_normal();
  if (d.root.has_filename() == false && d.root.has_parent_path() && d.root != d.root.root_path())
    d.root = d.root.parent_path();  // "dir/" -> "dir"
  const Layout layout = layout_of(d.root);
  d.base = layout.base;
  d.entries = layout.entries;
  d.locks = layout.locks;
  d.tmp = layout.tmp;
  d.toolchain = layout.toolchain;

  if (d.options.read_only_layer) {
    // A layer is only read: nothing is created, and its state is a warning, never an error (it may be a
    // network directory that comes and goes). Its counters live in this process only.
    d.writable = false;
    d.check_layer();
    d.stats = std::make_unique<StatsFile>(d.base / "stats", /*writable=*/false);
    return;
  }

  // Something that exists but is not a directory is a configuration mistake, not a reason to run slowly.
  // One that another user owns or may write is refused before anything is created in it: kiln would load
  // whatever they put there (the predictable fallback /tmp/kiln-cache-<uid> can be made by anyone first).
  // The root may be a shared directory with the sticky bit (DG_JIT_CACHE_DIR=/tmp): others cannot rename or
  // remove the kiln/ that kiln makes in it, which must itself be private.
  const uid_t euid = ::geteuid();
  for (const fs::path& dir : {d.root, d.base}) {
    struct stat st{};
    if (::stat(dir.c_str(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode))
      throw Error(ErrorKind::kConfigError,
                  "cache directory " + dir.string() +
                      " exists but is not a directory; set DG_JIT_CACHE_DIR to a directory (or remove the file)");
    require_trusted(dir, st, euid, /*sticky_ok=*/dir == d.root);
  }
  // A root that is a symbolic link is only as safe as the link: its owner can point it elsewhere at any time.
  if (struct stat link{}; ::lstat(d.root.c_str(), &link) == 0 && S_ISLNK(link.st_mode) && link.st_uid != euid &&
                          link.st_uid != 0)
    throw Error(ErrorKind::kConfigError,
                "kiln refuses the kernel cache directory " + d.root.string() + ": it is a symbolic link owned by uid " +
                    std::to_string(link.st_uid) + ", not by you (uid " + std::to_string(euid) +
                    ") or root, who can point it at a directory of their own at any time; set DG_JIT_CACHE_DIR to a "
                    "directory you own");

  // Create the layout, then ask the kernel whether we may write where publishing writes. access(2) with the
  // effective ids sees permission bits, ACLs, immutable files and read-only mounts (EROFS, even for root) for
  // a few microseconds, where a probe file would cost a create, a close and an unlink on every start. What it
  // cannot see (a server that refuses root) makes publish fail later, which is handled there the same way.
  fs::path failed_at;
  for (const fs::path& dir : {d.root, d.base, d.entries, d.locks, d.tmp, d.toolchain}) {
    if (!util::create_private_directories(dir, ec)) {
      failed_at = dir;
      break;
    }
  }
  if (failed_at.empty()) {
    for (const fs::path& dir : {d.entries, d.locks, d.tmp}) {
      if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
        ec = std::error_code(errno, std::generic_category());
        failed_at = dir;
        break;
      }
    }
    d.writable = failed_at.empty();
  }
  // The layout's own directories: kiln makes them private, so anything else was done to them since.
  for (const fs::path& dir : {d.entries, d.locks, d.tmp, d.toolchain}) {
    struct stat st{};
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) require_trusted(dir, st, euid, /*sticky_ok=*/false);
  }
  if (!d.writable) {
    util::warn_once("readonly:" + d.root.string(),
                    "the kernel cache directory " + failed_at.string() + " cannot be written (" + ec.message() +
                        "); kiln works from memory: cached kernels are read if present, new ones are not saved");
  }
  d.stats = std::make_unique<StatsFile>(d.base / "stats", d.writable);
  if (d.writable) d.remove_stale_temporaries(d.tmp);
}

DiskCache::~DiskCache() = default;

const fs::path& DiskCache::root() const { return impl_->root; }

bool DiskCache::writable() const { return impl_->writable; }

std::optional<Entry> DiskCache::load(const std::string& key, bool count_stats) {
  check_key(key, "load");
  Impl& d = *impl_;
  const fs::path path = d.entry_path(key);
  struct stat st{};
  int open_errno = 0;
  if (d.options.read_only_layer && d.distrusted && !d.check_layer()) {
    // Not trusted when last checked, and still not (it may have been fixed meanwhile): nothing is read.
    if (count_stats) count(Counter::kMisses);
    return std::nullopt;
  }
  DecodeResult result = d.read_entry(path, key, &st, &open_errno, /*touch=*/true);
  if (result.ok()) {
    if (count_stats) count(Counter::kHits);
    return std::move(result.entry);
  }
  // ENOTDIR: the fan-out directory's name is taken (a file named "5f"). That thing is the bad entry: it makes
  // every key starting so a miss that can never be stored.
  fs::path bad_path = path;
  if (open_errno == ENOTDIR) {
    if (std::optional<FanoutBlocker> blocker = d.fanout_blocker(key)) {
      bad_path = blocker->path;
      st = blocker->st;
      result.reason = blocker_reason(*blocker);
      open_errno = 0;
    }
  }
  if (d.options.read_only_layer) {
    // ENOENT is an ordinary miss unless the layer itself went away; anything else means it cannot be read.
    if (open_errno == ENOENT) d.check_layer();
    else if (open_errno != 0) d.set_unavailable(std::strerror(open_errno));
    else d.set_available();
  }
  if (open_errno == 0) {
    // Something is there but bad: never a crash, never a wrong kernel; it is removed and rebuilt.
    std::string why_not;
    if (d.remove_bad(bad_path, st, &why_not)) {
      count(Counter::kCorrupt);
      std::fprintf(stderr, "kiln: warning: cache entry %s is unusable (%s); removed, it will be rebuilt\n",
                   bad_path.c_str(), result.reason.c_str());
    } else if (first_report(bad_path, st, result.reason)) {
      count(Counter::kCorrupt);
      std::fprintf(stderr, "kiln: warning: cache entry %s is unusable (%s); ignored: %s\n", bad_path.c_str(),
                   result.reason.c_str(), why_not.c_str());
    }
  }
  if (count_stats) count(Counter::kMisses);
  return std::nullopt;
}

bool DiskCache::publish(const Entry& entry) { return store(entry) != StoreOutcome::kFailed; }

DiskCache::StoreOutcome DiskCache::store(const Entry& entry) {
  check_key(entry.meta.key, "publish");
  Impl& d = *impl_;
  if (!d.writable) return StoreOutcome::kFailed;
  const std::vector<uint8_t> bytes = encode_entry(entry);
  bool created = false;
  if (!d.install(d.entry_path(entry.meta.key), bytes, &entry.meta.key, &created)) return StoreOutcome::kFailed;
  if (!created) return StoreOutcome::kAlreadyPresent;
  count(Counter::kPublishes);
  if (d.options.max_bytes > 0) evict_after_publish(entry.meta.key);
  return StoreOutcome::kStored;
}

std::optional<fs::path> DiskCache::write_artifact(const std::string& key, const std::string& extension,
                                                  const std::string& content) {
  check_key(key, "write_artifact");
  const bool extension_ok =
      extension.size() >= 2 && extension.size() <= 16 && extension[0] == '.' &&
      std::all_of(extension.begin() + 1, extension.end(),
                  [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }) &&
      extension != kEntrySuffix && extension != kLockSuffix && extension != ".tmp";
  if (!extension_ok)
    throw Error(ErrorKind::kValueError, "DiskCache::write_artifact: extension must be like \".ptx\" or \".sass\" "
                                        "(a dot and up to 15 lowercase letters, digits or _; not .kiln/.lock/.tmp), got \"" +
                                            extension + "\"");
  Impl& d = *impl_;
  if (!d.writable) return std::nullopt;
  const fs::path path = d.entry_dir(key) / (key + extension);
  const auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(content.data()), content.size());
  if (!d.install(path, bytes, nullptr)) return std::nullopt;
  return path;
}

DiskCache::KeyLock DiskCache::lock(const std::string& key) {
  check_key(key, "lock");
  Impl& d = *impl_;
  if (!d.writable) return KeyLock();
  const fs::path path = d.locks / (key + std::string(kLockSuffix));
  std::error_code ec;
  util::FileLock file_lock = util::FileLock::acquire(path, ec);
  if (!file_lock.locked() && ec == std::errc::no_such_file_or_directory && util::create_private_directories(d.locks, ec))
    file_lock = util::FileLock::acquire(path, ec);
  if (!file_lock.locked()) {
    // Without the lock two processes may compile the same kernel; both results are valid, so carry on.
    util::warn_once("lock:" + d.locks.string(), "cannot lock " + path.string() + " (" + ec.message() +
                                                    "); another process may compile the same kernel at the same time");
    return KeyLock();
  }
  return KeyLock(file_lock.release());
}

void DiskCache::count(Counter counter, uint64_t amount) { impl_->stats->add(counter, amount); }

Stats DiskCache::stats() const {
  const Impl& d = *impl_;
  Stats s;
  s.root = d.root;
  s.writable = d.writable;
  d.scan_size(&s.entries, &s.bytes);
  const CounterValues values = d.stats->read();
  s.hits = values[static_cast<size_t>(Counter::kHits)];
  s.misses = values[static_cast<size_t>(Counter::kMisses)];
  s.compiles = values[static_cast<size_t>(Counter::kCompiles)];
  s.corrupt = values[static_cast<size_t>(Counter::kCorrupt)];
  s.compile_seconds = static_cast<double>(values[static_cast<size_t>(Counter::kCompileMicros)]) / 1e6;
  s.max_bytes = d.options.max_bytes;
  s.counters.assign(values.begin(), values.end());
  return s;
}

std::vector<ListedEntry> DiskCache::list(uint64_t* unreadable, std::vector<std::string>* problems) const {
  const Impl& d = *impl_;
  std::vector<ListedEntry> out;
  if (unreadable) *unreadable = 0;
  // Bad entries are verify's business; list shows usable ones and counts (and names) the rest.
  const auto bad = [&](const fs::path& path, const std::string& why) {
    if (unreadable) ++*unreadable;
    if (problems) problems->push_back(path.string() + ": " + why);
  };
  std::vector<FanoutBlocker> blockers;
  const std::vector<fs::path> dirs = fanout_dirs(d.entries, &blockers);
  for (const FanoutBlocker& b : blockers) bad(b.path, blocker_reason(b));
  for (const fs::path& dir : dirs) {
    d.scan_entries(dir, [&](Impl::ScannedEntry& scanned) {
      if (scanned.open_errno == ENOENT) return;  // removed by someone else during the scan
      if (!scanned.result.ok() || !scanned.result.entry) {
        bad(scanned.path, scanned.result.reason);
        return;
      }
      ListedEntry e;
      e.meta = std::move(scanned.result.entry->meta);
      e.file_bytes = static_cast<uint64_t>(scanned.st.st_size);
      e.last_use_unix = static_cast<int64_t>(scanned.st.st_mtime);
      out.push_back(std::move(e));
    });
  }
  std::sort(out.begin(), out.end(), [](const ListedEntry& a, const ListedEntry& b) {
    return a.last_use_unix != b.last_use_unix ? a.last_use_unix > b.last_use_unix : a.meta.key < b.meta.key;
  });
  return out;
}

VerifyReport DiskCache::verify() {
  Impl& d = *impl_;
  VerifyReport report;
  const auto bad = [&](const fs::path& path, const struct stat& st, const std::string& why) {
    ++report.corrupt;
    count(Counter::kCorrupt);
    std::string why_not;
    if (d.remove_bad(path, st, &why_not)) ++report.removed;
    report.problems.push_back(path.string() + ": " + why + (why_not.empty() ? "" : "; left in place: " + why_not));
  };
  std::vector<FanoutBlocker> blockers;
  const std::vector<fs::path> dirs = fanout_dirs(d.entries, &blockers);
  for (const FanoutBlocker& b : blockers) {
    ++report.checked;
    bad(b.path, b.st, blocker_reason(b));
  }
  for (const fs::path& dir : dirs) {
    d.scan_entries(dir, [&](Impl::ScannedEntry& scanned) {
      if (scanned.open_errno == ENOENT) return;  // removed by someone else during the scan
      ++report.checked;
      if (scanned.result.ok()) return;
      std::string why = scanned.result.reason;
      if (!is_valid_key(scanned.key)) why = "the file name is not a cache key; " + why;
      bad(scanned.path, scanned.st, why);
    });
    if (d.writable) d.remove_stale_temporaries(dir);
  }
  if (d.writable) d.remove_stale_temporaries(d.tmp);
  return report;
}

uint64_t DiskCache::clear() {
  Impl& d = *impl_;
  if (!d.writable)
    throw Error(ErrorKind::kCacheError,
                "cannot clear the kernel cache " + d.base.string() + ": the directory cannot be written");
  uint64_t removed = 0;
  // What is not kiln's (a link, a FIFO, a directory where an entry or a fan-out directory belongs) goes too,
  // as verify removes it; a directory with something in it stays, named on stderr.
  const auto remove_foreign = [&](const fs::path& path, const struct stat& st) {
    std::string why_not;
    if (!d.remove_bad(path, st, &why_not))
      std::fprintf(stderr, "kiln: warning: %s (%s) was left in the cache: %s\n", path.c_str(),
                   file_type_text(st.st_mode).c_str(), why_not.c_str());
  };
  std::vector<FanoutBlocker> blockers;
  for (const fs::path& dir : fanout_dirs(d.entries, &blockers)) {
    for_each_name(dir, [&](const fs::path& path, const struct stat& st) {
      const std::string name = path.filename().string();
      // Fresh temporaries belong to publishes in flight; only strays are removed.
      if (util::is_temporary_name(name)) return;
      if (!S_ISREG(st.st_mode)) {
        remove_foreign(path, st);
        return;
      }
      if (::unlink(path.c_str()) == 0 && ends_with(name, kEntrySuffix)) ++removed;
    });
    d.remove_stale_temporaries(dir);
    ::rmdir(dir.c_str());  // fails harmlessly when a publish just put something there
  }
  for (const FanoutBlocker& b : blockers) remove_foreign(b.path, b.st);
  d.remove_stale_temporaries(d.tmp);
  // Lock files: only those nobody holds, removed while we hold them (FileLock re-checks the path after locking,
  // so a waiter on the removed file starts over on a new one).
  for_each_file(d.locks, [&](const fs::path& path, const struct stat&) {
    if (!ends_with(path.filename().string(), kLockSuffix)) return;
    std::error_code ec;
    util::FileLock held = util::FileLock::try_acquire(path, ec);
    if (held.locked()) ::unlink(path.c_str());
  });
  d.stats->reset();
  return removed;
}

fs::path DiskCache::entry_path(const std::string& key) const {
  check_key(key, "entry_path");
  return impl_->entry_path(key);
}

fs::path DiskCache::toolchain_dir() const { return impl_->writable ? impl_->toolchain : fs::path(); }


// ---- Tier ------------------------------------------------------------------------------------------------

const char* to_string(TierKind kind) noexcept {
  switch (kind) {
    case TierKind::kLocal: return "local";
    case TierKind::kLayer: return "layer";
    case TierKind::kRemote: return "remote";
  }
  return "unknown";
}

bool DiskCache::is_layer() const { return impl_->options.read_only_layer; }

const std::string& DiskCache::name() const { return impl_->options.name; }

TierKind DiskCache::kind() const { return impl_->options.read_only_layer ? TierKind::kLayer : TierKind::kLocal; }

std::optional<Entry> DiskCache::lookup(const std::string& key) { return load(key, /*count_stats=*/false); }

TierStats DiskCache::tier_stats() {
  const Impl& d = *impl_;
  TierStats t;
  t.name = d.options.name;
  t.kind = kind();
  t.location = d.root.string();
  t.writable = d.writable;
  if (d.options.read_only_layer) {
    d.check_layer();
    const std::string why = d.unavailable();
    t.available = why.empty();
    t.state = t.available ? "read-only layer" : "unavailable: " + why;
  } else {
    t.state = d.writable ? "ok" : "read-only: cannot be written";
  }
  if (t.available) {
    d.scan_size(&t.entries, &t.bytes);
    t.sized = true;
  }
  return t;
}

// ---- The size bound ----------------------------------------------------------------------------------------

PruneReport DiskCache::Impl::clean(uint64_t max_bytes, uint64_t target_bytes, bool wait, const std::string* keep) {
  PruneReport report;
  // One cleaner at a time. The lock only spares work: unlinking whole immutable files is safe without it.
  std::error_code ec;
  const fs::path lock_path = locks / "cleaner.lock";
  util::FileLock cleaner = wait ? util::FileLock::acquire(lock_path, ec) : util::FileLock::try_acquire(lock_path, ec);
  if (!cleaner.locked() && !ec) {
    report.skipped = true;
    return report;
  }

  report.temporaries_removed = remove_stale_temporaries(tmp);

  // Every key's files: the entry (its mtime is the last use) and its dumps.
  struct KeyFiles {
    int64_t last_use = 0;  // 0 for dumps whose entry is gone: removed first
    bool has_entry = false;
    std::vector<std::pair<fs::path, uint64_t>> files;
  };
  std::map<std::string, KeyFiles> keys;
  uint64_t total = 0;
  for (const fs::path& dir : fanout_dirs(entries)) {
    report.temporaries_removed += remove_stale_temporaries(dir);
    for_each_file(dir, [&](const fs::path& path, const struct stat& st) {
      const std::string name = path.filename().string();
      if (util::is_temporary_name(name) || name.size() < 33 || name[32] != '.') return;
      const std::string key = name.substr(0, 32);
      if (!is_valid_key(key)) return;
      KeyFiles& k = keys[key];
      const auto size = static_cast<uint64_t>(st.st_size);
      k.files.emplace_back(path, size);
      total += size;
      if (ends_with(name, kEntrySuffix)) {
        k.has_entry = true;
        k.last_use = static_cast<int64_t>(st.st_mtime);
        ++report.scanned_entries;
      }
    });
  }
  report.scanned_bytes = total;
  report.remaining_entries = report.scanned_entries;
  report.remaining_bytes = total;
  if (total <= max_bytes) return report;

  std::vector<std::pair<int64_t, std::string>> order;
  order.reserve(keys.size());
  for (const auto& [key, files] : keys) order.emplace_back(files.has_entry ? files.last_use : 0, key);
  std::sort(order.begin(), order.end());
  for (const auto& [last_use, key] : order) {
    if (total <= target_bytes) break;
    if (keep && key == *keep) continue;
    const KeyFiles& k = keys[key];
    bool removed_entry = false;
    // The entry first: once it is gone the kernel is a miss, and its dumps are leftovers.
    std::vector<std::pair<fs::path, uint64_t>> files = k.files;
    std::stable_partition(files.begin(), files.end(),
                          [](const auto& f) { return ends_with(f.first.filename().string(), kEntrySuffix); });
    for (const auto& [path, size] : files) {
      total -= std::min(total, size);  // gone either way: by us, or by another cleaner or `clear`
      if (::unlink(path.c_str()) != 0) continue;
      report.removed_bytes += size;
      if (ends_with(path.filename().string(), kEntrySuffix)) removed_entry = true;
    }
    if (removed_entry) {
      ++report.removed_entries;
      report.removed_keys.push_back(key);
    }
  }
  report.remaining_entries = report.scanned_entries - std::min(report.scanned_entries, report.removed_entries);
  report.remaining_bytes = total;
  if (report.removed_entries) stats->add(Counter::kEvictedEntries, report.removed_entries);
  if (report.removed_bytes) stats->add(Counter::kEvictedBytes, report.removed_bytes);
  return report;
}

PruneReport DiskCache::prune(uint64_t max_bytes, uint64_t target_bytes, bool wait) {
  Impl& d = *impl_;
  if (!d.writable)
    throw Error(ErrorKind::kCacheError,
                "cannot prune the kernel cache " + d.base.string() + ": the directory cannot be written");
  return d.clean(max_bytes, std::min(target_bytes, max_bytes), wait, nullptr);
}

void DiskCache::evict_after_publish(const std::string& key) {
  Impl& d = *impl_;
  const uint64_t max_bytes = d.options.max_bytes;
  const auto target = static_cast<uint64_t>(static_cast<double>(max_bytes) * kEvictFraction);
  const auto publishes = [&d] { return d.stats->read()[static_cast<size_t>(Counter::kPublishes)]; };
  // A publisher that finds another cleaner running leaves its entry to that cleaner. So that none is missed,
  // a cleaner that saw the publish count change while it worked goes round again: a publish it could not
  // have seen happened before its holder's try-lock failed, so before this re-read.
  for (int round = 0; round < 8; ++round) {
    const uint64_t before = publishes();
    const PruneReport report = d.clean(max_bytes, target, /*wait=*/false, &key);
    if (report.skipped || publishes() == before) return;
  }
}

}  // namespace kiln::cache
