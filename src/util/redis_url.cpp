#include "util/redis_url.hpp"

#include <charconv>

namespace kiln::util {
namespace {

constexpr std::string_view kExpected =
    "expected redis://[[user]:password@]host[:port][/db] (or rediss:// for TLS; %XX escapes in user and password), "
    "for example redis://127.0.0.1:6379/0";

bool parse_int(std::string_view text, int lo, int hi, int* out) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) return false;
  *out = value;
  return true;
}

std::optional<RedisUrl> fail(std::string* why, std::string message) {
  if (why) *why = message + "; " + std::string(kExpected);
  return std::nullopt;
}

// A URL's user or password with its %XX escapes decoded (a password holding '@', '/' or ':' is written with
// them, as every Redis client reads URLs); nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex(text[i + 1]), low = hex(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

}  // namespace

std::string RedisUrl::display() const {
  std::string out = tls ? "rediss://" : "redis://";
  if (!username.empty() || !password.empty()) out += username + (password.empty() ? "" : ":***") + "@";
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  out += ":" + std::to_string(port) + "/" + std::to_string(db);
  return out;
}

std::optional<RedisUrl> parse_redis_url(std::string_view text, std::string* why) {
  RedisUrl url;
  std::string_view rest = text;
  if (rest.starts_with("redis://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("rediss://")) {
    url.tls = true;
    rest.remove_prefix(9);
  } else {
    return fail(why, "the scheme is not redis:// or rediss://");
  }
  // userinfo: the last '@' ends it (a password may contain '@' only percent-free; keep it simple and strict).
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    const size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) return fail(why, "the part before '@' has no ':' before the password");
    const std::optional<std::string> username = percent_decode(userinfo.substr(0, colon));
    const std::optional<std::string> password = percent_decode(userinfo.substr(colon + 1));
    // The message never shows the password, not even in part.
    if (!username || !password)
      return fail(why, "the user or password has a '%' not followed by two hexadecimal digits (write '%' as %25)");
    url.username = *username;
    url.password = *password;
    if (url.password.empty()) return fail(why, "the password before '@' is empty");
  }
  std::string_view authority = rest, path;
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  std::string_view port_text;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail(why, "an IPv6 address is missing its closing ']'");
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return fail(why, "unexpected text after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return fail(why, "the port after ':' is empty");
    }
  } else {
    const size_t colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return fail(why, "the port after ':' is empty");
    }
  }
  if (url.host.empty()) return fail(why, "the host is missing");
  for (char c : url.host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == '_' || c == ':';
    if (!ok) return fail(why, "the host \"" + url.host + "\" contains '" + std::string(1, c) + "'");
  }
  if (!port_text.empty() && !parse_int(port_text, 1, 65535, &url.port))
    return fail(why, "the port \"" + std::string(port_text) + "\" is not a number from 1 to 65535");
  // A query ("/0?password=...", as some clients take) may carry a secret: refused without being echoed.
  if (path.find('?') != std::string_view::npos)
    return fail(why, "it has a query string ('?...'), which kiln does not read; give the password as "
                     "redis://:password@host");
  if (!path.empty() && !parse_int(path, 0, 1 << 20, &url.db))
    return fail(why, "the database \"" + std::string(path) + "\" is not a non-negative whole number");
  return url;
}

}  // namespace kiln::util
