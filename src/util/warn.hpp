// Warnings the library prints itself, on stderr as "kiln: warning: ...". The cache tiers keep working when a
// directory, a lock or a remote server misbehaves; they say so once, not on every kernel.
#pragma once

#include <string>

namespace kiln::util {

// Prints `message` once per process for each `dedupe_key` (several caches on one unwritable directory, or
// every kernel missing one unreachable server, give one warning). Keys name their cause: "readonly:<dir>".
void warn_once(const std::string& dedupe_key, const std::string& message);

}  // namespace kiln::util
