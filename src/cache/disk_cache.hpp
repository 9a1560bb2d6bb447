// The persistent cache in one directory. It stores bytes and their metadata; it knows nothing of CUDA or
// compilers. It is a cache Tier (tier.hpp): the writable local directory, or — opened as a layer — a
// directory it only reads (a pack baked into an image, a shared network directory).
//
// Layout under the configured root (DG_JIT_CACHE_DIR, default ~/.deep_gemm), all inside "kiln/" so that a
// DeepGEMM cache in the same root is left alone:
//   kiln/entries/<k0k1>/<key>.kiln   entries (format in entry_format.hpp), fanned out by the key's first byte
//   kiln/entries/<k0k1>/<key>.ptx|.sass   dumps written beside the entry (DG_JIT_DUMP_*)
//   kiln/locks/<key>.lock            advisory per-key lock files (flock) so one process compiles a key
//   kiln/locks/cleaner.lock          held (non-blocking) by the one process evicting at a time
//   kiln/tmp/                        temporaries; published by rename(2) into entries/
//   kiln/stats                       counters shared by all processes (updated under flock)
//   kiln/toolchain/                  compiler state: memoised versions, NVCC's copy of the device headers
//
// Thread-safe; safe with many processes, also on NFS-like filesystems: locks are advisory and never needed
// for correctness. Readers never lock: a published entry is complete by construction (temporary + fsync +
// rename), immutable, and verified by checksum when read; eviction unlinks whole files, so a reader holding
// one open reads all of it.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/entry.hpp"
#include "cache/tier.hpp"

namespace kiln::cache {

struct Stats {
  std::filesystem::path root;
  bool writable = false;
  uint64_t entries = 0;
  uint64_t bytes = 0;  // entries and their dumps
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t compiles = 0;
  uint64_t corrupt = 0;
  double compile_seconds = 0;
  uint64_t max_bytes = 0;  // the configured bound, 0 for none
  // Every shared counter, indexed by Counter (the named fields above repeat the first ones).
  std::vector<uint64_t> counters;
  uint64_t counter(Counter c) const {
    const auto i = static_cast<size_t>(c);
    return i < counters.size() ? counters[i] : 0;
  }
};

struct ListedEntry {
  EntryMetadata meta;
  uint64_t file_bytes = 0;
  int64_t last_use_unix = 0;  // mtime, refreshed on use at most once a minute
};

struct VerifyReport {
  uint64_t checked = 0;
  uint64_t corrupt = 0;
  uint64_t removed = 0;
  // One line per bad entry: "<path>: <why it was rejected>", and "; left in place: <why>" when it was not
  // removed (a read-only cache, a directory with files in it). Anything at an entry's path that is not an entry
  // file is a bad entry (a FIFO, a link, a directory), and so is something named like a fan-out directory that
  // is not one.
  std::vector<std::string> problems;
};

// How a DiskCache is used.
struct DiskCacheOptions {
  // A read-only layer: never created, written, touched (no last-use updates), cleaned or locked; a bad entry
  // is reported and skipped, not removed. A layer that is missing, disappears or cannot be read is skipped
  // with one warning per process.
  bool read_only_layer = false;
  // When non-zero, a publish that takes the directory past this many bytes evicts the least recently used
  // entries down to 90 % of it (kEvictFraction), one process at a time.
  uint64_t max_bytes = 0;
  std::string name = "local";  // the tier's name in stats and messages ("local", "layer 1")
};

// Whether a directory can be trusted with a cache: kiln loads what it finds there and runs it on the GPU, so
// whoever can create or replace files in it could make this process run their code (docs/CACHE.md, "Who may
// write the cache"). A directory is trusted when it is owned by `euid` (this process), by root (who can replace
// any file anyway) or by `owner` (for a read-only layer, the owner of its kiln/ directory; pass euid otherwise),
// and neither its group nor others can write it. With `sticky_ok`, a directory that others may write but that
// has the sticky bit (as /tmp) is trusted too: others can add names to it but cannot remove or rename the
// directories kiln keeps in it. Pure (no system calls), so that every case can be tested without chown.
// The directories of the layout above under a cache root: what DiskCache makes and checks, and what `kiln
// doctor` checks the same way without opening the cache.
struct Layout {
  std::filesystem::path base, entries, locks, tmp, toolchain;  // kiln/ and those under it
  std::vector<std::filesystem::path> directories() const { return {base, entries, locks, tmp, toolchain}; }
};
Layout layout_of(const std::filesystem::path& root);

struct DirectoryTrust {
  enum class Problem { kNone, kOwner, kWritableByOthers };
  Problem problem = Problem::kNone;
  std::string why;  // "owned by uid 1001, not by you (uid 1000) or root"; empty when trusted
  bool ok() const { return problem == Problem::kNone; }
};
DirectoryTrust check_directory_trust(const struct stat& st, uid_t euid, uid_t owner, bool sticky_ok);

// Eviction target as a fraction of the bound: some headroom, so that a full cache does not scan on every
// publish.
inline constexpr double kEvictFraction = 0.9;

struct PruneReport {
  bool skipped = false;               // another process was cleaning (non-blocking attempts only)
  uint64_t scanned_entries = 0;       // before removal
  uint64_t scanned_bytes = 0;
  uint64_t removed_entries = 0;
  uint64_t removed_bytes = 0;         // entries and their dumps
  uint64_t remaining_entries = 0;
  uint64_t remaining_bytes = 0;
  uint64_t temporaries_removed = 0;   // strays of killed processes
  std::vector<std::string> removed_keys;
};

class DiskCache : public Tier {
 public:
  // Creates root (mode 0700) and the layout if missing. Throws Error(kConfigError) when root exists and is
  // not a directory, or when root, kiln/ or a directory of the layout is not trusted (check_directory_trust:
  // owned by another user, or writable by others; the message names the directory, its owner or mode, and
  // what to do). If the directory cannot be written, the cache works read-only (writable() == false) and
  // prints one warning to stderr naming the directory and the reason. A read-only layer creates nothing and
  // never throws for its directory's state: a layer that is not trusted is skipped with one warning.
  explicit DiskCache(std::filesystem::path root, DiskCacheOptions options = {});
  ~DiskCache() override;

  const std::filesystem::path& root() const;
  bool writable() const override;
  bool is_layer() const;

  // Tier: lookup is load(key, /*count_stats=*/false).
  const std::string& name() const override;
  TierKind kind() const override;
  std::optional<Entry> lookup(const std::string& key) override;
  TierStats tier_stats() override;

  // Reads and verifies an entry. A missing entry is nullopt (counts a miss when count_stats). A corrupt or
  // truncated one, or one whose key does not match, is counted, removed (when writable) and reported as
  // nullopt; never an exception. A hit counts a hit when count_stats. (Every key-taking member throws
  // Error(kValueError) for a key that is not 32 lowercase hex characters: that is a caller bug, not disk state.)
  std::optional<Entry> load(const std::string& key, bool count_stats = true);

  // Publishes atomically: unique temporary in kiln/tmp, fsync, rename. Never throws on a lost race: the
  // winner's valid entry (or ours) is what stays. Returns false (and does nothing) when read-only. With a
  // size bound, may then evict (see DiskCacheOptions::max_bytes).
  bool publish(const Entry& entry) override;
  // The same, telling whether these bytes were stored (also when they replaced a bad entry) or another
  // writer's valid entry was already there and kept: `cache import` reports the latter as present.
  enum class StoreOutcome { kStored, kAlreadyPresent, kFailed };
  StoreOutcome store(const Entry& entry);

  // Writes a dump (".ptx", ".sass") beside the entry, atomically. Returns its path, or nullopt if read-only.
  std::optional<std::filesystem::path> write_artifact(const std::string& key, const std::string& extension,
                                                      const std::string& content);

  // An exclusive inter-process lock for one key (flock on kiln/locks/<key>.lock). Blocks. Released by the
  // destructor or when the process dies. A no-op lock when read-only.
  class KeyLock {
   public:
    KeyLock() = default;
    explicit KeyLock(int fd) : fd_(fd) {}
    KeyLock(KeyLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    KeyLock& operator=(KeyLock&& other) noexcept;
    ~KeyLock();

   private:
    int fd_ = -1;
  };
  KeyLock lock(const std::string& key);

  void count(Counter counter, uint64_t amount = 1);

  Stats stats() const;
  // The entries that read and verify; `unreadable`, when given, counts those skipped (verify's business), and
  // `problems` names them ("<path>: <why>"), with anything else in the way of an entry (a FIFO, a link or a
  // directory at an entry's path, a file named like a fan-out directory).
  std::vector<ListedEntry> list(uint64_t* unreadable = nullptr, std::vector<std::string>* problems = nullptr) const;
  VerifyReport verify();
  // Removes every entry, dump, stray temporary and whatever else is in the way of entries (links, FIFOs, empty
  // directories; a directory with files in it is left, with a warning), and resets the counters; returns the
  // entries removed.
  uint64_t clear();

  // Evicts least-recently-used entries (by their last-use time) until the directory holds at most
  // target_bytes, when it holds more than max_bytes; removes stray temporaries either way. Waits for a
  // running cleaner when wait, else returns skipped. Entries are removed whole (unlink), so a process reading
  // one keeps reading it; an entry published meanwhile may survive a prune that started before it. Throws
  // Error(kCacheError) when the directory is read-only.
  PruneReport prune(uint64_t max_bytes, uint64_t target_bytes, bool wait);

  // Where the entry for key is (or would be) stored: kiln/entries/<k0k1>/<key>.kiln.
  std::filesystem::path entry_path(const std::string& key) const;

  // kiln/toolchain: writable compiler state, or empty when read-only.
  std::filesystem::path toolchain_dir() const;

 private:
  void evict_after_publish(const std::string& key);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cache
