// The driver table, loader and launch path against a fake driver (tests/unit/cuda_fake_driver.cc), with no
// GPU: how functions are resolved (public names, the version asked for, legacy-stream flavour), what a
// missing function, an old driver or a failing cuInit say, and what a launch does with contexts, streams,
// attributes and dynamic shared memory, through both the driver and the runtime API.
//
// The parent tests (FakeDriver.*) compile the fake into a temporary directory as libcuda.so.1 (and
// libcudart.so.13, a link to it) and run this same executable again with LD_LIBRARY_PATH pointing there and
// KILN_FAKE_CUDA_MODE naming which child suite runs; the child suites skip themselves otherwise.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "cuda/runtime.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

// The fake reads launch configurations with these layouts.
static_assert(offsetof(CUlaunchConfig, sharedMemBytes) == 24 && offsetof(CUlaunchConfig, hStream) == 32 &&
              offsetof(CUlaunchConfig, attrs) == 40 && offsetof(CUlaunchConfig, numAttrs) == 48);
static_assert(sizeof(CUlaunchAttribute) == 72 && offsetof(CUlaunchAttribute, value) == 8);
static_assert(offsetof(cudaLaunchConfig_t, dynamicSmemBytes) == 24 && offsetof(cudaLaunchConfig_t, stream) == 32 &&
              offsetof(cudaLaunchConfig_t, attrs) == 40 && offsetof(cudaLaunchConfig_t, numAttrs) == 48);
static_assert(sizeof(cudaLaunchAttribute) == 72 && offsetof(cudaLaunchAttribute, val) == 8);

namespace kiln::cuda {
namespace {

namespace fs = std::filesystem;

// ------------------------------------------------------------------------------------------------------
// Parent: build the fake and run the child suites.

class FakeDriver : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const fs::path source = fs::path(KILN_SOURCE_DIR) / "tests/unit/cuda_fake_driver.cc";
    const fs::path library = dir_->path() / "libcuda.so.1";
    test::ProgramResult built =
        test::run_program({"c++", "-std=c++17", "-O1", "-shared", "-fPIC", "-o", library.string(), source.string()});
    build_log_ = new std::string(built.output);
    if (built.exit_code != 0) return;
    fs::create_symlink("libcuda.so.1", dir_->path() / "libcudart.so.13");
    ok_ = true;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete build_log_;
    dir_ = nullptr;
    build_log_ = nullptr;
  }

  // Runs the child suite `suite` with the fake on the loader path and the extra environment `env`.
  static void run_child(const std::string& mode, const std::string& suite, std::vector<std::string> env = {}) {
    ASSERT_TRUE(ok_) << "could not compile the fake driver:\n" << *build_log_;
    std::vector<std::string> argv = {"env", "LD_LIBRARY_PATH=" + dir_->path().string(), "KILN_FAKE_CUDA_MODE=" + mode};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(fs::read_symlink("/proc/self/exe").string());
    argv.push_back("--gtest_filter=" + suite + ".*");
    test::ProgramResult child = test::run_program(argv);
    EXPECT_EQ(child.exit_code, 0) << child.output;
    EXPECT_NE(child.output.find("[  PASSED  ]"), std::string::npos) << child.output;
    EXPECT_EQ(child.output.find("[  SKIPPED ]"), std::string::npos) << child.output;
  }

  static inline test::TempDir* dir_ = nullptr;
  static inline std::string* build_log_ = nullptr;
  static inline bool ok_ = false;
};

TEST_F(FakeDriver, ResolvesLoadsAndLaunches) { run_child("normal", "FakeDriverChild"); }
TEST_F(FakeDriver, OlderDriverWorks) { run_child("old", "FakeOldDriverChild", {"FAKE_CUDA_DRIVER_VERSION=12040"}); }
TEST_F(FakeDriver, DriverBeforeCuda12IsRefused) {
  run_child("ancient", "FakeAncientDriverChild", {"FAKE_CUDA_DRIVER_VERSION=11080"});
}
TEST_F(FakeDriver, MissingFunctionsAreNamed) {
  run_child("missing", "FakeMissingChild", {"FAKE_CUDA_MISSING=cuLibraryLoadData,cuKernelSetAttribute"});
}
TEST_F(FakeDriver, MissingOptionalFunctionIsTolerated) {
  run_child("optional", "FakeOptionalChild", {"FAKE_CUDA_MISSING=cuStreamGetDevice"});
}
TEST_F(FakeDriver, FailingInitIsExplained) { run_child("init", "FakeInitChild", {"FAKE_CUDA_INIT=100"}); }

// ------------------------------------------------------------------------------------------------------
// Children.

bool in_mode(const char* mode) {
  const char* m = std::getenv("KILN_FAKE_CUDA_MODE");
  return m != nullptr && std::string(m) == mode;
}

#define CHILD_OF(mode) \
  if (!in_mode(mode)) GTEST_SKIP() << "runs only as a child of FakeDriver." mode

// The fake's own controls, found in the library the driver table loaded.
struct Fake {
  Fake() {
    handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) throw std::runtime_error("the fake libcuda.so.1 is not loaded");
    log_fn = reinterpret_cast<const char* (*)()>(dlsym(handle, "fake_cuda_log"));
    clear_fn = reinterpret_cast<void (*)()>(dlsym(handle, "fake_cuda_clear"));
    version = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "fake_cuda_requested_version"));
    flags = reinterpret_cast<unsigned long long (*)()>(dlsym(handle, "fake_cuda_requested_flags"));
    set_current = reinterpret_cast<void (*)(void*)>(dlsym(handle, "fake_cuda_set_current"));
    get_current = reinterpret_cast<void* (*)()>(dlsym(handle, "fake_cuda_get_current"));
    set_runtime_device = reinterpret_cast<void (*)(int)>(dlsym(handle, "fake_cuda_set_runtime_device"));
  }
  std::string log() const { return log_fn(); }
  void clear() const { clear_fn(); }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(log());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  void* handle;
  const char* (*log_fn)();
  void (*clear_fn)();
  int (*version)(const char*);
  unsigned long long (*flags)();
  void (*set_current)(void*);
  void* (*get_current)();
  void (*set_runtime_device)(int);
};

const Fake& fake() {
  DriverApi::available();  // loads the library
  static const Fake f;
  return f;
}

CUcontext primary(int d) { return reinterpret_cast<CUcontext>(static_cast<uintptr_t>(0x1000 + d)); }
CUcontext second(int d) { return reinterpret_cast<CUcontext>(static_cast<uintptr_t>(0x4000 + d)); }
CUstream stream_in_primary(int d) { return reinterpret_cast<CUstream>(static_cast<uintptr_t>(0x2000 + d)); }
CUstream stream_in_second(int d) { return reinterpret_cast<CUstream>(static_cast<uintptr_t>(0x3000 + d)); }
CUstream capturing_stream(int d) { return reinterpret_cast<CUstream>(static_cast<uintptr_t>(0x5000 + d)); }

const std::vector<uint8_t> kCubin = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};

using kiln::test::error_of;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

size_t count_lines_starting(const std::vector<std::string>& lines, const std::string& prefix) {
  return static_cast<size_t>(
      std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
}

LaunchConfig plain_config() {
  LaunchConfig c;
  c.grid[0] = 64;
  c.block[0] = 128;
  return c;
}

// One driver-API kernel on device 1, shared by the launch tests of the child (loading is tested apart).
const LoadedKernel& driver_kernel() {
  static std::unique_ptr<LoadedKernel> k = LoadedKernel::load(kCubin, "kiln_k", 1, LaunchApi::kDriver, false);
  return *k;
}
const LoadedKernel& runtime_kernel() {
  static std::unique_ptr<LoadedKernel> k = LoadedKernel::load(kCubin, "kiln_rt", 1, LaunchApi::kRuntime, false);
  return *k;
}

TEST(FakeDriverChild, ResolvesEveryFunctionByItsPublicNameAtItsAbiVersion) {
  CHILD_OF("normal");
  ASSERT_TRUE(DriverApi::available());
  const DriverApi& api = DriverApi::get();
  // Public names, each at the version whose ABI cuda.h declares, not at the toolkit's version: at 13000
  // "cuCtxGetDevice" would be cuCtxGetDevice_v2(CUdevice*, CUcontext) and crash when called.
  EXPECT_EQ(fake().version("cuCtxGetDevice"), 2000);
  EXPECT_EQ(fake().version("cuCtxSynchronize"), 2000);
  EXPECT_EQ(fake().version("cuStreamGetCtx"), 9020);
  EXPECT_EQ(fake().version("cuMemAlloc"), 3020);  // held as cuMemAlloc_v2
  EXPECT_EQ(fake().version("cuLibraryLoadData"), 12000);
  EXPECT_EQ(fake().version("cuStreamGetDevice"), 12080);
  EXPECT_EQ(fake().version("cuMemAlloc_v2"), -1);  // never a versioned symbol name
  EXPECT_EQ(fake().flags(), static_cast<unsigned long long>(CU_GET_PROC_ADDRESS_LEGACY_STREAM));
  EXPECT_EQ(api.version, 13000);
  EXPECT_EQ(driver_version(), "13.0");
  EXPECT_NE(api.cuStreamGetDevice, nullptr);
  EXPECT_NE(api.cuMemAlloc, nullptr);
}

TEST(FakeDriverChild, DeviceQueries) {
  CHILD_OF("normal");
  EXPECT_EQ(device_count(), 2);
  DeviceInfo info = device_info(1);
  EXPECT_EQ(info.ordinal, 1);
  EXPECT_EQ(info.name, "Fake H200 #1");
  EXPECT_EQ(info.cc_major, 9);
  EXPECT_EQ(info.cc_minor, 0);
  EXPECT_EQ(info.sm_count, 132);
  EXPECT_EQ(info.shared_memory_per_block_optin, 232448);
  EXPECT_EQ(info.l2_bytes, 52428800);
  EXPECT_EQ(info.memory_bytes, int64_t{141} << 30);
  std::string bad = error_of([] { device_info(2); }, ErrorKind::kValueError);
  EXPECT_TRUE(contains(bad, "device ordinal 2")) << bad;
  EXPECT_TRUE(contains(bad, "2 CUDA device(s)")) << bad;
  error_of([] { device_info(-1); }, ErrorKind::kValueError);
}

TEST(FakeDriverChild, CheckNamesTheDriverError) {
  CHILD_OF("normal");
  std::string message = error_of([] { check(CUDA_ERROR_INVALID_VALUE, "cuFoo", " (testing)"); }, ErrorKind::kCudaError);
  EXPECT_EQ(message, "cuFoo failed: CUDA_ERROR_INVALID_VALUE (invalid argument) (testing)");
  // A code the driver cannot name is given as a number.
  message = error_of([] { check(static_cast<CUresult>(12345), "cuFoo"); }, ErrorKind::kCudaError);
  EXPECT_EQ(message, "cuFoo failed: CUresult 12345");
}

TEST(FakeDriverChild, CurrentDeviceMakesDeviceZeroCurrentWhenThereIsNoContext) {
  CHILD_OF("normal");
  fake().set_current(nullptr);
  EXPECT_EQ(current_device(), 0);
  EXPECT_EQ(fake().get_current(), primary(0));
  fake().set_current(second(1));
  EXPECT_EQ(current_device(), 1);
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, PrimaryContextIsRetainedOncePerDevice) {
  CHILD_OF("normal");
  EXPECT_EQ(primary_context(1), primary(1));
  fake().clear();
  EXPECT_EQ(primary_context(1), primary(1));
  EXPECT_EQ(primary_context(1), primary(1));
  EXPECT_EQ(count_lines_starting(fake().lines(), "retain"), 0u) << fake().log();
  error_of([] { primary_context(7); }, ErrorKind::kValueError);
}

TEST(FakeDriverChild, StreamCapture) {
  CHILD_OF("normal");
  fake().set_current(nullptr);
  EXPECT_FALSE(stream_is_capturing(nullptr));  // no context: nothing can be capturing
  EXPECT_TRUE(stream_is_capturing(capturing_stream(0)));
  EXPECT_FALSE(stream_is_capturing(stream_in_primary(0)));
  fake().set_current(primary(0));
  EXPECT_FALSE(stream_is_capturing(nullptr));
  setenv("FAKE_CUDA_IMPLICIT", "1", 1);
  EXPECT_TRUE(stream_is_capturing(nullptr));  // the legacy stream while another stream captures
  unsetenv("FAKE_CUDA_IMPLICIT");
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, LoadFindsTheKernelByNameAndLoadsItIntoTheDevicePrimaryContext) {
  CHILD_OF("normal");
  fake().set_current(primary(0));
  fake().clear();
  ::testing::internal::CaptureStderr();
  auto k = LoadedKernel::load(kCubin, "kiln_load", 1, LaunchApi::kDriver, true);
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(k->device(), 1);
  EXPECT_EQ(k->name(), "kiln_load");
  EXPECT_EQ(k->api(), LaunchApi::kDriver);
  // The capture mode is relaxed for the load (a global-mode capture elsewhere must survive it) and restored.
  std::vector<std::string> expected = {"capture_mode 2",           "library_load",
                                       "get_kernel kiln_load",     "set_current primary1",
                                       "get_function in primary1", "set_current primary0",
                                       "capture_mode 0"};
  EXPECT_EQ(fake().lines(), expected) << fake().log();
  EXPECT_EQ(fake().get_current(), primary(0));  // the caller's context is left as it was
  EXPECT_TRUE(contains(printed, "loaded kiln_load on device 1 through the driver API in")) << printed;
  EXPECT_TRUE(contains(printed, " ms (8 bytes of cubin)")) << printed;
  fake().clear();
  k.reset();
  EXPECT_EQ(fake().lines(), std::vector<std::string>{"library_unload"});
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, LoadErrorsNameTheKernelDeviceAndDriverError) {
  CHILD_OF("normal");
  fake().clear();
  std::string missing = error_of([] { LoadedKernel::load(kCubin, "missing", 1, LaunchApi::kDriver, false); },
                                 ErrorKind::kCudaError);
  EXPECT_TRUE(contains(missing, "cuLibraryGetKernel failed: CUDA_ERROR_NOT_FOUND (named symbol not found)"))
      << missing;
  EXPECT_TRUE(contains(missing, "'missing'")) << missing;
  EXPECT_TRUE(contains(missing, "device 1")) << missing;
  EXPECT_EQ(count_lines_starting(fake().lines(), "library_unload"), 1u) << fake().log();  // nothing leaks

  std::vector<uint8_t> bad = {'B', 'A', 'D', 0};
  std::string invalid = error_of([&] { LoadedKernel::load(bad, "kiln_k", 0, LaunchApi::kDriver, false); },
                                 ErrorKind::kCudaError);
  EXPECT_TRUE(contains(invalid, "cuLibraryLoadData failed: CUDA_ERROR_INVALID_IMAGE")) << invalid;
  EXPECT_TRUE(contains(invalid, "kiln_k")) << invalid;

  std::string ordinal = error_of([] { LoadedKernel::load(kCubin, "kiln_k", 5, LaunchApi::kDriver, false); },
                                 ErrorKind::kValueError);
  EXPECT_TRUE(contains(ordinal, "device ordinal 5")) << ordinal;
}

TEST(FakeDriverChild, LaunchAttributesAreBuiltPerCall) {
  CHILD_OF("normal");
  const LoadedKernel& k = driver_kernel();
  fake().set_current(primary(1));
  int params = 0;
  fake().clear();
  LaunchConfig c = plain_config();
  k.launch(c, &params);
  c.cluster[0] = 2;
  c.pdl = true;
  k.launch(c, &params);
  c.cluster[0] = 1;
  k.launch(c, &params);
  char param_text[32];
  std::snprintf(param_text, sizeof(param_text), "%#llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&params)));
  std::string p = param_text;
  std::vector<std::string> expected = {
      "launch in primary1 grid=64,1,1 block=128,1,1 smem=0 stream=0 attrs= param=" + p,
      "launch in primary1 grid=64,1,1 block=128,1,1 smem=0 stream=0 attrs=[4:2,1,1][6:1] param=" + p,
      "launch in primary1 grid=64,1,1 block=128,1,1 smem=0 stream=0 attrs=[6:1] param=" + p,
  };
  EXPECT_EQ(fake().lines(), expected) << fake().log();
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, DynamicSharedMemoryIsRaisedOnlyWhenALargerSizeIsAsked) {
  CHILD_OF("normal");
  auto k = LoadedKernel::load(kCubin, "kiln_smem", 1, LaunchApi::kDriver, false);
  fake().set_current(primary(1));
  LaunchConfig c = plain_config();
  int params = 0;
  fake().clear();
  for (uint32_t bytes : {102400u, 102400u, 50000u, 200000u, 102400u, 200000u}) {
    c.shared_bytes = bytes;
    k->launch(c, &params);
  }
  std::vector<std::string> lines = fake().lines();
  std::vector<std::string> raised;
  for (const auto& l : lines)
    if (l.rfind("set_attribute", 0) == 0) raised.push_back(l);
  EXPECT_EQ(raised, (std::vector<std::string>{"set_attribute 8=102400 device 1", "set_attribute 8=200000 device 1"}))
      << fake().log();
  EXPECT_EQ(count_lines_starting(lines, "launch"), 6u);

  // Beyond the device's limit: a clear error, and the mark stays where it was.
  c.shared_bytes = 300000;
  std::string message = error_of([&] { k->launch(c, &params); }, ErrorKind::kCudaError);
  EXPECT_TRUE(contains(message, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES")) << message;
  EXPECT_TRUE(contains(message, "kiln_smem")) << message;
  EXPECT_TRUE(contains(message, "300000 bytes")) << message;
  EXPECT_TRUE(contains(message, "at most 232448 bytes")) << message;
  fake().clear();
  c.shared_bytes = 200000;
  k->launch(c, &params);
  EXPECT_EQ(count_lines_starting(fake().lines(), "set_attribute"), 0u) << fake().log();
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, NonPortableClusterIsAllowedOnceAndOnlyAboveEight) {
  CHILD_OF("normal");
  auto k = LoadedKernel::load(kCubin, "kiln_cluster", 1, LaunchApi::kDriver, false);
  fake().set_current(primary(1));
  LaunchConfig c = plain_config();
  int params = 0;
  fake().clear();
  c.cluster[0] = 8;
  k->launch(c, &params);
  EXPECT_EQ(count_lines_starting(fake().lines(), "set_attribute"), 0u) << fake().log();
  c.cluster[0] = 16;
  k->launch(c, &params);
  k->launch(c, &params);
  std::vector<std::string> lines = fake().lines();
  EXPECT_EQ(count_lines_starting(lines, "set_attribute 14=1 device 1"), 1u) << fake().log();
  EXPECT_EQ(count_lines_starting(lines, "set_attribute"), 1u) << fake().log();
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, DefaultStreamLaunchUsesTheKernelsDeviceAndRestoresTheCallersContext) {
  CHILD_OF("normal");
  const LoadedKernel& k = driver_kernel();
  LaunchConfig c = plain_config();
  int params = 0;

  // Another device's context is current: the kernel's primary context is used for the call only.
  fake().set_current(primary(0));
  fake().clear();
  k.launch(c, &params);
  std::vector<std::string> lines = fake().lines();
  ASSERT_EQ(lines.size(), 3u) << fake().log();
  EXPECT_EQ(lines[0], "set_current primary1");
  EXPECT_EQ(lines[1].rfind("launch in primary1 ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2], "set_current primary0");
  EXPECT_EQ(fake().get_current(), primary(0));

  // No context at all: the same, and none is left current.
  fake().set_current(nullptr);
  fake().clear();
  k.launch(c, &params);
  lines = fake().lines();
  ASSERT_EQ(lines.size(), 3u) << fake().log();
  EXPECT_EQ(lines[1].rfind("launch in primary1 ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2], "set_current none");

  // A non-primary context of the right device is the caller's choice and is kept.
  fake().set_current(second(1));
  fake().clear();
  k.launch(c, &params);
  lines = fake().lines();
  ASSERT_EQ(lines.size(), 1u) << fake().log();
  EXPECT_EQ(lines[0].rfind("launch in second1 ", 0), 0u) << lines[0];
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, StreamLaunchChecksTheStreamsDevice) {
  CHILD_OF("normal");
  const LoadedKernel& k = driver_kernel();
  LaunchConfig c = plain_config();
  int params = 0;
  fake().set_current(primary(0));  // irrelevant for a stream launch: the stream's context is used

  fake().clear();
  c.stream = stream_in_primary(1);
  k.launch(c, &params);
  std::vector<std::string> lines = fake().lines();
  ASSERT_EQ(lines.size(), 1u) << fake().log();  // the common case costs no extra driver calls
  EXPECT_EQ(lines[0].rfind("launch in primary1 ", 0), 0u) << lines[0];
  EXPECT_TRUE(contains(lines[0], "stream=0x2001")) << lines[0];

  fake().clear();
  c.stream = stream_in_second(1);
  k.launch(c, &params);
  lines = fake().lines();
  // A stream of another context: its device is asked by making that context current for a moment (the
  // stream-device queries are refused during graph capture).
  ASSERT_EQ(lines.size(), 3u) << fake().log();
  EXPECT_EQ(lines[0], "set_current second1");
  EXPECT_EQ(lines[1], "set_current primary0");
  EXPECT_EQ(lines[2].rfind("launch in second1 ", 0), 0u) << lines[2];
  EXPECT_EQ(fake().get_current(), primary(0));

  fake().clear();
  c.stream = stream_in_primary(0);
  std::string message = error_of([&] { k.launch(c, &params); }, ErrorKind::kCudaError);
  EXPECT_TRUE(contains(message, "belongs to device 0")) << message;
  EXPECT_TRUE(contains(message, "loaded for device 1")) << message;
  EXPECT_TRUE(contains(message, "kiln_k")) << message;
  EXPECT_EQ(count_lines_starting(fake().lines(), "launch"), 0u) << fake().log();
  EXPECT_EQ(fake().get_current(), primary(0));
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, LaunchFailureNamesKernelConfigAndError) {
  CHILD_OF("normal");
  const LoadedKernel& k = driver_kernel();
  fake().set_current(primary(0));
  LaunchConfig c = plain_config();
  c.grid[0] = 0;  // the fake rejects it
  c.cluster[0] = 1;
  int params = 0;
  std::string message = error_of([&] { k.launch(c, &params); }, ErrorKind::kCudaError);
  EXPECT_EQ(message.rfind("cuLaunchKernelEx failed: CUDA_ERROR_INVALID_VALUE (invalid argument)", 0), 0u) << message;
  EXPECT_TRUE(contains(message, "kernel kiln_k on device 1 with grid (0,1,1), block (128,1,1)")) << message;
  EXPECT_EQ(fake().get_current(), primary(0));  // restored on failure too
  fake().set_current(nullptr);
}

TEST(FakeDriverChild, ConcurrentLaunchesNeverLowerTheSharedMemoryAttribute) {
  CHILD_OF("normal");
  auto k = LoadedKernel::load(kCubin, "kiln_threads", 1, LaunchApi::kDriver, false);
  fake().clear();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      fake().set_current(primary(t % 2));  // half the threads start in the other device's context
      std::mt19937 rng(static_cast<unsigned>(t));
      LaunchConfig c = plain_config();
      int params = 0;
      for (int i = 0; i < 500; ++i) {
        c.shared_bytes = static_cast<uint32_t>(rng() % 232000);
        try {
          k->launch(c, &params);
        } catch (...) {
          failures.fetch_add(1);
        }
      }
      fake().set_current(nullptr);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<std::string> lines = fake().lines();
  std::vector<int> raised;
  for (const auto& l : lines) {
    if (l.rfind("set_attribute 8=", 0) == 0) raised.push_back(std::stoi(l.substr(16)));
    if (l.rfind("launch in ", 0) == 0) EXPECT_EQ(l.rfind("launch in primary1 ", 0), 0u) << l;
  }
  EXPECT_EQ(count_lines_starting(lines, "launch in "), 4000u);
  EXPECT_FALSE(raised.empty());
  EXPECT_TRUE(std::is_sorted(raised.begin(), raised.end()));
  EXPECT_EQ(std::adjacent_find(raised.begin(), raised.end()), raised.end());
}

TEST(FakeDriverChild, RuntimeApiLoadAndLaunch) {
  CHILD_OF("normal");
  ASSERT_TRUE(RuntimeApi::available());
  EXPECT_EQ(RuntimeApi::get().library_name, "libcudart.so.13");
  fake().set_runtime_device(0);
  fake().clear();
  ::testing::internal::CaptureStderr();
  auto k = LoadedKernel::load(kCubin, "kiln_rt_load", 1, LaunchApi::kRuntime, true);
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(k->api(), LaunchApi::kRuntime);
  std::vector<std::string> expected = {"rt_capture_mode 2", "rt_library_load",
                                       "rt_get_kernel kiln_rt_load", "rt_set_device 1",
                                       "rt_func_attributes on device 1", "rt_set_device 0",
                                       "rt_capture_mode 0"};
  EXPECT_EQ(fake().lines(), expected) << fake().log();
  EXPECT_TRUE(contains(printed, "loaded kiln_rt_load on device 1 through the runtime API in")) << printed;

  // Default stream, other device current: switched for the call and back.
  LaunchConfig c = plain_config();
  c.cluster[0] = 2;
  c.pdl = true;
  c.shared_bytes = 102400;
  int params = 0;
  fake().clear();
  k->launch(c, &params);
  k->launch(c, &params);
  std::vector<std::string> lines = fake().lines();
  ASSERT_EQ(lines.size(), 7u) << fake().log();
  EXPECT_EQ(lines[0], "rt_set_attribute 8=102400 device 1");
  EXPECT_EQ(lines[1], "rt_set_device 1");
  EXPECT_EQ(lines[2].rfind("rt_launch on device 1 grid=64,1,1 block=128,1,1 smem=102400 stream=0 attrs=[4:2,1,1][6:1]", 0),
            0u)
      << lines[2];
  EXPECT_EQ(lines[3], "rt_set_device 0");

  // The right device current: no switching.
  fake().set_runtime_device(1);
  fake().clear();
  k->launch(c, &params);
  lines = fake().lines();
  ASSERT_EQ(lines.size(), 1u) << fake().log();
  EXPECT_EQ(lines[0].rfind("rt_launch on device 1 ", 0), 0u) << lines[0];

  // A stream of another device is refused.
  fake().set_runtime_device(0);
  c.stream = stream_in_primary(0);
  std::string message = error_of([&] { k->launch(c, &params); }, ErrorKind::kCudaError);
  EXPECT_TRUE(contains(message, "belongs to device 0")) << message;
  c.stream = stream_in_primary(1);
  fake().clear();
  k->launch(c, &params);
  lines = fake().lines();
  ASSERT_EQ(lines.size(), 1u) << fake().log();
  EXPECT_TRUE(contains(lines[0], "stream=0x2001")) << lines[0];

  // Clusters above 8 CTAs.
  c.cluster[0] = 16;
  fake().clear();
  k->launch(c, &params);
  k->launch(c, &params);
  EXPECT_EQ(count_lines_starting(fake().lines(), "rt_set_attribute 14=1 device 1"), 1u) << fake().log();

  // Failures name the runtime error, kernel and configuration.
  c.grid[0] = 0;
  message = error_of([&] { k->launch(c, &params); }, ErrorKind::kCudaError);
  EXPECT_EQ(message.rfind("cudaLaunchKernelExC failed: cudaErrorInvalidValue (invalid argument) launching kernel "
                          "kiln_rt_load on device 1 with grid (0,1,1)",
                          0),
            0u)
      << message;
  fake().clear();
  k.reset();
  EXPECT_EQ(fake().lines(), std::vector<std::string>{"rt_library_unload"});
}

TEST(FakeDriverChild, RuntimeApiLoadErrors) {
  CHILD_OF("normal");
  std::string missing = error_of([] { LoadedKernel::load(kCubin, "missing", 0, LaunchApi::kRuntime, false); },
                                 ErrorKind::kCudaError);
  EXPECT_TRUE(contains(missing, "cudaLibraryGetKernel failed:")) << missing;
  EXPECT_TRUE(contains(missing, "'missing'")) << missing;
  EXPECT_TRUE(contains(missing, "runtime API")) << missing;
  std::string ordinal = error_of([] { LoadedKernel::load(kCubin, "kiln_k", 2, LaunchApi::kRuntime, false); },
                                 ErrorKind::kValueError);
  EXPECT_TRUE(contains(ordinal, "device ordinal 2")) << ordinal;
}

TEST(FakeOldDriverChild, OlderDriverWorksWithoutTheNewerOptionalFunctions) {
  CHILD_OF("old");
  ASSERT_TRUE(DriverApi::available());
  EXPECT_EQ(driver_version(), "12.4");
  EXPECT_EQ(DriverApi::get().cuStreamGetDevice, nullptr);  // CUDA 12.8
  EXPECT_NE(DriverApi::get().cuLibraryLoadData, nullptr);
}

TEST(FakeAncientDriverChild, DriverBeforeCuda12IsRefusedNamingWhatItLacks) {
  CHILD_OF("ancient");
  EXPECT_FALSE(DriverApi::available());
  std::string message = error_of([] { DriverApi::get(); }, ErrorKind::kCudaError);
  EXPECT_TRUE(contains(message, "the CUDA driver 11.8 (libcuda.so.1) lacks functions kiln needs")) << message;
  EXPECT_TRUE(contains(message, "cuLibraryLoadData")) << message;
  EXPECT_TRUE(contains(message, "cuKernelSetAttribute")) << message;
  EXPECT_FALSE(contains(message, "cuStreamGetDevice")) << message;  // optional: not listed
  EXPECT_TRUE(contains(message, "CUDA 12.0 or later")) << message;
}

TEST(FakeMissingChild, NamesEveryMissingFunction) {
  CHILD_OF("missing");
  EXPECT_FALSE(DriverApi::available());
  EXPECT_EQ(device_count(), 0);
  std::string message = error_of([] { DriverApi::get(); }, ErrorKind::kCudaError);
  EXPECT_TRUE(contains(message, "lacks functions kiln needs")) << message;
  EXPECT_TRUE(contains(message, "cuLibraryLoadData, cuKernelSetAttribute")) << message;
  EXPECT_TRUE(contains(message, "the CUDA driver 13.0 (libcuda.so.1)")) << message;
  EXPECT_TRUE(contains(message, "CUDA 12.0 or later")) << message;
  EXPECT_TRUE(contains(message, "kiln compile")) << message;
}

TEST(FakeOptionalChild, WorksWithoutCuStreamGetDevice) {
  CHILD_OF("optional");
  ASSERT_TRUE(DriverApi::available());
  EXPECT_EQ(DriverApi::get().cuStreamGetDevice, nullptr);
  auto k = LoadedKernel::load(kCubin, "kiln_k", 1, LaunchApi::kDriver, false);
  LaunchConfig c = plain_config();
  c.stream = stream_in_second(1);
  int params = 0;
  fake().clear();
  k->launch(c, &params);  // the launch path does not need it
  std::vector<std::string> lines = fake().lines();
  ASSERT_EQ(lines.size(), 3u) << fake().log();
  EXPECT_EQ(lines[2].rfind("launch in second1 ", 0), 0u) << lines[2];
}

TEST(FakeInitChild, ExplainsAFailingCuInit) {
  CHILD_OF("init");
  EXPECT_FALSE(DriverApi::available());
  EXPECT_EQ(device_count(), 0);
  std::string message = error_of([] { DriverApi::get(); }, ErrorKind::kCudaError);
  EXPECT_EQ(message.rfind("cuInit(0) failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", 0), 0u)
      << message;
  EXPECT_TRUE(contains(message, "CUDA_VISIBLE_DEVICES")) << message;
  EXPECT_TRUE(contains(message, "kiln compile")) << message;
  EXPECT_EQ(message, error_of([] { driver_version(); }, ErrorKind::kCudaError));
}

}  // namespace
}  // namespace kiln::cuda
