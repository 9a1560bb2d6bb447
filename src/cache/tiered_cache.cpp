#include "cache/tiered_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include "cache/redis_tier.hpp"
#include "util/sha256.hpp"
#include "util/warn.hpp"

namespace kiln::cache {
namespace {

// A token no other holder of a remote lock can have: this host and process, a clock and random bits.
std::string lock_token() {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  uint64_t bits;
  {
    std::lock_guard<std::mutex> lock(mutex);
    bits = rng();
  }
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return util::sha256_hex(std::string(host) + ":" + std::to_string(::getpid()) + ":" + std::to_string(now) + ":" +
                          std::to_string(bits))
      .substr(0, 32);
}

}  // namespace

TieredCache::TieredCache(TieredCacheOptions options) : options_(std::move(options)) {
  DiskCacheOptions local_options;
  local_options.max_bytes = options_.max_bytes;
  local_options.name = "local";
  local_ = std::make_unique<DiskCache>(options_.writable_dir, local_options);
  for (size_t i = 0; i < options_.layers.size(); ++i) {
    DiskCacheOptions layer_options;
    layer_options.read_only_layer = true;
    layer_options.name = "layer " + std::to_string(i + 1);
    layers_.push_back(std::make_unique<DiskCache>(options_.layers[i], layer_options));
  }
  if (!options_.remote_url.empty()) {
    DiskCache* local = local_.get();
    remote_ = make_redis_tier(options_.remote_url, options_.remote_timeout_ms,
                              [local](Counter c, uint64_t n) { local->count(c, n); });
  }
}

TieredCache::~TieredCache() = default;

std::vector<Tier*> TieredCache::tiers() {
  std::vector<Tier*> out{local_.get()};
  for (auto& layer : layers_) out.push_back(layer.get());
  if (remote_) out.push_back(remote_.get());
  return out;
}

std::optional<Found> TieredCache::lookup(const std::string& key, bool count_stats, bool include_remote) {
  auto found_in = [&](Tier& tier, Entry&& entry) {
    Found f;
    f.entry = std::move(entry);
    f.kind = tier.kind();
    f.tier = tier.name();
    return f;
  };
  if (auto entry = local_->lookup(key)) {
    if (count_stats) count(Counter::kHits);
    return found_in(*local_, std::move(*entry));
  }
  for (auto& layer : layers_) {
    if (auto entry = layer->lookup(key)) {
      if (count_stats) {
        count(Counter::kHits);
        count(Counter::kLayerHits);
      }
      // Served in place: a layer is often a large shared pack, and copying it piecemeal into every
      // machine's directory is what the layer is there to avoid, unless asked. (Uncounted lookups are checks,
      // such as plan()'s "is it cached?", and never write.)
      if (options_.copy_up && count_stats) local_->publish(*entry);
      return found_in(*layer, std::move(*entry));
    }
  }
  if (include_remote && remote_ && remote_->available()) {
    if (auto entry = remote_->lookup(key)) {
      if (count_stats) {
        count(Counter::kHits);
        count(Counter::kRemoteHits);
      }
      local_->publish(*entry);
      return found_in(*remote_, std::move(*entry));
    }
  }
  return std::nullopt;
}

bool TieredCache::publish(const Entry& entry, bool to_remote) {
  const bool local = local_->publish(entry);
  const bool remote = to_remote && remote_ && remote_->available() && remote_->publish(entry);
  if (remote) count(Counter::kRemotePublishes);
  return local || remote;
}

TieredCache::Claim::Claim(Claim&& other) noexcept
    : remote_(other.remote_), key_(std::move(other.key_)), token_(std::move(other.token_)) {
  other.remote_ = nullptr;
}

TieredCache::Claim& TieredCache::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    if (remote_) remote_->unlock(key_, token_);
    remote_ = other.remote_;
    key_ = std::move(other.key_);
    token_ = std::move(other.token_);
    other.remote_ = nullptr;
  }
  return *this;
}

TieredCache::Claim::~Claim() {
  if (remote_) remote_->unlock(key_, token_);
}

TieredCache::ClaimResult TieredCache::claim_compile(const std::string& key) {
  ClaimResult result;
  if (!remote_ || !remote_->available()) return result;
  const std::string token = lock_token();
  // The lock outlives the wait of the others, so that they do not all start compiling while the holder is
  // still at it; it expires on its own when the holder dies.
  const int ttl_ms = std::max(options_.remote_wait_ms, 1000);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.remote_wait_ms);
  auto poll = std::chrono::milliseconds(10);
  bool waited = false;
  for (;;) {
    switch (remote_->try_lock(key, token, ttl_ms)) {
      case RemoteTier::LockResult::kUnavailable:
        return result;
      case RemoteTier::LockResult::kAcquired: {
        // The holder before us may have published between our lookup and our lock.
        if (auto entry = remote_->look_again(key)) {
          remote_->unlock(key, token);
          count(Counter::kRemoteHits);
          local_->publish(*entry);
          result.found = Found{std::move(*entry), TierKind::kRemote, remote_->name()};
          return result;
        }
        result.claim = Claim(remote_.get(), key, token);
        return result;
      }
      case RemoteTier::LockResult::kHeldElsewhere:
        break;
    }
    if (!waited) {
      waited = true;
      count(Counter::kRemoteLockWaits);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      util::warn_once("remote-wait:" + key, "another machine has held the remote compile lock of kernel " + key +
                                                " for more than " + std::to_string(options_.remote_wait_ms) +
                                                " ms (DG_JIT_REMOTE_WAIT_MS); compiling it here instead");
      return result;
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(poll, deadline - now));
    poll = std::min(poll * 2, std::chrono::milliseconds(200));
    if (!remote_->available()) return result;
    if (auto entry = remote_->look_again(key)) {
      count(Counter::kRemoteHits);
      local_->publish(*entry);
      result.found = Found{std::move(*entry), TierKind::kRemote, remote_->name()};
      return result;
    }
  }
}

std::vector<TierStats> TieredCache::tier_stats() {
  std::vector<TierStats> out;
  for (Tier* tier : tiers()) out.push_back(tier->tier_stats());
  const Stats shared = local_->stats();  // after the tiers', which may have counted (a remote found down)
  for (TierStats& t : out) {
    switch (t.kind) {
      case TierKind::kLocal: {
        const uint64_t elsewhere = shared.counter(Counter::kLayerHits) + shared.counter(Counter::kRemoteHits);
        t.hits = shared.hits - std::min(shared.hits, elsewhere);
        t.corrupt = shared.corrupt;
        t.publishes = shared.counter(Counter::kPublishes);
        break;
      }
      case TierKind::kLayer:
        t.hits = shared.counter(Counter::kLayerHits);  // all layers together
        break;
      case TierKind::kRemote:
        t.hits = shared.counter(Counter::kRemoteHits);
        t.misses = shared.counter(Counter::kRemoteMisses);
        t.errors = shared.counter(Counter::kRemoteErrors);
        t.corrupt = shared.counter(Counter::kRemoteCorrupt);
        t.publishes = shared.counter(Counter::kRemotePublishes);
        break;
    }
  }
  return out;
}

}  // namespace kiln::cache
