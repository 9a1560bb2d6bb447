// The Redis tier against a real redis-server on a loopback port: round trips between two "machines" (two
// local directories), the compile lock and its expiry, waiting for another machine's compile, bad values,
// protocol garbage, AUTH and database selection; and the URL grammar (no server needed).
#include "cache/redis_tier.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <chrono>
#include <thread>

#include "cache/entry_format.hpp"
#include "cache/tiered_cache.hpp"
#include "cache_test_support.hpp"
#include "kiln/error.hpp"
#include "redis_test_support.hpp"
#include "test_support.hpp"
#include "util/redis_url.hpp"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::make_entry;

// Keys distinct in every iteration of the test program (warnings are given once per key and process, and
// --gtest_repeat runs the tests again in the same process).
std::atomic<int> g_iteration{0};
struct Iterations : testing::EmptyTestEventListener {
  void OnTestIterationStart(const testing::UnitTest&, int iteration) override { g_iteration = iteration; }
};
[[maybe_unused]] const bool g_iterations = [] {
  testing::UnitTest::GetInstance()->listeners().Append(new Iterations);
  return true;
}();

std::string key_of(const std::string& name) { return test::key_of(name + "#" + std::to_string(g_iteration.load())); }

TEST(RedisUrl, Grammar) {
  std::string why;
  auto u = util::parse_redis_url("redis://127.0.0.1:6380/2", &why);
  ASSERT_TRUE(u) << why;
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 2);
  EXPECT_FALSE(u->tls);
  u = util::parse_redis_url("rediss://:pa:ss@cache.internal", &why);
  ASSERT_TRUE(u) << why;
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->port, 6379);
  EXPECT_EQ(u->password, "pa:ss");
  EXPECT_EQ(u->display(), "rediss://:***@cache.internal:6379/0");
  u = util::parse_redis_url("redis://alice:pw@[::1]:7000", &why);
  ASSERT_TRUE(u) << why;
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->username, "alice");
  EXPECT_EQ(u->display(), "redis://alice:***@[::1]:7000/0");
  for (const char* bad : {"http://h", "redis://", "redis://h:0", "redis://h:70000", "redis://h:x", "redis://h/-1",
                          "redis://h/db", "redis://pw@h", "redis://:@h", "redis://h h", "redis://[::1"}) {
    EXPECT_FALSE(util::parse_redis_url(bad, &why)) << bad;
    EXPECT_NE(why.find("expected redis://"), std::string::npos) << why;
  }
}

// As every Redis client reads a URL: %XX escapes in the user and password are decoded; a stray '%' is refused
// without the password being shown.
TEST(RedisUrl, UserAndPasswordArePercentDecoded) {
  std::string why;
  auto u = util::parse_redis_url("redis://al%69ce:p%40ss%2Fw%3Ad%25@h", &why);
  ASSERT_TRUE(u) << why;
  EXPECT_EQ(u->username, "alice");
  EXPECT_EQ(u->password, "p@ss/w:d%");
  for (const char* bad : {"redis://:s3cret%@h", "redis://:s3cret%4@h", "redis://:s3cret%zz@h"}) {
    EXPECT_FALSE(util::parse_redis_url(bad, &why)) << bad;
    EXPECT_NE(why.find("%25"), std::string::npos) << why;
    EXPECT_EQ(why.find("s3cret"), std::string::npos) << why;
  }
}

TEST(RedisUrl, AQueryStringIsRefusedWithoutEchoingIt) {
  std::string why;
  EXPECT_FALSE(util::parse_redis_url("redis://host:6379/0?password=s3cret", &why));
  EXPECT_NE(why.find("query string"), std::string::npos) << why;
  EXPECT_EQ(why.find("s3cret"), std::string::npos) << why;
}

TEST(RedisTier, MalformedUrlIsAConfigError) {
  try {
    make_redis_tier("redis://h:x", 100, [](Counter, uint64_t) {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfigError);
    EXPECT_NE(std::string(e.what()).find("DG_JIT_REMOTE_CACHE"), std::string::npos) << e.what();
  }
}

#if KILN_HAVE_HIREDIS

#define REQUIRE_REDIS(server)                                                             \
  if (test::redis_server_path().empty()) GTEST_SKIP() << "redis-server is not installed"; \
  test::RedisServer server;                                                                \
  ASSERT_TRUE(server.running()) << "redis-server did not start"

TieredCacheOptions machine(const fs::path& dir, const std::string& url, int wait_ms = 30000) {
  TieredCacheOptions o;
  o.writable_dir = dir;
  o.remote_url = url;
  o.remote_wait_ms = wait_ms;
  return o;
}

TEST(RedisTier, TwoMachinesShareEntries) {
  REQUIRE_REDIS(redis);
  test::TempDir dir;
  TieredCache a(machine(dir.path() / "a", redis.url())), b(machine(dir.path() / "b", redis.url()));
  const Entry entry = make_entry(key_of("shared"), 50000);
  EXPECT_FALSE(b.lookup(entry.meta.key));
  a.publish(entry);
  auto found = b.lookup(entry.meta.key);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->kind, TierKind::kRemote);
  EXPECT_EQ(found->entry.cubin, entry.cubin);
  EXPECT_TRUE(fs::exists(test::entry_path(dir.path() / "b", entry.meta.key))) << "stored locally";
  EXPECT_EQ(b.lookup(entry.meta.key)->kind, TierKind::kLocal);

  const Stats sb = b.local().stats();
  EXPECT_EQ(sb.counter(Counter::kRemoteMisses), 1u);
  EXPECT_EQ(sb.counter(Counter::kRemoteHits), 1u);
  EXPECT_EQ(a.local().stats().counter(Counter::kRemotePublishes), 1u);
  const auto tiers = b.tier_stats();
  ASSERT_EQ(tiers.size(), 2u);
  EXPECT_EQ(tiers[1].kind, TierKind::kRemote);
  EXPECT_TRUE(tiers[1].available);
  EXPECT_NE(tiers[1].state.find("PING"), std::string::npos) << tiers[1].state;
  EXPECT_EQ(tiers[1].hits, 1u);
}

TEST(RedisTier, CompileLockIsExclusiveReleasedOnlyByItsHolderAndExpires) {
  REQUIRE_REDIS(redis);
  auto a = make_redis_tier(redis.url(), 500, [](Counter, uint64_t) {});
  auto b = make_redis_tier(redis.url(), 500, [](Counter, uint64_t) {});
  const std::string key = key_of("locked");
  EXPECT_EQ(a->try_lock(key, "token-a", 10000), RemoteTier::LockResult::kAcquired);
  EXPECT_EQ(b->try_lock(key, "token-b", 10000), RemoteTier::LockResult::kHeldElsewhere);
  b->unlock(key, "token-b");  // not b's to release
  EXPECT_EQ(b->try_lock(key, "token-b", 10000), RemoteTier::LockResult::kHeldElsewhere);
  a->unlock(key, "token-a");
  EXPECT_EQ(b->try_lock(key, "token-b", 200), RemoteTier::LockResult::kAcquired);
  std::this_thread::sleep_for(std::chrono::milliseconds(350));  // b died holding it: it expires
  EXPECT_EQ(a->try_lock(key, "token-a2", 10000), RemoteTier::LockResult::kAcquired);
  b->unlock(key, "token-b");  // an expired holder cannot release the new holder's lock
  EXPECT_EQ(b->try_lock(key, "token-b3", 10000), RemoteTier::LockResult::kHeldElsewhere);
}

TEST(RedisTier, AMachineWaitsForAnotherMachinesCompile) {
  REQUIRE_REDIS(redis);
  test::TempDir dir;
  TieredCache a(machine(dir.path() / "a", redis.url())), b(machine(dir.path() / "b", redis.url()));
  const Entry entry = make_entry(key_of("compiled elsewhere"));
  TieredCache::ClaimResult first = a.claim_compile(entry.meta.key);
  ASSERT_TRUE(first.claim.held());
  ASSERT_FALSE(first.found);
  std::thread compiler([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // "compiling"
    a.publish(entry);
    first.claim = TieredCache::Claim();  // released after publishing
  });
  const auto t0 = Clock::now();
  TieredCache::ClaimResult second = b.claim_compile(entry.meta.key);
  compiler.join();
  EXPECT_FALSE(second.claim.held());
  ASSERT_TRUE(second.found) << "got the other machine's result instead of compiling";
  EXPECT_EQ(second.found->entry.cubin, entry.cubin);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(100));
  EXPECT_EQ(b.local().stats().counter(Counter::kRemoteLockWaits), 1u);
  EXPECT_TRUE(b.local().load(entry.meta.key, false));
}

TEST(RedisTier, TheWaitIsBoundedThenTheMachineCompilesItself) {
  REQUIRE_REDIS(redis);
  test::TempDir dir;
  TieredCache b(machine(dir.path() / "b", redis.url(), /*wait_ms=*/300));
  auto other = make_redis_tier(redis.url(), 500, [](Counter, uint64_t) {});
  const std::string key = key_of("never finished");
  ASSERT_EQ(other->try_lock(key, "stuck machine", 60000), RemoteTier::LockResult::kAcquired);
  testing::internal::CaptureStderr();
  const auto t0 = Clock::now();
  TieredCache::ClaimResult r = b.claim_compile(key);
  const auto waited = Clock::now() - t0;
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(r.found);
  EXPECT_FALSE(r.claim.held());
  EXPECT_GE(waited, std::chrono::milliseconds(290));
  EXPECT_LT(waited, std::chrono::milliseconds(1500));
  EXPECT_NE(err.find("DG_JIT_REMOTE_WAIT_MS"), std::string::npos) << err;
}

TEST(RedisTier, BadValuesAreNeverReturned) {
  REQUIRE_REDIS(redis);
  std::atomic<uint64_t> corrupt{0};
  auto tier = make_redis_tier(redis.url(), 500, [&](Counter c, uint64_t n) {
    if (c == Counter::kRemoteCorrupt) corrupt += n;
  });
  const Entry good = make_entry(key_of("k1"));
  // A valid entry stored under another key's name, plain garbage, a truncated entry and a value of another type.
  const auto bytes = encode_entry(good);
  const std::string as_text(bytes.begin(), bytes.end());
  ASSERT_EQ(test::redis_do(redis.port(), {"SET", "kiln:v1:entry:" + key_of("k2"), as_text}), "OK");
  ASSERT_EQ(test::redis_do(redis.port(), {"SET", "kiln:v1:entry:" + key_of("k3"), "garbage"}), "OK");
  ASSERT_EQ(test::redis_do(redis.port(), {"SET", "kiln:v1:entry:" + key_of("k4"), as_text.substr(0, 100)}), "OK");
  test::redis_do(redis.port(), {"RPUSH", "kiln:v1:entry:" + key_of("k5"), "a list"});
  testing::internal::CaptureStderr();
  for (const char* name : {"k2", "k3", "k4", "k5"}) EXPECT_FALSE(tier->lookup(key_of(name))) << name;
  EXPECT_FALSE(tier->lookup(key_of("k3")));  // seen again: not counted again
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(corrupt.load(), 4u);
  EXPECT_NE(err.find("key mismatch"), std::string::npos) << err;
  EXPECT_TRUE(tier->available()) << "a bad value is not an outage";
  // A publish overwrites whatever is there, lists included.
  Entry fixed = make_entry(key_of("k5"));
  EXPECT_TRUE(tier->publish(fixed));
  auto back = tier->lookup(key_of("k5"));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->cubin, fixed.cubin);
}

// A server on a loopback port that answers its first request with `answer(fd)` (then closes): the
// misbehaviours a serving path must survive within one DG_JIT_REMOTE_TIMEOUT_MS.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<void(int fd)> answer) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener_, 4), 0);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, answer = std::move(answer)] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      char buf[4096];
      if (::read(fd, buf, sizeof buf) > 0) answer(fd);
      ::close(fd);
    });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  bool stopping() const { return stop_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void send_text(int fd, std::string_view text) {
  [[maybe_unused]] ssize_t n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
}

struct Counts {
  std::atomic<uint64_t> errors{0}, corrupt{0}, misses{0};
  CountFn fn() {
    return [this](Counter c, uint64_t n) {
      if (c == Counter::kRemoteErrors) errors += n;
      if (c == Counter::kRemoteCorrupt) corrupt += n;
      if (c == Counter::kRemoteMisses) misses += n;
    };
  }
};

TEST(RedisTier, ProtocolGarbageMarksItDownWithoutACrash) {
  // A server that is not Redis: it answers a request with a line of nonsense.
  ScriptedServer server([](int fd) {
    send_text(fd, "HTTP/1.1 400 Bad Request\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  Counts counts;
  auto tier = make_redis_tier(server.url(), 1000, counts.fn());
  testing::internal::CaptureStderr();
  EXPECT_FALSE(tier->lookup(key_of("x")));
  EXPECT_FALSE(tier->publish(make_entry(key_of("x"))));
  EXPECT_EQ(tier->try_lock(key_of("x"), "t", 1000), RemoteTier::LockResult::kUnavailable);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(tier->available());
  EXPECT_EQ(counts.errors.load(), 1u);
  EXPECT_NE(err.find("cannot be used"), std::string::npos) << err;
}

// The socket timeout bounds each read: a server sending a byte at a time must still cost one timeout in all.
TEST(RedisTier, AServerThatDripsItsAnswerCostsOneTimeoutInAll) {
  ScriptedServer server([&server](int fd) {
    send_text(fd, "$100000\r\n");
    for (int i = 0; i < 200 && !server.stopping(); ++i) {
      send_text(fd, "x");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  Counts counts;
  auto tier = make_redis_tier(server.url(), 200, counts.fn());
  testing::internal::CaptureStderr();
  const auto start = Clock::now();
  EXPECT_FALSE(tier->lookup(key_of("drip")));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_LT(seconds, 1.0) << "a 200 ms request took " << seconds << " s";
  EXPECT_FALSE(tier->available());
  EXPECT_EQ(counts.errors.load(), 1u);
  EXPECT_NE(err.find("within 200 ms (DG_JIT_REMOTE_TIMEOUT_MS)"), std::string::npos) << err;
}

// hiredis would allocate a 2^31-element array for "*2147483647", or wait for a 1 TB value: refused from the
// first line, before it parses them.
TEST(RedisTier, ImplausibleAnswersAreRefusedFromTheirFirstLine) {
  for (const char* first_line : {"*2147483647\r\n", "$1099511627776\r\n"}) {
    ScriptedServer server([first_line](int fd) {
      send_text(fd, first_line);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    });
    Counts counts;
    auto tier = make_redis_tier(server.url(), 5000, counts.fn());
    testing::internal::CaptureStderr();
    const auto start = Clock::now();
    EXPECT_FALSE(tier->lookup(key_of(std::string("implausible") + first_line)));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_LT(seconds, 1.0) << first_line;
    EXPECT_FALSE(tier->available()) << first_line;
    EXPECT_EQ(counts.errors.load(), 1u) << first_line;
    EXPECT_NE(err.find("answered with a"), std::string::npos) << err;
  }
}

// NOAUTH, NOPERM, LOADING...: a server that cannot serve us is down (one warning, one error), not a bad value.
TEST(RedisTier, AnErrorAnswerOtherThanWrongtypeMarksItDown) {
  ScriptedServer server([](int fd) { send_text(fd, "-NOAUTH Authentication required.\r\n"); });
  Counts counts;
  auto tier = make_redis_tier(server.url(), 1000, counts.fn());
  testing::internal::CaptureStderr();
  EXPECT_FALSE(tier->lookup(key_of("noauth")));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(tier->available());
  EXPECT_EQ(counts.errors.load(), 1u);
  EXPECT_EQ(counts.corrupt.load(), 0u);
  EXPECT_NE(err.find("NOAUTH"), std::string::npos) << err;
}

// `kiln cache stats` checks reachability: a remote it finds down is shown so, not counted as a serving error.
TEST(RedisTier, AReachabilityCheckCountsNoError) {
  Counts counts;
  auto tier = make_redis_tier("redis://127.0.0.1:" + std::to_string(test::free_loopback_port()), 200, counts.fn());
  testing::internal::CaptureStderr();
  const TierStats stats = tier->tier_stats();
  testing::internal::GetCapturedStderr();
  EXPECT_FALSE(stats.available);
  EXPECT_EQ(counts.errors.load(), 0u);
}

// A kernel's lookup is one miss, however often it looks again (after the lock, while waiting).
TEST(RedisTier, LookingAgainCountsNoMiss) {
  REQUIRE_REDIS(redis);
  Counts counts;
  auto tier = make_redis_tier(redis.url(), 500, counts.fn());
  EXPECT_FALSE(tier->lookup(key_of("again")));
  EXPECT_FALSE(tier->look_again(key_of("again")));
  EXPECT_FALSE(tier->look_again(key_of("again")));
  EXPECT_EQ(counts.misses.load(), 1u);
}

TEST(RedisTier, PasswordAndDatabase) {
  if (test::redis_server_path().empty()) GTEST_SKIP() << "redis-server is not installed";
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  ASSERT_EQ(test::redis_do(redis.port(), {"CONFIG", "SET", "requirepass", "s3cret"}), "OK");
  const std::string base = "redis://:s3cret@127.0.0.1:" + std::to_string(redis.port());
  auto db3 = make_redis_tier(base + "/3", 500, [](Counter, uint64_t) {});
  const Entry entry = make_entry(key_of("in db 3"));
  ASSERT_TRUE(db3->publish(entry));
  EXPECT_TRUE(db3->lookup(entry.meta.key));
  auto db0 = make_redis_tier(base + "/0", 500, [](Counter, uint64_t) {});
  EXPECT_FALSE(db0->lookup(entry.meta.key)) << "another database";
  EXPECT_TRUE(db0->available());

  auto wrong = make_redis_tier("redis://:nope@127.0.0.1:" + std::to_string(redis.port()), 500,
                               [](Counter, uint64_t) {});
  testing::internal::CaptureStderr();
  EXPECT_FALSE(wrong->lookup(entry.meta.key));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(wrong->available());
  EXPECT_NE(err.find("AUTH"), std::string::npos) << err;
  EXPECT_EQ(err.find("nope"), std::string::npos) << "the password is never printed: " << err;
}

#endif  // KILN_HAVE_HIREDIS

}  // namespace
}  // namespace kiln::cache
