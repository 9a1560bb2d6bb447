// The entry file format: golden bytes, round trips, and that every kind of damage is detected and named.
#include "cache/entry_format.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "util/sha256.hpp"

namespace fs = std::filesystem;
using namespace kiln::cache;

namespace {

const fs::path kGoldenPath = fs::path(KILN_SOURCE_DIR) / "tests/unit/golden/cache_entry_v1.kiln";
const std::string kKey = "0123456789abcdef0123456789abcdef";

Entry golden_entry() {
  Entry e;
  e.meta.key = kKey;
  e.meta.op = "per_token_cast_to_fp8";
  e.meta.spec = "k=7168 threads=256";
  e.meta.arch = "sm_90a";
  e.meta.backend = "nvrtc";
  e.meta.compiler = "nvrtc 13.0.88";
  e.meta.kernel_name = "kiln_per_token_cast_to_fp8";
  e.meta.kiln_version = "0.1.0";
  e.meta.compile_ms = 123.25;
  e.meta.created_unix = 1764460800;
  e.meta.registers = 32;
  e.meta.shared_bytes = 1024;
  e.meta.stack_frame_bytes = 0;
  e.meta.spill_bytes = 0;
  for (int i = 0; i < 64; ++i) e.cubin.push_back(static_cast<uint8_t>(i * 37 + 11));
  return e;
}

void expect_same_metadata(const EntryMetadata& a, const EntryMetadata& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.spec, b.spec);
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.compiler, b.compiler);
  EXPECT_EQ(a.kernel_name, b.kernel_name);
  EXPECT_EQ(a.kiln_version, b.kiln_version);
  EXPECT_EQ(a.compile_ms, b.compile_ms);
  EXPECT_EQ(a.created_unix, b.created_unix);
  EXPECT_EQ(a.registers, b.registers);
  EXPECT_EQ(a.shared_bytes, b.shared_bytes);
  EXPECT_EQ(a.stack_frame_bytes, b.stack_frame_bytes);
  EXPECT_EQ(a.spill_bytes, b.spill_bytes);
}

uint64_t le(const std::vector<uint8_t>& bytes, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | bytes[at + i];
  return v;
}

// A file with a correct checksum around arbitrary metadata text: reaches the metadata checks.
std::vector<uint8_t> raw_file(const std::string& metadata, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(std::begin(kEntryMagic), std::end(kEntryMagic));
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(kFormatVersion, 4);
  put(metadata.size(), 4);
  put(payload.size(), 8);
  kiln::util::Sha256 h;
  h.update(metadata);
  h.update(payload);
  auto digest = h.digest();
  out.insert(out.end(), digest.begin(), digest.end());
  out.insert(out.end(), metadata.begin(), metadata.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

}  // namespace

TEST(EntryFormat, GoldenFileIsByteIdentical) {
  const std::vector<uint8_t> encoded = encode_entry(golden_entry());
  if (const char* update = std::getenv("KILN_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    fs::create_directories(kGoldenPath.parent_path());
    std::ofstream(kGoldenPath, std::ios::binary).write(reinterpret_cast<const char*>(encoded.data()),
                                                       static_cast<std::streamsize>(encoded.size()));
    GTEST_SKIP() << "rewrote " << kGoldenPath << " (KILN_UPDATE_GOLDEN=1)";
  }
  std::ifstream in(kGoldenPath, std::ios::binary);
  ASSERT_TRUE(in) << kGoldenPath << " is missing; run with KILN_UPDATE_GOLDEN=1 to create it deliberately";
  const std::vector<uint8_t> golden((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(encoded, golden) << "the entry encoding changed. If that is intended, bump kFormatVersion and the "
                                "grammar in entry_format.hpp, then regenerate with KILN_UPDATE_GOLDEN=1";
  // The golden file also decodes to what it was made from: old files stay readable.
  DecodeResult r = decode_entry(golden, kKey);
  ASSERT_TRUE(r.ok()) << r.reason;
  expect_same_metadata(r.entry->meta, golden_entry().meta);
  EXPECT_EQ(r.entry->cubin, golden_entry().cubin);
}

TEST(EntryFormat, FixedHeaderFollowsTheGrammar) {
  const Entry e = golden_entry();
  const std::vector<uint8_t> bytes = encode_entry(e);
  const std::string metadata = encode_metadata(e.meta);
  ASSERT_EQ(kFixedHeaderBytes, 56u);
  ASSERT_EQ(bytes.size(), kFixedHeaderBytes + metadata.size() + e.cubin.size());
  EXPECT_TRUE(std::equal(std::begin(kEntryMagic), std::end(kEntryMagic), bytes.begin()));
  EXPECT_EQ(le(bytes, 8, 4), kFormatVersion);
  EXPECT_EQ(le(bytes, 12, 4), metadata.size());
  EXPECT_EQ(le(bytes, 16, 8), e.cubin.size());
  kiln::util::Sha256 h;
  h.update(metadata);
  h.update(e.cubin);
  const auto digest = h.digest();
  EXPECT_TRUE(std::equal(digest.begin(), digest.end(), bytes.begin() + 24));
  EXPECT_EQ(std::string(bytes.begin() + 56, bytes.begin() + 56 + static_cast<long>(metadata.size())), metadata);
  EXPECT_TRUE(std::equal(e.cubin.begin(), e.cubin.end(), bytes.end() - static_cast<long>(e.cubin.size())));
}

TEST(EntryFormat, MetadataIsSortedCompactJsonWithEveryField) {
  const std::string metadata = encode_metadata(golden_entry().meta);
  EXPECT_EQ(metadata,
            "{\"arch\":\"sm_90a\",\"backend\":\"nvrtc\",\"compile_ms\":123.25,\"compiler\":\"nvrtc 13.0.88\","
            "\"created_unix\":1764460800,\"kernel_name\":\"kiln_per_token_cast_to_fp8\","
            "\"key\":\"0123456789abcdef0123456789abcdef\",\"kiln_version\":\"0.1.0\","
            "\"op\":\"per_token_cast_to_fp8\",\"registers\":32,\"shared_bytes\":1024,"
            "\"spec\":\"k=7168 threads=256\",\"spill_bytes\":0,\"stack_frame_bytes\":0}");
}

TEST(EntryFormat, RoundTripsUnusualValues) {
  Entry e = golden_entry();
  e.meta.spec = "name=\"quoted\" \\ tab\t newline\n unicode \xc3\xa9";
  e.meta.compile_ms = 0.1 + 0.2;  // a double that needs every digit to round-trip
  e.meta.registers = -1;
  e.meta.shared_bytes = -1;
  e.meta.stack_frame_bytes = (int64_t{1} << 40);
  e.meta.spill_bytes = -1;
  e.meta.created_unix = -5;
  DecodeResult r = decode_entry(encode_entry(e), kKey);
  ASSERT_TRUE(r.ok()) << r.reason;
  expect_same_metadata(r.entry->meta, e.meta);
  EXPECT_EQ(r.entry->cubin, e.cubin);
}

TEST(EntryFormat, RoundTripsAnEmptyAndALargePayload) {
  Entry e = golden_entry();
  e.cubin.clear();
  DecodeResult r = decode_entry(encode_entry(e), kKey);
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_TRUE(r.entry->cubin.empty());
  e.cubin.assign(3 << 20, 0x5a);
  r = decode_entry(encode_entry(e), kKey);
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.entry->cubin, e.cubin);
}

TEST(EntryFormat, EncodingIsDeterministic) { EXPECT_EQ(encode_entry(golden_entry()), encode_entry(golden_entry())); }

TEST(EntryFormat, EverySingleByteCorruptionIsDetected) {
  const std::vector<uint8_t> good = encode_entry(golden_entry());
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x01;
    DecodeResult r = decode_entry(bad, kKey);
    EXPECT_FALSE(r.ok()) << "a flipped bit at byte " << i << " was not detected";
    EXPECT_FALSE(r.entry.has_value());
    EXPECT_FALSE(r.reason.empty());
  }
}

TEST(EntryFormat, EveryTruncationIsDetectedAsTruncated) {
  const std::vector<uint8_t> good = encode_entry(golden_entry());
  for (size_t n = 0; n < good.size(); ++n) {
    DecodeResult r = decode_entry(std::span<const uint8_t>(good.data(), n), kKey);
    EXPECT_EQ(r.error, DecodeError::kTruncated) << "prefix of " << n << " bytes: " << r.reason;
  }
}

TEST(EntryFormat, TrailingBytesAreALengthMismatch) {
  std::vector<uint8_t> bytes = encode_entry(golden_entry());
  bytes.push_back(0);
  DecodeResult r = decode_entry(bytes, kKey);
  EXPECT_EQ(r.error, DecodeError::kLengthMismatch) << r.reason;
}

TEST(EntryFormat, EachHeaderFieldHasItsOwnReason) {
  const std::vector<uint8_t> good = encode_entry(golden_entry());
  {
    std::vector<uint8_t> bad = good;
    bad[1] = 'X';
    DecodeResult r = decode_entry(bad, kKey);
    EXPECT_EQ(r.error, DecodeError::kBadMagic);
    EXPECT_NE(r.reason.find("bad magic"), std::string::npos) << r.reason;
  }
  {
    std::vector<uint8_t> bad = good;
    bad[8] = 2;
    DecodeResult r = decode_entry(bad, kKey);
    EXPECT_EQ(r.error, DecodeError::kUnsupportedVersion);
    EXPECT_NE(r.reason.find("format version 2, expected 1"), std::string::npos) << r.reason;
  }
  {
    std::vector<uint8_t> bad = good;
    for (int i = 16; i < 24; ++i) bad[static_cast<size_t>(i)] = 0xff;  // a payload length that would overflow
    DecodeResult r = decode_entry(bad, kKey);
    EXPECT_EQ(r.error, DecodeError::kTruncated) << r.reason;
  }
  {
    std::vector<uint8_t> bad = good;
    bad.back() ^= 0xff;
    DecodeResult r = decode_entry(bad, kKey);
    EXPECT_EQ(r.error, DecodeError::kChecksumMismatch);
    EXPECT_NE(r.reason.find("checksum mismatch"), std::string::npos) << r.reason;
  }
  {
    const std::string text = "hello, not an entry";
    DecodeResult r = decode_entry(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), kKey);
    EXPECT_EQ(r.error, DecodeError::kBadMagic);
  }
}

TEST(EntryFormat, AnEntryForAnotherKeyIsRejected) {
  const std::string other = "ffffffffffffffffffffffffffffffff";
  DecodeResult r = decode_entry(encode_entry(golden_entry()), other);
  EXPECT_EQ(r.error, DecodeError::kKeyMismatch);
  EXPECT_FALSE(r.entry.has_value());
  EXPECT_NE(r.reason.find(kKey), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find(other), std::string::npos) << r.reason;
}

TEST(EntryFormat, BadMetadataWithAGoodChecksumIsRejectedAndExplained) {
  const std::vector<uint8_t> payload = {1, 2, 3};
  const std::string good = encode_metadata(golden_entry().meta);
  auto reason_for = [&](const std::string& metadata) {
    DecodeResult r = decode_entry(raw_file(metadata, payload), kKey);
    EXPECT_EQ(r.error, DecodeError::kBadMetadata) << metadata;
    return r.reason;
  };
  EXPECT_NE(reason_for("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(reason_for("[1,2]").find("expected an object"), std::string::npos);
  std::string missing = good;
  missing.replace(missing.find("\"op\""), 4, "\"oq\"");
  EXPECT_NE(reason_for(missing).find("\"op\" is missing"), std::string::npos);
  std::string wrong_type = good;
  wrong_type.replace(wrong_type.find("\"registers\":32"), 14, "\"registers\":\"32\"");
  EXPECT_NE(reason_for(wrong_type).find("\"registers\" has the wrong type"), std::string::npos);
  std::string out_of_range = good;
  out_of_range.replace(out_of_range.find("\"registers\":32"), 14, "\"registers\":99999999999");
  EXPECT_NE(reason_for(out_of_range).find("\"registers\" is out of range"), std::string::npos);

  // The hand-made file itself is fine with good metadata, so the failures above are the metadata's.
  EXPECT_TRUE(decode_entry(raw_file(good, payload), kKey).ok());
}

TEST(EntryFormat, UnknownMetadataFieldsAreIgnored) {
  std::string metadata = encode_metadata(golden_entry().meta);
  metadata.insert(1, "\"added_later\":[1,2,3],");
  DecodeResult r = decode_entry(raw_file(metadata, {9}), kKey);
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.entry->meta.op, "per_token_cast_to_fp8");
}

TEST(EntryFormat, KeysAreThirtyTwoLowercaseHexCharacters) {
  EXPECT_TRUE(is_valid_key(kKey));
  EXPECT_FALSE(is_valid_key(""));
  EXPECT_FALSE(is_valid_key("0123456789abcdef0123456789abcde"));    // 31
  EXPECT_FALSE(is_valid_key("0123456789abcdef0123456789abcdef0"));  // 33
  EXPECT_FALSE(is_valid_key("0123456789ABCDEF0123456789abcdef"));   // upper case
  EXPECT_FALSE(is_valid_key("../../../../etc/passwd0123456789a"));
}

TEST(EntryFormat, DecodeErrorsHaveStableNames) {
  EXPECT_STREQ(to_string(DecodeError::kNone), "ok");
  EXPECT_STREQ(to_string(DecodeError::kTruncated), "truncated");
  EXPECT_STREQ(to_string(DecodeError::kChecksumMismatch), "checksum mismatch");
  EXPECT_STREQ(to_string(DecodeError::kKeyMismatch), "key mismatch");
}
