// The address of a Redis server as DG_JIT_REMOTE_CACHE gives it. Parsed here, below both the configuration
// (which validates the variable once) and the cache (which connects), so both read it by one rule.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::util {

struct RedisUrl {
  bool tls = false;       // rediss://
  std::string host;       // a name, an IPv4 address, or an IPv6 address without its brackets
  int port = 6379;
  int db = 0;
  std::string username;   // empty: the default user (AUTH with the password alone)
  std::string password;   // empty: no AUTH
  // The URL with the password replaced by "***", for messages, `kiln config` and `kiln cache stats`.
  std::string display() const;
};

// Accepts redis://[[username]:password@]host[:port][/db] and the same with rediss:// (TLS). On failure,
// nullopt and *why says what is wrong and what is expected (the caller names the variable).
std::optional<RedisUrl> parse_redis_url(std::string_view text, std::string* why);

}  // namespace kiln::util
