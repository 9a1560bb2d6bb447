// NVRTC is loaded only when an NVRTC compile needs it: never for NVCC users, and not for the identity on a
// warm start (the memo written by an earlier process answers). One test, in order, in one process, because
// a library once loaded stays loaded.
#include <cstdlib>

#include "compiler_test_support.hpp"
#include "test_support.hpp"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using namespace test_kernels;

constexpr const char* kStateVariable = "KILN_TEST_NVRTC_STATE_DIR";

// Run only as the child of the test below: plays "an earlier process" that memoises NVRTC's identity.
TEST(NvrtcLazy, EarlierProcessWritesTheMemo) {
  const char* state = std::getenv(kStateVariable);
  if (!state) GTEST_SKIP() << "runs only as a child of NvrtcLazy.LoadedOnlyWhenCompiling";
  auto compiler = make_compiler(Backend::kNvrtc, test_config(), state);
  std::printf("IDENTITY=%s\n", compiler->identity().text().c_str());
}

TEST(NvrtcLazy, LoadedOnlyWhenCompiling) {
  if (std::getenv(kStateVariable)) GTEST_SKIP();
  ASSERT_FALSE(nvrtc_mapped()) << "the test binary must not link NVRTC";

  // An NVCC user compiles without ever loading NVRTC.
  auto nvcc = make_compiler(Backend::kNvcc, test_config(), {});
  nvcc->identity();
  EXPECT_TRUE(is_elf(nvcc->compile(add_input(), sm90a_options()).cubin));
  EXPECT_FALSE(nvrtc_mapped());

  // Making an NVRTC compiler loads nothing either.
  test::TempDir dir;
  const fs::path state = dir.path() / "state";
  auto nvrtc = make_compiler(Backend::kNvrtc, test_config(), state);
  EXPECT_FALSE(nvrtc_mapped());

  // An earlier process memoised the identity; this one reads it without loading NVRTC.
  test::ProgramResult child = test::run_program(
      {"/proc/self/exe", "--gtest_filter=NvrtcLazy.EarlierProcessWritesTheMemo"},
      {std::string(kStateVariable) + "=" + state.string()});
  ASSERT_EQ(child.exit_code, 0) << child.output;
  const size_t at = child.output.find("IDENTITY=");
  ASSERT_NE(at, std::string::npos) << child.output;
  const std::string earlier = child.output.substr(at + 9, child.output.find('\n', at) - at - 9);
  EXPECT_EQ(nvrtc->identity().text(), earlier);
  EXPECT_FALSE(nvrtc_mapped()) << "a warm identity() loaded NVRTC";
  EXPECT_FALSE(detail::nvrtc_loaded());

  // The first NVRTC compile loads it.
  EXPECT_TRUE(is_elf(nvrtc->compile(add_input(), sm90a_options()).cubin));
  EXPECT_TRUE(nvrtc_mapped());
  EXPECT_TRUE(detail::nvrtc_loaded());

  // Asked cold now (no memo anywhere), the loaded library gives the same identity.
  detail::clear_process_memo();
  auto cold = make_compiler(Backend::kNvrtc, test_config(), {});
  EXPECT_EQ(cold->identity().text(), earlier);
}

}  // namespace
}  // namespace kiln::compiler
