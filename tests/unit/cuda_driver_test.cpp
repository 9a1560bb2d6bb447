// The CUDA layer on a machine without a driver (CI): nothing throws at load time, device_count() is 0, and
// everything that needs the driver says clearly what is missing, why, and that compiling ahead of time
// works without it. On a machine with a driver these tests are skipped (the GPU programs cover it).
#include "cuda/driver.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/kernel.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

namespace kiln::cuda {
namespace {

#define SKIP_IF_DRIVER_PRESENT()                                                   \
  if (DriverApi::available()) GTEST_SKIP() << "a CUDA driver is present here"

using kiln::test::error_of;

void expect_missing_driver_message(const std::string& message) {
  EXPECT_NE(message.find("libcuda.so.1"), std::string::npos) << message;
  EXPECT_NE(message.find("CUDA driver"), std::string::npos) << message;
  EXPECT_NE(message.find("load and launch kernels"), std::string::npos) << message;
  EXPECT_NE(message.find("kiln compile"), std::string::npos) << message;
  EXPECT_NE(message.find("--arch sm_90a"), std::string::npos) << message;
  // dlerror's own words are passed on.
  EXPECT_NE(message.find("cannot open shared object file"), std::string::npos) << message;
}

TEST(NoDriver, AvailableIsFalseAndNeverThrows) {
  SKIP_IF_DRIVER_PRESENT();
  EXPECT_FALSE(DriverApi::available());
  EXPECT_FALSE(DriverApi::available());  // the outcome is remembered
}

TEST(NoDriver, GetSaysWhatIsMissingAndWhatStillWorks) {
  SKIP_IF_DRIVER_PRESENT();
  std::string first = error_of([] { DriverApi::get(); }, ErrorKind::kCudaError);
  expect_missing_driver_message(first);
  std::string second = error_of([] { DriverApi::get(); }, ErrorKind::kCudaError);
  EXPECT_EQ(first, second);
}

TEST(NoDriver, DeviceCountIsZero) {
  SKIP_IF_DRIVER_PRESENT();
  EXPECT_EQ(device_count(), 0);
}

TEST(NoDriver, EveryDriverQueryThrowsTheSameClearError) {
  SKIP_IF_DRIVER_PRESENT();
  expect_missing_driver_message(error_of([] { driver_version(); }, ErrorKind::kCudaError));
  expect_missing_driver_message(error_of([] { device_info(0); }, ErrorKind::kCudaError));
  expect_missing_driver_message(error_of([] { current_device(); }, ErrorKind::kCudaError));
  expect_missing_driver_message(error_of([] { primary_context(0); }, ErrorKind::kCudaError));
  expect_missing_driver_message(error_of([] { stream_is_capturing(nullptr); }, ErrorKind::kCudaError));
}

TEST(NoDriver, LoadingAKernelNeedsTheDriver) {
  SKIP_IF_DRIVER_PRESENT();
  std::vector<uint8_t> cubin = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  expect_missing_driver_message(error_of(
      [&] { LoadedKernel::load(cubin, "kiln_test", 0, LaunchApi::kDriver, false); }, ErrorKind::kCudaError));
}

TEST(LoadArguments, EmptyCubinOrNameIsAValueError) {
  std::string empty = error_of([] { LoadedKernel::load({}, "kiln_test", 0, LaunchApi::kDriver, false); },
                               ErrorKind::kValueError);
  EXPECT_NE(empty.find("kiln_test"), std::string::npos) << empty;
  EXPECT_NE(empty.find("empty"), std::string::npos) << empty;
  std::vector<uint8_t> cubin = {1, 2, 3};
  std::string unnamed =
      error_of([&] { LoadedKernel::load(cubin, "", 0, LaunchApi::kRuntime, false); }, ErrorKind::kValueError);
  EXPECT_NE(unnamed.find("name"), std::string::npos) << unnamed;
}

TEST(Check, SuccessDoesNotThrow) { EXPECT_NO_THROW(check(CUDA_SUCCESS, "cuFoo")); }

TEST(Check, FailureNamesTheCallAndCode) {
  std::string message =
      error_of([] { check(CUDA_ERROR_INVALID_VALUE, "cuFoo", " while testing"); }, ErrorKind::kCudaError);
  EXPECT_EQ(message.rfind("cuFoo failed: ", 0), 0u) << message;
  EXPECT_NE(message.find(" while testing"), std::string::npos) << message;
  if (DriverApi::available()) {
    EXPECT_NE(message.find("CUDA_ERROR_INVALID_VALUE (invalid argument)"), std::string::npos) << message;
  } else {
    // Without a driver there is nothing to name the code: the number is given.
    EXPECT_EQ(message, "cuFoo failed: CUresult 1 while testing");
  }
}

TEST(Check, MacroNamesTheExpression) {
  std::string message = error_of([] { KILN_CU_CHECK(CUDA_ERROR_OUT_OF_MEMORY); }, ErrorKind::kCudaError);
  EXPECT_EQ(message.rfind("CUDA_ERROR_OUT_OF_MEMORY failed: ", 0), 0u) << message;
}

}  // namespace
}  // namespace kiln::cuda
