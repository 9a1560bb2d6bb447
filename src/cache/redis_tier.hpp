// The remote tier on Redis (through hiredis, when kiln is built with it).
//
// Keys: "kiln:v1:entry:<key>" holds an entry exactly as a local .kiln file (entry_format.hpp), so it is
// verified by the same checksum when fetched; "kiln:v1:lock:<key>" is the compile lock (SET NX PX, a random
// token, released only by its holder, expiring on its own). Each request has a timeout; the first failure —
// refused connection, timeout, a reply that is not Redis — marks the tier down for the rest of the process,
// with one warning and a counter, so an outage costs a process at most one timeout.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cache/tier.hpp"

namespace kiln::cache {

// Receives the tier's counts (into the shared counters of the local directory).
using CountFn = std::function<void(Counter, uint64_t)>;

// Whether this build can talk to Redis, and to Redis over TLS.
bool redis_supported() noexcept;
bool redis_tls_supported() noexcept;

// A remote tier for `url` (redis://...). Connects on first use. Throws Error(kConfigError) naming
// DG_JIT_REMOTE_CACHE when the URL is malformed, when kiln was built without hiredis, or when rediss:// is
// asked of a build without hiredis_ssl.
std::unique_ptr<RemoteTier> make_redis_tier(const std::string& url, int timeout_ms, CountFn count);

}  // namespace kiln::cache
