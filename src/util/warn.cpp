#include "util/warn.hpp"

#include <cstdio>
#include <mutex>
#include <set>

namespace kiln::util {

void warn_once(const std::string& dedupe_key, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(dedupe_key).second) return;
  }
  std::fprintf(stderr, "kiln: warning: %s\n", message.c_str());
}

}  // namespace kiln::util
