// The size bound of the writable directory: least-recently-used eviction after a publish, by one cleaner at a
// time, under concurrent writers and readers in several processes; `prune` by hand; stray temporaries.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>

#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "cache_test_support.hpp"
#include "kiln/error.hpp"
#include "util/fs.hpp"
#include "test_support.hpp"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using test::entry_path;
using test::key_of;
using test::make_entry;

constexpr size_t kCubin = 4000;
// The size of one test entry's file (the metadata length depends only on the variant's digits).
uint64_t entry_bytes() { return encode_entry(make_entry(key_of("x"), kCubin)).size(); }

DiskCache bounded(const fs::path& root, uint64_t max_bytes) {
  DiskCacheOptions o;
  o.max_bytes = max_bytes;
  return DiskCache(root, o);
}

TEST(Eviction, PublishPastTheBoundEvictsTheLeastRecentlyUsed) {
  test::TempDir dir;
  const uint64_t one = entry_bytes();
  DiskCache cache = bounded(dir.path(), 10 * one);
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) {
    keys.push_back(key_of("k" + std::to_string(i)));
    ASSERT_TRUE(cache.publish(make_entry(keys.back(), kCubin)));
    // Older keys were used longer ago; key 0 was used last of all.
    test::age_file(entry_path(dir.path(), keys.back()), 1000 - i);
  }
  test::age_file(entry_path(dir.path(), keys[0]), 1);
  EXPECT_EQ(cache.stats().entries, 10u);
  EXPECT_EQ(cache.stats().counter(Counter::kEvictedEntries), 0u) << "at the bound, not past it";

  ASSERT_TRUE(cache.publish(make_entry(key_of("new"), kCubin)));
  const Stats stats = cache.stats();
  EXPECT_LE(stats.bytes, static_cast<uint64_t>(10 * one * kEvictFraction));
  EXPECT_EQ(stats.entries, 9u);  // 11 entries down to at most 9 (90 % of 10)
  EXPECT_EQ(stats.counter(Counter::kEvictedEntries), 2u);
  EXPECT_EQ(stats.counter(Counter::kEvictedBytes), 2 * one);
  EXPECT_FALSE(fs::exists(entry_path(dir.path(), keys[1])));
  EXPECT_FALSE(fs::exists(entry_path(dir.path(), keys[2])));
  EXPECT_TRUE(fs::exists(entry_path(dir.path(), keys[0]))) << "recently used";
  EXPECT_TRUE(fs::exists(entry_path(dir.path(), key_of("new")))) << "just published";
  EXPECT_EQ(stats.counter(Counter::kPublishes), 11u);
  EXPECT_EQ(stats.counter(Counter::kPublishes) - stats.counter(Counter::kEvictedEntries), stats.entries);
}

TEST(Eviction, DumpsGoWithTheirEntryAndCountInTheBound) {
  test::TempDir dir;
  const uint64_t one = entry_bytes();
  DiskCache cache = bounded(dir.path(), 3 * one + 3000);
  const std::string old_key = key_of("old");
  ASSERT_TRUE(cache.publish(make_entry(old_key, kCubin)));
  ASSERT_TRUE(cache.write_artifact(old_key, ".ptx", std::string(3000, 'p')));
  test::age_file(entry_path(dir.path(), old_key), 5000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache.publish(make_entry(key_of("n" + std::to_string(i)), kCubin)));
  EXPECT_FALSE(fs::exists(entry_path(dir.path(), old_key)));
  EXPECT_FALSE(fs::exists(entry_path(dir.path(), old_key).replace_extension(".ptx")));
  EXPECT_EQ(cache.stats().counter(Counter::kEvictedBytes), one + 3000);
}

TEST(Eviction, AReaderHoldingAnEntryOpenReadsAllOfIt) {
  test::TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("being read");
  ASSERT_TRUE(cache.publish(make_entry(key, 100000)));
  const int fd = ::open(entry_path(dir.path(), key).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  const PruneReport report = cache.prune(0, 0, /*wait=*/true);
  EXPECT_EQ(report.removed_entries, 1u);
  EXPECT_FALSE(fs::exists(entry_path(dir.path(), key)));
  std::vector<uint8_t> bytes(200000);
  const ssize_t n = ::read(fd, bytes.data(), bytes.size());
  ::close(fd);
  ASSERT_GT(n, 0);
  bytes.resize(static_cast<size_t>(n));
  EXPECT_TRUE(decode_entry(bytes, key).ok()) << "unlink never leaves a reader with half an entry";
}

TEST(Prune, ByHandReportsWhatItRemoved) {
  test::TempDir dir;
  const uint64_t one = entry_bytes();
  DiskCache cache(dir.path());
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(cache.publish(make_entry(key_of("p" + std::to_string(i)), kCubin)));
    test::age_file(entry_path(dir.path(), key_of("p" + std::to_string(i))), 600 - i);
  }
  // A temporary left by a process killed an hour ago, and one being written right now.
  const fs::path stray = dir.path() / "kiln" / "tmp" / "entry.kiln.abc123.tmp";
  const fs::path fresh = dir.path() / "kiln" / "tmp" / "entry.kiln.def456.tmp";
  test::write_bytes(stray, {1, 2, 3});
  test::write_bytes(fresh, {4, 5, 6});
  test::age_file(stray, 3600);

  PruneReport r = cache.prune(4 * one, 4 * one, /*wait=*/true);
  EXPECT_FALSE(r.skipped);
  EXPECT_EQ(r.scanned_entries, 6u);
  EXPECT_EQ(r.removed_entries, 2u);
  EXPECT_EQ(r.removed_bytes, 2 * one);
  EXPECT_EQ(r.remaining_entries, 4u);
  EXPECT_EQ(r.remaining_bytes, 4 * one);
  EXPECT_EQ(r.temporaries_removed, 1u);
  EXPECT_EQ(r.removed_keys, (std::vector<std::string>{key_of("p0"), key_of("p1")}));
  EXPECT_FALSE(fs::exists(stray));
  EXPECT_TRUE(fs::exists(fresh)) << "a temporary in use is left alone";
  EXPECT_EQ(cache.stats().entries, 4u);

  r = cache.prune(4 * one, 4 * one, true);
  EXPECT_EQ(r.removed_entries, 0u) << "nothing to do within the bound";
  EXPECT_EQ(cache.prune(0, 0, true).removed_entries, 4u);
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST(Prune, OneCleanerAtATime) {
  test::TempDir dir;
  DiskCache cache(dir.path());
  ASSERT_TRUE(cache.publish(make_entry(key_of("one"), kCubin)));
  std::error_code ec;
  util::FileLock held = util::FileLock::acquire(dir.path() / "kiln" / "locks" / "cleaner.lock", ec);
  ASSERT_TRUE(held.locked());
  EXPECT_TRUE(cache.prune(0, 0, /*wait=*/false).skipped);
  EXPECT_TRUE(fs::exists(entry_path(dir.path(), key_of("one"))));
  held.unlock();
  EXPECT_EQ(cache.prune(0, 0, false).removed_entries, 1u);
}

TEST(Prune, ReadOnlyDirectoryIsAnError) {
  test::TempDir dir;
  DiskCacheOptions layer;
  layer.read_only_layer = true;
  DiskCache cache(dir.path(), layer);
  try {
    cache.prune(0, 0, true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCacheError);
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos) << e.what();
  }
}

// Several processes publish into one bounded directory while others read: the bound holds when they are done,
// nothing read is ever half an entry, and the counters add up.
TEST(Eviction, ConcurrentWritersAndReadersInSeveralProcesses) {
  test::TempDir dir;
  const uint64_t one = entry_bytes();
  const uint64_t bound = 20 * one;
  constexpr int kWriters = 4, kPerWriter = 25, kReaders = 2;
  { DiskCache create(dir.path()); }
  auto key_for = [](int w, int i) { return key_of("w" + std::to_string(w) + "-" + std::to_string(i)); };

  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    children.push_back(test::fork_child([&, w] {
      DiskCache cache = bounded(dir.path(), bound);
      for (int i = 0; i < kPerWriter; ++i)
        if (!cache.publish(make_entry(key_for(w, i), kCubin))) return 1;
      return 0;
    }));
  }
  for (int r = 0; r < kReaders; ++r) {
    children.push_back(test::fork_child([&, r] {
      DiskCache cache(dir.path());
      std::mt19937 rng(static_cast<unsigned>(r));
      for (int n = 0; n < 400; ++n) {
        const int w = int(rng() % kWriters), i = int(rng() % kPerWriter);
        const std::string key = key_for(w, i);
        auto entry = cache.load(key, /*count_stats=*/false);
        if (entry && entry->cubin != make_entry(key, kCubin).cubin) return 2;  // a wrong or partial kernel
      }
      return 0;
    }));
  }
  for (pid_t pid : children) EXPECT_EQ(test::wait_child(pid), 0);

  DiskCache cache(dir.path());
  const Stats stats = cache.stats();
  EXPECT_LE(stats.bytes, bound) << "the bound holds once the writers are done";
  EXPECT_GT(stats.entries, 0u);
  EXPECT_EQ(stats.corrupt, 0u) << "no reader ever met half an entry";
  EXPECT_EQ(stats.counter(Counter::kPublishes), uint64_t(kWriters * kPerWriter));
  EXPECT_EQ(stats.counter(Counter::kPublishes) - stats.counter(Counter::kEvictedEntries), stats.entries);
  EXPECT_EQ(stats.counter(Counter::kEvictedBytes), stats.counter(Counter::kEvictedEntries) * one);
  const VerifyReport verify = cache.verify();
  EXPECT_EQ(verify.checked, stats.entries);
  EXPECT_EQ(verify.corrupt, 0u);
}

}  // namespace
}  // namespace kiln::cache
