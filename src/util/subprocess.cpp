#include "util/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "kiln/error.hpp"

extern char** environ;

namespace kiln::util {
namespace {

using Clock = std::chrono::steady_clock;

// The process groups of the children now running, for kill_running_subprocesses (from a signal handler, so a
// fixed table of lock-free atomics: 0 is a free slot). A group is entered once spawned and left before the
// child is reaped: until then its id cannot be reused, so a kill never reaches another program's group.
constexpr size_t kTrackedChildren = 256;
std::array<std::atomic<pid_t>, kTrackedChildren> g_running_groups{};
static_assert(std::atomic<pid_t>::is_always_lock_free);

// Holds one slot of g_running_groups for the life of a child (none when the table is full).
class RunningGroup {
 public:
  explicit RunningGroup(pid_t group) {
    for (auto& slot : g_running_groups) {
      pid_t expected = 0;
      if (slot.compare_exchange_strong(expected, group)) {
        slot_ = &slot;
        return;
      }
    }
  }
  ~RunningGroup() { leave(); }
  void leave() {
    if (slot_) slot_->store(0);
    slot_ = nullptr;
  }
  RunningGroup(const RunningGroup&) = delete;
  RunningGroup& operator=(const RunningGroup&) = delete;

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Owns the posix_spawn attribute objects so every exit path destroys them.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

// Whether the child has exited, without reaping it: while it is an unreaped zombie its pid (and so its
// process group id) cannot be reused, which keeps kill(-pid) aimed at our own group.
bool has_exited(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return info.si_pid == pid;
}

std::string quote_argument(const std::string& arg) {
  if (arg.empty()) return "''";
  bool plain = true;
  for (char c : arg) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::strchr("@%+=:,./-_", c))) {
      plain = false;
      break;
    }
  }
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace

std::string SubprocessResult::describe_status() const {
  if (timed_out) return "timed out after " + std::to_string(static_cast<int64_t>(elapsed_ms / 1000)) + " s and was killed";
  if (term_signal != 0)
    return "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
  return "exit status " + std::to_string(exit_code);
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += quote_argument(a);
  }
  return out;
}

bool is_executable_file(const std::filesystem::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::filesystem::path find_in_path_list(std::string_view path_list, const std::string& name) {
  if (name.empty()) return {};
  while (true) {
    const size_t colon = path_list.find(':');
    const std::string_view dir = path_list.substr(0, colon);
    const std::filesystem::path candidate = std::filesystem::path(std::string(dir)) / name;
    if (!dir.empty() && is_executable_file(candidate)) {
      std::error_code ec;
      const std::filesystem::path absolute = std::filesystem::absolute(candidate, ec);
      return ec ? candidate : absolute.lexically_normal();
    }
    if (colon == std::string_view::npos) return {};
    path_list.remove_prefix(colon + 1);
  }
}

std::filesystem::path find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  return path ? find_in_path_list(path, name) : std::filesystem::path();
}

SubprocessResult run_subprocess(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty())
    throw Error(ErrorKind::kValueError, "run_subprocess: argv is empty; expected at least the program to run");
  const std::string& program = options.argv[0];

  int pipe_fds[2];
  // O_CLOEXEC keeps the pipe out of children that other threads start concurrently; dup2 in the file actions
  // clears the flag on the child's copies (fds 1 and 2).
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw Error(ErrorKind::kInternal, std::string("pipe2 failed while starting ") + program + ": " + strerror(errno));
  Fd read_end{pipe_fds[0]};
  Fd write_end{pipe_fds[1]};

  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, write_end.fd, 1);
  posix_spawn_file_actions_adddup2(&setup.actions, write_end.fd, 2);
  if (!options.working_directory.empty())
    posix_spawn_file_actions_addchdir_np(&setup.actions, options.working_directory.c_str());

  // A new process group (so the timeout can kill the grandchildren too), an empty signal mask and default
  // dispositions: the parent may block or ignore signals (SIGPIPE, SIGINT) that the child must see normally.
  sigset_t empty_mask, all_signals;
  sigemptyset(&empty_mask);
  sigfillset(&all_signals);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setsigmask(&setup.attr, &empty_mask);
  posix_spawnattr_setsigdefault(&setup.attr, &all_signals);
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> args_copy = options.argv;
  std::vector<char*> args;
  for (auto& a : args_copy) args.push_back(a.data());
  args.push_back(nullptr);

  const auto start = Clock::now();
  pid_t pid = 0;
  const bool search_path = program.find('/') == std::string::npos;
  int rc = search_path ? posix_spawnp(&pid, program.c_str(), &setup.actions, &setup.attr, args.data(), environ)
                       : posix_spawn(&pid, program.c_str(), &setup.actions, &setup.attr, args.data(), environ);
  write_end.reset();  // the child has its own copies; EOF on read_end then means every writer is gone
  if (rc != 0) {
    std::string where = options.working_directory.empty()
                            ? std::string()
                            : " (working directory '" + options.working_directory.string() + "')";
    throw Error(ErrorKind::kNotFound, "cannot start '" + program + "'" + where + ": " + strerror(rc) +
                                          (search_path ? " (searched in PATH)" : ""));
  }

  RunningGroup running(pid);  // the child's group id is its pid (POSIX_SPAWN_SETPGROUP with 0)
  SubprocessResult result;
  const bool has_deadline = options.timeout_ms > 0;
  const auto deadline = start + std::chrono::milliseconds(options.timeout_ms);
  bool eof = false, exited = false, killed = false;
  Clock::time_point killed_at;
  std::array<char, 16384> buffer;

  while (!(eof && exited)) {
    // Poll in short slices so that a child that exits while a grandchild keeps the pipe open is noticed.
    int slice_ms = 50;
    if (has_deadline && !killed) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      slice_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, slice_ms)));
    }
    if (!eof) {
      pollfd pfd{read_end.fd, POLLIN, 0};
      int ready = ::poll(&pfd, 1, slice_ms);
      if (ready > 0) {
        ssize_t n = ::read(read_end.fd, buffer.data(), buffer.size());
        if (n > 0)
          result.output.append(buffer.data(), static_cast<size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
          eof = true;
      }
    } else if (!exited) {
      ::usleep(static_cast<useconds_t>(std::max(1, std::min(slice_ms, 10)) * 1000));
    }
    if (!exited) exited = has_exited(pid);
    if (killed) {
      // A process that left our group (setsid) may keep the pipe open forever: stop reading after a grace.
      if (exited && !eof && Clock::now() - killed_at > std::chrono::seconds(2)) eof = true;
      continue;
    }
    if (has_deadline && Clock::now() >= deadline && !(eof && exited)) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      killed = true;
      killed_at = Clock::now();
    } else if (exited && !eof) {
      // The child is gone but something it started still holds the output open: drain what is there, then
      // end the leftovers, which belong to this command's process group.
      pollfd pfd{read_end.fd, POLLIN, 0};
      while (::poll(&pfd, 1, 0) > 0) {
        ssize_t n = ::read(read_end.fd, buffer.data(), buffer.size());
        if (n <= 0) {
          eof = true;
          break;
        }
        result.output.append(buffer.data(), static_cast<size_t>(n));
      }
      if (!eof) {
        ::kill(-pid, SIGKILL);
        killed = true;
        killed_at = Clock::now();
      }
    }
  }

  running.leave();  // before the reap that frees the group id
  int status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  result.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (waited == pid) {
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  }
  // waited < 0 (ECHILD) happens only when the application ignores SIGCHLD; the status is then unknown and
  // exit_code stays -1, which reads as a failure.
  return result;
}

void kill_running_subprocesses() noexcept {
  for (auto& slot : g_running_groups)
    if (const pid_t group = slot.load(); group > 0) ::kill(-group, SIGKILL);
}

}  // namespace kiln::util
