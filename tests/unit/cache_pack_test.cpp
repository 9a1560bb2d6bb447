// Packs: export and import round trips, filters, idempotence, a damaged entry rejected by name while the
// others are imported, and files that are not packs.
#include "cache/pack.hpp"

#include <gtest/gtest.h>

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
  for (const fs::path& file : {dir.path() / "readme.txt", dir.path() / "missing"}) {
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
