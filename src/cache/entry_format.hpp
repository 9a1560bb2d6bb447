// The on-disk format of one cache entry (kiln/entries/<k0k1>/<key>.kiln): self-describing, so that a file can
// be checked on its own, and by `kiln cache verify`, without any other state.
//
// Grammar (integers little-endian, no padding):
//
//   entry        = fixed-header metadata payload                        ; nothing after the payload
//   fixed-header = magic version header-length payload-length checksum  ; kFixedHeaderBytes = 56 bytes
//   magic        = %x89 "KILN" %x0D %x0A %x1A                           ; 8 bytes: catches text-mode mangling
//                                                                       ; and non-kiln files
//   version      = u32                                                  ; kFormatVersion (1)
//   header-length  = u32                                                ; bytes of metadata
//   payload-length = u64                                                ; bytes of payload
//   checksum     = 32 bytes                                             ; SHA-256(metadata || payload)
//   metadata     = header-length bytes of compact UTF-8 JSON, one object with keys in sorted order:
//                  {"arch":s,"backend":s,"compile_ms":number,"compiler":s,"created_unix":int,
//                   "kernel_name":s,"key":s,"kiln_version":s,"op":s,"registers":int,"shared_bytes":int,
//                   "spec":s,"spill_bytes":int,"stack_frame_bytes":int}
//                  (every EntryMetadata field; unknown keys are ignored so that a later version 1 writer
//                  may add some)
//   payload      = payload-length bytes: the cubin
//
// A file is accepted only when the magic and version match, 56 + header-length + payload-length equals the
// file size exactly (a shorter file is truncated), the checksum matches, the metadata is a JSON object with
// every field of the right type, and its "key" equals the key the file was looked up by (which guards against
// a file copied or renamed to the wrong place). The format version changes whenever this grammar does.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/disk_cache.hpp"

namespace kiln::cache {

inline constexpr uint8_t kEntryMagic[8] = {0x89, 'K', 'I', 'L', 'N', 0x0D, 0x0A, 0x1A};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kFixedHeaderBytes = 8 + 4 + 4 + 8 + 32;

// Why a file was rejected. Stable names (to_string) for logs and `kiln cache verify`.
enum class DecodeError {
  kNone,
  kTruncated,           // shorter than its header says (or than the fixed header)
  kBadMagic,            // not a kiln entry
  kUnsupportedVersion,  // written by another format version
  kLengthMismatch,      // longer than its header says (trailing bytes), or lengths that cannot be right
  kChecksumMismatch,    // metadata or payload altered
  kBadMetadata,         // checksum fine but the JSON is not a valid metadata object
  kKeyMismatch,         // a valid entry for another key
  kUntrusted,           // in a read-only layer, a file or directory others than the layer's owner can write
  kNotAFile,            // not a regular file at the entry's path: a FIFO, a link, a directory, a device
};

// No entry is larger (cubins are kilobytes to a few megabytes): a bound on what a read of an entry allocates,
// whatever the file claims to be.
inline constexpr uint64_t kMaxEntryBytes = uint64_t(256) << 20;

const char* to_string(DecodeError error) noexcept;

struct DecodeResult {
  std::optional<Entry> entry;  // set exactly when error == kNone
  DecodeError error = DecodeError::kNone;
  std::string reason;  // human-readable detail: "checksum mismatch (stored 1a2b..., computed 3c4d...)"

  bool ok() const { return error == DecodeError::kNone; }
};

// The metadata object as written into entries (sorted keys, compact). Deterministic for given metadata.
std::string encode_metadata(const EntryMetadata& meta);

// The complete file content for an entry. Deterministic: the same entry always gives the same bytes.
std::vector<uint8_t> encode_entry(const Entry& entry);

// Verifies and decodes a whole file's bytes. Never throws for any input; the result says why it was rejected.
DecodeResult decode_entry(std::span<const uint8_t> file, std::string_view expected_key);

// Whether text is a well-formed cache key: 32 lowercase hexadecimal characters (it becomes a file name, so
// this also keeps paths inside the cache).
bool is_valid_key(std::string_view key);

}  // namespace kiln::cache
