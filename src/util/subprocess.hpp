// Running a child program without a shell: an argv vector (so paths with spaces or quotes need no escaping),
// stdout and stderr captured together, an optional working directory and a timeout that kills the child's
// whole process group (NVCC starts cicc and ptxas; killing only NVCC would leave them running).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::util {

struct SubprocessOptions {
  // argv[0] is the program: a path when it contains '/', else a name searched in PATH.
  std::vector<std::string> argv;
  // The child's working directory; empty inherits ours.
  std::filesystem::path working_directory;
  // Wall-clock limit in milliseconds; 0 means none. When it passes, the child's process group is killed
  // with SIGKILL and the result says timed_out.
  int64_t timeout_ms = 0;
};

struct SubprocessResult {
  int exit_code = -1;      // the exit status when the child exited normally, else -1
  int term_signal = 0;     // the signal that ended the child, else 0
  bool timed_out = false;  // the timeout passed and the child was killed
  std::string output;      // stdout and stderr, interleaved as written
  double elapsed_ms = 0;

  bool succeeded() const { return !timed_out && term_signal == 0 && exit_code == 0; }
  // "exit status 2", "killed by signal 11 (Segmentation fault)", "timed out after 5 s and was killed".
  std::string describe_status() const;
};

// Runs the program and waits for it (and for its output to close). The child starts in a new process group
// with stdin from /dev/null and default signal dispositions; any process it leaves running in that group
// after it exits, still holding the output open, is killed. Thread-safe.
// Throws Error(kNotFound) naming the program and strerror when it cannot be started (missing, not
// executable, bad working directory), and Error(kValueError) when argv is empty.
SubprocessResult run_subprocess(const SubprocessOptions& options);

// Sends SIGKILL to the process group of every child run_subprocess is waiting for (up to 256 at once; more are
// not tracked). Async-signal-safe: it reads a table of atomics and calls kill(2), nothing else.
void kill_running_subprocesses() noexcept;

// The argv as one line for display and error messages, each argument quoted the way a POSIX shell would
// need it ("nvcc -I'/path with spaces'"). Never executed.
std::string join_command(const std::vector<std::string>& argv);

// Whether `path` is a regular file this process may execute.
bool is_executable_file(const std::filesystem::path& path);

// The first executable file called `name` in the directories of `path_list` (a PATH-style ':'-separated list), as
// an absolute path, or an empty path. Empty entries (the working directory, to a shell) are skipped: a tool
// should not depend on where a program was started. A relative entry's find is made absolute, since the tools
// run in directories of their own.
std::filesystem::path find_in_path_list(std::string_view path_list, const std::string& name);

// The same in $PATH.
std::filesystem::path find_in_path(const std::string& name);

}  // namespace kiln::util
