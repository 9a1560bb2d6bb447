// Storage tiers behind one interface. The composer (TieredCache, used by the JIT) searches them in order —
// the writable local directory, the read-only layers, the remote cache — and publishes into the writable
// ones, without knowing what each is: a directory (DiskCache), a directory it may only read (DiskCache as a
// layer), or a Redis server (RedisTier). A tier stores whole entries in the self-verifying format of
// entry_format.hpp, so every tier verifies what it returns the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cache/entry.hpp"

namespace kiln::cache {

enum class TierKind { kLocal, kLayer, kRemote };
const char* to_string(TierKind kind) noexcept;  // "local", "layer", "remote"

// What `kiln cache stats` shows for one tier. Counters shared across processes are filled by the composer
// (TieredCache::tier_stats), which owns the shared counters file.
struct TierStats {
  std::string name;      // "local", "layer 1", "remote"
  TierKind kind = TierKind::kLocal;
  std::string location;  // a directory, or redis://host:port/db (never a password)
  bool writable = false;
  bool available = true;
  std::string state;     // "ok", "read-only", "unavailable: <why>", "down: <why>", "not contacted"
  bool sized = false;    // entries and bytes are known (scanned)
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t hits = 0;     // lookups this tier served (shared counters; for layers, all layers together)
  uint64_t misses = 0;   // remote only: lookups that reached it and found nothing
  uint64_t corrupt = 0;  // remote only: bad values found (ignored, then overwritten)
  uint64_t errors = 0;   // remote only: failures and timeouts (each marks it down for that process)
  uint64_t publishes = 0;
};

class Tier {
 public:
  virtual ~Tier() = default;
  virtual const std::string& name() const = 0;
  virtual TierKind kind() const = 0;
  // Whether publish() can store anything.
  virtual bool writable() const = 0;
  // The verified entry stored for key, or nullopt when the tier has no good one or cannot be reached. A bad
  // entry is counted and never returned. Never throws for the tier's state (only for a malformed key).
  virtual std::optional<Entry> lookup(const std::string& key) = 0;
  // Stores an entry; false when it could not (read-only, unreachable). Never throws for the tier's state.
  virtual bool publish(const Entry& entry) = 0;
  // Location, state and size; counters are the composer's.
  virtual TierStats tier_stats() = 0;
};

// A tier shared between machines, which also arbitrates who compiles a key.
class RemoteTier : public Tier {
 public:
  enum class LockResult { kAcquired, kHeldElsewhere, kUnavailable };
  // Takes the compile lock of key for `token`, expiring after ttl_ms (so a machine that dies holding it
  // blocks nobody for long).
  virtual LockResult try_lock(const std::string& key, const std::string& token, int ttl_ms) = 0;
  // Releases the lock if `token` still holds it (an expired lock taken over by another is left alone).
  virtual void unlock(const std::string& key, const std::string& token) = 0;
  // False once the tier was marked down in this process: it is then skipped without being contacted.
  virtual bool available() const = 0;
  // lookup() without counting a miss: the looks again of one kernel's lookup (after taking the compile lock,
  // while waiting for another machine's compile), so the remote's misses count kernels, not requests.
  virtual std::optional<Entry> look_again(const std::string& key) = 0;
};

}  // namespace kiln::cache
