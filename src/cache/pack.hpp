// Packs: many cache entries in one file, to move a warm cache between machines (built by `kiln precompile`
// on a CI machine without a GPU, imported on GPU machines, or baked into an image as a read-only layer's
// source). `kiln cache export` writes one, `kiln cache import` adds its good entries to a cache.
//
// Format (integers little-endian; docs/CACHE.md has the same):
//
//   pack         = fixed-header manifest data
//   fixed-header = magic version reserved manifest-length        ; kPackHeaderBytes = 24 bytes
//   magic        = %x89 "KPACK" %x0D %x0A                        ; 8 bytes
//   version      = u32                                           ; kPackVersion (1)
//   reserved     = u32                                           ; 0
//   manifest-length = u64                                        ; bytes of manifest
//   manifest     = UTF-8 JSON object:
//                  {"format": "kiln-pack", "version": 1, "kiln_version": s, "created_unix": int,
//                   "entries": [{"key": s, "op": s, "spec": s, "arch": s, "backend": s, "compiler": s,
//                                "kiln_version": s, "kernel_name": s, "offset": int, "bytes": int,
//                                "sha256": s}, ...]}
//   data         = the entries' files (entry_format.hpp), byte for byte, at their "offset" from the start of
//                  data, each "bytes" long, with "sha256" the SHA-256 of those bytes in lowercase hex
//
// Each entry is checked twice on import: against the manifest's SHA-256, and as an entry (its own checksum,
// metadata and key), so a damaged entry is rejected by name while the others are imported. Nothing in a
// pack depends on the machine that wrote it: entries are keyed by content, never by path or host.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"

namespace kiln::cache {

inline constexpr uint8_t kPackMagic[8] = {0x89, 'K', 'P', 'A', 'C', 'K', 0x0D, 0x0A};
inline constexpr uint32_t kPackVersion = 1;
inline constexpr size_t kPackHeaderBytes = 8 + 4 + 4 + 8;

struct PackFilter {
  std::string op;    // empty: every op
  std::string arch;  // empty: every arch
};

struct PackExportReport {
  std::filesystem::path file;
  uint64_t bytes = 0;                  // size of the pack
  std::vector<EntryMetadata> entries;  // what it holds, in order
};

// Writes every valid entry of `sources` (searched in order; a key in several is taken from the first)
// that passes the filter, atomically (a temporary beside `file`, then rename). Throws Error(kCacheError)
// naming the file when it cannot be written.
PackExportReport export_pack(const std::vector<DiskCache*>& sources, const std::filesystem::path& file,
                             const PackFilter& filter);

struct PackImportItem {
  std::string key, op, spec, arch;
  enum class Outcome { kImported, kPresent, kRejected } outcome = Outcome::kRejected;
  std::string reason;  // why it was rejected
};
const char* to_string(PackImportItem::Outcome outcome) noexcept;  // "imported", "present", "rejected"

struct PackImportReport {
  uint64_t imported = 0;
  uint64_t present = 0;   // a valid entry for the key was already there
  uint64_t rejected = 0;
  std::vector<PackImportItem> items;
};

// Verifies each entry of the pack and publishes the good ones into `into`. Idempotent. Throws
// Error(kCacheError) naming the file when it cannot be read, is not a regular file or not a pack, or when its
// manifest is unusable at the top level (not an object; "format", "version", "kiln_version", "created_unix" or
// "entries" missing where required, of the wrong type or, for "version", not kPackVersion; the message names
// the field): then nothing is imported. It also throws when `into` cannot be written. A malformed manifest
// entry (not an object, a field of the wrong type, a bad key or sha256) is rejected by its index in the
// manifest ("manifest entry 5: \"op\" must be a string, got an integer (5)") while the others are imported.
PackImportReport import_pack(const std::filesystem::path& file, DiskCache& into);

}  // namespace kiln::cache
