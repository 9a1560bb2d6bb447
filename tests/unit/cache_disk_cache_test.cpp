// DiskCache in one process: layout, round trips, recovery from damaged entries, read-only operation, stats,
// clear/verify/list, dumps, last-use times and stray temporaries.
#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <thread>

#include "cache/entry_format.hpp"
#include "cache_test_support.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"
#include "util/fs.hpp"

namespace fs = std::filesystem;
using kiln::cache::Counter;
using kiln::cache::DiskCache;
using namespace kiln::test;

namespace {

mode_t mode_of(const fs::path& path) {
  struct stat st{};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

size_t count_occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool running_as_root() { return ::geteuid() == 0; }

// Exercises every operation of a read-only cache: none may fail or write.
void expect_works_read_only(DiskCache& cache) {
  const std::string key = key_of("read-only");
  EXPECT_FALSE(cache.writable());
  EXPECT_FALSE(cache.load(key));
  EXPECT_FALSE(cache.publish(make_entry(key)));
  EXPECT_FALSE(cache.load(key));
  {
    auto a = cache.lock(key);
    auto b = cache.lock(key);  // a no-op lock: a second one does not wait
  }
  EXPECT_FALSE(cache.write_artifact(key, ".ptx", "// ptx"));
  EXPECT_TRUE(cache.toolchain_dir().empty());
  cache.count(Counter::kCompiles);
  const auto stats = cache.stats();
  EXPECT_FALSE(stats.writable);
  EXPECT_EQ(stats.misses, 2u) << "counted in memory when the file cannot be written";
  EXPECT_EQ(stats.compiles, 1u);
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_TRUE(cache.list().empty());
  const auto report = cache.verify();
  EXPECT_EQ(report.checked, 0u);
  try {
    cache.clear();
    ADD_FAILURE() << "clear of a read-only cache must fail";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), kiln::ErrorKind::kCacheError);
  }
}

}  // namespace

TEST(DiskCache, CreatesAPrivateLayout) {
  TempDir dir;
  const fs::path root = dir.path() / "home" / ".deep_gemm";
  DiskCache cache(root);
  EXPECT_TRUE(cache.writable());
  EXPECT_EQ(cache.root(), root);
  EXPECT_EQ(mode_of(root), 0700u);
  EXPECT_EQ(mode_of(dir.path() / "home"), 0700u);
  for (const char* sub : {"kiln", "kiln/entries", "kiln/locks", "kiln/tmp", "kiln/toolchain"}) {
    EXPECT_TRUE(fs::is_directory(root / sub)) << sub;
    EXPECT_EQ(mode_of(root / sub), 0700u) << sub;
  }
  EXPECT_EQ(cache.toolchain_dir(), root / "kiln" / "toolchain");
  EXPECT_TRUE(fs::is_empty(root / "kiln" / "tmp")) << "the writability probe is removed";
}

TEST(DiskCache, LeavesOtherContentOfTheRootAlone) {
  TempDir dir;
  fs::create_directories(dir.path() / "cache");  // DeepGEMM's own cache lives beside ours
  write_bytes(dir.path() / "kernel.so", {1, 2, 3});
  {
    DiskCache cache(dir.path());
    cache.publish(make_entry(key_of("x")));
    cache.clear();
  }
  EXPECT_TRUE(fs::is_directory(dir.path() / "cache"));
  EXPECT_EQ(read_bytes(dir.path() / "kernel.so"), (std::vector<uint8_t>{1, 2, 3}));
}

TEST(DiskCache, RelativeRootIsMadeAbsolute) {
  TempDir dir;
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir.path());
  DiskCache cache("rel/cache");
  fs::current_path(old_cwd);
  EXPECT_TRUE(cache.root().is_absolute());
  EXPECT_EQ(cache.root(), dir.path() / "rel" / "cache");
}

TEST(DiskCache, RoundTripsAnEntry) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("round-trip");
  EXPECT_FALSE(cache.load(key));
  const auto entry = make_entry(key, 100000);
  ASSERT_TRUE(cache.publish(entry));
  const fs::path path = entry_path(dir.path(), key);
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_EQ(mode_of(path.parent_path()), 0700u);

  auto loaded = cache.load(key);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->cubin, entry.cubin);
  EXPECT_EQ(loaded->meta.key, key);
  EXPECT_EQ(loaded->meta.op, entry.meta.op);
  EXPECT_EQ(loaded->meta.compile_ms, entry.meta.compile_ms);
  EXPECT_TRUE(cache.load(key, /*count_stats=*/false));

  const auto stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.corrupt, 0u);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, fs::file_size(path));
  EXPECT_TRUE(fs::is_empty(dir.path() / "kiln" / "tmp"));
}

TEST(DiskCache, ACorruptPayloadByteIsCountedRemovedAndAMiss) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("corrupt");
  ASSERT_TRUE(cache.publish(make_entry(key)));
  const fs::path path = entry_path(dir.path(), key);
  auto bytes = read_bytes(path);
  bytes[bytes.size() - 100] ^= 0x40;
  write_bytes(path, bytes);

  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(key));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(path)) << "a corrupt entry is removed";
  auto stats = cache.stats();
  EXPECT_EQ(stats.corrupt, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 0u);

  // Rebuilt like any miss.
  ASSERT_TRUE(cache.publish(make_entry(key)));
  EXPECT_TRUE(cache.load(key));
}

TEST(DiskCache, ATruncatedEntryIsCountedRemovedAndAMiss) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("truncated");
  ASSERT_TRUE(cache.publish(make_entry(key)));
  const fs::path path = entry_path(dir.path(), key);
  fs::resize_file(path, fs::file_size(path) / 2);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(key));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("truncated"), std::string::npos);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(cache.stats().corrupt, 1u);

  // Empty files and garbage are no different.
  write_bytes(path, {});
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(key));
  write_bytes(path, {'h', 'e', 'l', 'l', 'o'});
  EXPECT_FALSE(cache.load(key));
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(cache.stats().corrupt, 3u);
  EXPECT_FALSE(fs::exists(path));
}

TEST(DiskCache, AnEntryWithAnotherKeyInsideIsRejected) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string a = key_of("a"), b = key_of("b-different");
  ASSERT_TRUE(cache.publish(make_entry(a)));
  fs::create_directories(entry_path(dir.path(), b).parent_path());
  fs::copy_file(entry_path(dir.path(), a), entry_path(dir.path(), b));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(b)) << "a valid entry for another key must never be served";
  EXPECT_NE(testing::internal::GetCapturedStderr().find("key mismatch"), std::string::npos);
  EXPECT_FALSE(fs::exists(entry_path(dir.path(), b)));
  EXPECT_EQ(cache.stats().corrupt, 1u);
  EXPECT_TRUE(cache.load(a));
}

TEST(DiskCache, SomethingOtherThanAFileInPlaceOfAnEntryIsNotACrash) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("dir-in-place");
  fs::create_directories(entry_path(dir.path(), key));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(key));
  testing::internal::GetCapturedStderr();
}

TEST(DiskCache, ARootThatIsARegularFileIsAConfigError) {
  TempDir dir;
  const fs::path file = dir.path() / "not-a-dir";
  write_bytes(file, {'x'});
  try {
    DiskCache cache(file);
    FAIL() << "expected Error(kConfigError)";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), kiln::ErrorKind::kConfigError);
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
  // The same when the file sits where kiln's own directory goes.
  fs::create_directories(dir.path() / "root");
  write_bytes(dir.path() / "root" / "kiln", {'x'});
  EXPECT_THROW(DiskCache(dir.path() / "root"), kiln::Error);
}

TEST(DiskCache, AnEmptyRootIsAConfigError) {
  try {
    DiskCache cache{fs::path()};
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), kiln::ErrorKind::kConfigError);
    EXPECT_NE(std::string(e.what()).find("DG_JIT_CACHE_DIR"), std::string::npos);
  }
}

// Works whoever runs the tests: no permission bits stop a path below a regular file from being created.
TEST(DiskCache, ARootThatCannotBeCreatedWorksReadOnlyWithOneWarning) {
  TempDir dir;
  write_bytes(dir.path() / "file", {'x'});
  const fs::path root = dir.path() / "file" / "cache";
  testing::internal::CaptureStderr();
  {
    DiskCache cache(root);
    expect_works_read_only(cache);
    DiskCache again(root);  // a second cache object on the same directory: no second warning
    EXPECT_FALSE(again.writable());
    again.load(key_of("z"));
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_occurrences(err, "warning"), 1u) << err;
  EXPECT_NE(err.find(root.string()), std::string::npos) << err;
  EXPECT_NE(err.find("Not a directory"), std::string::npos) << err;  // strerror
}

// An existing directory that cannot be written, even by root: /proc/self/fdinfo.
TEST(DiskCache, AnExistingUnwritableRootWorksReadOnlyEvenForRoot) {
  if (!fs::is_directory("/proc/self/fdinfo")) GTEST_SKIP() << "no /proc";
  testing::internal::CaptureStderr();
  {
    DiskCache cache("/proc/self/fdinfo");
    expect_works_read_only(cache);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_occurrences(err, "warning"), 1u) << err;
  EXPECT_NE(err.find("/proc/self/fdinfo"), std::string::npos) << err;
}

TEST(DiskCache, AModeBitsReadOnlyRootWorksReadOnlyWithOneWarning) {
  // Permission bits do not stop root (CI runs as root); the two tests above cover the read-only path there.
  if (running_as_root()) GTEST_SKIP() << "running as root: chmod 0500 does not make a directory unwritable";
  TempDir dir;
  const fs::path root = dir.path() / "ro";
  fs::create_directories(root);
  ::chmod(root.c_str(), 0500);
  testing::internal::CaptureStderr();
  {
    DiskCache cache(root);
    expect_works_read_only(cache);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_occurrences(err, "warning"), 1u) << err;
  EXPECT_NE(err.find("Permission denied"), std::string::npos) << err;
}

TEST(DiskCache, AReadOnlyCacheStillServesItsEntriesAndIgnoresBadOnes) {
  if (running_as_root()) GTEST_SKIP() << "running as root: chmod does not make a directory unwritable";
  TempDir dir;
  const std::string good = key_of("good"), bad = key_of("bad");
  {
    DiskCache cache(dir.path());
    ASSERT_TRUE(cache.publish(make_entry(good)));
    ASSERT_TRUE(cache.publish(make_entry(bad)));
  }
  auto bytes = read_bytes(entry_path(dir.path(), bad));
  bytes.back() ^= 1;
  write_bytes(entry_path(dir.path(), bad), bytes);
  ::chmod((dir.path() / "kiln" / "tmp").c_str(), 0500);
  ::chmod(entry_path(dir.path(), bad).parent_path().c_str(), 0500);
  testing::internal::CaptureStderr();
  DiskCache cache(dir.path());
  EXPECT_FALSE(cache.writable());
  EXPECT_TRUE(cache.load(good));
  EXPECT_FALSE(cache.load(bad));
  testing::internal::GetCapturedStderr();
  EXPECT_TRUE(fs::exists(entry_path(dir.path(), bad))) << "a read-only cache removes nothing";
  EXPECT_EQ(cache.stats().corrupt, 1u);
  EXPECT_FALSE(cache.publish(make_entry(bad)));
}

TEST(DiskCache, CountersAreSharedByCacheObjectsAndProcesses) {
  TempDir dir;
  DiskCache a(dir.path());
  DiskCache b(dir.path());
  a.count(Counter::kHits, 2);
  b.count(Counter::kHits, 3);
  b.count(Counter::kCompileMicros, 1500000);
  pid_t pid = fork_child([&] {
    DiskCache c(dir.path());
    c.count(Counter::kMisses, 7);
    a.count(Counter::kCompiles);  // an object inherited across fork works too
    return 0;
  });
  ASSERT_EQ(wait_child(pid), 0);
  const auto stats = DiskCache(dir.path()).stats();
  EXPECT_EQ(stats.hits, 5u);
  EXPECT_EQ(stats.misses, 7u);
  EXPECT_EQ(stats.compiles, 1u);
  EXPECT_DOUBLE_EQ(stats.compile_seconds, 1.5);
}

TEST(DiskCache, ACorruptStatsFileReadsAsZeroAndIsRepaired) {
  TempDir dir;
  {
    DiskCache cache(dir.path());
    cache.count(Counter::kHits, 4);
  }
  write_bytes(dir.path() / "kiln" / "stats", {'g', 'a', 'r', 'b', 'a', 'g', 'e'});
  DiskCache cache(dir.path());
  EXPECT_EQ(cache.stats().hits, 0u);
  cache.count(Counter::kHits);
  EXPECT_EQ(cache.stats().hits, 1u);
}

// The counters' file in kiln's own directory: a FIFO or a link there is replaced (never waited on, never written
// through); in a read-only layer, where nothing is replaced, a FIFO is not read and the layer still opens.
TEST(DiskCache, AFifoOrALinkAtTheStatsPathNeitherHangsNorIsWrittenThrough) {
  TempDir dir;
  const fs::path stats = dir.path() / "kiln" / "stats";
  { DiskCache make(dir.path()); }
  fs::remove(stats);
  ASSERT_EQ(::mkfifo(stats.c_str(), 0600), 0);
  pid_t pid = fork_child([&] {
    ::alarm(20);  // a hang fails the test instead of stopping it
    DiskCache cache(dir.path());
    cache.count(Counter::kHits, 2);
    return cache.stats().hits == 2 ? 0 : 1;
  });
  ASSERT_EQ(wait_child(pid), 0);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(stats)));

  const fs::path victim = dir.path() / "victim";
  write_bytes(victim, {'k', 'e', 'e', 'p'});
  fs::remove(stats);
  fs::create_symlink(victim, stats);
  {
    DiskCache cache(dir.path());
    cache.count(Counter::kHits);
    EXPECT_EQ(cache.stats().hits, 1u);
  }
  EXPECT_EQ(fs::file_size(victim), 4u) << "the link's target is untouched";

  fs::remove(stats);
  ASSERT_EQ(::mkfifo(stats.c_str(), 0600), 0);
  pid = fork_child([&] {
    ::alarm(20);
    DiskCache layer(dir.path(), kiln::cache::DiskCacheOptions{.read_only_layer = true});
    return layer.stats().hits == 0 ? 0 : 1;
  });
  ASSERT_EQ(wait_child(pid), 0);
}

TEST(DiskCache, ClearRemovesEntriesDumpsStrayTemporariesAndResetsCounters) {
  TempDir dir;
  DiskCache cache(dir.path());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache.publish(make_entry(key_of("e" + std::to_string(i)))));
  ASSERT_TRUE(cache.write_artifact(key_of("e0"), ".ptx", "// ptx"));
  cache.lock(key_of("e0"));  // leaves a lock file
  const fs::path stray = dir.path() / "kiln" / "tmp" / (key_of("e9") + ".kiln.AbCd12.tmp");
  write_bytes(stray, {1});
  age_file(stray, 3600);
  const fs::path unrelated = dir.path() / "kiln" / "tmp" / "README";
  write_bytes(unrelated, {1});
  cache.count(Counter::kHits, 10);
  cache.count(Counter::kCompiles, 3);

  EXPECT_EQ(cache.clear(), 3u);
  const auto stats = cache.stats();
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_EQ(stats.bytes, 0u);
  EXPECT_EQ(stats.hits, 0u);
  EXPECT_EQ(stats.compiles, 0u);
  EXPECT_FALSE(fs::exists(stray));
  EXPECT_TRUE(fs::exists(unrelated)) << "files that are not kiln temporaries are left alone";
  EXPECT_TRUE(fs::is_empty(dir.path() / "kiln" / "entries"));
  EXPECT_TRUE(fs::is_empty(dir.path() / "kiln" / "locks"));
  EXPECT_FALSE(cache.load(key_of("e1")));
  // And the cache keeps working afterwards.
  ASSERT_TRUE(cache.publish(make_entry(key_of("e1"))));
  EXPECT_TRUE(cache.load(key_of("e1")));
}

TEST(DiskCache, VerifyChecksEveryEntryAndRemovesTheBadOnes) {
  TempDir dir;
  DiskCache cache(dir.path());
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(key_of("v" + std::to_string(i)));
    ASSERT_TRUE(cache.publish(make_entry(keys.back())));
  }
  auto flipped = read_bytes(entry_path(dir.path(), keys[1]));
  flipped[flipped.size() / 2] ^= 0xff;
  write_bytes(entry_path(dir.path(), keys[1]), flipped);
  fs::resize_file(entry_path(dir.path(), keys[2]), 10);
  const fs::path misnamed = entry_path(dir.path(), keys[0]).parent_path() / "not-a-key.kiln";
  fs::copy_file(entry_path(dir.path(), keys[0]), misnamed);

  const auto report = cache.verify();
  EXPECT_EQ(report.checked, 6u);
  EXPECT_EQ(report.corrupt, 3u);
  EXPECT_EQ(report.removed, 3u);
  ASSERT_EQ(report.problems.size(), 3u);
  std::string all;
  for (const auto& p : report.problems) all += p + "\n";
  EXPECT_NE(all.find(entry_path(dir.path(), keys[1]).string() + ": checksum mismatch"), std::string::npos) << all;
  EXPECT_NE(all.find(entry_path(dir.path(), keys[2]).string() + ": truncated"), std::string::npos) << all;
  EXPECT_NE(all.find("not-a-key.kiln: the file name is not a cache key"), std::string::npos) << all;
  EXPECT_EQ(cache.stats().corrupt, 3u);
  EXPECT_EQ(cache.stats().entries, 3u);

  const auto again = cache.verify();
  EXPECT_EQ(again.checked, 3u);
  EXPECT_EQ(again.corrupt, 0u);
  EXPECT_EQ(again.removed, 0u);
}

TEST(DiskCache, ListShowsMetadataSizeAndLastUse) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string a = key_of("list-a"), b = key_of("list-b"), bad = key_of("list-bad");
  ASSERT_TRUE(cache.publish(make_entry(a, 1000, 1)));
  ASSERT_TRUE(cache.publish(make_entry(b, 2000, 2)));
  ASSERT_TRUE(cache.publish(make_entry(bad)));
  fs::resize_file(entry_path(dir.path(), bad), 100);
  age_file(entry_path(dir.path(), a), 7200);

  uint64_t unreadable = 99;
  const auto listed = cache.list(&unreadable);
  ASSERT_EQ(listed.size(), 2u) << "a bad entry is not listed";
  EXPECT_EQ(unreadable, 1u) << "but it is counted";
  EXPECT_EQ(listed[0].meta.key, b) << "most recently used first";
  EXPECT_EQ(listed[1].meta.key, a);
  EXPECT_EQ(listed[1].meta.spec, "variant=1");
  EXPECT_EQ(listed[1].meta.compile_ms, 11.0);
  EXPECT_EQ(listed[1].file_bytes, fs::file_size(entry_path(dir.path(), a)));
  EXPECT_EQ(listed[1].last_use_unix, mtime_of(entry_path(dir.path(), a)));
  EXPECT_TRUE(fs::exists(entry_path(dir.path(), bad))) << "list changes nothing";
}

TEST(DiskCache, LoadRefreshesTheLastUseAtMostOnceAMinute) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("touch");
  ASSERT_TRUE(cache.publish(make_entry(key)));
  const fs::path path = entry_path(dir.path(), key);
  const auto bytes_before = read_bytes(path);

  age_file(path, 3600);
  const int64_t old_time = mtime_of(path);
  ASSERT_TRUE(cache.load(key));
  EXPECT_GE(mtime_of(path), old_time + 3500) << "an hour-old last use is refreshed";

  age_file(path, 30);
  const int64_t recent = mtime_of(path);
  ASSERT_TRUE(cache.load(key));
  EXPECT_EQ(mtime_of(path), recent) << "a use within the last minute is not rewritten";
  EXPECT_EQ(read_bytes(path), bytes_before) << "the entry itself is never rewritten";
}

TEST(DiskCache, WritesDumpsBesideTheEntry) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("dump");
  ASSERT_TRUE(cache.publish(make_entry(key)));
  auto ptx = cache.write_artifact(key, ".ptx", "// ptx text");
  ASSERT_TRUE(ptx);
  EXPECT_EQ(*ptx, entry_path(dir.path(), key).parent_path() / (key + ".ptx"));
  EXPECT_EQ(read_bytes(*ptx), (std::vector<uint8_t>{'/', '/', ' ', 'p', 't', 'x', ' ', 't', 'e', 'x', 't'}));
  auto sass = cache.write_artifact(key, ".sass", "NEW");
  ASSERT_TRUE(sass);
  ASSERT_TRUE(cache.write_artifact(key, ".sass", "NEWER"));  // replaced
  EXPECT_EQ(read_bytes(*sass).size(), 5u);
  const auto stats = cache.stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, fs::file_size(entry_path(dir.path(), key)) + 11 + 5);

  // A dump without its entry yet (written before publishing) works too.
  EXPECT_TRUE(cache.write_artifact(key_of("no-entry-yet"), ".ptx", "x"));

  for (const char* bad : {"ptx", ".kiln", ".lock", ".tmp", ".", ".p/x", ".PTX"}) {
    try {
      cache.write_artifact(key, bad, "x");
      ADD_FAILURE() << "extension " << bad << " accepted";
    } catch (const kiln::Error& e) {
      EXPECT_EQ(e.kind(), kiln::ErrorKind::kValueError);
      EXPECT_NE(std::string(e.what()).find("extension"), std::string::npos);
    }
  }
}

TEST(DiskCache, StrayTemporariesAreNeverEntriesAndOldOnesAreCleanedOnOpen) {
  TempDir dir;
  const std::string key = key_of("killed-publish");
  { DiskCache init(dir.path()); }
  const fs::path tmp = dir.path() / "kiln" / "tmp";
  // What a publish killed after writing half its temporary leaves behind.
  auto half = kiln::cache::encode_entry(make_entry(key));
  half.resize(half.size() / 2);
  const fs::path old_stray = tmp / (key + ".kiln.Xy12Ab.tmp");
  const fs::path fresh_stray = tmp / (key + ".kiln.Zz99Qq.tmp");
  write_bytes(old_stray, half);
  write_bytes(fresh_stray, half);
  age_file(old_stray, 3600);
  // Also one left in the fan-out directory (the EXDEV fallback puts temporaries there).
  fs::create_directories(entry_path(dir.path(), key).parent_path());
  const fs::path fanout_stray = entry_path(dir.path(), key).parent_path() / (key + ".kiln.Qw34Er.tmp");
  write_bytes(fanout_stray, half);
  age_file(fanout_stray, 3600);

  DiskCache cache(dir.path());
  EXPECT_FALSE(fs::exists(old_stray)) << "an old temporary is cleaned when the cache is opened";
  EXPECT_TRUE(fs::exists(fresh_stray)) << "a fresh one may belong to a publish in flight";
  EXPECT_FALSE(cache.load(key));
  EXPECT_TRUE(cache.list().empty());
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().corrupt, 0u) << "a temporary is not a corrupt entry";
  EXPECT_EQ(cache.verify().checked, 0u);
  EXPECT_FALSE(fs::exists(fanout_stray)) << "verify cleans old temporaries beside entries";
  ASSERT_TRUE(cache.publish(make_entry(key)));
  EXPECT_TRUE(cache.load(key));
}

TEST(DiskCache, PublishKeepsAValidWinnerAndReplacesABadOne) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("winner");
  ASSERT_TRUE(cache.publish(make_entry(key, 4096, 1)));
  EXPECT_TRUE(cache.publish(make_entry(key, 4096, 2))) << "losing a race is success";
  EXPECT_EQ(cache.load(key)->meta.compile_ms, 11.0) << "the first valid entry stays";

  fs::resize_file(entry_path(dir.path(), key), 30);  // the existing one is broken: replace it
  EXPECT_TRUE(cache.publish(make_entry(key, 4096, 3)));
  EXPECT_EQ(cache.load(key)->meta.compile_ms, 13.0);
  EXPECT_TRUE(fs::is_empty(dir.path() / "kiln" / "tmp")) << "the loser's temporary is removed";
}

// store() tells a caller that counts (`cache import`) whether its bytes went in or another writer's stayed.
TEST(DiskCache, StoreSaysWhetherTheBytesWereStoredOrAnEntryWasAlreadyThere) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("store-outcome");
  EXPECT_EQ(cache.store(make_entry(key, 4096, 1)), DiskCache::StoreOutcome::kStored);
  EXPECT_EQ(cache.store(make_entry(key, 4096, 2)), DiskCache::StoreOutcome::kAlreadyPresent);
  EXPECT_EQ(cache.load(key)->meta.compile_ms, 11.0) << "the first valid entry stays";
  EXPECT_EQ(cache.stats().counter(Counter::kPublishes), 1u) << "a kept winner is not a publish";

  fs::resize_file(entry_path(dir.path(), key), 30);  // a broken entry is replaced: that is a store
  EXPECT_EQ(cache.store(make_entry(key, 4096, 3)), DiskCache::StoreOutcome::kStored);
  EXPECT_EQ(cache.load(key)->meta.compile_ms, 13.0);
  EXPECT_EQ(cache.stats().counter(Counter::kPublishes), 2u);

  DiskCache layer(dir.path(), kiln::cache::DiskCacheOptions{.read_only_layer = true});
  EXPECT_EQ(layer.store(make_entry(key_of("other"))), DiskCache::StoreOutcome::kFailed);
}

TEST(DiskCache, PublishRecreatesDirectoriesRemovedUnderIt) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("recreate");
  fs::remove_all(dir.path() / "kiln" / "entries");
  fs::remove_all(dir.path() / "kiln" / "tmp");
  fs::remove_all(dir.path() / "kiln" / "locks");
  { auto lock = cache.lock(key); }
  ASSERT_TRUE(cache.publish(make_entry(key)));
  EXPECT_TRUE(cache.load(key));
}

TEST(DiskCache, MalformedKeysAreRejectedBeforeTouchingTheDisk) {
  TempDir dir;
  DiskCache cache(dir.path());
  for (const std::string bad : {"", "../../../../../../../../etc/passwd", "0123456789ABCDEF0123456789abcdef"}) {
    EXPECT_THROW(cache.load(bad), kiln::Error) << bad;
    EXPECT_THROW(cache.lock(bad), kiln::Error) << bad;
    auto entry = make_entry(key_of("x"));
    entry.meta.key = bad;
    try {
      cache.publish(entry);
      ADD_FAILURE();
    } catch (const kiln::Error& e) {
      EXPECT_EQ(e.kind(), kiln::ErrorKind::kValueError);
      EXPECT_NE(std::string(e.what()).find("key"), std::string::npos);
    }
  }
}

TEST(DiskCache, KeyLockExcludesOtherThreadsUntilReleased) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("lock");
  auto held = std::make_unique<DiskCache::KeyLock>(cache.lock(key));
  EXPECT_TRUE(fs::exists(dir.path() / "kiln" / "locks" / (key + ".lock")));
  auto other = std::async(std::launch::async, [&] { auto l = cache.lock(key); });
  EXPECT_EQ(other.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  DiskCache::KeyLock moved = std::move(*held);
  held.reset();  // the moved-from lock releases nothing
  EXPECT_EQ(other.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  moved = DiskCache::KeyLock();  // assignment releases the lock it held
  EXPECT_EQ(other.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  // Different keys do not exclude each other.
  auto a = cache.lock(key_of("k1"));
  auto b = cache.lock(key_of("k2"));
}

// ---- What else may be found where an entry belongs ---------------------------------------------------------
// A FIFO, a socket, a link (to a device, or to a good entry elsewhere), a directory, a file too large to be an
// entry, or a file named like a fan-out directory: each is a bad entry, reported by its path, removed where that
// is safe, and never a hang or an unbounded read.

namespace {

// Runs fn in a child and waits at most `seconds` for it: a FIFO opened without O_NONBLOCK waits forever for a
// writer, and a read of /dev/zero never ends. Returns the child's exit code, or -1000 when it had to be killed.
int run_within(int seconds, const std::function<int()>& fn) {
  const pid_t pid = fork_child(fn);
  for (int i = 0; i < seconds * 100; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    ::usleep(10000);
  }
  ::kill(pid, SIGKILL);
  wait_child(pid);
  return -1000;
}

bool exists_no_follow(const fs::path& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

// Puts something that is not an entry file at `path`: "fifo", "socket", "link to /dev/zero", "link to an entry"
// (a good entry of the same key, elsewhere), "empty directory", "directory with a file", "huge file".
void plant(const fs::path& path, const std::string& what, const std::string& key) {
  fs::create_directories(path.parent_path());
  if (what == "fifo") {
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  } else if (what == "socket") {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    ASSERT_LT(path.string().size(), sizeof addr.sun_path);
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(fd);
  } else if (what == "link to /dev/zero") {
    fs::create_symlink("/dev/zero", path);
  } else if (what == "link to an entry") {
    const fs::path elsewhere = path.parent_path().parent_path().parent_path().parent_path() / "elsewhere";
    { DiskCache other(elsewhere); ASSERT_TRUE(other.publish(make_entry(key))); }
    fs::create_symlink(entry_path(elsewhere, key), path);
  } else if (what == "empty directory") {
    fs::create_directories(path);
  } else if (what == "directory with a file") {
    fs::create_directories(path);
    write_bytes(path / "notes.txt", {'x'});
  } else if (what == "huge file") {
    write_bytes(path, {});
    fs::resize_file(path, kiln::cache::kMaxEntryBytes + 1);  // sparse: costs no disk
  } else {
    FAIL() << what;
  }
}

const char* const kRemovable[] = {"fifo", "socket", "link to /dev/zero", "link to an entry", "empty directory",
                                  "huge file"};

}  // namespace

TEST(DiskCacheForeignFiles, EachIsABadEntryRemovedByTheLookupAndRebuilt) {
  const std::map<std::string, std::string> described = {
      {"fifo", "a FIFO (named pipe), not an entry file"},
      {"socket", "a socket, not an entry file"},
      {"link to /dev/zero", "a symbolic link, not an entry file (kiln never makes links in its own directory)"},
      {"link to an entry", "a symbolic link, not an entry file"},
      {"empty directory", "a directory, not an entry file"},
      {"huge file", "it is " + std::to_string(kiln::cache::kMaxEntryBytes + 1) +
                        " bytes, more than any entry can be (at most " +
                        std::to_string(kiln::cache::kMaxEntryBytes) + ")"}};
  for (const char* what : kRemovable) {
    SCOPED_TRACE(what);
    TempDir dir;
    const std::string key = key_of(std::string("foreign ") + what);
    { DiskCache init(dir.path()); }
    const fs::path path = entry_path(dir.path(), key);
    plant(path, what, key);
    testing::internal::CaptureStderr();
    const int rc = run_within(20, [&] {
      DiskCache cache(dir.path());
      return cache.load(key) ? 1 : 0;
    });
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_EQ(rc, 0) << "the lookup must return a miss at once (-1000: it hung; 99: it threw)\n" << err;
    EXPECT_NE(err.find("cache entry " + path.string() + " is unusable (" + described.at(what)), std::string::npos)
        << err;
    EXPECT_NE(err.find("removed, it will be rebuilt"), std::string::npos) << err;
    EXPECT_FALSE(exists_no_follow(path)) << "removed (only the link, never what it leads to)";
    DiskCache cache(dir.path());
    EXPECT_EQ(cache.stats().corrupt, 1u);
    ASSERT_TRUE(cache.publish(make_entry(key)));
    EXPECT_TRUE(cache.load(key)) << "stored and served once the thing in the way is gone";
  }
  EXPECT_TRUE(fs::exists("/dev/zero"));
}

TEST(DiskCacheForeignFiles, VerifyAndListNameEachAndClearRemovesThem) {
  TempDir dir;
  DiskCache cache(dir.path());
  std::vector<fs::path> planted;
  for (const char* what : kRemovable) {
    const std::string key = key_of(std::string("verify ") + what);
    planted.push_back(entry_path(dir.path(), key));
    plant(planted.back(), what, key);
  }
  ASSERT_TRUE(cache.publish(make_entry(key_of("good"))));

  uint64_t unreadable = 0;
  std::vector<std::string> problems;
  EXPECT_EQ(cache.list(&unreadable, &problems).size(), 1u);
  EXPECT_EQ(unreadable, planted.size());
  ASSERT_EQ(problems.size(), planted.size());
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  for (const fs::path& path : planted) EXPECT_NE(all.find(path.string() + ": "), std::string::npos) << all;
  for (const fs::path& path : planted) EXPECT_TRUE(exists_no_follow(path)) << "list changes nothing";

  const auto report = cache.verify();
  EXPECT_EQ(report.checked, planted.size() + 1);
  EXPECT_EQ(report.corrupt, planted.size());
  EXPECT_EQ(report.removed, planted.size());
  all.clear();
  for (const auto& p : report.problems) all += p + "\n";
  EXPECT_NE(all.find(planted[0].string() + ": a FIFO (named pipe), not an entry file\n"), std::string::npos) << all;
  EXPECT_NE(all.find(planted[4].string() + ": a directory, not an entry file\n"), std::string::npos) << all;
  for (const fs::path& path : planted) EXPECT_FALSE(exists_no_follow(path)) << path;
  EXPECT_EQ(cache.verify().corrupt, 0u);

  // clear removes them as well (it used to skip anything not a regular file, and said it had cleared the cache).
  for (size_t i = 0; i < planted.size(); ++i)
    plant(planted[i], kRemovable[i], key_of(std::string("verify ") + kRemovable[i]));
  testing::internal::CaptureStderr();
  EXPECT_EQ(cache.clear(), 2u) << "entries removed: the good one and the huge file (counted by their names)";
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  for (const fs::path& path : planted) EXPECT_FALSE(exists_no_follow(path)) << path;
  EXPECT_TRUE(fs::is_empty(dir.path() / "kiln" / "entries"));
}

TEST(DiskCacheForeignFiles, ADirectoryWithFilesInItIsReportedByPathButNeverDeleted) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("user data in the way");
  const fs::path path = entry_path(dir.path(), key);
  plant(path, "directory with a file", key);

  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(key));
  EXPECT_FALSE(cache.publish(make_entry(key))) << "nothing can be stored there";
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cache entry " + path.string() + " is unusable (a directory, not an entry file); ignored: it is "
                     "a directory with files in it, which kiln does not delete: remove it by hand (rm -r " +
                     path.string() + ")"),
            std::string::npos)
      << err;
  // The publish's warning names the entry's path, not the whole cache.
  EXPECT_NE(err.find("cannot store " + path.string() + " (Is a directory: it is a directory with files in it"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("cannot write into the kiln cache"), std::string::npos) << err;

  const auto report = cache.verify();
  EXPECT_EQ(report.corrupt, 1u);
  EXPECT_EQ(report.removed, 0u);
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0], path.string() + ": a directory, not an entry file; left in place: it is a directory "
                                "with files in it, which kiln does not delete: remove it by hand (rm -r " +
                                    path.string() + ")");
  testing::internal::CaptureStderr();
  cache.clear();
  const std::string cleared = testing::internal::GetCapturedStderr();
  EXPECT_NE(cleared.find(path.string() + " (a directory) was left in the cache"), std::string::npos) << cleared;
  EXPECT_TRUE(fs::exists(path / "notes.txt")) << "kiln deletes no tree it did not make";
}

TEST(DiskCacheForeignFiles, AFileNamedLikeAFanOutDirectoryIsRemovedByTheLookup) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string key = key_of("fan-out taken");
  const fs::path fanout = entry_path(dir.path(), key).parent_path();
  write_bytes(fanout, {'x'});
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(key));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cache entry " + fanout.string() + " is unusable (a file where kiln keeps the directory of the "
                     "entries whose keys start with " + key.substr(0, 2) + "); removed"),
            std::string::npos)
      << err;
  ASSERT_TRUE(cache.publish(make_entry(key)));
  EXPECT_TRUE(cache.load(key));

  // verify, list and clear see one too.
  const std::string other = key_of("fan-out taken again");
  const fs::path other_fanout = entry_path(dir.path(), other).parent_path();
  ASSERT_NE(other_fanout, fanout);
  write_bytes(other_fanout, {'x'});
  uint64_t unreadable = 0;
  cache.list(&unreadable);
  EXPECT_EQ(unreadable, 1u);
  const auto report = cache.verify();
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].rfind(other_fanout.string() + ": a file where kiln keeps", 0), 0u) << report.problems[0];
  EXPECT_EQ(report.removed, 1u);
  write_bytes(other_fanout, {'x'});
  cache.clear();
  EXPECT_FALSE(fs::exists(other_fanout));
}
