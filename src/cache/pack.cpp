#include "cache/pack.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "cache/entry_format.hpp"
#include "kiln/error.hpp"
#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace kiln::cache {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void pack_error(const fs::path& file, const std::string& why) {
  throw Error(ErrorKind::kCacheError, "pack " + file.string() + ": " + why);
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// An entry file's bytes. It was listed as a good entry, but may have been replaced since: as DiskCache reads
// entries, a FIFO there must not block (O_NONBLOCK), and only a regular file of a sane size is read.
std::vector<uint8_t> read_file(const fs::path& path, bool* ok) {
  std::vector<uint8_t> bytes;
  *ok = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return bytes;
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= kMaxEntryBytes) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t used = 0;
    while (used < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + used, bytes.size() - used);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      used += static_cast<size_t>(n);
    }
    bytes.resize(used);
    *ok = used == static_cast<size_t>(st.st_size);
  }
  ::close(fd);
  return bytes;
}

// A JSON value as an error shows it: its type, and the value itself when it is short.
std::string describe(const json& value) {
  const char* type = value.is_null()              ? "null"
                     : value.is_boolean()         ? "a boolean"
                     : value.is_number_integer()  ? "an integer"
                     : value.is_number()          ? "a number"
                     : value.is_string()          ? "a string"
                     : value.is_array()           ? "a list"
                     : value.is_object()          ? "an object"
                                                  : "a value";
  if (value.is_null() || value.is_array() || value.is_object()) return type;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(type) + " (" + text + ")";
}

// Checks one field of a manifest object by type, without the exceptions of json's typed getters (which name
// neither the file nor the field). Returns why the field is unusable, or empty.
std::string string_field(const json& object, const char* name, bool required, std::string* out) {
  const auto it = object.find(name);
  if (it == object.end()) return required ? "\"" + std::string(name) + "\" is missing" : std::string();
  if (!it->is_string()) return "\"" + std::string(name) + "\" must be a string, got " + describe(*it);
  *out = it->get<std::string>();
  return {};
}
std::string count_field(const json& object, const char* name, bool required, uint64_t* out) {
  const auto it = object.find(name);
  if (it == object.end()) return required ? "\"" + std::string(name) + "\" is missing" : std::string();
  if (!it->is_number_unsigned())
    return "\"" + std::string(name) + "\" must be a whole number >= 0, got " + describe(*it);
  *out = it->get<uint64_t>();
  return {};
}

bool is_lower_hex(const std::string& text, size_t size) {
  return text.size() == size &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// pread of exactly n bytes at offset; false when the file is shorter.
bool read_at(int fd, uint64_t offset, size_t n, std::vector<uint8_t>& out) {
  out.resize(n);
  size_t used = 0;
  while (used < n) {
    ssize_t got = ::pread(fd, out.data() + used, n - used, static_cast<off_t>(offset + used));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    used += static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

const char* to_string(PackImportItem::Outcome outcome) noexcept {
  switch (outcome) {
    case PackImportItem::Outcome::kImported: return "imported";
    case PackImportItem::Outcome::kPresent: return "present";
    case PackImportItem::Outcome::kRejected: return "rejected";
  }
  return "unknown";
}

PackExportReport export_pack(const std::vector<DiskCache*>& sources, const fs::path& file, const PackFilter& filter) {
  PackExportReport report;
  report.file = file;
  json entries = json::array();
  std::vector<uint8_t> data;
  std::map<std::string, bool> seen;
  for (DiskCache* source : sources) {
    // list() returns only entries that verify; each is read again here and must verify again, since another
    // process may have replaced or evicted it in between.
    for (const ListedEntry& listed : source->list()) {
      const EntryMetadata& meta = listed.meta;
      if (seen.count(meta.key)) continue;
      if (!filter.op.empty() && meta.op != filter.op) continue;
      if (!filter.arch.empty() && meta.arch != filter.arch) continue;
      bool ok = false;
      std::vector<uint8_t> bytes = read_file(source->entry_path(meta.key), &ok);
      if (!ok || !decode_entry(bytes, meta.key).ok()) continue;
      seen[meta.key] = true;
      entries.push_back({{"key", meta.key}, {"op", meta.op}, {"spec", meta.spec}, {"arch", meta.arch},
                         {"backend", meta.backend}, {"compiler", meta.compiler}, {"kiln_version", meta.kiln_version},
                         {"kernel_name", meta.kernel_name}, {"offset", data.size()}, {"bytes", bytes.size()},
                         {"sha256", util::Sha256().update(std::span<const uint8_t>(bytes)).hex_digest()}});
      data.insert(data.end(), bytes.begin(), bytes.end());
      report.entries.push_back(meta);
    }
  }
  json manifest = {{"format", "kiln-pack"},
                   {"version", kPackVersion},
                   {"kiln_version", KILN_VERSION},
                   {"created_unix", static_cast<int64_t>(std::time(nullptr))},
                   {"entries", entries}};
  const std::string manifest_text = manifest.dump(-1, ' ', false, json::error_handler_t::replace);

  std::vector<uint8_t> head;
  head.insert(head.end(), std::begin(kPackMagic), std::end(kPackMagic));
  put_u32(head, kPackVersion);
  put_u32(head, 0);
  put_u64(head, manifest_text.size());
  head.insert(head.end(), manifest_text.begin(), manifest_text.end());

  std::error_code ec;
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  // Written beside its final name and renamed into place: each step's failure says which it was.
  auto temp = util::TemporaryFile::create(dir, file.filename().string(), ec);
  if (!temp) pack_error(file, "cannot be written: no temporary file can be made in " + dir.string() + " (" + ec.message() + ")");
  if (!temp->write(std::span<const uint8_t>(head), ec) || !temp->write(std::span<const uint8_t>(data), ec) ||
      !temp->sync(ec))
    pack_error(file, "cannot be written: writing " + temp->path().string() + " failed (" + ec.message() + ")");
  if (!temp->commit(file, ec))
    pack_error(file, "cannot be written: the finished pack cannot be renamed to it (" + ec.message() + ")");
  report.bytes = head.size() + data.size();
  return report;
}

PackImportReport import_pack(const fs::path& file, DiskCache& into) {
  if (!into.writable())
    throw Error(ErrorKind::kCacheError, "cannot import " + file.string() + ": the kernel cache " +
                                            into.root().string() + " cannot be written");
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) pack_error(file, std::string("cannot be opened: ") + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) pack_error(file, std::string("cannot be read: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) pack_error(file, "is a directory, not a pack file");
  // O_NONBLOCK above and this check: a FIFO or a device given as the pack is refused at once, never read without
  // end.
  if (!S_ISREG(st.st_mode)) pack_error(file, "is not a regular file (a FIFO, socket or device), not a pack file");
  const auto file_size = static_cast<uint64_t>(st.st_size);

  std::vector<uint8_t> header;
  if (!read_at(fd, 0, kPackHeaderBytes, header) || std::memcmp(header.data(), kPackMagic, sizeof kPackMagic) != 0)
    pack_error(file, "is not a kiln pack (it does not start with the pack magic); packs are written by "
                     "`kiln cache export`");
  const auto version = static_cast<uint32_t>(get_le(header.data() + 8, 4));
  if (version != kPackVersion)
    pack_error(file, "has pack format version " + std::to_string(version) + "; this kiln reads version " +
                         std::to_string(kPackVersion));
  const uint64_t manifest_bytes = get_le(header.data() + 16, 8);
  if (manifest_bytes > file_size - kPackHeaderBytes)
    pack_error(file, "is truncated: its manifest is " + std::to_string(manifest_bytes) + " bytes, the file has " +
                         std::to_string(file_size - kPackHeaderBytes) + " after the header");
  std::vector<uint8_t> manifest_raw;
  if (!read_at(fd, kPackHeaderBytes, static_cast<size_t>(manifest_bytes), manifest_raw))
    pack_error(file, "cannot read its manifest");
  json manifest = json::parse(manifest_raw.begin(), manifest_raw.end(), nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object())
    pack_error(file, "has an unusable manifest (expected a JSON object with \"format\": \"kiln-pack\" and an "
                     "\"entries\" list)");
  // The top level is checked whole before anything is imported: a manifest that is wrong there is not a pack
  // this kiln understands, and nothing of it is trusted.
  const auto unusable = [&](const std::string& why) { pack_error(file, "has an unusable manifest: " + why); };
  std::string format, kiln_version;
  uint64_t manifest_version = 0, created_unix = 0;
  if (std::string why = string_field(manifest, "format", true, &format); !why.empty()) unusable(why);
  if (format != "kiln-pack") unusable("\"format\" must be \"kiln-pack\", got " + describe(manifest["format"]));
  if (std::string why = count_field(manifest, "version", true, &manifest_version); !why.empty()) unusable(why);
  if (manifest_version != kPackVersion)
    pack_error(file, "has manifest version " + std::to_string(manifest_version) + "; this kiln reads version " +
                         std::to_string(kPackVersion) + " (was it written by a newer kiln?)");
  if (std::string why = string_field(manifest, "kiln_version", false, &kiln_version); !why.empty()) unusable(why);
  if (std::string why = count_field(manifest, "created_unix", false, &created_unix); !why.empty()) unusable(why);
  if (!manifest.contains("entries")) unusable("\"entries\" is missing");
  if (!manifest["entries"].is_array()) unusable("\"entries\" must be a list, got " + describe(manifest["entries"]));
  const uint64_t data_start = kPackHeaderBytes + manifest_bytes;
  const uint64_t data_size = file_size - data_start;

  PackImportReport report;
  size_t index = 0;
  for (const json& item : manifest["entries"]) {
    PackImportItem out;
    // Each rejection names the entry by its place in the manifest (its key may be what is wrong).
    const std::string where = "manifest entry " + std::to_string(index++) + ": ";
    auto reject = [&](const std::string& why) {
      out.outcome = PackImportItem::Outcome::kRejected;
      out.reason = where + why;
      ++report.rejected;
      report.items.push_back(out);
    };
    if (!item.is_object()) {
      reject("must be an object, got " + describe(item));
      continue;
    }
    // The key first, so that a rejection for another field names it too. The descriptive fields only name the
    // entry in the report (the entry carries its own metadata), but one of the wrong type means something other
    // than kiln wrote the manifest: the entry is rejected rather than guessed at.
    std::string key, sha256;
    uint64_t offset = 0, bytes = 0;
    std::string why = string_field(item, "key", true, &key);
    if (why.empty() && !is_valid_key(key))
      why = "\"key\" must be 32 lowercase hexadecimal characters, got " + describe(item["key"]);
    if (why.empty()) out.key = key;
    for (const auto& [name, field] :
         {std::pair{"op", &out.op}, std::pair{"spec", &out.spec}, std::pair{"arch", &out.arch}})
      if (why.empty()) why = string_field(item, name, false, field);
    std::string ignored;
    for (const char* name : {"backend", "compiler", "kiln_version", "kernel_name"})
      if (why.empty()) why = string_field(item, name, false, &ignored);
    if (why.empty()) why = count_field(item, "offset", true, &offset);
    if (why.empty()) why = count_field(item, "bytes", true, &bytes);
    if (why.empty()) why = string_field(item, "sha256", true, &sha256);
    if (why.empty() && !is_lower_hex(sha256, 64))
      why = "\"sha256\" must be 64 lowercase hexadecimal characters, got " + describe(item["sha256"]);
    if (!why.empty()) {
      reject(why);
      continue;
    }
    if (offset > data_size || bytes > data_size - offset) {
      reject("the pack ends before this entry's bytes (truncated pack)");
      continue;
    }
    std::vector<uint8_t> raw;
    if (!read_at(fd, data_start + offset, static_cast<size_t>(bytes), raw)) {
      reject("its bytes cannot be read");
      continue;
    }
    const std::string digest = util::Sha256().update(std::span<const uint8_t>(raw)).hex_digest();
    if (digest != sha256) {
      reject("checksum mismatch: the manifest says sha256 " + sha256.substr(0, 16) + "..., the bytes have " +
             digest.substr(0, 16) + "...");
      continue;
    }
    DecodeResult decoded = decode_entry(raw, out.key);
    if (!decoded.ok()) {
      reject("not a valid entry: " + decoded.reason);
      continue;
    }
    if (into.load(out.key, /*count_stats=*/false)) {
      out.outcome = PackImportItem::Outcome::kPresent;
      ++report.present;
      report.items.push_back(out);
      continue;
    }
    const DiskCache::StoreOutcome stored = into.store(*decoded.entry);
    if (stored == DiskCache::StoreOutcome::kFailed) {
      reject("it could not be written into " + into.root().string());
      continue;
    }
    // Another process may have published the same key between the load above and this store.
    if (stored == DiskCache::StoreOutcome::kAlreadyPresent) {
      out.outcome = PackImportItem::Outcome::kPresent;
      ++report.present;
    } else {
      out.outcome = PackImportItem::Outcome::kImported;
      ++report.imported;
    }
    report.items.push_back(out);
  }
  return report;
}

}  // namespace kiln::cache
