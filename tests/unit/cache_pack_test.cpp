// Packs: export and import round trips, filters, idempotence, a damaged entry rejected by name while the
// others are imported, and files that are not packs.
#include "cache/pack.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "cache/entry_format.hpp"
#include "cache_test_support.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using test::entry_path;
using test::key_of;
using test::make_entry;

Entry entry_for(const std::string& name, const std::string& op, const std::string& arch) {
  Entry e = make_entry(key_of(name), 3000);
  e.meta.op = op;
  e.meta.arch = arch;
  return e;
}

std::vector<Entry> sample() {
  return {entry_for("gemm-a", "fp8_gemm_nt", "sm_90a"), entry_for("gemm-b", "fp8_gemm_nt", "sm_100a"),
          entry_for("cast", "per_token_cast_to_fp8", "sm_90a")};
}

nlohmann::json manifest_of(const fs::path& pack) {
  const auto bytes = test::read_bytes(pack);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | bytes[16 + size_t(i)];
  return nlohmann::json::parse(bytes.begin() + kPackHeaderBytes, bytes.begin() + long(kPackHeaderBytes + length));
}

TEST(Packs, RoundTripCarriesEveryEntryByteForByte) {
  test::TempDir dir;
  DiskCache source(dir.path() / "ci");
  for (const Entry& e : sample()) ASSERT_TRUE(source.publish(e));
  const fs::path pack = dir.path() / "warmup.kilnpack";
  const PackExportReport out = export_pack({&source}, pack, {});
  EXPECT_EQ(out.entries.size(), 3u);
  EXPECT_EQ(out.bytes, fs::file_size(pack));

  // The documented layout: magic, version, manifest with every field.
  const auto bytes = test::read_bytes(pack);
  ASSERT_GE(bytes.size(), kPackHeaderBytes);
  EXPECT_TRUE(std::equal(std::begin(kPackMagic), std::end(kPackMagic), bytes.begin()));
  EXPECT_EQ(bytes[8], kPackVersion);
  const nlohmann::json manifest = manifest_of(pack);
  EXPECT_EQ(manifest["format"], "kiln-pack");
  ASSERT_EQ(manifest["entries"].size(), 3u);
  for (const auto& item : manifest["entries"])
    for (const char* field : {"key", "op", "spec", "arch", "backend", "compiler", "kiln_version", "kernel_name",
                              "offset", "bytes", "sha256"})
      EXPECT_TRUE(item.contains(field)) << field;

  DiskCache gpu(dir.path() / "gpu machine");
  const PackImportReport in = import_pack(pack, gpu);
  EXPECT_EQ(in.imported, 3u);
  EXPECT_EQ(in.present, 0u);
  EXPECT_EQ(in.rejected, 0u);
  for (const Entry& e : sample()) {
    EXPECT_EQ(test::read_bytes(entry_path(dir.path() / "gpu machine", e.meta.key)),
              test::read_bytes(entry_path(dir.path() / "ci", e.meta.key)));
  }
}

TEST(Packs, ImportingTwiceIsIdempotent) {
  test::TempDir dir;
  DiskCache source(dir.path() / "a");
  for (const Entry& e : sample()) ASSERT_TRUE(source.publish(e));
  const fs::path pack = dir.path() / "p";
  export_pack({&source}, pack, {});
  DiskCache target(dir.path() / "b");
  ASSERT_TRUE(target.publish(sample()[0]));  // one already there
  const PackImportReport first = import_pack(pack, target);
  EXPECT_EQ(first.imported, 2u);
  EXPECT_EQ(first.present, 1u);
  const PackImportReport second = import_pack(pack, target);
  EXPECT_EQ(second.imported, 0u);
  EXPECT_EQ(second.present, 3u);
  EXPECT_EQ(second.rejected, 0u);
  EXPECT_EQ(target.stats().entries, 3u);
}

TEST(Packs, FiltersByOpAndArchAndTakesEachKeyOnce) {
  test::TempDir dir;
  DiskCache local(dir.path() / "local"), layer_source(dir.path() / "layer");
  const auto entries = sample();
  ASSERT_TRUE(local.publish(entries[0]));
  ASSERT_TRUE(layer_source.publish(entries[0]));
  ASSERT_TRUE(layer_source.publish(entries[1]));
  ASSERT_TRUE(layer_source.publish(entries[2]));
  DiskCacheOptions read_only;
  read_only.read_only_layer = true;
  DiskCache layer(dir.path() / "layer", read_only);

  EXPECT_EQ(export_pack({&local, &layer}, dir.path() / "all", {}).entries.size(), 3u);
  const auto gemm = export_pack({&local, &layer}, dir.path() / "gemm", {"fp8_gemm_nt", ""});
  EXPECT_EQ(gemm.entries.size(), 2u);
  const auto gemm90 = export_pack({&local, &layer}, dir.path() / "gemm90", {"fp8_gemm_nt", "sm_90a"});
  ASSERT_EQ(gemm90.entries.size(), 1u);
  EXPECT_EQ(gemm90.entries[0].key, entries[0].meta.key);
  EXPECT_TRUE(export_pack({&local}, dir.path() / "none", {"no_such_op", ""}).entries.empty());
  DiskCache target(dir.path() / "t");
  EXPECT_EQ(import_pack(dir.path() / "none", target).imported, 0u);
}

TEST(Packs, ACorruptedEntryIsRejectedByNameAndTheOthersImported) {
  test::TempDir dir;
  DiskCache source(dir.path() / "a");
  for (const Entry& e : sample()) ASSERT_TRUE(source.publish(e));
  const fs::path pack = dir.path() / "p";
  export_pack({&source}, pack, {});
  const nlohmann::json manifest = manifest_of(pack);
  const auto& victim = manifest["entries"][1];
  auto bytes = test::read_bytes(pack);
  const uint64_t data_start = bytes.size() - [&] {
    uint64_t total = 0;
    for (const auto& item : manifest["entries"]) total += item["bytes"].get<uint64_t>();
    return total;
  }();
  bytes[data_start + victim["offset"].get<uint64_t>() + victim["bytes"].get<uint64_t>() - 7] ^= 0x5a;
  test::write_bytes(pack, bytes);

  DiskCache target(dir.path() / "b");
  const PackImportReport r = import_pack(pack, target);
  EXPECT_EQ(r.imported, 2u);
  EXPECT_EQ(r.rejected, 1u);
  bool named = false;
  for (const auto& item : r.items) {
    if (item.outcome != PackImportItem::Outcome::kRejected) continue;
    named = true;
    EXPECT_EQ(item.key, victim["key"]);
    EXPECT_EQ(item.op, victim["op"]);
    EXPECT_NE(item.reason.find("checksum mismatch"), std::string::npos) << item.reason;
  }
  EXPECT_TRUE(named);
  EXPECT_FALSE(target.load(victim["key"].get<std::string>(), false));
  EXPECT_EQ(target.stats().entries, 2u);
}

TEST(Packs, AnEntryThatMatchesItsManifestButIsNotAnEntryIsRejected) {
  // A pack written by something else: the manifest's checksum is right, the bytes are not a kiln entry.
  test::TempDir dir;
  const std::string key = key_of("forged");
  const std::string junk = "not an entry at all";
  const nlohmann::json manifest = {
      {"format", "kiln-pack"}, {"version", 1}, {"kiln_version", "0"}, {"created_unix", 0},
      {"entries", {{{"key", key}, {"op", "x"}, {"spec", ""}, {"arch", "sm_90a"}, {"offset", 0},
                    {"bytes", junk.size()}, {"sha256", util::sha256_hex(junk)}}}}};
  const std::string text = manifest.dump();
  std::vector<uint8_t> bytes(std::begin(kPackMagic), std::end(kPackMagic));
  for (uint32_t v : {kPackVersion, 0u})
    for (int i = 0; i < 4; ++i) bytes.push_back(uint8_t(v >> (8 * i)));
  for (int i = 0; i < 8; ++i) bytes.push_back(uint8_t(uint64_t(text.size()) >> (8 * i)));
  bytes.insert(bytes.end(), text.begin(), text.end());
  bytes.insert(bytes.end(), junk.begin(), junk.end());
  test::write_bytes(dir.path() / "forged", bytes);
  DiskCache target(dir.path() / "b");
  const PackImportReport r = import_pack(dir.path() / "forged", target);
  ASSERT_EQ(r.rejected, 1u);
  EXPECT_NE(r.items[0].reason.find("not a valid entry"), std::string::npos) << r.items[0].reason;
}

// Rewrites a pack's manifest (its data stays as it is): what a pack written by something else may hold.
void rewrite_manifest(const fs::path& pack, const nlohmann::json& manifest) {
  const auto old_bytes = test::read_bytes(pack);
  uint64_t old_length = 0;
  for (int i = 7; i >= 0; --i) old_length = (old_length << 8) | old_bytes[16 + size_t(i)];
  const std::string text = manifest.dump();
  std::vector<uint8_t> bytes(old_bytes.begin(), old_bytes.begin() + 16);
  for (int i = 0; i < 8; ++i) bytes.push_back(uint8_t(uint64_t(text.size()) >> (8 * i)));
  bytes.insert(bytes.end(), text.begin(), text.end());
  bytes.insert(bytes.end(), old_bytes.begin() + long(kPackHeaderBytes + old_length), old_bytes.end());
  test::write_bytes(pack, bytes);
}

std::vector<Entry> six() {
  std::vector<Entry> out;
  for (int i = 0; i < 6; ++i) out.push_back(entry_for("six-" + std::to_string(i), "fp8_gemm_nt", "sm_90a"));
  return out;
}

TEST(Packs, AManifestWrongAtTheTopLevelIsAnErrorNamingTheFieldAndImportsNothing) {
  test::TempDir dir;
  DiskCache source(dir.path() / "a");
  for (const Entry& e : six()) ASSERT_TRUE(source.publish(e));
  const fs::path pack = dir.path() / "p";
  export_pack({&source}, pack, {});
  const nlohmann::json good = manifest_of(pack);
  const struct {
    const char* field;
    nlohmann::json value;  // null: the field is removed
    const char* message;
  } cases[] = {
      {"format", 5, "\"format\" must be a string, got an integer (5)"},
      {"format", "kiln-cache", "\"format\" must be \"kiln-pack\", got a string (\"kiln-cache\")"},
      {"format", nullptr, "\"format\" is missing"},
      {"version", "1", "\"version\" must be a whole number >= 0, got a string (\"1\")"},
      {"version", -1, "\"version\" must be a whole number >= 0, got an integer (-1)"},
      {"version", nullptr, "\"version\" is missing"},
      {"version", 2, "has manifest version 2; this kiln reads version 1"},
      {"kiln_version", 7, "\"kiln_version\" must be a string, got an integer (7)"},
      {"created_unix", "today", "\"created_unix\" must be a whole number >= 0, got a string (\"today\")"},
      {"entries", nlohmann::json::object(), "\"entries\" must be a list, got an object"},
      {"entries", nullptr, "\"entries\" is missing"},
  };
  for (const auto& c : cases) {
    nlohmann::json manifest = good;
    if (c.value.is_null()) manifest.erase(c.field);
    else manifest[c.field] = c.value;
    export_pack({&source}, pack, {});
    rewrite_manifest(pack, manifest);
    DiskCache target(dir.path() / ("t-" + std::string(c.field) + "-" + c.value.dump()));
    try {
      import_pack(pack, target);
      ADD_FAILURE() << "imported a pack whose " << c.field << " is " << c.value.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCacheError);
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("pack " + pack.string() + ": ", 0), 0u) << what;
      EXPECT_NE(what.find(c.message), std::string::npos) << what;
    }
    EXPECT_EQ(target.stats().entries, 0u) << "nothing is imported from " << c.field << " = " << c.value.dump();
  }
}

TEST(Packs, AMalformedManifestEntryIsRejectedByIndexWhileTheOthersAreImported) {
  test::TempDir dir;
  DiskCache source(dir.path() / "a");
  for (const Entry& e : six()) ASSERT_TRUE(source.publish(e));
  const fs::path pack = dir.path() / "p";
  export_pack({&source}, pack, {});
  const nlohmann::json good = manifest_of(pack);
  const struct {
    const char* field;
    nlohmann::json value;  // null with `remove`: the field is removed
    bool remove;
    const char* message;
  } cases[] = {
      {"op", 5, false, "\"op\" must be a string, got an integer (5)"},
      {"spec", nullptr, false, "\"spec\" must be a string, got null"},
      {"kernel_name", {1, 2}, false, "\"kernel_name\" must be a string, got a list"},
      {"key", 7, false, "\"key\" must be a string, got an integer (7)"},
      {"key", "ABC", false, "\"key\" must be 32 lowercase hexadecimal characters, got a string (\"ABC\")"},
      {"key", nullptr, true, "\"key\" is missing"},
      {"offset", -1, false, "\"offset\" must be a whole number >= 0, got an integer (-1)"},
      {"bytes", 1e30, false, "\"bytes\" must be a whole number >= 0, got a number (1e+30)"},
      {"sha256", true, false, "\"sha256\" must be a string, got a boolean (true)"},
  };
  for (const auto& c : cases) {
    // The bad field in the last entry but one: the entries before and after it are imported all the same.
    nlohmann::json manifest = good;
    nlohmann::json& victim = manifest["entries"][4];
    const std::string victim_key = victim["key"];
    if (c.remove) victim.erase(c.field);
    else victim[c.field] = c.value;
    export_pack({&source}, pack, {});
    rewrite_manifest(pack, manifest);
    DiskCache target(dir.path() / ("t-" + std::string(c.field) + "-" + c.value.dump()));
    PackImportReport r;
    ASSERT_NO_THROW(r = import_pack(pack, target)) << c.field << " = " << c.value.dump();
    EXPECT_EQ(r.imported, 5u) << c.field;
    EXPECT_EQ(r.rejected, 1u) << c.field;
    ASSERT_EQ(r.items.size(), 6u);
    const PackImportItem& rejected = r.items[4];
    EXPECT_EQ(rejected.outcome, PackImportItem::Outcome::kRejected);
    EXPECT_EQ(rejected.reason, "manifest entry 4: " + std::string(c.message));
    if (std::string(c.field) != "key") EXPECT_EQ(rejected.key, victim_key) << "named by its key as well";
    EXPECT_FALSE(target.load(victim_key, false));
    EXPECT_EQ(target.stats().entries, 5u);
  }
  // Not an object at all.
  nlohmann::json manifest = good;
  manifest["entries"][0] = "six-0";
  rewrite_manifest(pack, manifest);
  DiskCache target(dir.path() / "t-string");
  const PackImportReport r = import_pack(pack, target);
  EXPECT_EQ(r.imported, 5u);
  EXPECT_EQ(r.items[0].reason, "manifest entry 0: must be an object, got a string (\"six-0\")");
}

TEST(Packs, TruncatedPackRejectsWhatIsMissing) {
  test::TempDir dir;
  DiskCache source(dir.path() / "a");
  for (const Entry& e : sample()) ASSERT_TRUE(source.publish(e));
  const fs::path pack = dir.path() / "p";
  export_pack({&source}, pack, {});
  fs::resize_file(pack, fs::file_size(pack) - 100);
  DiskCache target(dir.path() / "b");
  const PackImportReport r = import_pack(pack, target);
  EXPECT_EQ(r.imported, 2u);
  EXPECT_EQ(r.rejected, 1u);
  for (const auto& item : r.items)
    if (item.outcome == PackImportItem::Outcome::kRejected)
      EXPECT_NE(item.reason.find("truncated"), std::string::npos) << item.reason;
}

TEST(Packs, NotAPackIsAnErrorNamingTheFile) {
  test::TempDir dir;
  DiskCache target(dir.path() / "b");
  test::write_bytes(dir.path() / "readme.txt", {'h', 'e', 'l', 'l', 'o'});
  // A FIFO given as the pack is refused at once (opening or reading it would wait for a writer forever).
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  for (const fs::path& file : {dir.path() / "readme.txt", dir.path() / "missing", dir.path() / "fifo"}) {
    try {
      import_pack(file, target);
      FAIL() << "expected an error for " << file;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCacheError);
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln::cache
