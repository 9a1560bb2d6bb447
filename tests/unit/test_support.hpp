// Shared test utilities: temporary directories, running kiln's own programs, golden texts, the message of an
// expected kiln::Error and fake device addresses.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/error.hpp"

namespace kiln::test {

// A fresh directory under $TMPDIR, removed (recursively, after restoring write permission) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A GoogleTest environment for tests of the public API, which reads its configuration once per process: a
// private cache (DG_JIT_CACHE_DIR), NVRTC (in-process, the quicker compile) and no DG_JIT_ARCH, set before the
// first test runs. Register it with ::testing::AddGlobalTestEnvironment.
class PrivateCacheEnvironment : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;
  // The DG_JIT_CACHE_DIR it set; empty outside SetUp .. TearDown.
  static std::filesystem::path cache_dir();
};

struct ProgramResult {
  int exit_code = -1;  // -signal when killed by a signal
  std::string output;  // stdout and stderr together
};

// Runs argv[0] with the given extra environment variables ("NAME=value"), waits, captures output.
ProgramResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

// The kiln_test_helper program built beside the tests.
std::string helper_path();

// Compares generated text with tests/unit/golden/<name>, byte for byte; with KILN_UPDATE_GOLDEN=1 rewrites the
// file instead (and skips), so a deliberate change is one reviewed diff. A GoogleTest assertion.
void expect_golden_text(const std::string& name, const std::string& text);

// The message of the kiln::Error that `call()` throws, after checking its kind; a test failure (and "") when it
// throws nothing or something that is not a kiln::Error.
template <typename Call>
std::string error_of(const Call& call, ErrorKind kind = ErrorKind::kValueError) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a kiln::Error: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no kiln::Error was thrown";
  return {};
}

// A device address the validation tests put in a TensorView: checks read its alignment, nothing dereferences it.
inline void* ptr(uint64_t address) { return reinterpret_cast<void*>(address); }

}  // namespace kiln::test
