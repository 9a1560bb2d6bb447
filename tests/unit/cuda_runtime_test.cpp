// The runtime-API table (DG_JIT_USE_RUNTIME_API=1): a missing libcudart is a clear error that names every
// file tried and the setting that asked for it; with libcudart but no driver, loading a kernel fails with
// the runtime's own error name.
#include "cuda/runtime.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "kiln/error.hpp"

namespace kiln::cuda {
namespace {

TEST(RuntimeApiLoad, MissingLibraryNamesEachCandidateAndTheSetting) {
  try {
    RuntimeApi::load({"/nonexistent/kiln/libcudart.so.13", "libcudart-kiln-none.so.12"});
    FAIL() << "loading a nonexistent libcudart succeeded";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kCudaError);
    EXPECT_NE(message.find("/nonexistent/kiln/libcudart.so.13"), std::string::npos) << message;
    EXPECT_NE(message.find("libcudart-kiln-none.so.12"), std::string::npos) << message;
    EXPECT_NE(message.find("DG_JIT_USE_RUNTIME_API=1"), std::string::npos) << message;
    EXPECT_NE(message.find("runtime API"), std::string::npos) << message;
  }
}

TEST(RuntimeApiLoad, DefaultCandidatesPreferTheLoaderPathThenTheToolkit) {
  std::vector<std::string> c = RuntimeApi::default_candidates();
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0], "libcudart.so.13");
  EXPECT_EQ(c[1], "libcudart.so.12");
  bool toolkit = false;
  for (const auto& name : c) toolkit = toolkit || name.find("/lib64/libcudart.so.13") != std::string::npos;
  EXPECT_TRUE(toolkit);
}

TEST(RuntimeApiLoad, ResolvesEveryFunctionFromARealRuntime) {
  if (!RuntimeApi::available()) GTEST_SKIP() << "no libcudart here";
  const RuntimeApi& api = RuntimeApi::get();
  EXPECT_NE(api.cudaLaunchKernelExC, nullptr);
  EXPECT_NE(api.cudaLibraryLoadData, nullptr);
  EXPECT_NE(api.cudaKernelSetAttributeForDevice, nullptr);
  EXPECT_GE(api.version, 12000);
  EXPECT_FALSE(api.library_name.empty());
}

TEST(RuntimeCheck, FailureNamesTheRuntimeError) {
  if (!RuntimeApi::available()) GTEST_SKIP() << "no libcudart here";
  try {
    check_runtime(cudaErrorInvalidValue, "cudaFoo", " while testing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cudaFoo failed: cudaErrorInvalidValue (invalid argument) while testing");
  }
  EXPECT_NO_THROW(check_runtime(cudaSuccess, "cudaFoo"));
}

TEST(RuntimeLoad, WithoutADriverLoadingFailsClearly) {
  if (!RuntimeApi::available()) GTEST_SKIP() << "no libcudart here";
  if (DriverApi::available()) GTEST_SKIP() << "a CUDA driver is present here";
  std::vector<uint8_t> cubin = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  try {
    LoadedKernel::load(cubin, "kiln_test", 0, LaunchApi::kRuntime, false);
    FAIL() << "loading through the runtime API without a driver succeeded";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kCudaError);
    EXPECT_NE(message.find("failed: cudaError"), std::string::npos) << message;
    EXPECT_NE(message.find("kiln_test"), std::string::npos) << message;
    EXPECT_NE(message.find("runtime API"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace kiln::cuda
