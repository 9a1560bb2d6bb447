// disassemble_sass: finds nvdisasm or cuobjdump under $CUDA_HOME/bin then PATH, runs it on a temporary copy
// of the cubin, and says clearly what to install when neither exists.
#include <cstdlib>

#include "compiler_test_support.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using namespace test_kernels;

// Sets PATH for one test and restores it.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) {
    if (const char* old = std::getenv("PATH")) old_ = old;
    ::setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

void write_script(const fs::path& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  fs::permissions(path, fs::perms::owner_all);
}

TEST(Sass, NoToolIsNotFoundSayingWhereAndWhatToInstall) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "bin");
  Config config;
  config.cuda_home = dir.path();
  ScopedPath path((dir.path() / "empty").string());
  try {
    disassemble_sass({0x7f, 'E', 'L', 'F', 1, 2, 3}, config);
    FAIL() << "expected NotFound";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    const std::string what = e.what();
    EXPECT_TRUE(has(what, "cuobjdump")) << what;
    EXPECT_TRUE(has(what, "nvdisasm"));
    EXPECT_TRUE(has(what, (dir.path() / "bin").string()));
    EXPECT_TRUE(has(what, "PATH"));
    EXPECT_TRUE(has(what, "pip install triton"));
    EXPECT_TRUE(has(what, "pip install nvidia-cuda-nvdisasm"));
  }
}

TEST(Sass, PrefersNvdisasmFromTheToolkitOnACopyOfTheCubin) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "bin");
  // Stand-ins that show how they were called and what they were given.
  write_script(dir.path() / "bin" / "nvdisasm", "echo \"nvdisasm args: $1 $2\"; wc -c < \"$3\"\n");
  write_script(dir.path() / "bin" / "cuobjdump", "echo cuobjdump\n");
  Config config;
  config.cuda_home = dir.path();  // preferred over anything on PATH
  const std::string sass = disassemble_sass(std::vector<uint8_t>(1234, 7), config);
  EXPECT_TRUE(has(sass, "nvdisasm args: -c -hex")) << sass;  // the code sections, with the encodings
  EXPECT_TRUE(has(sass, "1234")) << sass;
}

TEST(Sass, FallsBackToCuobjdumpOnPath) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "tools");
  write_script(dir.path() / "tools" / "cuobjdump", "echo \"cuobjdump $1 $#\"\n");
  Config config;
  config.cuda_home = dir.path() / "no toolkit";
  ScopedPath path((dir.path() / "tools").string());
  EXPECT_TRUE(has(disassemble_sass({1, 2, 3}, config), "cuobjdump -sass 2"));
}

TEST(Sass, AFailingToolIsAnErrorWithItsOutput) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "bin");
  write_script(dir.path() / "bin" / "nvdisasm", "echo 'nvdisasm fatal: not a cubin' >&2; exit 1\n");
  Config config;
  config.cuda_home = dir.path();
  try {
    disassemble_sass({1, 2, 3}, config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "not a cubin")) << e.what();
    EXPECT_TRUE(has(e.what(), "exit status 1"));
  }
}

TEST(Sass, RealDisassemblyWhenAToolIsInstalled) {
  Config config = test_config();
  auto compiler = make_compiler(Backend::kNvrtc, config, {});
  CompiledKernel k = compiler->compile(add_input(), sm90a_options());
  try {
    const std::string sass = disassemble_sass(k.cubin, config);
    EXPECT_TRUE(has(sass, "kiln_test_add")) << sass.substr(0, 500);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound) throw;
    GTEST_SKIP() << "no cuobjdump/nvdisasm here: " << e.what();
  }
}

}  // namespace
}  // namespace kiln::compiler
