// Who may write a cache kiln loads kernels from: the writable directory must be owned by the user (or root)
// and writable by no one else (the root may be a sticky shared directory such as /tmp); a read-only layer may
// belong to another user but must be writable by no one but its owner. The rule itself is a pure function of a
// stat result (tested for every case, whoever runs the tests); the directories are then tested with chmod,
// and with chown where the tests run as root.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "cache/disk_cache.hpp"
#include "cache/tiered_cache.hpp"
#include "cache_test_support.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using test::entry_path;
using test::key_of;
using test::make_entry;

// Some uid that is neither root nor the user running the tests.
constexpr uid_t kOtherUid = 4242;
constexpr uid_t kYou = 1000;

struct stat dir_stat(uid_t uid, mode_t mode) {
  struct stat st{};
  st.st_uid = uid;
  st.st_mode = S_IFDIR | mode;
  return st;
}

bool running_as_root() { return ::geteuid() == 0; }

// The message of the Error that opening `root` as the writable directory throws ("" when it does not).
std::string refusal_of(const fs::path& root) {
  try {
    DiskCache cache(root);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfigError) << e.what();
    return e.what();
  }
  return "";
}

void expect_contains(const std::string& text, const std::string& what) {
  EXPECT_NE(text.find(what), std::string::npos) << "\"" << what << "\" not in: " << text;
}

TEST(DirectoryTrust, OwnedByYouOrRootAndWritableByNoOneElseIsTrusted) {
  for (uid_t owner : {kYou, uid_t(0)})
    for (mode_t mode : {0700, 0755, 0500, 0711})
      EXPECT_TRUE(check_directory_trust(dir_stat(owner, mode), kYou, kYou, false).ok()) << owner << " " << mode;
}

TEST(DirectoryTrust, AnotherUsersDirectoryIsNotTrustedWhateverItsMode) {
  for (mode_t mode : {0700, 0755, 0777, 01777}) {
    const DirectoryTrust t = check_directory_trust(dir_stat(kOtherUid, mode), kYou, kYou, true);
    EXPECT_EQ(t.problem, DirectoryTrust::Problem::kOwner);
    EXPECT_EQ(t.why, "owned by uid 4242, not by you (uid 1000) or root");
  }
  // Root running kiln does not trust another user's directory either: that is the worst case of a plant.
  EXPECT_EQ(check_directory_trust(dir_stat(kOtherUid, 0700), 0, 0, false).problem, DirectoryTrust::Problem::kOwner);
}

TEST(DirectoryTrust, WritableByGroupOrOthersIsNotTrusted) {
  const struct {
    mode_t mode;
    const char* why;
  } cases[] = {{0770, "writable by its group (mode 0770)"},
               {0775, "writable by its group (mode 0775)"},
               {0757, "writable by others (mode 0757)"},
               {0777, "writable by its group and by others (mode 0777)"},
               {01777, "writable by its group and by others (mode 1777)"}};
  for (const auto& c : cases) {
    const DirectoryTrust t = check_directory_trust(dir_stat(kYou, c.mode), kYou, kYou, /*sticky_ok=*/false);
    EXPECT_EQ(t.problem, DirectoryTrust::Problem::kWritableByOthers) << c.mode;
    EXPECT_EQ(t.why, c.why);
  }
}

TEST(DirectoryTrust, AStickySharedDirectoryIsTrustedWhereAllowed) {
  // /tmp itself: root's, world-writable, sticky. Others can add names to it but not rename or remove ours.
  EXPECT_TRUE(check_directory_trust(dir_stat(0, 01777), kYou, kYou, /*sticky_ok=*/true).ok());
  EXPECT_TRUE(check_directory_trust(dir_stat(kYou, 01770), kYou, kYou, /*sticky_ok=*/true).ok());
  const DirectoryTrust no_sticky = check_directory_trust(dir_stat(kYou, 0777), kYou, kYou, /*sticky_ok=*/true);
  EXPECT_EQ(no_sticky.problem, DirectoryTrust::Problem::kWritableByOthers);
  EXPECT_EQ(no_sticky.why, "writable by its group and by others (mode 0777, no sticky bit)");
}

TEST(DirectoryTrust, ALayerIsTrustedAsItsOwner) {
  EXPECT_TRUE(check_directory_trust(dir_stat(kOtherUid, 0755), kYou, kOtherUid, false).ok());
  const DirectoryTrust third = check_directory_trust(dir_stat(kOtherUid + 1, 0755), kYou, kOtherUid, false);
  EXPECT_EQ(third.problem, DirectoryTrust::Problem::kOwner);
  EXPECT_EQ(third.why, "owned by uid 4243, not by you (uid 1000), root or the layer's owner (uid 4242, who owns its "
                       "kiln directory)");
  EXPECT_EQ(check_directory_trust(dir_stat(kOtherUid, 0775), kYou, kOtherUid, false).problem,
            DirectoryTrust::Problem::kWritableByOthers);
}

TEST(CacheOwnership, AWritableRootOthersCanWriteIsRefusedBeforeAnythingIsCreated) {
  test::TempDir dir;
  for (mode_t mode : {0770, 0777, 0757}) {
    const fs::path root = dir.path() / ("shared-" + std::to_string(mode));
    fs::create_directories(root);
    ::chmod(root.c_str(), mode);
    const std::string message = refusal_of(root);
    expect_contains(message, "kiln refuses the kernel cache directory " + root.string() + ": it is writable by");
    expect_contains(message, "no sticky bit");
    expect_contains(message, "another user could plant kernels in it");
    expect_contains(message, "chmod go-w " + root.string());
    expect_contains(message, "DG_JIT_CACHE_DIR");
    EXPECT_FALSE(fs::exists(root / "kiln")) << "nothing is created in a refused directory";
  }
}

TEST(CacheOwnership, AStickySharedRootIsUsedWithAPrivateKilnDirectory) {
  test::TempDir dir;
  const fs::path root = dir.path() / "like-tmp";
  fs::create_directories(root);
  ::chmod(root.c_str(), 01777);
  DiskCache cache(root);
  EXPECT_TRUE(cache.writable());
  struct stat st{};
  ASSERT_EQ(::stat((root / "kiln").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_TRUE(cache.publish(make_entry(key_of("sticky"))));
  EXPECT_TRUE(cache.load(key_of("sticky")));
}

TEST(CacheOwnership, KilnsOwnDirectoriesMustStayPrivate) {
  for (const char* sub : {"kiln", "kiln/entries", "kiln/locks", "kiln/tmp", "kiln/toolchain"}) {
    test::TempDir dir;
    { DiskCache init(dir.path()); }
    // Even the sticky bit does not help below the root: others could add fan-out directories and entries.
    ::chmod((dir.path() / sub).c_str(), 01777);
    const std::string message = refusal_of(dir.path());
    expect_contains(message, "kiln refuses the kernel cache directory " + (dir.path() / sub).string() +
                                 ": it is writable by its group and by others (mode 1777)");
  }
}

TEST(CacheOwnership, AnotherUsersDirectoryIsRefusedWithBothUids) {
  if (!running_as_root()) GTEST_SKIP() << "chown to another user needs root; DirectoryTrust covers the rule";
  test::TempDir dir;
  // The audit's plant: another user made the directory first (the predictable /tmp/kiln-cache-<uid>), world-
  // writable, with an entry that verifies.
  const fs::path root = dir.path() / "kiln-cache-1000";
  const std::string key = key_of("planted");
  { DiskCache planter(root); ASSERT_TRUE(planter.publish(make_entry(key))); }
  ASSERT_EQ(::chown(root.c_str(), kOtherUid, kOtherUid), 0);
  const std::string message = refusal_of(root);
  expect_contains(message, "kiln refuses the kernel cache directory " + root.string() + ": it is owned by uid 4242, "
                           "not by you (uid 0) or root");
  expect_contains(message, "set DG_JIT_CACHE_DIR to a directory you own");
  EXPECT_EQ(message.find("chmod"), std::string::npos) << "chmod does not fix an owner: " << message;

  // The same for kiln/ inside a root of ours, and through the tiers the JIT opens.
  ASSERT_EQ(::chown(root.c_str(), 0, 0), 0);
  ASSERT_EQ(::chown((root / "kiln").c_str(), kOtherUid, kOtherUid), 0);
  expect_contains(refusal_of(root), (root / "kiln").string() + ": it is owned by uid 4242");
  TieredCacheOptions options;
  options.writable_dir = root;
  EXPECT_THROW(TieredCache tiers(options), Error);
}

TEST(CacheOwnership, ASymlinkedRootOwnedByAnotherUserIsRefused) {
  if (!running_as_root()) GTEST_SKIP() << "lchown to another user needs root";
  test::TempDir dir;
  fs::create_directories(dir.path() / "mine");
  fs::create_directory_symlink(dir.path() / "mine", dir.path() / "link");
  ASSERT_EQ(::lchown((dir.path() / "link").c_str(), kOtherUid, kOtherUid), 0);
  expect_contains(refusal_of(dir.path() / "link"), "it is a symbolic link owned by uid 4242");
  // A link of your own (~/.deep_gemm -> /data/deep_gemm) is fine.
  ASSERT_EQ(::lchown((dir.path() / "link").c_str(), 0, 0), 0);
  EXPECT_EQ(refusal_of(dir.path() / "link"), "");
}

TieredCacheOptions with_layer(const fs::path& local, const fs::path& layer) {
  TieredCacheOptions o;
  o.writable_dir = local;
  o.layers = {layer};
  return o;
}

TEST(LayerTrust, ALayerOthersCanWriteIsSkippedUntilFixed) {
  for (const char* sub : {"", "kiln", "kiln/entries"}) {
    test::TempDir dir;
    const std::string key = key_of("in a shared layer");
    { DiskCache fill(dir.path() / "layer"); ASSERT_TRUE(fill.publish(make_entry(key))); }
    const fs::path opened = *sub ? dir.path() / "layer" / sub : dir.path() / "layer";
    ::chmod(opened.c_str(), 0777);
    testing::internal::CaptureStderr();
    TieredCache tiers(with_layer(dir.path() / "local", dir.path() / "layer"));
    EXPECT_FALSE(tiers.lookup(key)) << "nothing is read from a layer anyone can write";
    EXPECT_FALSE(tiers.lookup(key));
    const std::string err = testing::internal::GetCapturedStderr();
    expect_contains(err, "the read-only cache layer " + (dir.path() / "layer").string() + " (layer 1) cannot be used "
                         "(its directory " + opened.string());
    expect_contains(err, "writable by its group and by others (mode 0777");
    const auto stats = tiers.tier_stats();
    EXPECT_FALSE(stats[1].available);
    expect_contains(stats[1].state, "unavailable: its directory");

    ::chmod(opened.c_str(), 0755);
    EXPECT_TRUE(tiers.lookup(key)) << "used again once fixed";
    EXPECT_TRUE(tiers.tier_stats()[1].available);
  }
}

TEST(LayerTrust, AnEntryOrFanOutDirectoryOthersCanWriteIsNotServed) {
  test::TempDir dir;
  const std::string key = key_of("planted in a layer");
  for (const char* layer : {"l1", "l2"}) {
    DiskCache fill(dir.path() / layer);
    ASSERT_TRUE(fill.publish(make_entry(key, 512, layer[1] - '0')));
  }
  TieredCacheOptions options = with_layer(dir.path() / "local", dir.path() / "l1");
  options.layers.push_back(dir.path() / "l2");
  TieredCache tiers(options);
  const fs::path file = entry_path(dir.path() / "l1", key);
  for (const fs::path& opened : {file, file.parent_path()}) {
    ::chmod(opened.c_str(), opened == file ? 0666 : 0777);
    testing::internal::CaptureStderr();
    auto found = tiers.lookup(key);
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(found);
    EXPECT_EQ(found->tier, "layer 2") << "the next layer serves it";
    expect_contains(err, file.string());
    expect_contains(err, "not trusted: ");
    expect_contains(err, opened == file ? "the file is writable by"
                                        : "its directory " + opened.string() + " is writable by");
    ::chmod(opened.c_str(), opened == file ? 0600 : 0700);
  }
  auto found = tiers.lookup(key);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->tier, "layer 1");
}

TEST(LayerTrust, ALayerOfAnotherUserIsServedAsItsOwners) {
  if (!running_as_root()) GTEST_SKIP() << "chown to another user needs root";
  test::TempDir dir;
  const std::string key = key_of("team layer");
  { DiskCache fill(dir.path() / "team"); ASSERT_TRUE(fill.publish(make_entry(key))); }
  std::error_code ec;
  ASSERT_EQ(::chown((dir.path() / "team").c_str(), kOtherUid, kOtherUid), 0);
  for (auto it = fs::recursive_directory_iterator(dir.path() / "team", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    ASSERT_EQ(::chown(it->path().c_str(), kOtherUid, kOtherUid), 0);
  TieredCache tiers(with_layer(dir.path() / "local", dir.path() / "team"));
  ASSERT_TRUE(tiers.lookup(key)) << "a layer belonging to another user is trusted as that user";

  // But a file in it that belongs to a third user is not: that user could rewrite it.
  ASSERT_EQ(::chown(entry_path(dir.path() / "team", key).c_str(), kOtherUid + 1, kOtherUid + 1), 0);
  TieredCache again(with_layer(dir.path() / "local", dir.path() / "team"));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(again.lookup(key));
  expect_contains(testing::internal::GetCapturedStderr(), "the file is owned by uid 4243");
}

}  // namespace
}  // namespace kiln::cache
