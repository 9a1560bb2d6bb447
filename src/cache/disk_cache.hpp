// The persistent cache. It stores bytes and their metadata; it knows nothing of CUDA or compilers.
//
// Layout under the configured root (DG_JIT_CACHE_DIR, default ~/.deep_gemm), all inside "kiln/" so that a
// DeepGEMM cache in the same root is left alone:
//   kiln/entries/<k0k1>/<key>.kiln   entries (format in entry_format.hpp), fanned out by the key's first byte
//   kiln/entries/<k0k1>/<key>.ptx|.sass   dumps written beside the entry (DG_JIT_DUMP_*)
//   kiln/locks/<key>.lock            advisory per-key lock files (flock) so one process compiles a key
//   kiln/tmp/                        temporaries; published by rename(2) into entries/
//   kiln/stats                       counters shared by all processes (updated under flock)
//   kiln/toolchain/                  compiler state: memoised versions, NVCC's copy of the device headers
//
// Thread-safe; safe with many processes. Readers never lock: a published entry is complete by construction
// (temporary + fsync + rename) and verified by checksum when read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cache {

struct EntryMetadata {
  std::string key;           // 32 hex chars; also the file name
  std::string op;            // "per_token_cast_to_fp8"
  std::string spec;          // "k=7168 threads=256"
  std::string arch;          // "sm_90a"
  std::string backend;       // "nvcc" / "nvrtc"
  std::string compiler;      // "nvcc 13.0.88"
  std::string kernel_name;   // symbol to look up after loading
  std::string kiln_version;
  double compile_ms = 0;
  int64_t created_unix = 0;
  // ptxas figures, -1 when unknown
  int registers = -1;
  int64_t shared_bytes = -1;
  int64_t stack_frame_bytes = -1;
  int64_t spill_bytes = -1;
};

struct Entry {
  EntryMetadata meta;
  std::vector<uint8_t> cubin;
};

// Counters shared by every process using the cache, since it was created or cleared.
enum class Counter : int { kHits = 0, kMisses = 1, kCompiles = 2, kCorrupt = 3, kCompileMicros = 4, kCount };

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
  std::vector<std::string> problems;  // one line per bad entry: "<path>: <why it was rejected>"
};

class DiskCache {
 public:
  // Creates root (mode 0700) and the layout if missing. Throws Error(kConfigError) when root exists and is
  // not a directory. If the directory cannot be written, the cache works read-only (writable() == false) and
  // prints one warning to stderr naming the directory and the reason.
  explicit DiskCache(std::filesystem::path root);
  ~DiskCache();

  const std::filesystem::path& root() const;
  bool writable() const;

  // Reads and verifies an entry. A missing entry is nullopt (counts a miss when count_stats). A corrupt or
  // truncated one, or one whose key does not match, is counted, removed (when writable) and reported as
  // nullopt; never an exception. A hit counts a hit when count_stats. (Every key-taking member throws
  // Error(kValueError) for a key that is not 32 lowercase hex characters: that is a caller bug, not disk state.)
  std::optional<Entry> load(const std::string& key, bool count_stats = true);

  // Publishes atomically: unique temporary in kiln/tmp, fsync, rename. Never throws on a lost race: the
  // winner's valid entry (or ours) is what stays. Returns false (and does nothing) when read-only.
  bool publish(const Entry& entry);

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
  std::vector<ListedEntry> list() const;
  VerifyReport verify();
  uint64_t clear();  // removes every entry, dump, stray temporary and resets the counters; returns entries removed

  // kiln/toolchain: writable compiler state, or empty when read-only.
  std::filesystem::path toolchain_dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cache
