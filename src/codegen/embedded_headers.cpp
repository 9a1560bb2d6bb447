#include "codegen/embedded_headers.hpp"

#include <algorithm>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "util/sha256.hpp"

namespace kiln::codegen {
namespace {

// The "kiln/..." paths named by #include directives in `text`, in order of appearance.
std::vector<std::string_view> kiln_includes(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while ((pos = text.find("#include", pos)) != std::string_view::npos) {
    pos += 8;
    size_t open = text.find_first_of("\"<\n", pos);
    if (open == std::string_view::npos || text[open] == '\n') continue;
    char close_char = text[open] == '"' ? '"' : '>';
    size_t close = text.find_first_of(std::string_view(&close_char, 1), open + 1);
    if (close == std::string_view::npos) break;
    std::string_view path = text.substr(open + 1, close - open - 1);
    if (path.starts_with("kiln/")) out.push_back(path);
    pos = close;
  }
  return out;
}

}  // namespace

const EmbeddedHeader* find_embedded_header(std::string_view path) {
  auto headers = embedded_headers();
  auto it = std::lower_bound(headers.begin(), headers.end(), path,
                             [](const EmbeddedHeader& h, std::string_view p) { return h.path < p; });
  return it != headers.end() && it->path == path ? &*it : nullptr;
}

std::string included_headers_digest(std::string_view source) {
  // Closure of kiln includes; a std::set keeps the hash independent of include order.
  std::set<std::string_view> seen;
  std::vector<std::string_view> pending = kiln_includes(source);
  while (!pending.empty()) {
    std::string_view path = pending.back();
    pending.pop_back();
    if (!seen.insert(path).second) continue;
    if (const EmbeddedHeader* h = find_embedded_header(path)) {
      for (auto inc : kiln_includes(h->content)) pending.push_back(inc);
    }
  }
  util::Sha256 hash;
  for (std::string_view path : seen) {
    const EmbeddedHeader* h = find_embedded_header(path);
    hash.update(path);
    hash.update(std::string_view("\0", 1));
    // A missing header is hashed as absent: the compile will then fail and nothing is cached.
    hash.update(h ? h->sha256 : std::string_view("<missing>"));
    hash.update(std::string_view("\0", 1));
  }
  return hash.hex_digest();
}

const std::string& all_headers_digest() {
  static const std::string digest = [] {
    util::Sha256 hash;
    for (const auto& h : embedded_headers()) {
      hash.update(h.path);
      hash.update(std::string_view("\0", 1));
      hash.update(h.sha256);
      hash.update(std::string_view("\0", 1));
    }
    return hash.hex_digest();
  }();
  return digest;
}

}  // namespace kiln::codegen
