#include "test_support.hpp"

#include <gtest/gtest.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace kiln::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/kiln-test-XXXXXX";
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
  }
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

namespace {
std::unique_ptr<TempDir> g_private_cache;
}  // namespace

void PrivateCacheEnvironment::SetUp() {
  g_private_cache = std::make_unique<TempDir>();
  setenv("DG_JIT_CACHE_DIR", cache_dir().c_str(), 1);
  setenv("DG_JIT_USE_NVRTC", "1", 1);
  unsetenv("DG_JIT_ARCH");
}

void PrivateCacheEnvironment::TearDown() { g_private_cache.reset(); }

std::filesystem::path PrivateCacheEnvironment::cache_dir() {
  return g_private_cache ? g_private_cache->path() / "cache" : std::filesystem::path();
}

ProgramResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);

  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& e : env) env_strings.push_back(e);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    throw std::runtime_error("cannot start " + argv[0]);
  }
  ProgramResult result;
  std::array<char, 4096> buf;
  ssize_t n;
  while ((n = read(pipe_fds[0], buf.data(), buf.size())) > 0) result.output.append(buf.data(), size_t(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

std::string helper_path() { return KILN_TEST_HELPER; }

void expect_golden_text(const std::string& name, const std::string& text) {
  const std::filesystem::path path = std::filesystem::path(KILN_SOURCE_DIR) / "tests/unit/golden" / name;
  if (const char* update = std::getenv("KILN_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << text;
    GTEST_SKIP() << "rewrote " << path << " (KILN_UPDATE_GOLDEN=1)";
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path << " is missing; run with KILN_UPDATE_GOLDEN=1 to create it deliberately";
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(text, golden.str()) << "the generated source changed; if that is intended, regenerate " << path
                                << " with KILN_UPDATE_GOLDEN=1 and review the diff";
}

}  // namespace kiln::test
