#include "cache/entry_format.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "util/sha256.hpp"

namespace kiln::cache {
namespace {

using nlohmann::json;

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::array<uint8_t, 32> checksum_of(std::span<const uint8_t> metadata, std::span<const uint8_t> payload) {
  util::Sha256 h;
  h.update(metadata);
  h.update(payload);
  return h.digest();
}

DecodeResult fail(DecodeError error, std::string reason) {
  DecodeResult r;
  r.error = error;
  r.reason = std::string(to_string(error)) + ": " + reason;
  return r;
}

// Reads one metadata field, checking its type; returns false naming the field in *problem.
template <typename T>
bool read_field(const json& object, const char* name, T& out, std::string* problem) {
  auto it = object.find(name);
  if (it == object.end()) {
    *problem = std::string("field \"") + name + "\" is missing";
    return false;
  }
  bool type_ok;
  if constexpr (std::is_same_v<T, std::string>)
    type_ok = it->is_string();
  else if constexpr (std::is_floating_point_v<T>)
    type_ok = it->is_number();
  else
    type_ok = it->is_number_integer();
  if (!type_ok) {
    *problem = std::string("field \"") + name + "\" has the wrong type (" + it->type_name() + ")";
    return false;
  }
  if constexpr (std::is_integral_v<T>) {
    // Range check: a value that does not fit the field is as wrong as a wrong type.
    if (it->is_number_unsigned()) {
      const auto v = it->get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        *problem = std::string("field \"") + name + "\" is out of range";
        return false;
      }
    } else {
      const auto v = it->get<int64_t>();
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
        *problem = std::string("field \"") + name + "\" is out of range";
        return false;
      }
    }
  }
  out = it->get<T>();
  return true;
}

bool parse_metadata(std::span<const uint8_t> bytes, EntryMetadata& meta, std::string* problem) {
  json object = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) {
    *problem = "metadata is not valid JSON";
    return false;
  }
  if (!object.is_object()) {
    *problem = std::string("metadata is a JSON ") + object.type_name() + ", expected an object";
    return false;
  }
  return read_field(object, "key", meta.key, problem) && read_field(object, "op", meta.op, problem) &&
         read_field(object, "spec", meta.spec, problem) && read_field(object, "arch", meta.arch, problem) &&
         read_field(object, "backend", meta.backend, problem) &&
         read_field(object, "compiler", meta.compiler, problem) &&
         read_field(object, "kernel_name", meta.kernel_name, problem) &&
         read_field(object, "kiln_version", meta.kiln_version, problem) &&
         read_field(object, "compile_ms", meta.compile_ms, problem) &&
         read_field(object, "created_unix", meta.created_unix, problem) &&
         read_field(object, "registers", meta.registers, problem) &&
         read_field(object, "shared_bytes", meta.shared_bytes, problem) &&
         read_field(object, "stack_frame_bytes", meta.stack_frame_bytes, problem) &&
         read_field(object, "spill_bytes", meta.spill_bytes, problem);
}

std::string short_hex(std::span<const uint8_t> bytes) { return util::to_hex(bytes.first(std::min<size_t>(8, bytes.size()))); }

}  // namespace

const char* to_string(DecodeError error) noexcept {
  switch (error) {
    case DecodeError::kNone: return "ok";
    case DecodeError::kTruncated: return "truncated";
    case DecodeError::kBadMagic: return "bad magic";
    case DecodeError::kUnsupportedVersion: return "unsupported format version";
    case DecodeError::kLengthMismatch: return "length mismatch";
    case DecodeError::kChecksumMismatch: return "checksum mismatch";
    case DecodeError::kBadMetadata: return "bad metadata";
    case DecodeError::kKeyMismatch: return "key mismatch";
    case DecodeError::kUntrusted: return "untrusted";
    case DecodeError::kNotAFile: return "not a regular file";
  }
  return "unknown";
}

bool is_valid_key(std::string_view key) {
  return key.size() == 32 &&
         std::all_of(key.begin(), key.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string encode_metadata(const EntryMetadata& m) {
  // nlohmann::json objects keep keys sorted, which makes the encoding deterministic (golden-testable).
  json object = {
      {"key", m.key},
      {"op", m.op},
      {"spec", m.spec},
      {"arch", m.arch},
      {"backend", m.backend},
      {"compiler", m.compiler},
      {"kernel_name", m.kernel_name},
      {"kiln_version", m.kiln_version},
      {"compile_ms", m.compile_ms},
      {"created_unix", m.created_unix},
      {"registers", m.registers},
      {"shared_bytes", m.shared_bytes},
      {"stack_frame_bytes", m.stack_frame_bytes},
      {"spill_bytes", m.spill_bytes},
  };
  // Replace invalid UTF-8 rather than throw: metadata is descriptive, and publishing must not fail for it.
  return object.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<uint8_t> encode_entry(const Entry& entry) {
  const std::string metadata = encode_metadata(entry.meta);
  const auto meta_bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(metadata.data()), metadata.size());
  const auto checksum = checksum_of(meta_bytes, entry.cubin);

  std::vector<uint8_t> out;
  out.reserve(kFixedHeaderBytes + metadata.size() + entry.cubin.size());
  out.insert(out.end(), std::begin(kEntryMagic), std::end(kEntryMagic));
  put_u32(out, kFormatVersion);
  put_u32(out, static_cast<uint32_t>(metadata.size()));
  put_u64(out, entry.cubin.size());
  out.insert(out.end(), checksum.begin(), checksum.end());
  out.insert(out.end(), meta_bytes.begin(), meta_bytes.end());
  out.insert(out.end(), entry.cubin.begin(), entry.cubin.end());
  return out;
}

DecodeResult decode_entry(std::span<const uint8_t> file, std::string_view expected_key) {
  try {
    // The magic first: a short non-kiln file should be called what it is, not "truncated".
    const size_t magic_bytes = std::min(file.size(), sizeof kEntryMagic);
    if (std::memcmp(file.data(), kEntryMagic, magic_bytes) != 0)
      return fail(DecodeError::kBadMagic, "the file does not start with the kiln entry magic");
    if (file.size() < kFixedHeaderBytes)
      return fail(DecodeError::kTruncated, std::to_string(file.size()) + " bytes, shorter than the " +
                                               std::to_string(kFixedHeaderBytes) + "-byte fixed header");
    const uint8_t* p = file.data() + sizeof kEntryMagic;
    const uint32_t version = get_u32(p);
    if (version != kFormatVersion)
      return fail(DecodeError::kUnsupportedVersion,
                  "format version " + std::to_string(version) + ", expected " + std::to_string(kFormatVersion));
    const uint64_t meta_len = get_u32(p + 4);
    const uint64_t payload_len = get_u64(p + 8);
    const std::span<const uint8_t> stored_checksum = file.subspan(kFixedHeaderBytes - 32, 32);
    const uint64_t available = file.size() - kFixedHeaderBytes;
    // Compared without computing meta_len + payload_len first, which a corrupt payload-length could overflow.
    const std::string sizes = "header says " + std::to_string(meta_len) + " metadata + " +
                              std::to_string(payload_len) + " payload bytes, the file has " +
                              std::to_string(available) + " after the fixed header";
    if (payload_len > available || meta_len > available - payload_len) return fail(DecodeError::kTruncated, sizes);
    if (meta_len + payload_len != available) return fail(DecodeError::kLengthMismatch, sizes);

    const auto metadata = file.subspan(kFixedHeaderBytes, meta_len);
    const auto payload = file.subspan(kFixedHeaderBytes + meta_len, payload_len);
    const auto computed = checksum_of(metadata, payload);
    if (!std::equal(computed.begin(), computed.end(), stored_checksum.begin()))
      return fail(DecodeError::kChecksumMismatch,
                  "stored " + short_hex(stored_checksum) + "..., computed " + short_hex(computed) + "...");

    Entry entry;
    std::string problem;
    if (!parse_metadata(metadata, entry.meta, &problem)) return fail(DecodeError::kBadMetadata, problem);
    if (entry.meta.key != expected_key)
      return fail(DecodeError::kKeyMismatch,
                  "the entry is for key " + entry.meta.key + ", looked up as " + std::string(expected_key));
    entry.cubin.assign(payload.begin(), payload.end());
    DecodeResult ok;
    ok.entry = std::move(entry);
    return ok;
  } catch (const std::exception& e) {
    // Only allocation failure can get here; a cache read must still not throw.
    return fail(DecodeError::kBadMetadata, std::string("cannot decode: ") + e.what());
  }
}

}  // namespace kiln::cache
