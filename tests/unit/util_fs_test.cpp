// File utilities: whole-file reads, private directories, temporaries, atomic writes and flock-based locks.
#include "util/fs.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "test_support.hpp"

namespace fs = std::filesystem;
using kiln::util::FileLock;
using kiln::util::TemporaryFile;

namespace {

void write_plain(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

std::string read_plain(const fs::path& path) {
  std::error_code ec;
  auto content = kiln::util::read_file(path, ec);
  return content ? *content : "<unreadable: " + ec.message() + ">";
}

mode_t mode_of(const fs::path& path) {
  struct stat st{};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

size_t count_files(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST(ReadFile, ReturnsEveryByteIncludingNul) {
  kiln::test::TempDir dir;
  const std::string content("a\0b\xff\n", 5);
  write_plain(dir.path() / "f", content);
  std::error_code ec;
  auto got = kiln::util::read_file(dir.path() / "f", ec);
  ASSERT_TRUE(got);
  EXPECT_FALSE(ec);
  EXPECT_EQ(*got, content);
}

TEST(ReadFile, ReadsLargeFiles) {
  kiln::test::TempDir dir;
  std::string content(1 << 20, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 131 + 7);
  write_plain(dir.path() / "big", content);
  EXPECT_EQ(read_plain(dir.path() / "big"), content);
}

TEST(ReadFile, MissingFileReportsErrno) {
  kiln::test::TempDir dir;
  std::error_code ec;
  EXPECT_FALSE(kiln::util::read_file(dir.path() / "missing", ec));
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
}

TEST(ReadFile, ThrowingFormNamesPathAndReasonWithTheGivenKind) {
  kiln::test::TempDir dir;
  const fs::path missing = dir.path() / "nope.bin";
  try {
    kiln::util::read_file(missing, kiln::ErrorKind::kCompileError);
    FAIL() << "expected an exception";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), kiln::ErrorKind::kCompileError);
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

TEST(CreatePrivateDirectories, CreatesEveryMissingLevelWithMode0700) {
  kiln::test::TempDir dir;
  const mode_t old_umask = ::umask(0277);  // a hostile umask must not make unusable directories
  std::error_code ec;
  const bool ok = kiln::util::create_private_directories(dir.path() / "a" / "b" / "c", ec);
  ::umask(old_umask);
  ASSERT_TRUE(ok) << ec.message();
  EXPECT_EQ(mode_of(dir.path() / "a"), 0700u);
  EXPECT_EQ(mode_of(dir.path() / "a" / "b"), 0700u);
  EXPECT_EQ(mode_of(dir.path() / "a" / "b" / "c"), 0700u);
  // Idempotent.
  EXPECT_TRUE(kiln::util::create_private_directories(dir.path() / "a" / "b" / "c", ec));
}

TEST(CreatePrivateDirectories, LeavesExistingDirectoriesAlone) {
  kiln::test::TempDir dir;
  ASSERT_EQ(::mkdir((dir.path() / "shared").c_str(), 0755), 0);
  ::chmod((dir.path() / "shared").c_str(), 0755);
  std::error_code ec;
  ASSERT_TRUE(kiln::util::create_private_directories(dir.path() / "shared" / "mine", ec));
  EXPECT_EQ(mode_of(dir.path() / "shared"), 0755u);
  EXPECT_EQ(mode_of(dir.path() / "shared" / "mine"), 0700u);
}

TEST(CreatePrivateDirectories, FailsUnderARegularFile) {
  kiln::test::TempDir dir;
  write_plain(dir.path() / "file", "x");
  std::error_code ec;
  EXPECT_FALSE(kiln::util::create_private_directories(dir.path() / "file", ec));
  EXPECT_EQ(ec, std::errc::not_a_directory);
  EXPECT_FALSE(kiln::util::create_private_directories(dir.path() / "file" / "sub" / "dir", ec));
  EXPECT_EQ(ec, std::errc::not_a_directory);
}

TEST(IsTemporaryName, RecognisesOnlyTheTemporaryShape) {
  using kiln::util::is_temporary_name;
  EXPECT_TRUE(is_temporary_name("0123456789abcdef0123456789abcdef.kiln.Ab12Z9.tmp"));
  EXPECT_TRUE(is_temporary_name("x.aaaaaa.tmp"));
  EXPECT_FALSE(is_temporary_name("x.aaaaa.tmp"));    // five unique characters
  EXPECT_FALSE(is_temporary_name("xaaaaaaa.tmp"));   // no dot before them
  EXPECT_FALSE(is_temporary_name("x.aa-aaa.tmp"));   // not alphanumeric
  EXPECT_FALSE(is_temporary_name("x.aaaaaa.tmpx"));  // wrong suffix
  EXPECT_FALSE(is_temporary_name(".aaaaaa.tmp"));    // no stem
  EXPECT_FALSE(is_temporary_name("notes.txt"));
  EXPECT_FALSE(is_temporary_name("0123456789abcdef0123456789abcdef.kiln"));
}

TEST(TemporaryFile, RemovesItselfUnlessCommitted) {
  kiln::test::TempDir dir;
  std::error_code ec;
  fs::path temp_path;
  {
    auto temp = TemporaryFile::create(dir.path(), "entry", ec);
    ASSERT_TRUE(temp) << ec.message();
    temp_path = temp->path();
    EXPECT_EQ(temp_path.parent_path(), dir.path());
    EXPECT_TRUE(kiln::util::is_temporary_name(temp_path.filename().string())) << temp_path;
    EXPECT_EQ(mode_of(temp_path), 0600u);
    ASSERT_TRUE(temp->write(std::string_view("partial"), ec));
    EXPECT_TRUE(fs::exists(temp_path));
  }
  EXPECT_FALSE(fs::exists(temp_path));
  EXPECT_EQ(count_files(dir.path()), 0u);
}

TEST(TemporaryFile, CommitRenamesIntoPlaceAndIsKept) {
  kiln::test::TempDir dir;
  std::error_code ec;
  const fs::path target = dir.path() / "final.bin";
  {
    auto temp = TemporaryFile::create(dir.path(), "final.bin", ec);
    ASSERT_TRUE(temp);
    ASSERT_TRUE(temp->write(std::string_view("hello "), ec));
    ASSERT_TRUE(temp->write(std::string_view("world"), ec));
    ASSERT_TRUE(temp->sync(ec));
    ASSERT_TRUE(temp->commit(target, ec)) << ec.message();
    EXPECT_FALSE(fs::exists(temp->path()));
  }
  EXPECT_EQ(read_plain(target), "hello world");
  EXPECT_EQ(count_files(dir.path()), 1u);
}

TEST(TemporaryFile, NamesAreUnique) {
  kiln::test::TempDir dir;
  std::error_code ec;
  std::vector<TemporaryFile> temps;
  std::set<fs::path> names;
  for (int i = 0; i < 50; ++i) {
    auto temp = TemporaryFile::create(dir.path(), "same", ec);
    ASSERT_TRUE(temp);
    names.insert(temp->path());
    temps.push_back(std::move(*temp));
  }
  EXPECT_EQ(names.size(), 50u);
  temps.clear();
  EXPECT_EQ(count_files(dir.path()), 0u);
}

TEST(TemporaryFile, MoveTransfersOwnership) {
  kiln::test::TempDir dir;
  std::error_code ec;
  auto a = TemporaryFile::create(dir.path(), "a", ec);
  auto b = TemporaryFile::create(dir.path(), "b", ec);
  ASSERT_TRUE(a && b);
  const fs::path a_path = a->path(), b_path = b->path();
  *b = std::move(*a);  // b's own file is discarded, a's is now b's
  EXPECT_FALSE(fs::exists(b_path));
  EXPECT_TRUE(fs::exists(a_path));
  a.reset();  // the moved-from object removes nothing
  EXPECT_TRUE(fs::exists(a_path));
  b.reset();
  EXPECT_FALSE(fs::exists(a_path));
}

TEST(TemporaryFile, NoReplaceCommitKeepsTheExistingTarget) {
  kiln::test::TempDir dir;
  std::error_code ec;
  const fs::path target = dir.path() / "t";
  write_plain(target, "winner");
  {
    auto temp = TemporaryFile::create(dir.path(), "t", ec);
    ASSERT_TRUE(temp);
    ASSERT_TRUE(temp->write(std::string_view("loser"), ec));
    EXPECT_FALSE(temp->commit(target, ec, TemporaryFile::CommitMode::kNoReplace));
    EXPECT_EQ(ec, std::errc::file_exists);
    // The caller may still decide to replace.
    auto temp2 = TemporaryFile::create(dir.path(), "t", ec);
    ASSERT_TRUE(temp2);
    ASSERT_TRUE(temp2->write(std::string_view("replacement"), ec));
    EXPECT_TRUE(temp2->commit(target, ec, TemporaryFile::CommitMode::kReplace));
  }
  EXPECT_EQ(read_plain(target), "replacement");
  EXPECT_EQ(count_files(dir.path()), 1u);  // the losing temporary is gone
}

TEST(TemporaryFile, CommitIntoAMissingDirectoryFailsAndCleansUp) {
  kiln::test::TempDir dir;
  std::error_code ec;
  {
    auto temp = TemporaryFile::create(dir.path(), "x", ec);
    ASSERT_TRUE(temp);
    EXPECT_FALSE(temp->commit(dir.path() / "no" / "such" / "dir", ec));
    EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  }
  EXPECT_EQ(count_files(dir.path()), 0u);
}

TEST(TemporaryFile, CreateInAMissingDirectoryReportsIt) {
  kiln::test::TempDir dir;
  std::error_code ec;
  EXPECT_FALSE(TemporaryFile::create(dir.path() / "missing", "x", ec));
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
}

TEST(WriteFileAtomic, ReplacesContentAndLeavesNoTemporaries) {
  kiln::test::TempDir dir;
  const fs::path target = dir.path() / "data";
  std::error_code ec;
  ASSERT_TRUE(kiln::util::write_file_atomic(target, std::string_view("first"), ec)) << ec.message();
  EXPECT_EQ(read_plain(target), "first");
  ASSERT_TRUE(kiln::util::write_file_atomic(target, std::string_view("second, longer"), ec));
  EXPECT_EQ(read_plain(target), "second, longer");
  EXPECT_EQ(count_files(dir.path()), 1u);
}

TEST(WriteFileAtomic, UsesTheGivenTemporaryDirectory) {
  kiln::test::TempDir dir;
  fs::create_directory(dir.path() / "tmp");
  fs::create_directory(dir.path() / "out");
  std::error_code ec;
  const std::vector<uint8_t> bytes = {0, 1, 2, 255};
  ASSERT_TRUE(kiln::util::write_file_atomic(dir.path() / "out" / "b", bytes, ec, dir.path() / "tmp"));
  EXPECT_EQ(read_plain(dir.path() / "out" / "b"), std::string("\0\1\2\xff", 4));
  EXPECT_EQ(count_files(dir.path() / "tmp"), 0u);
}

TEST(WriteFileAtomic, FailsCleanlyWhenTheDirectoryIsMissing) {
  kiln::test::TempDir dir;
  std::error_code ec;
  EXPECT_FALSE(kiln::util::write_file_atomic(dir.path() / "missing" / "f", std::string_view("x"), ec));
  EXPECT_TRUE(ec);
}

TEST(FsyncDirectory, ReportsAMissingDirectory) {
  kiln::test::TempDir dir;
  std::error_code ec;
  kiln::util::fsync_directory(dir.path(), ec);
  EXPECT_FALSE(ec);
  kiln::util::fsync_directory(dir.path() / "missing", ec);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
}

// A lock file or the counters: a link is never written through, a FIFO never waited on; either is replaced.
TEST(OpenPrivateFile, ReplacesALinkOrAFifoWithARegularFile) {
  kiln::test::TempDir dir;
  const fs::path victim = dir.path() / "victim";
  write_plain(victim, "keep me");
  const fs::path link = dir.path() / "stats";
  fs::create_symlink(victim, link);
  std::error_code ec;
  int fd = kiln::util::open_private_file(link, O_RDWR, ec);
  ASSERT_GE(fd, 0) << ec.message();
  ASSERT_EQ(::write(fd, "x", 1), 1);
  ::close(fd);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(link))) << "the link is replaced, not followed";
  EXPECT_EQ(read_plain(victim), "keep me");
  EXPECT_EQ(mode_of(link), 0600u);

  const fs::path fifo = dir.path() / "k.lock";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto opened = std::async(std::launch::async, [&] {
    std::error_code fifo_ec;
    const int fifo_fd = kiln::util::open_private_file(fifo, O_RDONLY, fifo_ec);
    if (fifo_fd >= 0) ::close(fifo_fd);
    return fifo_fd >= 0;
  });
  ASSERT_EQ(opened.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "open waited on the FIFO";
  EXPECT_TRUE(opened.get());
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(fifo)));
  FileLock lock = FileLock::acquire(fifo, ec);
  EXPECT_TRUE(lock.locked()) << ec.message();
}

TEST(OpenPrivateFile, ADirectoryOrAMissingParentIsAnError) {
  kiln::test::TempDir dir;
  fs::create_directory(dir.path() / "stats");
  std::error_code ec;
  EXPECT_EQ(kiln::util::open_private_file(dir.path() / "stats", O_RDWR, ec), -1);
  EXPECT_EQ(ec, std::errc::is_a_directory);
  EXPECT_TRUE(fs::is_directory(dir.path() / "stats")) << "a directory is never removed";
  EXPECT_EQ(kiln::util::open_private_file(dir.path() / "missing" / "k.lock", O_RDWR, ec), -1);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  FileLock lock = FileLock::acquire(dir.path() / "stats", ec);
  EXPECT_FALSE(lock.locked());
  EXPECT_EQ(ec, std::errc::is_a_directory);
}

TEST(FileLock, ExcludesAnotherHolderInTheSameProcess) {
  kiln::test::TempDir dir;
  const fs::path path = dir.path() / "k.lock";
  std::error_code ec;
  FileLock first = FileLock::acquire(path, ec);
  ASSERT_TRUE(first.locked()) << ec.message();
  EXPECT_EQ(mode_of(path), 0600u);
  FileLock second = FileLock::try_acquire(path, ec);
  EXPECT_FALSE(second.locked());
  EXPECT_FALSE(ec) << "a held lock is not an error";
  first.unlock();
  second = FileLock::try_acquire(path, ec);
  EXPECT_TRUE(second.locked());
}

TEST(FileLock, BlockingAcquireWaitsForTheHolder) {
  kiln::test::TempDir dir;
  const fs::path path = dir.path() / "k.lock";
  std::error_code ec;
  FileLock holder = FileLock::acquire(path, ec);
  ASSERT_TRUE(holder.locked());
  auto waiter = std::async(std::launch::async, [&] {
    std::error_code wec;
    return FileLock::acquire(path, wec).locked();
  });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  holder.unlock();
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(waiter.get());
}

TEST(FileLock, ExcludesOtherProcesses) {
  kiln::test::TempDir dir;
  const fs::path path = dir.path() / "k.lock";
  std::error_code ec;
  FileLock holder = FileLock::acquire(path, ec);
  ASSERT_TRUE(holder.locked());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::error_code cec;
    // The child inherits nothing of the lock: its own open file is excluded.
    ::_exit(FileLock::try_acquire(path, cec).locked() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "another process got a lock that is held";
}

TEST(FileLock, ReleasedWhenTheHolderIsKilled) {
  kiln::test::TempDir dir;
  const fs::path path = dir.path() / "k.lock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    std::error_code cec;
    FileLock lock = FileLock::acquire(path, cec);
    char c = lock.locked() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, 'y');
  std::error_code ec;
  EXPECT_FALSE(FileLock::try_acquire(path, ec).locked()) << "the child holds it";
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  auto acquired = std::async(std::launch::async, [&] {
    std::error_code aec;
    return FileLock::acquire(path, aec).locked();
  });
  ASSERT_EQ(acquired.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "lock not released";
  EXPECT_TRUE(acquired.get());
}

TEST(FileLock, AWaiterFollowsALockFileReplacedByACleaner) {
  kiln::test::TempDir dir;
  const fs::path path = dir.path() / "k.lock";
  std::error_code ec;
  FileLock holder = FileLock::acquire(path, ec);
  ASSERT_TRUE(holder.locked());
  auto waiter = std::async(std::launch::async, [&] {
    std::error_code wec;
    return FileLock::acquire(path, wec);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(::unlink(path.c_str()), 0);  // a cleaner removes the file while it is held and waited for
  holder.unlock();
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  FileLock got = waiter.get();
  ASSERT_TRUE(got.locked());
  // The waiter's lock is on the file now at the path, so a newcomer is excluded.
  FileLock newcomer = FileLock::try_acquire(path, ec);
  EXPECT_FALSE(newcomer.locked());
}

TEST(FileLock, ReleaseHandsOverTheDescriptor) {
  kiln::test::TempDir dir;
  const fs::path path = dir.path() / "k.lock";
  std::error_code ec;
  FileLock lock = FileLock::acquire(path, ec);
  int fd = lock.release();
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(lock.locked());
  EXPECT_FALSE(FileLock::try_acquire(path, ec).locked()) << "still held through the released descriptor";
  ::close(fd);
  EXPECT_TRUE(FileLock::try_acquire(path, ec).locked());
}

TEST(FileLock, ReportsAnUnopenablePath) {
  kiln::test::TempDir dir;
  std::error_code ec;
  FileLock lock = FileLock::acquire(dir.path() / "missing" / "k.lock", ec);
  EXPECT_FALSE(lock.locked());
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
}
