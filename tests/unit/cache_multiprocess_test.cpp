// DiskCache under many processes and threads: a cold race compiles each key once, locks die with their
// holder, killed publishes leave nothing visible, racing publishers both succeed, counters add up.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <random>
#include <thread>

#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "cache_test_support.hpp"
#include "test_support.hpp"
#include "util/fs.hpp"

namespace fs = std::filesystem;
using kiln::cache::Counter;
using kiln::cache::DiskCache;
using namespace kiln::test;
using namespace std::chrono_literals;

namespace {

// Children block on this pipe until the parent closes it, so that they all start at once.
class StartGate {
 public:
  StartGate() {
    if (::pipe(fds_) != 0) throw std::runtime_error("pipe");
  }
  ~StartGate() {
    close_write();
    if (fds_[0] >= 0) ::close(fds_[0]);
  }
  void wait_in_child() {
    close_write();
    char c;
    while (::read(fds_[0], &c, 1) < 0 && errno == EINTR) {
    }
  }
  void open_gate() { close_write(); }

 private:
  void close_write() {
    if (fds_[1] >= 0) ::close(fds_[1]);
    fds_[1] = -1;
  }
  int fds_[2] = {-1, -1};
};

// One byte from a child: "I am ready" (after taking a lock, or writing half a file).
class ReadySignal {
 public:
  ReadySignal() {
    if (::pipe(fds_) != 0) throw std::runtime_error("pipe");
  }
  ~ReadySignal() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  void signal_from_child(char c = 'y') {
    if (::write(fds_[1], &c, 1) != 1) ::_exit(98);
  }
  char wait_in_parent() {
    ::close(fds_[1]);
    fds_[1] = -1;
    char c = 0;
    return ::read(fds_[0], &c, 1) == 1 ? c : 0;
  }

 private:
  int fds_[2] = {-1, -1};
};

// Appends one line to a file with O_APPEND (atomic for short writes): a record of who compiled what.
void append_line(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string text = line + "\n";
  if (::write(fd, text.data(), text.size()) < 0) {
  }
  ::close(fd);
}

size_t count_lines(const fs::path& path) {
  auto bytes = read_bytes(path);
  return static_cast<size_t>(std::count(bytes.begin(), bytes.end(), '\n'));
}

bool lock_is_free(const fs::path& lock_path) {
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return true;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

}  // namespace

// The composer's protocol, as the JIT layer runs it: load; on a miss lock, load again, compile, publish, load.
TEST(DiskCacheMultiProcess, ColdRaceCompilesEachKeyExactlyOnce) {
  constexpr int kProcesses = 8, kThreads = 4;
  TempDir dir;
  const fs::path root = dir.path() / "cache";
  const fs::path log_dir = dir.path() / "compiles";
  fs::create_directories(log_dir);
  const std::vector<std::string> keys = {key_of("race-0"), key_of("race-1"), key_of("race-2")};

  StartGate gate;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(fork_child([&, p] {
      DiskCache cache(root);
      gate.wait_in_child();
      std::atomic<int> failures{0};
      std::latch all_ready(kThreads);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          all_ready.arrive_and_wait();
          for (size_t i = 0; i < keys.size(); ++i) {
            const std::string& key = keys[(i + static_cast<size_t>(p + t)) % keys.size()];
            auto entry = cache.load(key);
            if (!entry) {
              auto lock = cache.lock(key);
              entry = cache.load(key, /*count_stats=*/false);
              if (!entry) {
                std::this_thread::sleep_for(60ms);  // the "compile": long enough for everyone to pile up
                auto built = make_entry(key);
                cache.count(Counter::kCompiles);
                cache.count(Counter::kCompileMicros, 60000);
                append_line(log_dir / key, std::to_string(::getpid()) + "/" + std::to_string(t));
                if (!cache.publish(built)) ++failures;
                entry = cache.load(key, /*count_stats=*/false);
              }
            }
            if (!entry || entry->cubin != cubin_for(key) || entry->meta.key != key) ++failures;
          }
        });
      }
      for (auto& th : threads) th.join();
      return failures.load();
    }));
  }
  gate.open_gate();
  for (pid_t pid : children) EXPECT_EQ(wait_child(pid), 0) << "child " << pid << " saw a failure";

  for (const auto& key : keys) EXPECT_EQ(count_lines(log_dir / key), 1u) << "compiles of " << key;
  DiskCache cache(root);
  const auto stats = cache.stats();
  EXPECT_EQ(stats.compiles, keys.size());
  EXPECT_EQ(stats.hits + stats.misses, static_cast<uint64_t>(kProcesses * kThreads) * keys.size())
      << "every first lookup is counted once, as a hit or a miss";
  EXPECT_GE(stats.misses, keys.size());
  EXPECT_EQ(stats.corrupt, 0u);
  EXPECT_EQ(stats.entries, keys.size());
  EXPECT_NEAR(stats.compile_seconds, 0.06 * static_cast<double>(keys.size()), 1e-9);
  const auto report = cache.verify();
  EXPECT_EQ(report.checked, keys.size());
  EXPECT_EQ(report.corrupt, 0u);
  EXPECT_TRUE(fs::is_empty(root / "kiln" / "tmp"));
}

TEST(DiskCacheMultiProcess, AKeyLockDiesWithItsHolder) {
  TempDir dir;
  const std::string key = key_of("killed-holder");
  const fs::path lock_file = dir.path() / "kiln" / "locks" / (key + ".lock");
  ReadySignal ready;
  pid_t holder = fork_child([&] {
    DiskCache cache(dir.path());
    auto lock = cache.lock(key);
    ready.signal_from_child();
    for (;;) ::pause();  // "compiling" forever, until killed
    return 0;
  });
  ASSERT_EQ(ready.wait_in_parent(), 'y');
  EXPECT_FALSE(lock_is_free(lock_file)) << "the child holds the key";

  DiskCache cache(dir.path());
  auto waiter = std::async(std::launch::async, [&] {
    auto lock = cache.lock(key);
    if (auto hit = cache.load(key, false)) return true;
    return cache.publish(make_entry(key));
  });
  EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout) << "the lock must wait for the holder";
  ::kill(holder, SIGKILL);
  EXPECT_EQ(wait_child(holder), -SIGKILL);
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready) << "the lock was not released by the kernel";
  EXPECT_TRUE(waiter.get());

  // And a fresh process proceeds normally too.
  pid_t next = fork_child([&] {
    DiskCache c(dir.path());
    auto lock = c.lock(key);
    auto entry = c.load(key);
    return entry && entry->cubin == cubin_for(key) ? 0 : 1;
  });
  EXPECT_EQ(wait_child(next), 0);
}

TEST(DiskCacheMultiProcess, AProcessKilledInTheMiddleOfAPublishLeavesNothingVisible) {
  TempDir dir;
  const std::string key = key_of("killed-publish");
  { DiskCache init(dir.path()); }
  const fs::path tmp = dir.path() / "kiln" / "tmp";
  ReadySignal ready;
  pid_t child = fork_child([&] {
    // Exactly what a publish does up to its rename, then stopped half-way through writing.
    std::error_code ec;
    auto temp = kiln::util::TemporaryFile::create(tmp, key + ".kiln", ec);
    if (!temp) return 1;
    auto bytes = kiln::cache::encode_entry(make_entry(key));
    bytes.resize(bytes.size() / 2);
    temp->write(bytes, ec);
    ready.signal_from_child();
    for (;;) ::pause();
    return 0;
  });
  ASSERT_EQ(ready.wait_in_parent(), 'y');
  ::kill(child, SIGKILL);
  EXPECT_EQ(wait_child(child), -SIGKILL);

  std::vector<fs::path> strays;
  for (const auto& e : fs::directory_iterator(tmp)) strays.push_back(e.path());
  ASSERT_EQ(strays.size(), 1u) << "the killed publish left its temporary";

  DiskCache cache(dir.path());
  EXPECT_FALSE(cache.load(key)) << "never visible as an entry";
  EXPECT_TRUE(cache.list().empty());
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().corrupt, 0u);
  EXPECT_TRUE(fs::exists(strays[0])) << "too young to be called stray: it could be a live publish";

  age_file(strays[0], 3600);
  DiskCache reopened(dir.path());
  EXPECT_FALSE(fs::exists(strays[0])) << "an old temporary is cleaned when a cache is opened";
  ASSERT_TRUE(reopened.publish(make_entry(key)));
  EXPECT_TRUE(reopened.load(key));
}

// Real publishes killed at random moments: whatever instant the kill lands, every visible entry is valid. Each
// child completes one publish before the clock starts, so that the check below has entries to verify however slow
// the build (under ThreadSanitizer a 1 MB publish can outlast the longest delay); the kill then lands somewhere in
// the publishes that follow.
TEST(DiskCacheMultiProcess, PublishesKilledAtRandomMomentsNeverLeaveABrokenEntry) {
  TempDir dir;
  { DiskCache init(dir.path()); }
  std::mt19937 rng(12345);
  for (int round = 0; round < 6; ++round) {
    ReadySignal ready;
    pid_t child = fork_child([&, round] {
      DiskCache cache(dir.path());
      const auto key = [round](int i) { return key_of("k" + std::to_string(round) + "-" + std::to_string(i)); };
      if (!cache.publish(make_entry(key(0), 1 << 20))) return 1;
      ready.signal_from_child();
      for (int i = 1;; ++i) cache.publish(make_entry(key(i), 1 << 20));
      return 0;
    });
    ASSERT_EQ(ready.wait_in_parent(), 'y');
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 120)(rng)));
    ::kill(child, SIGKILL);
    EXPECT_EQ(wait_child(child), -SIGKILL);
  }
  DiskCache cache(dir.path());
  const auto report = cache.verify();
  EXPECT_EQ(report.corrupt, 0u) << (report.problems.empty() ? "" : report.problems[0]);
  EXPECT_EQ(cache.stats().corrupt, 0u);
  EXPECT_EQ(cache.list().size(), report.checked);
  EXPECT_GT(report.checked, 0u) << "no publish completed: the test proved nothing";
}

TEST(DiskCacheMultiProcess, TwoWritersPublishingTheSameKeyBothSucceed) {
  constexpr int kWriters = 2, kThreads = 2, kRounds = 15;
  TempDir dir;
  const std::vector<std::string> keys = {key_of("pub-0"), key_of("pub-1"), key_of("pub-2")};
  StartGate gate;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    children.push_back(fork_child([&, w] {
      DiskCache cache(dir.path());
      gate.wait_in_child();
      std::atomic<int> failures{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          for (int r = 0; r < kRounds; ++r) {
            const std::string& key = keys[static_cast<size_t>(r) % keys.size()];
            // No lock: writers race on purpose. Each writes a valid entry of its own (a different variant).
            if (!cache.publish(make_entry(key, 8192, 1 + w * kThreads + t))) ++failures;
            auto entry = cache.load(key, false);
            if (!entry || entry->meta.key != key) ++failures;
          }
        });
      }
      for (auto& th : threads) th.join();
      return failures.load();
    }));
  }
  gate.open_gate();
  for (pid_t pid : children) EXPECT_EQ(wait_child(pid), 0);
  DiskCache cache(dir.path());
  for (const auto& key : keys) {
    auto entry = cache.load(key);
    ASSERT_TRUE(entry);
    const int variant = static_cast<int>(entry->meta.compile_ms) - 10;
    EXPECT_EQ(entry->cubin, cubin_for(key, 8192, variant)) << "one writer's complete entry, not a mixture";
  }
  EXPECT_EQ(cache.verify().corrupt, 0u);
  EXPECT_TRUE(fs::is_empty(dir.path() / "kiln" / "tmp")) << "losers leave no temporaries";
}

// The child is forked before the clearing thread starts: a fork while another thread runs can copy a lock that
// thread holds (under ASan its allocator's, which hung this test's child in malloc), and the child would wait on it
// for ever. The gate then lets both run at once.
TEST(DiskCacheMultiProcess, ClearingWhilePublishingIsHarmless) {
  TempDir dir;
  DiskCache cache(dir.path());
  StartGate gate;
  pid_t child = fork_child([&] {
    gate.wait_in_child();
    DiskCache c(dir.path());
    int bad = 0;
    for (int i = 0; i < 30; ++i) {
      const std::string key = key_of("clear-race-" + std::to_string(i % 4));
      auto lock = c.lock(key);
      if (!c.publish(make_entry(key))) ++bad;
      if (auto e = c.load(key, false); e && e->cubin != cubin_for(key)) ++bad;  // a miss is fine; a wrong entry is not
    }
    return bad;
  });
  std::atomic<bool> stop{false};
  std::thread clearer([&] {
    while (!stop) {
      cache.clear();
      std::this_thread::sleep_for(1ms);
    }
  });
  gate.open_gate();
  EXPECT_EQ(wait_child(child), 0);
  stop = true;
  clearer.join();
  EXPECT_EQ(cache.verify().corrupt, 0u);
}

TEST(DiskCacheMultiProcess, CountersAddUpAcrossProcessesAndForkedCacheObjects) {
  constexpr int kChildren = 6, kCounts = 1500;
  TempDir dir;
  DiskCache shared(dir.path());  // created before fork: its open stats file is inherited by the children
  StartGate gate;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    children.push_back(fork_child([&, c] {
      gate.wait_in_child();
      if (c % 2 == 0) {
        for (int i = 0; i < kCounts; ++i) shared.count(Counter::kHits);
      } else {
        DiskCache own(dir.path());
        for (int i = 0; i < kCounts; ++i) own.count(Counter::kHits);
      }
      return 0;
    }));
  }
  gate.open_gate();
  for (int i = 0; i < kCounts; ++i) shared.count(Counter::kMisses);
  for (pid_t pid : children) EXPECT_EQ(wait_child(pid), 0);
  const auto stats = shared.stats();
  EXPECT_EQ(stats.hits, static_cast<uint64_t>(kChildren) * kCounts);
  EXPECT_EQ(stats.misses, static_cast<uint64_t>(kCounts));
}
