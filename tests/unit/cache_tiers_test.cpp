// Cache tiers in one process: read-only layers behind the writable directory (hit order, served in place or
// copied up, a layer that is missing, disappears, cannot be read, or holds a bad entry; a layer is never
// written).
#include "cache/tiered_cache.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "cache_test_support.hpp"
#include "test_support.hpp"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using test::entry_path;
using test::key_of;
using test::make_entry;

// Every file under dir with its size and mtime, to prove a directory was left untouched.
std::map<std::string, std::pair<uintmax_t, int64_t>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<uintmax_t, int64_t>> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st{};
    ::lstat(it->path().c_str(), &st);
    out[it->path().string()] = {S_ISREG(st.st_mode) ? uintmax_t(st.st_size) : 0, int64_t(st.st_mtim.tv_nsec) + st.st_mtime * 1000000000ll};
  }
  return out;
}

// Fills a directory as another machine (or an image build) would have.
void fill(const fs::path& root, const std::vector<Entry>& entries) {
  DiskCache cache(root);
  for (const Entry& e : entries) ASSERT_TRUE(cache.publish(e));
}

TieredCacheOptions layered(const fs::path& writable, std::vector<fs::path> layers, bool copy_up = false) {
  TieredCacheOptions o;
  o.writable_dir = writable;
  o.layers = std::move(layers);
  o.copy_up = copy_up;
  return o;
}

TEST(Layers, LowerLayerHitIsServedInPlaceAndTheLayerIsNeverWritten) {
  test::TempDir dir;
  const std::string key = key_of("in-layer");
  fill(dir.path() / "layer", {make_entry(key)});
  const auto before = snapshot(dir.path() / "layer");

  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "layer"}));
  auto found = tiers.lookup(key);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->kind, TierKind::kLayer);
  EXPECT_EQ(found->tier, "layer 1");
  EXPECT_EQ(found->entry.cubin, make_entry(key).cubin);
  EXPECT_FALSE(fs::exists(entry_path(dir.path() / "local", key))) << "served without copying";

  // Misses, a publish and stats touch only the writable directory.
  EXPECT_FALSE(tiers.lookup(key_of("nowhere")));
  tiers.publish(make_entry(key_of("new")));
  tiers.tier_stats();
  EXPECT_EQ(snapshot(dir.path() / "layer"), before);

  const Stats stats = tiers.local().stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.counter(Counter::kLayerHits), 1u);
  EXPECT_EQ(stats.misses, 0u) << "a lookup counts no miss: the runtime does, where it decides to compile";
}

TEST(Layers, CopyUpStoresTheLayerHitLocally) {
  test::TempDir dir;
  const std::string key = key_of("copy-up");
  fill(dir.path() / "layer", {make_entry(key)});
  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "layer"}, /*copy_up=*/true));
  ASSERT_TRUE(tiers.lookup(key, /*count_stats=*/false));
  EXPECT_FALSE(fs::exists(entry_path(dir.path() / "local", key))) << "a check (plan's \"cached?\") never writes";
  ASSERT_TRUE(tiers.lookup(key));
  EXPECT_TRUE(fs::exists(entry_path(dir.path() / "local", key)));
  auto again = tiers.lookup(key);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, TierKind::kLocal);
}

TEST(Layers, SearchedInOrderAfterTheWritableDirectory) {
  test::TempDir dir;
  const std::string in_all = key_of("everywhere"), in_lower = key_of("lower layers");
  fill(dir.path() / "local", {make_entry(in_all, 512, 0)});
  fill(dir.path() / "l1", {make_entry(in_all, 512, 1), make_entry(in_lower, 512, 1)});
  fill(dir.path() / "l2", {make_entry(in_all, 512, 2), make_entry(in_lower, 512, 2)});
  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "l1", dir.path() / "l2"}));

  auto a = tiers.lookup(in_all);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, TierKind::kLocal);
  EXPECT_EQ(a->entry.cubin, make_entry(in_all, 512, 0).cubin);
  auto b = tiers.lookup(in_lower);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->tier, "layer 1");
  EXPECT_EQ(b->entry.cubin, make_entry(in_lower, 512, 1).cubin);
}

TEST(Layers, BadEntryInALayerIsSkippedAndLeftAlone) {
  test::TempDir dir;
  const std::string key = key_of("bad in l1");
  fill(dir.path() / "l1", {make_entry(key, 512, 1)});
  fill(dir.path() / "l2", {make_entry(key, 512, 2)});
  auto bytes = test::read_bytes(entry_path(dir.path() / "l1", key));
  bytes[bytes.size() - 10] ^= 0xff;
  test::write_bytes(entry_path(dir.path() / "l1", key), bytes);

  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "l1", dir.path() / "l2"}));
  testing::internal::CaptureStderr();
  auto found = tiers.lookup(key);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(found);
  EXPECT_EQ(found->tier, "layer 2");
  EXPECT_EQ(found->entry.cubin, make_entry(key, 512, 2).cubin);
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(entry_path(dir.path() / "l1", key))) << "a read-only layer is never cleaned";
}

// A layer may be assembled with links (a pack unpacked into a content store): a link to an entry is served, as
// what it leads to is checked like any entry. A link to a device, or a FIFO, is a bad entry: skipped at once
// (never a hang, never an unbounded read) and left alone.
TEST(Layers, LinksInALayerAreFollowedAndWhatTheyLeadToChecked) {
  test::TempDir dir;
  const std::string linked = key_of("linked"), to_zero = key_of("to /dev/zero"), fifo = key_of("fifo");
  fill(dir.path() / "store", {make_entry(linked)});
  fill(dir.path() / "l1", {});
  fill(dir.path() / "l2", {make_entry(to_zero, 512, 2), make_entry(fifo, 512, 2)});
  for (const std::string& key : {linked, to_zero, fifo})
    fs::create_directories(entry_path(dir.path() / "l1", key).parent_path());
  fs::create_symlink(entry_path(dir.path() / "store", linked), entry_path(dir.path() / "l1", linked));
  fs::create_symlink("/dev/zero", entry_path(dir.path() / "l1", to_zero));
  ASSERT_EQ(::mkfifo(entry_path(dir.path() / "l1", fifo).c_str(), 0600), 0);

  const pid_t pid = test::fork_child([&] {
    TieredCache tiers(layered(dir.path() / "local", {dir.path() / "l1", dir.path() / "l2"}));
    auto a = tiers.lookup(linked);
    if (!a || a->tier != "layer 1" || a->entry.cubin != make_entry(linked).cubin) return 1;
    for (const std::string& key : {to_zero, fifo}) {
      auto b = tiers.lookup(key);
      if (!b || b->tier != "layer 2") return 2;
    }
    return 0;
  });
  int rc = -1000;
  for (int i = 0; i < 2000 && rc == -1000; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) rc = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    else ::usleep(10000);
  }
  if (rc == -1000) {
    ::kill(pid, SIGKILL);
    test::wait_child(pid);
  }
  EXPECT_EQ(rc, 0) << "-1000: the lookup hung on the FIFO or /dev/zero";
  EXPECT_TRUE(fs::is_fifo(entry_path(dir.path() / "l1", fifo))) << "a layer is never cleaned";
  EXPECT_TRUE(fs::is_symlink(entry_path(dir.path() / "l1", to_zero)));
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The JIT looks a kernel up twice before compiling it (before and after taking its lock); a bad entry that stays
// (a layer is never cleaned) used to be reported at each. Once per process now, and again only when it changes.
TEST(Layers, ABadEntryInALayerIsReportedOncePerProcess) {
  test::TempDir dir;
  const std::string key = key_of("bad once");
  fill(dir.path() / "layer", {make_entry(key)});
  const fs::path path = entry_path(dir.path() / "layer", key);
  auto bytes = test::read_bytes(path);
  bytes[bytes.size() - 10] ^= 0xff;
  test::write_bytes(path, bytes);

  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "layer"}));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(tiers.lookup(key));
  EXPECT_FALSE(tiers.lookup(key, /*count_stats=*/false, /*include_remote=*/false));  // as the JIT's second look
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(tiers.lookup(key));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, path.string()), 1u) << err;
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
  EXPECT_NE(err.find("ignored: a read-only layer is never changed"), std::string::npos) << err;

  // Another bad file in its place (another inode, another reason) is news, and reported.
  fs::remove(path);
  test::write_bytes(path, {'j', 'u', 'n', 'k'});
  testing::internal::CaptureStderr();
  EXPECT_FALSE(tiers.lookup(key));
  EXPECT_FALSE(tiers.lookup(key));
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, path.string()), 1u) << err;
}

TEST(Layers, MissingLayerIsSkippedWithOneWarning) {
  test::TempDir dir;
  const std::string key = key_of("in l2");
  fill(dir.path() / "l2", {make_entry(key)});
  testing::internal::CaptureStderr();
  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "not there", dir.path() / "l2"}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(tiers.lookup(key_of("miss " + std::to_string(i))));
    EXPECT_TRUE(tiers.lookup(key));
  }
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string warning = "the read-only cache layer " + (dir.path() / "not there").string();
  ASSERT_NE(err.find(warning), std::string::npos) << err;
  EXPECT_EQ(err.find(warning), err.rfind(warning)) << "one warning per process:\n" << err;
  EXPECT_FALSE(fs::exists(dir.path() / "not there")) << "a layer is never created";

  const auto stats = tiers.tier_stats();
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_FALSE(stats[1].available);
  EXPECT_NE(stats[1].state.find("unavailable"), std::string::npos);
  EXPECT_TRUE(stats[2].available);
  EXPECT_EQ(stats[2].entries, 1u);
}

TEST(Layers, LayerThatDisappearsIsSkippedAndComesBack) {
  test::TempDir dir;
  const std::string key = key_of("vanishing");
  fill(dir.path() / "layer", {make_entry(key)});
  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "layer"}));
  ASSERT_TRUE(tiers.lookup(key));

  fs::rename(dir.path() / "layer", dir.path() / "moved away");  // an unmounted network directory
  testing::internal::CaptureStderr();
  EXPECT_FALSE(tiers.lookup(key));
  EXPECT_FALSE(tiers.lookup(key));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("disappeared"), std::string::npos) << err;
  EXPECT_FALSE(tiers.tier_stats()[1].available);

  fs::rename(dir.path() / "moved away", dir.path() / "layer");
  auto found = tiers.lookup(key);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->kind, TierKind::kLayer);
  EXPECT_TRUE(tiers.tier_stats()[1].available);
}

TEST(Layers, UnreadableLayerIsSkipped) {
  test::TempDir dir;
  const std::string key = key_of("unreadable");
  fill(dir.path() / "layer", {make_entry(key)});
  // Permissions do not stop root; a file where the entries directory should be does stop everyone.
  fs::remove_all(dir.path() / "layer" / "kiln" / "entries");
  test::write_bytes(dir.path() / "layer" / "kiln" / "entries", {1, 2, 3});
  testing::internal::CaptureStderr();
  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "layer"}));
  EXPECT_FALSE(tiers.lookup(key));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot be used"), std::string::npos) << err;
  EXPECT_FALSE(tiers.tier_stats()[1].available);
}

TEST(Layers, TierStatsAddUp) {
  test::TempDir dir;
  fill(dir.path() / "layer", {make_entry(key_of("a")), make_entry(key_of("b"))});
  TieredCache tiers(layered(dir.path() / "local", {dir.path() / "layer"}));
  tiers.publish(make_entry(key_of("c")));
  ASSERT_TRUE(tiers.lookup(key_of("a")));
  ASSERT_TRUE(tiers.lookup(key_of("c")));
  ASSERT_TRUE(tiers.lookup(key_of("c")));
  EXPECT_FALSE(tiers.lookup(key_of("d")));
  const auto stats = tiers.tier_stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].name, "local");
  EXPECT_EQ(stats[0].hits, 2u);
  EXPECT_EQ(stats[0].entries, 1u);
  EXPECT_EQ(stats[0].publishes, 1u);
  EXPECT_EQ(stats[1].hits, 1u);
  EXPECT_EQ(stats[1].entries, 2u);
  EXPECT_FALSE(stats[1].writable);
  const Stats shared = tiers.local().stats();
  EXPECT_EQ(shared.hits, 3u);
  EXPECT_EQ(shared.misses, 0u);
}

}  // namespace
}  // namespace kiln::cache
