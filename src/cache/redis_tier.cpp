#include "cache/redis_tier.hpp"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "cache/entry_format.hpp"
#include "kiln/error.hpp"
#include "util/redis_url.hpp"
#include "util/warn.hpp"

#if KILN_HAVE_HIREDIS
#include <pthread.h>
#include <unistd.h>
#include <signal.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#if KILN_HAVE_HIREDIS_SSL
#include <hiredis/hiredis_ssl.h>
#endif
#endif

namespace kiln::cache {

bool redis_supported() noexcept {
#if KILN_HAVE_HIREDIS
  return true;
#else
  return false;
#endif
}

bool redis_tls_supported() noexcept {
#if KILN_HAVE_HIREDIS_SSL
  return true;
#else
  return false;
#endif
}

#if KILN_HAVE_HIREDIS
namespace {

constexpr std::string_view kEntryPrefix = "kiln:v1:entry:";
constexpr std::string_view kLockPrefix = "kiln:v1:lock:";
// Deletes the lock only if the token still holds it: a lock that expired and was taken by another machine
// must not be released by the one it expired on.
constexpr std::string_view kUnlockScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

// hiredis writes to its socket with write(2): a server that closed the connection would raise SIGPIPE, whose
// default action kills the process. A library may not change the process's signal disposition, so SIGPIPE is
// blocked in this thread for the duration of a request and a SIGPIPE it raised is consumed before unblocking.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    already_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_mask_);
  }
  ~SigpipeGuard() {
    if (!already_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_set_{};
  sigset_t old_mask_{};
  bool already_pending_ = false;
};

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisTier final : public RemoteTier {
 public:
  RedisTier(util::RedisUrl url, int timeout_ms, CountFn count)
      : url_(std::move(url)), timeout_ms_(timeout_ms), count_(std::move(count)), name_("remote") {}

  ~RedisTier() override {
    std::lock_guard<std::mutex> lock(mutex_);
    disconnect();
  }

  const std::string& name() const override { return name_; }
  TierKind kind() const override { return TierKind::kRemote; }
  bool writable() const override { return available(); }
  bool available() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return down_reason_.empty();
  }

  std::optional<Entry> lookup(const std::string& key) override { return fetch(key, /*count_miss=*/true); }
  std::optional<Entry> look_again(const std::string& key) override { return fetch(key, /*count_miss=*/false); }

  std::optional<Entry> fetch(const std::string& key, bool count_miss) {
    check_key(key);
    const std::string name = std::string(kEntryPrefix) + key;
    Reply reply;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // A value already found bad is not fetched again (it may be large): this process compiles the kernel
      // and overwrites it.
      if (bad_keys_.count(key)) return std::nullopt;
      reply = command({"GET", name});
    }
    if (!reply) return std::nullopt;  // down
    if (reply->type == REDIS_REPLY_NIL) {
      if (count_miss) count_(Counter::kRemoteMisses, 1);
      return std::nullopt;
    }
    std::string why;
    if (reply->type == REDIS_REPLY_STRING) {
      const auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(reply->str), reply->len);
      DecodeResult decoded = decode_entry(bytes, key);
      if (decoded.ok()) return std::move(decoded.entry);
      why = decoded.reason;
    } else {
      // Only WRONGTYPE reaches here among errors (command() marks the tier down on the others).
      why = reply->type == REDIS_REPLY_ERROR ? "the server answered: " + std::string(reply->str, reply->len)
                                             : "the value is not a string";
    }
    // Never a wrong kernel: a bad value is counted (once per key and process: the composer looks again after
    // taking the compile lock) and ignored; the compile that follows overwrites it.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!bad_keys_.insert(key).second) return std::nullopt;
    }
    count_(Counter::kRemoteCorrupt, 1);
    util::warn_once("remote-corrupt:" + key, "the remote cache " + url_.display() +
                                                 " holds an unusable value for kernel " + key + " (" + why +
                                                 "); it is ignored and will be overwritten");
    return std::nullopt;
  }

  bool publish(const Entry& entry) override {
    check_key(entry.meta.key);
    const std::vector<uint8_t> bytes = encode_entry(entry);
    std::lock_guard<std::mutex> lock(mutex_);
    Reply reply = command({"SET", std::string(kEntryPrefix) + entry.meta.key,
                           std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
    if (!reply || reply->type != REDIS_REPLY_STATUS) return false;
    bad_keys_.erase(entry.meta.key);  // overwritten: worth fetching again
    return true;
  }

  LockResult try_lock(const std::string& key, const std::string& token, int ttl_ms) override {
    check_key(key);
    std::lock_guard<std::mutex> lock(mutex_);
    Reply reply = command({"SET", std::string(kLockPrefix) + key, token, "NX", "PX", std::to_string(ttl_ms)},
                          kErrorsAreAnswers);
    if (!reply) return LockResult::kUnavailable;
    if (reply->type == REDIS_REPLY_STATUS) return LockResult::kAcquired;
    if (reply->type == REDIS_REPLY_NIL) return LockResult::kHeldElsewhere;
    // An error reply (a server refusing SET options, say): compile without the lock, which is still correct.
    return LockResult::kUnavailable;
  }

  void unlock(const std::string& key, const std::string& token) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string name = std::string(kLockPrefix) + key;
    Reply reply = command({"EVAL", kUnlockScript, "1", name, token}, kErrorsAreAnswers);
    if (reply && reply->type == REDIS_REPLY_ERROR) {
      // Scripting disabled (some managed servers): compare and delete in two steps; the gap can only delete a
      // lock that expired within it, which costs at most a duplicate compile.
      Reply held = command({"GET", name});
      if (held && held->type == REDIS_REPLY_STRING && std::string_view(held->str, held->len) == token)
        command({"DEL", name});
    }
  }

  TierStats tier_stats() override {
    TierStats t;
    t.name = name_;
    t.kind = TierKind::kRemote;
    t.location = url_.display();
    std::lock_guard<std::mutex> lock(mutex_);
    // Reachability now (at most one timeout): `kiln cache stats` is how people check a remote setup.
    if (down_reason_.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      counting_errors_ = false;  // a report is not an outage of the serving path: no count in the shared stats
      Reply reply = command({"PING"});
      counting_errors_ = true;
      if (reply) {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.2f",
                      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        t.state = std::string("ok (PING ") + ms + " ms)";
      }
    }
    t.available = down_reason_.empty();
    t.writable = t.available;
    if (!t.available) t.state = "down: " + down_reason_;
    return t;
  }

 private:
  static void check_key(const std::string& key) {
    if (!is_valid_key(key))
      throw Error(ErrorKind::kValueError,
                  "RedisTier: key must be 32 lowercase hexadecimal characters, got \"" + key + "\"");
  }

  struct timeval timeout() const {
    struct timeval tv;
    tv.tv_sec = timeout_ms_ / 1000;
    tv.tv_usec = (timeout_ms_ % 1000) * 1000;
    return tv;
  }

  void disconnect() {
    if (context_) redisFree(context_);
    context_ = nullptr;
  }

  // Records the first failure: one warning, one count, and the tier is skipped from then on. Under mutex_.
  void mark_down(const std::string& why) {
    disconnect();
    if (!down_reason_.empty()) return;
    down_reason_ = why;
    if (counting_errors_) count_(Counter::kRemoteErrors, 1);
    util::warn_once("remote-down:" + url_.display(),
                    "the remote cache " + url_.display() + " cannot be used (" + why +
                        "); this process carries on without it, compiling locally, and does not contact it again");
  }

  std::string failure_text(const redisContext* c) const {
    const std::string text = c ? c->errstr : "cannot allocate a connection";
    const bool timed_out = c && c->err == REDIS_ERR_IO &&
                           (text.find("temporarily unavailable") != std::string::npos ||
                            text.find("timed out") != std::string::npos || text.find("Timeout") != std::string::npos);
    if (timed_out)
      return "no answer within " + std::to_string(timeout_ms_) + " ms (DG_JIT_REMOTE_TIMEOUT_MS): " + text;
    return text.empty() ? "connection lost" : text;
  }

  // Connects (once) with the timeout, authenticates and selects the database. Under mutex_.
  bool connect() {
    if (context_ && pid_ != ::getpid()) {
      // A forked child shares the parent's socket: replies would interleave. Close the child's copy of the
      // descriptor (the parent's connection is unaffected) and connect anew.
      redisFree(context_);
      context_ = nullptr;
    }
    if (context_) return true;
    if (!down_reason_.empty()) return false;
    context_ = redisConnectWithTimeout(url_.host.c_str(), url_.port, timeout());
    if (!context_ || context_->err) {
      mark_down("cannot connect to " + url_.host + ":" + std::to_string(url_.port) + ": " + failure_text(context_));
      return false;
    }
    redisSetTimeout(context_, timeout());
    pid_ = ::getpid();
#if KILN_HAVE_HIREDIS_SSL
    if (url_.tls) {
      static std::once_flag init;
      std::call_once(init, [] { redisInitOpenSSL(); });
      redisSSLContextError ssl_error = REDIS_SSL_CTX_NONE;
      redisSSLContext* ssl = redisCreateSSLContext(nullptr, nullptr, nullptr, nullptr, url_.host.c_str(), &ssl_error);
      if (!ssl || redisInitiateSSLWithContext(context_, ssl) != REDIS_OK) {
        mark_down(std::string("TLS handshake failed: ") +
                  (ssl ? context_->errstr : redisSSLContextGetError(ssl_error)));
        return false;
      }
      ssl_ = ssl;
    }
#endif
    if (!url_.password.empty()) {
      Reply reply = url_.username.empty() ? raw_command({"AUTH", url_.password}, kErrorsAreAnswers)
                                          : raw_command({"AUTH", url_.username, url_.password}, kErrorsAreAnswers);
      if (!reply || reply->type == REDIS_REPLY_ERROR) {
        if (context_) mark_down("AUTH was refused" + (reply ? ": " + std::string(reply->str, reply->len) : ""));
        return false;
      }
    }
    if (url_.db != 0) {
      Reply reply = raw_command({"SELECT", std::to_string(url_.db)}, kErrorsAreAnswers);
      if (!reply || reply->type == REDIS_REPLY_ERROR) {
        if (context_) mark_down("SELECT " + std::to_string(url_.db) + " was refused" +
                                (reply ? ": " + std::string(reply->str, reply->len) : ""));
        return false;
      }
    }
    return true;
  }

  // Whether an error reply is an answer the caller handles (AUTH, SELECT, EVAL without scripting) or a server
  // that cannot serve us (NOAUTH, NOPERM, LOADING, OOM...), which marks the tier down. WRONGTYPE, a key
  // holding something else, is always an answer: the value is bad, not the server.
  static constexpr bool kErrorsAreAnswers = true;

  // Why a reply whose first line is `line` (type byte and number, without CRLF) is refused before hiredis
  // parses it, or empty: an entry's value is bounded (kMaxEntryBytes), and no command kiln sends is answered
  // with more than a few elements (hiredis would allocate a 2^31-element array for "*2147483647").
  static std::string implausible_reply(std::string_view line) {
    if (line.size() < 2) return {};
    const char type = line[0];
    long long n = 0;
    auto [end, ec] = std::from_chars(line.data() + 1, line.data() + line.size(), n);
    if (ec != std::errc() || end != line.data() + line.size()) return {};  // hiredis reports a protocol error
    if (type == '$' && n > static_cast<long long>(kMaxEntryBytes))
      return "answered with a value of " + std::to_string(n) + " bytes, over an entry's bound of " +
             std::to_string(kMaxEntryBytes);
    if ((type == '*' || type == '%' || type == '~' || type == '>') && n > 64)
      return "answered with an aggregate of " + std::to_string(n) + " elements, where kiln expects a value";
    return {};
  }

  // Sets the socket's timeouts to what is left before `deadline`; false when nothing is left.
  bool time_left_until(std::chrono::steady_clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    struct timeval tv;
    tv.tv_sec = static_cast<time_t>(left / 1000000);
    tv.tv_usec = static_cast<suseconds_t>(left % 1000000);
    return redisSetTimeout(context_, tv) == REDIS_OK;
  }

  // One request on the open connection, within one DG_JIT_REMOTE_TIMEOUT_MS in all (the socket timeout alone
  // bounds each read, and a server sending a byte at a time would hold the serving path forever); nullptr (and
  // the tier marked down) on any failure. Under mutex_.
  Reply raw_command(std::initializer_list<std::string_view> args, bool errors_are_answers = false) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    SigpipeGuard guard;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
    const std::string too_slow =
        "no complete answer within " + std::to_string(timeout_ms_) + " ms (DG_JIT_REMOTE_TIMEOUT_MS)";
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK) {
      mark_down(failure_text(context_));
      return nullptr;
    }
    for (int sent = 0; !sent;) {
      if (!time_left_until(deadline)) {
        mark_down(too_slow);
        return nullptr;
      }
      if (redisBufferWrite(context_, &sent) != REDIS_OK) {
        mark_down(failure_text(context_));
        return nullptr;
      }
    }
    void* raw = nullptr;
    bool first_line_checked = false;
    for (;;) {
      if (!first_line_checked) {
        const redisReader* reader = context_->reader;
        const std::string_view buffered(reader->buf + reader->pos, reader->len - reader->pos);
        if (const size_t eol = buffered.find("\r\n"); eol != std::string_view::npos) {
          if (const std::string why = implausible_reply(buffered.substr(0, eol)); !why.empty()) {
            mark_down(why);
            return nullptr;
          }
          first_line_checked = true;
        }
      }
      if (first_line_checked && redisGetReplyFromReader(context_, &raw) != REDIS_OK) {
        mark_down(failure_text(context_));
        return nullptr;
      }
      if (raw) break;
      if (!time_left_until(deadline)) {
        mark_down(too_slow);
        return nullptr;
      }
      if (redisBufferRead(context_) != REDIS_OK) {
        mark_down(failure_text(context_));
        return nullptr;
      }
    }
    Reply reply(static_cast<redisReply*>(raw));
    if (reply->type == REDIS_REPLY_ERROR && !errors_are_answers &&
        !std::string_view(reply->str, reply->len).starts_with("WRONGTYPE")) {
      mark_down("the server answered " + std::string(*args.begin()) + " with an error: " +
                std::string(reply->str, reply->len));
      return nullptr;
    }
    return reply;
  }

  Reply command(std::initializer_list<std::string_view> args, bool errors_are_answers = false) {
    if (!connect()) return nullptr;
    return raw_command(args, errors_are_answers);
  }

  util::RedisUrl url_;
  int timeout_ms_;
  CountFn count_;
  std::string name_;
  mutable std::mutex mutex_;
  redisContext* context_ = nullptr;
  pid_t pid_ = 0;  // the process that connected
  std::string down_reason_;  // empty while usable
  bool counting_errors_ = true;  // false while tier_stats checks reachability
  std::set<std::string> bad_keys_;  // keys whose bad value was already counted and reported
#if KILN_HAVE_HIREDIS_SSL
  redisSSLContext* ssl_ = nullptr;  // kept for the life of the tier (hiredis does not own it)
#endif
};

}  // namespace
#endif  // KILN_HAVE_HIREDIS

std::unique_ptr<RemoteTier> make_redis_tier(const std::string& url_text, int timeout_ms, CountFn count) {
  std::string why;
  std::optional<util::RedisUrl> url = util::parse_redis_url(url_text, &why);
  if (!url) throw Error(ErrorKind::kConfigError, "DG_JIT_REMOTE_CACHE is not a Redis URL: " + why);
  if (!redis_supported())
    throw Error(ErrorKind::kConfigError,
                "DG_JIT_REMOTE_CACHE='" + url->display() +
                    "' is set, but this kiln was built without hiredis, so it has no remote cache tier; install "
                    "hiredis (Debian: libhiredis-dev; scripts/install-deps.sh does) and rebuild kiln, or unset "
                    "DG_JIT_REMOTE_CACHE");
  if (url->tls && !redis_tls_supported())
    throw Error(ErrorKind::kConfigError,
                "DG_JIT_REMOTE_CACHE='" + url->display() +
                    "' asks for TLS (rediss://), but this kiln was built without hiredis_ssl (hiredis 1.0 or newer "
                    "with SSL support); use redis:// (for example through a TLS tunnel) or rebuild kiln against a "
                    "hiredis with hiredis_ssl");
#if KILN_HAVE_HIREDIS
  return std::make_unique<RedisTier>(std::move(*url), timeout_ms, std::move(count));
#else
  (void)timeout_ms;
  (void)count;
  return nullptr;
#endif
}

}  // namespace kiln::cache
