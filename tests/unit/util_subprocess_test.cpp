// util::run_subprocess: argv without a shell, captured output, working directory, timeout killing the
// whole process group, and the errors for programs that cannot start.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "kiln/error.hpp"
#include "test_support.hpp"
#include "util/subprocess.hpp"

namespace kiln::util {
namespace {

namespace fs = std::filesystem;

TEST(Subprocess, CapturesStdoutAndStderrAndExitStatus) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "echo out; echo err 1>&2; exit 3"};
  SubprocessResult r = run_subprocess(o);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.succeeded());
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.output.find("out\n"), std::string::npos);
  EXPECT_NE(r.output.find("err\n"), std::string::npos);
  EXPECT_EQ(r.describe_status(), "exit status 3");
}

TEST(Subprocess, ArgumentsWithSpacesAndQuotesArriveVerbatim) {
  test::TempDir dir;
  const fs::path odd = dir.path() / "a dir with spaces 'and quotes'";
  fs::create_directories(odd);
  SubprocessOptions o;
  o.argv = {"printf", "[%s]\n", odd.string(), "$HOME", "a;b"};  // no shell: nothing is expanded
  SubprocessResult r = run_subprocess(o);
  ASSERT_TRUE(r.succeeded()) << r.output;
  EXPECT_EQ(r.output, "[" + odd.string() + "]\n[$HOME]\n[a;b]\n");
}

TEST(Subprocess, RunsInTheWorkingDirectory) {
  test::TempDir dir;
  const fs::path wd = dir.path() / "work dir";
  fs::create_directories(wd);
  SubprocessOptions o;
  o.argv = {"pwd", "-P"};
  o.working_directory = wd;
  SubprocessResult r = run_subprocess(o);
  ASSERT_TRUE(r.succeeded()) << r.output;
  EXPECT_EQ(r.output, fs::canonical(wd).string() + "\n");
}

TEST(Subprocess, TimeoutKillsTheChildAndItsProcessGroup) {
  test::TempDir dir;
  const fs::path pid_file = dir.path() / "grandchild.pid";
  // The shell starts a grandchild `sleep` in the background, records its pid, then sleeps itself.
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 30 & echo $! > '" + pid_file.string() + "'; echo started; sleep 30"};
  o.timeout_ms = 500;
  const auto start = std::chrono::steady_clock::now();
  SubprocessResult r = run_subprocess(o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_LT(seconds, 5.0);
  EXPECT_NE(r.output.find("started"), std::string::npos);
  EXPECT_NE(r.describe_status().find("timed out"), std::string::npos);

  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  in >> grandchild;
  ASSERT_GT(grandchild, 0);
  // The grandchild was in the same process group: it must be gone (or a zombie about to be reaped by init).
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid_text, comm, state;
    gone = !(stat >> pid_text >> comm >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " survived the timeout";
}

// What a SIGINT handler calls: every running child's group is killed, from another thread, at once.
TEST(Subprocess, KillRunningSubprocessesEndsEveryRunningChild) {
  test::TempDir dir;
  std::vector<std::future<SubprocessResult>> results;
  for (int i = 0; i < 3; ++i)
    results.push_back(std::async(std::launch::async, [&dir, i] {
      SubprocessOptions o;
      o.argv = {"/bin/sh", "-c", "touch '" + (dir.path() / std::to_string(i)).string() + "'; sleep 30"};
      o.timeout_ms = 60000;
      return run_subprocess(o);
    }));
  for (int waited_ms = 0; waited_ms < 30000; waited_ms += 10) {  // until all three have started
    int started = 0;
    for (int i = 0; i < 3; ++i) started += fs::exists(dir.path() / std::to_string(i));
    if (started == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // A child can run before its spawning thread has entered it in the table (a loaded machine): kill until all
  // three calls return, which must be long before their 30 s sleeps end.
  const auto start = std::chrono::steady_clock::now();
  auto all_returned = [&] {
    for (auto& r : results)
      if (r.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) return false;
    return true;
  };
  while (!all_returned() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    kill_running_subprocesses();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  for (auto& future : results) {
    const SubprocessResult r = future.get();
    EXPECT_EQ(r.term_signal, SIGKILL) << r.describe_status();
    EXPECT_FALSE(r.timed_out);
  }
  // Nothing is left registered: a new child runs normally beside another call.
  kill_running_subprocesses();
  SubprocessOptions quick;
  quick.argv = {"/bin/sh", "-c", "exit 3"};
  EXPECT_EQ(run_subprocess(quick).exit_code, 3);
}

TEST(Subprocess, NoTimeoutWhenTheChildIsQuick) {
  SubprocessOptions o;
  o.argv = {"true"};
  o.timeout_ms = 10'000;
  SubprocessResult r = run_subprocess(o);
  EXPECT_TRUE(r.succeeded());
  EXPECT_LT(r.elapsed_ms, 5000);
}

TEST(Subprocess, ABackgroundProcessHoldingTheOutputDoesNotHangTheCaller) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 30 & echo done"};
  const auto start = std::chrono::steady_clock::now();
  SubprocessResult r = run_subprocess(o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("done"), std::string::npos);
  EXPECT_LT(seconds, 5.0);
}

TEST(Subprocess, ReportsASignal) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "kill -SEGV $$"};
  SubprocessResult r = run_subprocess(o);
  EXPECT_EQ(r.term_signal, SIGSEGV);
  EXPECT_NE(r.describe_status().find("signal 11"), std::string::npos);
}

TEST(Subprocess, MissingProgramIsNotFoundNamingIt) {
  SubprocessOptions o;
  o.argv = {"/no/such/dir/nvcc", "--version"};
  try {
    run_subprocess(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/no/such/dir/nvcc"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos);
  }
  o.argv = {"kiln-no-such-program-anywhere"};
  EXPECT_THROW(run_subprocess(o), Error);
  o.argv = {};
  EXPECT_THROW(run_subprocess(o), Error);
}

TEST(Subprocess, BadWorkingDirectoryIsAnError) {
  SubprocessOptions o;
  o.argv = {"true"};
  o.working_directory = "/no/such/working/dir";
  try {
    run_subprocess(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/working/dir"), std::string::npos);
  }
}

TEST(Subprocess, ManyThreadsAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      SubprocessOptions o;
      o.argv = {"echo", std::to_string(t)};
      SubprocessResult r = run_subprocess(o);
      if (r.succeeded() && r.output == std::to_string(t) + "\n") ok.fetch_add(1);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 8);
}

TEST(Subprocess, JoinCommandQuotesForDisplay) {
  EXPECT_EQ(join_command({"nvcc", "-I/a b/include", "x'y", "", "-O3"}), "nvcc '-I/a b/include' 'x'\\''y' '' -O3");
}

TEST(Subprocess, FindInPath) {
  EXPECT_FALSE(find_in_path("sh").empty());
  EXPECT_TRUE(find_in_path("kiln-no-such-program-anywhere").empty());
}

}  // namespace
}  // namespace kiln::util
