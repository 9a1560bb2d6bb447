// A real redis-server for the remote-tier tests: started on a free loopback port, with no persistence, and
// stopped (SIGKILL, reaped) when the object goes away. Tests skip when redis-server is not installed.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#if KILN_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

extern char** environ;

namespace kiln::test {

// A port nobody listens on right now (the kernel picks one; there is a small window before it is reused).
inline int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

inline bool port_accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

inline std::string redis_server_path() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

class RedisServer {
 public:
  RedisServer() { start(); }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // Starts (again, on the same port when restarting). Bounded: gives up after about 5 s.
  bool start() {
    const std::string server = redis_server_path();
    if (server.empty() || pid_ > 0) return pid_ > 0;
    for (int attempt = 0; attempt < 3 && pid_ <= 0; ++attempt) {
      if (port_ <= 0 || attempt > 0) port_ = free_loopback_port();
      std::vector<std::string> args = {server, "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no", "--daemonize", "no",
                                       "--loglevel", "warning", "--logfile", "/dev/null", "--dir", "/tmp",
                                       "--enable-debug-command", "local"};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      pid_t pid = 0;
      if (posix_spawn(&pid, server.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return false;
      for (int i = 0; i < 250; ++i) {  // up to 5 s
        if (port_accepts(port_)) {
          pid_ = pid;
          break;
        }
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) break;  // exited: port taken, try another
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (pid_ <= 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    return pid_ > 0;
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
};

#if KILN_HAVE_HIREDIS
// One request on a fresh connection (the tests' own client, to plant values and stall the server); the reply
// as text ("" for nil or failure).
inline std::string redis_do(int port, const std::vector<std::string>& args, int timeout_ms = 2000) {
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    return "";
  }
  redisSetTimeout(c, tv);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  std::string out;
  if (r) {
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
      out.assign(r->str, r->len);
    else if (r->type == REDIS_REPLY_INTEGER)
      out = std::to_string(r->integer);
    freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

// Sends a request without waiting for its reply (DEBUG SLEEP stalls the server for everyone).
inline void redis_send_and_forget(int port, const std::vector<std::string>& args) {
  std::thread([port, args] { redis_do(port, args, 5000); }).detach();
}
#endif

}  // namespace kiln::test
