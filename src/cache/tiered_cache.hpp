// The cache tiers composed: the writable local directory, the read-only layers in order, then the remote
// tier — each a cache::Tier. The JIT asks this one object; what stands behind it is configuration.
//
//   lookup:  local -> layer 1 -> ... -> layer n -> remote      (first verified entry wins)
//            a layer hit is served in place (copied into the local directory only with copy_up);
//            a remote hit is always stored locally, so the next process on this machine finds it there
//   publish: local (then the size bound may evict) and remote
//   claim:   before compiling, take the key's compile lock in the remote tier, or wait (bounded) for the
//            machine that holds it and use its result
//
// Counters shared by the processes of this machine live in the local directory's kiln/stats.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"
#include "cache/tier.hpp"

namespace kiln::cache {

struct TieredCacheOptions {
  std::filesystem::path writable_dir;             // DG_JIT_CACHE_DIR's first directory
  std::vector<std::filesystem::path> layers;      // its others: read-only, searched in order
  bool copy_up = false;                           // DG_JIT_CACHE_COPY_UP
  uint64_t max_bytes = 0;                         // DG_JIT_CACHE_MAX_BYTES
  std::string remote_url;                         // DG_JIT_REMOTE_CACHE; empty: no remote tier
  int remote_timeout_ms = 100;                    // DG_JIT_REMOTE_TIMEOUT_MS
  int remote_wait_ms = 30000;                     // DG_JIT_REMOTE_WAIT_MS
};

struct Found {
  Entry entry;
  TierKind kind = TierKind::kLocal;
  std::string tier;  // the tier's name
};

class TieredCache {
 public:
  // Opens every tier (a remote tier connects lazily, on its first use). Throws Error(kConfigError) when
  // the writable directory is unusable (as DiskCache does), or a remote cache is configured that this build
  // cannot use (built without hiredis, or rediss:// without hiredis_ssl).
  explicit TieredCache(TieredCacheOptions options);
  ~TieredCache();

  DiskCache& local() { return *local_; }
  const std::vector<std::unique_ptr<DiskCache>>& layers() const { return layers_; }
  RemoteTier* remote() { return remote_.get(); }  // nullptr when none is configured
  const TieredCacheOptions& options() const { return options_; }
  // Every tier in search order.
  std::vector<Tier*> tiers();

  // Searches the tiers in order; include_remote false stops before the remote tier. With count_stats, counts
  // a hit (and which kind of tier served it) and copies a layer hit up when copy_up; without, it is a check that
  // writes nothing locally. It never counts a miss: a caller that waits for another process's compile and looks
  // again is not yet at one; it counts kMisses itself where it decides to compile. Never throws for any tier's
  // state.
  std::optional<Found> lookup(const std::string& key, bool count_stats = true, bool include_remote = true);

  // Publishes into the local directory and, when to_remote, the remote tier. Never throws for tier state.
  // Whether a persistent tier now holds the entry (the writable directory, else the remote cache): false when
  // neither could take it (a read-only or full directory and no remote), so a later process would compile again.
  bool publish(const Entry& entry, bool to_remote = true);

  // The right to compile a key, held in the remote tier until destroyed.
  class Claim {
   public:
    Claim() = default;
    Claim(RemoteTier* remote, std::string key, std::string token)
        : remote_(remote), key_(std::move(key)), token_(std::move(token)) {}
    Claim(Claim&& other) noexcept;
    Claim& operator=(Claim&& other) noexcept;
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;
    ~Claim();
    bool held() const { return remote_ != nullptr; }

   private:
    RemoteTier* remote_ = nullptr;
    std::string key_, token_;
  };
  struct ClaimResult {
    std::optional<Found> found;  // another machine's result (also stored locally): do not compile
    Claim claim;                 // held when this machine should compile and publish
  };
  // Without a usable remote tier: nothing found, nothing held (compile locally). Otherwise takes the key's
  // compile lock, or waits up to remote_wait_ms for the machine holding it, polling for its entry; after the
  // wait (or when the remote tier fails) it returns nothing found and nothing held. Never throws.
  ClaimResult claim_compile(const std::string& key);

  void count(Counter counter, uint64_t amount = 1) { local_->count(counter, amount); }

  // Every tier's stats, with the shared counters filled in.
  std::vector<TierStats> tier_stats();

 private:
  TieredCacheOptions options_;
  std::unique_ptr<DiskCache> local_;
  std::vector<std::unique_ptr<DiskCache>> layers_;
  std::unique_ptr<RemoteTier> remote_;
};

}  // namespace kiln::cache
