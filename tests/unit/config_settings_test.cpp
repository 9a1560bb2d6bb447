// The configuration: every variable's default, accepted forms, bad values (the message names the variable,
// the value and what is accepted) and origins; derived defaults (cache directory, nvcc, CUDA home).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "config/settings_table.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Vars = std::map<std::string, std::string>;

// A baseline with a home directory that exists, so no test depends on the real HOME.
class ConfigTest : public ::testing::Test {
 protected:
  Vars base() const { return {{"HOME", home_.path().string()}, {"PATH", ""}}; }
  Vars with(Vars extra) const {
    Vars vars = base();
    for (auto& [k, v] : extra) vars[k] = v;
    return vars;
  }
  // The message of the ConfigError that `vars` produce; fails the test if none is thrown.
  std::string config_error(const Vars& vars) const {
    try {
      Config::from_variables(vars);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfigError);
      return e.what();
    }
    ADD_FAILURE() << "no error was thrown";
    return {};
  }
  static const Config::Setting& setting(const Config& config, const std::string& name) {
    for (const auto& s : config.settings())
      if (s.name == name) return s;
    throw std::runtime_error("no setting " + name);
  }
  static void make_executable(const fs::path& path) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << "#!/bin/sh\nexit 0\n";
    fs::permissions(path, fs::perms::owner_all);
  }

  test::TempDir home_;
  test::TempDir scratch_;
};

TEST_F(ConfigTest, DefaultsAreDocumented) {
  Config c = Config::from_variables(base());
  EXPECT_EQ(c.cache_dir, home_.path() / ".deep_gemm");
  EXPECT_EQ(c.backend, Backend::kNvcc);
  EXPECT_EQ(c.cpp_standard, 20);
  EXPECT_FALSE(c.debug);
  EXPECT_FALSE(c.print_compiler_command);
  EXPECT_FALSE(c.print_load_time);
  EXPECT_FALSE(c.ptxas_verbose);
  EXPECT_FALSE(c.ptxas_check);
  EXPECT_FALSE(c.dump_ptx);
  EXPECT_FALSE(c.dump_sass);
  EXPECT_FALSE(c.dump_asm);
  EXPECT_FALSE(c.wants_ptx());
  EXPECT_FALSE(c.wants_sass());
  EXPECT_EQ(c.launch_api, LaunchApi::kDriver);
  EXPECT_FALSE(c.with_lineinfo);
  EXPECT_FALSE(c.print_configs);
  EXPECT_FALSE(c.arch.has_value());
  EXPECT_EQ(c.compile_timeout_s, 600);
  EXPECT_EQ(c.cuda_home, fs::path(KILN_DEFAULT_CUDA_HOME));
  for (const auto& s : c.settings()) {
    EXPECT_EQ(s.origin, Origin::kDefault) << s.name;
    EXPECT_FALSE(s.doc.empty()) << s.name;
  }
  EXPECT_EQ(setting(c, "cache_dir").detail, "$HOME/.deep_gemm");
}

TEST_F(ConfigTest, EverySettingIsListedOnceInTableOrder) {
  Config c = Config::from_variables(base());
  auto table = configuration::setting_table();
  ASSERT_EQ(c.settings().size(), table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(c.settings()[i].name, table[i].name);
    EXPECT_EQ(c.settings()[i].variable, table[i].variable);
  }
  const char* required[] = {"DG_JIT_CACHE_DIR", "DG_JIT_USE_NVRTC", "DG_JIT_NVCC_COMPILER", "DG_JIT_CPP_STANDARD",
                            "DG_JIT_DEBUG", "DG_JIT_PRINT_COMPILER_COMMAND", "DG_JIT_PRINT_LOAD_TIME",
                            "DG_JIT_PTXAS_VERBOSE", "DG_JIT_PTXAS_CHECK", "DG_JIT_DUMP_PTX", "DG_JIT_DUMP_SASS",
                            "DG_JIT_DUMP_ASM", "DG_JIT_USE_RUNTIME_API", "DG_JIT_WITH_LINEINFO",
                            "DG_PRINT_CONFIGS", "DG_JIT_ARCH", "DG_JIT_COMPILE_TIMEOUT"};
  for (const char* variable : required) {
    bool found = false;
    for (const auto& s : c.settings()) found = found || s.variable == variable;
    EXPECT_TRUE(found) << variable;
  }
}

// Each boolean variable with the field it sets (backend and launch_api are booleans rendered as a choice).
struct BoolCase {
  const char* variable;
  const char* setting;
  bool (*get)(const Config&);
};
const BoolCase kBoolCases[] = {
    {"DG_JIT_USE_NVRTC", "backend", [](const Config& c) { return c.backend == Backend::kNvrtc; }},
    {"DG_JIT_DEBUG", "debug", [](const Config& c) { return c.debug; }},
    {"DG_JIT_PRINT_COMPILER_COMMAND", "print_compiler_command", [](const Config& c) { return c.print_compiler_command; }},
    {"DG_JIT_PRINT_LOAD_TIME", "print_load_time", [](const Config& c) { return c.print_load_time; }},
    {"DG_JIT_PTXAS_VERBOSE", "ptxas_verbose", [](const Config& c) { return c.ptxas_verbose; }},
    {"DG_JIT_PTXAS_CHECK", "ptxas_check", [](const Config& c) { return c.ptxas_check; }},
    {"DG_JIT_DUMP_PTX", "dump_ptx", [](const Config& c) { return c.dump_ptx; }},
    {"DG_JIT_DUMP_SASS", "dump_sass", [](const Config& c) { return c.dump_sass; }},
    {"DG_JIT_DUMP_ASM", "dump_asm", [](const Config& c) { return c.dump_asm; }},
    {"DG_JIT_USE_RUNTIME_API", "launch_api", [](const Config& c) { return c.launch_api == LaunchApi::kRuntime; }},
    {"DG_JIT_WITH_LINEINFO", "with_lineinfo", [](const Config& c) { return c.with_lineinfo; }},
    {"DG_PRINT_CONFIGS", "print_configs", [](const Config& c) { return c.print_configs; }},
};

TEST_F(ConfigTest, BooleansAcceptEveryDocumentedForm) {
  const char* truthy[] = {"1", "true", "TRUE", "True", "yes", "YES", "on", "On", " 1 "};
  const char* falsy[] = {"0", "false", "FALSE", "no", "No", "off", "OFF"};
  for (const BoolCase& bc : kBoolCases) {
    for (const char* text : truthy) {
      Config c = Config::from_variables(with({{bc.variable, text}}));
      EXPECT_TRUE(bc.get(c)) << bc.variable << "=" << text;
      EXPECT_EQ(setting(c, bc.setting).origin, Origin::kEnvironment) << bc.variable;
    }
    for (const char* text : falsy) {
      Config c = Config::from_variables(with({{bc.variable, text}}));
      EXPECT_FALSE(bc.get(c)) << bc.variable << "=" << text;
      EXPECT_EQ(setting(c, bc.setting).origin, Origin::kEnvironment) << bc.variable;
    }
    // Empty means unset: the default, with a default origin.
    Config c = Config::from_variables(with({{bc.variable, ""}}));
    EXPECT_FALSE(bc.get(c)) << bc.variable;
    EXPECT_EQ(setting(c, bc.setting).origin, Origin::kDefault) << bc.variable;
  }
}

TEST_F(ConfigTest, BadBooleansNameVariableValueAndAcceptedForms) {
  for (const BoolCase& bc : kBoolCases) {
    for (const char* bad : {"yes please", "2", "enable", "-1", "tru"}) {
      std::string message = config_error(with({{bc.variable, bad}}));
      EXPECT_THAT(message, HasSubstr(bc.variable));
      EXPECT_THAT(message, HasSubstr(std::string("'") + bad + "'"));
      EXPECT_THAT(message, HasSubstr("true/false"));
      EXPECT_THAT(message, HasSubstr("yes/no"));
      EXPECT_THAT(message, HasSubstr("on/off"));
    }
  }
}

TEST_F(ConfigTest, SettingValuesAreReadable) {
  Config c = Config::from_variables(with({{"DG_JIT_USE_NVRTC", "1"}, {"DG_JIT_USE_RUNTIME_API", "yes"},
                                          {"DG_JIT_DUMP_PTX", "on"}}));
  EXPECT_EQ(setting(c, "backend").value, "nvrtc");
  EXPECT_EQ(setting(c, "launch_api").value, "runtime");
  EXPECT_EQ(setting(c, "dump_ptx").value, "true");
  EXPECT_EQ(setting(c, "dump_sass").value, "false");
  EXPECT_EQ(setting(c, "cpp_standard").value, "20");
  EXPECT_EQ(setting(c, "compile_timeout_s").value, "600");
  EXPECT_EQ(setting(c, "arch").value, "");
}

TEST_F(ConfigTest, DumpAsmImpliesPtxAndSass) {
  Config c = Config::from_variables(with({{"DG_JIT_DUMP_ASM", "1"}}));
  EXPECT_TRUE(c.wants_ptx());
  EXPECT_TRUE(c.wants_sass());
  Config p = Config::from_variables(with({{"DG_JIT_DUMP_PTX", "1"}}));
  EXPECT_TRUE(p.wants_ptx());
  EXPECT_FALSE(p.wants_sass());
  // `kiln config` shows what is in effect: both dumps on, implied by DG_JIT_DUMP_ASM.
  for (const char* name : {"dump_ptx", "dump_sass"}) {
    EXPECT_EQ(setting(c, name).value, "true") << name;
    EXPECT_EQ(setting(c, name).origin, Origin::kEnvironment) << name;
    EXPECT_THAT(setting(c, name).detail, HasSubstr("DG_JIT_DUMP_ASM")) << name;
  }
  // A bad DG_JIT_DUMP_ASM is reported once, by its own variable.
  const std::string message = config_error(with({{"DG_JIT_DUMP_ASM", "maybe"}}));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_THAT(message, HasSubstr("DG_JIT_DUMP_ASM='maybe'"));
}

TEST_F(ConfigTest, DebugImpliesPrintingTheCompilerCommandUnlessTurnedOff) {
  Config c = Config::from_variables(with({{"DG_JIT_DEBUG", "1"}}));
  EXPECT_TRUE(c.print_compiler_command);
  EXPECT_EQ(setting(c, "print_compiler_command").origin, Origin::kEnvironment);
  EXPECT_THAT(setting(c, "print_compiler_command").detail, HasSubstr("DG_JIT_DEBUG"));
  Config off = Config::from_variables(with({{"DG_JIT_DEBUG", "1"}, {"DG_JIT_PRINT_COMPILER_COMMAND", "0"}}));
  EXPECT_FALSE(off.print_compiler_command);
}

TEST_F(ConfigTest, CppStandard) {
  EXPECT_EQ(Config::from_variables(with({{"DG_JIT_CPP_STANDARD", "17"}})).cpp_standard, 17);
  Config c = Config::from_variables(with({{"DG_JIT_CPP_STANDARD", "20"}}));
  EXPECT_EQ(c.cpp_standard, 20);
  EXPECT_EQ(setting(c, "cpp_standard").origin, Origin::kEnvironment);
  EXPECT_EQ(Config::from_variables(with({{"DG_JIT_CPP_STANDARD", ""}})).cpp_standard, 20);
  for (const char* bad : {"banana", "14", "23", "c++20", "20x"}) {
    std::string message = config_error(with({{"DG_JIT_CPP_STANDARD", bad}}));
    EXPECT_THAT(message, HasSubstr("DG_JIT_CPP_STANDARD"));
    EXPECT_THAT(message, HasSubstr(std::string("'") + bad + "'"));
    EXPECT_THAT(message, HasSubstr("17 or 20"));
  }
}

TEST_F(ConfigTest, Arch) {
  for (const char* good : {"sm_90a", "sm_90", "sm_100a", "sm_80"}) {
    Config c = Config::from_variables(with({{"DG_JIT_ARCH", good}}));
    ASSERT_TRUE(c.arch.has_value());
    EXPECT_EQ(*c.arch, good);
    EXPECT_EQ(setting(c, "arch").origin, Origin::kEnvironment);
  }
  EXPECT_EQ(*Config::from_variables(with({{"DG_JIT_ARCH", " sm_90a "}})).arch, "sm_90a");
  // The rule of compiler::Arch::parse, so a value refused at compile time is refused here, by its variable.
  for (const char* bad : {"banana", "90a", "sm90a", "sm_9", "compute_90a", "sm_90b", "sm_00", "sm_090a", "sm_9999"}) {
    std::string message = config_error(with({{"DG_JIT_ARCH", bad}}));
    EXPECT_THAT(message, HasSubstr("DG_JIT_ARCH"));
    EXPECT_THAT(message, HasSubstr(std::string("'") + bad + "'"));
    EXPECT_THAT(message, HasSubstr("sm_90a"));
  }
}

TEST_F(ConfigTest, CompileTimeout) {
  Config c = Config::from_variables(with({{"DG_JIT_COMPILE_TIMEOUT", "30"}}));
  EXPECT_EQ(c.compile_timeout_s, 30);
  EXPECT_EQ(setting(c, "compile_timeout_s").origin, Origin::kEnvironment);
  for (const char* bad : {"0", "-5", "ten", "1.5", "99999999999999", "30s"}) {
    std::string message = config_error(with({{"DG_JIT_COMPILE_TIMEOUT", bad}}));
    EXPECT_THAT(message, HasSubstr("DG_JIT_COMPILE_TIMEOUT"));
    EXPECT_THAT(message, HasSubstr(std::string("'") + bad + "'"));
    EXPECT_THAT(message, HasSubstr("a whole number of seconds from 1 to 2147483647"));
  }
}

TEST_F(ConfigTest, CacheDirFromVariable) {
  fs::path dir = scratch_.path() / "my cache";  // a space in the path is fine
  Config c = Config::from_variables(with({{"DG_JIT_CACHE_DIR", dir.string()}}));
  EXPECT_EQ(c.cache_dir, dir);
  EXPECT_EQ(setting(c, "cache_dir").origin, Origin::kEnvironment);
  EXPECT_FALSE(fs::exists(dir)) << "reading the configuration must not create the cache";

  Config trailing = Config::from_variables(with({{"DG_JIT_CACHE_DIR", dir.string() + "/"}}));
  EXPECT_EQ(trailing.cache_dir, dir);
  Config tilde = Config::from_variables(with({{"DG_JIT_CACHE_DIR", "~/kc"}}));
  EXPECT_EQ(tilde.cache_dir, home_.path() / "kc");
  Config relative = Config::from_variables(with({{"DG_JIT_CACHE_DIR", "rel/dir"}}));
  EXPECT_TRUE(relative.cache_dir.is_absolute());
  EXPECT_EQ(relative.cache_dir, fs::current_path() / "rel/dir");
}

TEST_F(ConfigTest, CacheDirThatIsARegularFileIsAnError) {
  fs::path file = scratch_.path() / "not-a-dir";
  std::ofstream(file) << "x";
  std::string message = config_error(with({{"DG_JIT_CACHE_DIR", file.string()}}));
  EXPECT_THAT(message, HasSubstr("DG_JIT_CACHE_DIR"));
  EXPECT_THAT(message, HasSubstr(file.string()));
  EXPECT_THAT(message, HasSubstr("not a directory"));

  // Below a regular file it cannot be created either.
  message = config_error(with({{"DG_JIT_CACHE_DIR", (file / "sub").string()}}));
  EXPECT_THAT(message, HasSubstr("DG_JIT_CACHE_DIR"));
  EXPECT_THAT(message, HasSubstr(file.string()));
  EXPECT_THAT(message, HasSubstr("cannot be created"));

  // The default location too, naming the variable that moves it.
  std::ofstream(home_.path() / ".deep_gemm") << "x";
  message = config_error(base());
  EXPECT_THAT(message, HasSubstr((home_.path() / ".deep_gemm").string()));
  EXPECT_THAT(message, HasSubstr("DG_JIT_CACHE_DIR"));
}

TEST_F(ConfigTest, HomeUnsetUsesThePasswordDatabase) {
  struct passwd* pw = getpwuid(getuid());
  if (!pw) GTEST_SKIP() << "this uid has no password entry";
  Vars vars = {{"PATH", ""}};
  Config c = Config::from_variables(vars);
  EXPECT_EQ(c.cache_dir, fs::path(pw->pw_dir) / ".deep_gemm");
  EXPECT_THAT(setting(c, "cache_dir").detail, HasSubstr("password database"));
  EXPECT_EQ(setting(c, "cache_dir").origin, Origin::kDefault);
  // An empty HOME counts as unset.
  EXPECT_EQ(Config::from_variables({{"HOME", ""}}).cache_dir, fs::path(pw->pw_dir) / ".deep_gemm");
}

TEST_F(ConfigTest, NoHomeAtAllFallsBackToTmp) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to become a uid without a password entry";
  // In a child: become a uid nobody has, then read the configuration without HOME.
  const uid_t unknown = 54321;
  if (getpwuid(unknown)) GTEST_SKIP() << "uid " << unknown << " exists here";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setuid(unknown) != 0) _exit(10);
    try {
      Config c = Config::from_variables({});
      const auto& settings = c.settings();
      if (c.cache_dir != fs::path("/tmp/kiln-cache-54321")) _exit(11);
      if (settings.front().detail.find("no password entry") == std::string::npos) _exit(12);
    } catch (...) {
      _exit(13);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(ConfigTest, NvccPathFromVariable) {
  fs::path nvcc = scratch_.path() / "cuda dir" / "bin" / "nvcc";
  make_executable(nvcc);
  Config c = Config::from_variables(with({{"DG_JIT_NVCC_COMPILER", nvcc.string()}}));
  EXPECT_EQ(c.nvcc_path, nvcc);
  EXPECT_EQ(setting(c, "nvcc_path").origin, Origin::kEnvironment);

  // A bare name is looked up on PATH.
  Config bare = Config::from_variables(
      with({{"DG_JIT_NVCC_COMPILER", "nvcc"}, {"PATH", "/nonexistent:" + nvcc.parent_path().string()}}));
  EXPECT_EQ(bare.nvcc_path, nvcc);
}

// NVCC runs in a temporary working directory: a relative path, given or found through a relative PATH entry,
// is made absolute when the configuration is read.
TEST_F(ConfigTest, ARelativeNvccPathIsMadeAbsolute) {
  const fs::path before = fs::current_path();
  fs::current_path(scratch_.path());
  make_executable(scratch_.path() / "bin" / "wrap");
  Config given = Config::from_variables(with({{"DG_JIT_NVCC_COMPILER", "bin/wrap"}}));
  Config found = Config::from_variables(with({{"DG_JIT_NVCC_COMPILER", "wrap"}, {"PATH", "bin"}}));
  fs::current_path(before);
  EXPECT_EQ(given.nvcc_path, scratch_.path() / "bin" / "wrap");
  EXPECT_EQ(found.nvcc_path, scratch_.path() / "bin" / "wrap");
}

TEST_F(ConfigTest, BadNvccPathsAreErrors) {
  fs::path missing = scratch_.path() / "no" / "nvcc";
  std::string message = config_error(with({{"DG_JIT_NVCC_COMPILER", missing.string()}}));
  EXPECT_THAT(message, HasSubstr("DG_JIT_NVCC_COMPILER"));
  EXPECT_THAT(message, HasSubstr(missing.string()));
  EXPECT_THAT(message, HasSubstr("does not exist"));

  message = config_error(with({{"DG_JIT_NVCC_COMPILER", scratch_.path().string()}}));
  EXPECT_THAT(message, HasSubstr("is a directory"));

  fs::path plain = scratch_.path() / "plain-nvcc";
  std::ofstream(plain) << "not executable";
  fs::permissions(plain, fs::perms::owner_read | fs::perms::owner_write);
  // No execute bit at all: refused even for root (access(X_OK) needs one).
  message = config_error(with({{"DG_JIT_NVCC_COMPILER", plain.string()}}));
  EXPECT_THAT(message, HasSubstr("not an executable"));

  message = config_error(with({{"DG_JIT_NVCC_COMPILER", "nvcc-that-is-nowhere"}}));
  EXPECT_THAT(message, HasSubstr("DG_JIT_NVCC_COMPILER"));
  EXPECT_THAT(message, HasSubstr("'nvcc-that-is-nowhere'"));
  EXPECT_THAT(message, HasSubstr("PATH"));
}

TEST_F(ConfigTest, DefaultNvccSearchOrder) {
  fs::path home_nvcc = scratch_.path() / "home" / "bin" / "nvcc";
  fs::path path_nvcc = scratch_.path() / "cudapath" / "bin" / "nvcc";
  fs::path on_path = scratch_.path() / "onpath" / "nvcc";
  make_executable(home_nvcc);
  make_executable(path_nvcc);
  make_executable(on_path);
  const std::string path_var = on_path.parent_path().string();

  Config a = Config::from_variables(with({{"CUDA_HOME", (scratch_.path() / "home").string()},
                                          {"CUDA_PATH", (scratch_.path() / "cudapath").string()},
                                          {"PATH", path_var}}));
  EXPECT_EQ(a.nvcc_path, home_nvcc);
  EXPECT_EQ(setting(a, "nvcc_path").detail, "$CUDA_HOME/bin/nvcc");
  EXPECT_EQ(setting(a, "nvcc_path").origin, Origin::kDefault);
  EXPECT_EQ(a.cuda_home, scratch_.path() / "home");
  EXPECT_EQ(setting(a, "cuda_home").origin, Origin::kEnvironment);

  Config b = Config::from_variables(
      with({{"CUDA_PATH", (scratch_.path() / "cudapath").string()}, {"PATH", path_var}}));
  EXPECT_EQ(b.nvcc_path, path_nvcc);
  EXPECT_EQ(b.cuda_home, scratch_.path() / "cudapath");
  EXPECT_EQ(setting(b, "cuda_home").detail, "from CUDA_PATH");

  // A CUDA_HOME without nvcc falls through to PATH.
  Config c = Config::from_variables(with({{"CUDA_HOME", scratch_.path().string()}, {"PATH", path_var}}));
  EXPECT_EQ(c.nvcc_path, on_path);
  EXPECT_EQ(setting(c, "nvcc_path").detail, "found on PATH");
}

TEST_F(ConfigTest, MissingDefaultNvccIsNotAnErrorAtConfigTime) {
  // Nothing in CUDA_HOME, CUDA_PATH or PATH; the build toolkit's nvcc may still exist on this machine.
  Config c = Config::from_variables(with({{"CUDA_HOME", scratch_.path().string()}, {"PATH", ""}}));
  fs::path built_with = fs::path(KILN_DEFAULT_CUDA_HOME) / "bin/nvcc";
  if (access(built_with.c_str(), X_OK) == 0) {
    EXPECT_EQ(c.nvcc_path, built_with);
  } else {
    EXPECT_TRUE(c.nvcc_path.empty());
    EXPECT_THAT(setting(c, "nvcc_path").detail, HasSubstr("not found"));
  }
}

TEST_F(ConfigTest, SeveralBadVariablesAreReportedTogether) {
  std::string message =
      config_error(with({{"DG_JIT_USE_NVRTC", "yes please"}, {"DG_JIT_CPP_STANDARD", "banana"}}));
  EXPECT_THAT(message, HasSubstr("DG_JIT_USE_NVRTC='yes please'"));
  EXPECT_THAT(message, HasSubstr("DG_JIT_CPP_STANDARD='banana'"));
}

// Only spaces is unset, as empty is; spaces around a directory are a slip, refused by name.
TEST_F(ConfigTest, AValueOfOnlySpacesIsUnset) {
  for (const char* variable : {"DG_JIT_USE_NVRTC", "DG_JIT_ARCH", "DG_JIT_MODE", "DG_JIT_CACHE_MAX_BYTES",
                               "DG_JIT_CACHE_DIR", "DG_JIT_COMPILE_TIMEOUT", "DG_JIT_NVCC_COMPILER"}) {
    Config c = Config::from_variables(with({{variable, "   "}}));
    for (const auto& s : c.settings())
      if (s.variable == variable) EXPECT_EQ(s.origin, Origin::kDefault) << variable;
  }
  for (const std::string bad : {" /tmp/x", "/tmp/x ", "/tmp/a: /tmp/b"}) {
    const std::string message = config_error(with({{"DG_JIT_CACHE_DIR", bad}}));
    EXPECT_THAT(message, HasSubstr("DG_JIT_CACHE_DIR='" + bad + "'"));
    EXPECT_THAT(message, HasSubstr("spaces at the start or end"));
  }
  EXPECT_EQ(Config::from_variables(with({{"DG_JIT_CACHE_DIR", (scratch_.path() / "a b").string()}})).cache_dir,
            scratch_.path() / "a b") << "spaces inside a path are kept";
}

TEST_F(ConfigTest, TildeUserIsThatUsersHomeAndARelativeHomeIsMadeAbsolute) {
  struct passwd* root = ::getpwuid(0);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(Config::from_variables(with({{"DG_JIT_CACHE_DIR", std::string("~") + root->pw_name + "/kiln-x"}})).cache_dir,
            fs::path(root->pw_dir) / "kiln-x");
  const std::string message = config_error(with({{"DG_JIT_CACHE_DIR", "~no-such-user-kiln/x"}}));
  EXPECT_THAT(message, HasSubstr("no user no-such-user-kiln"));

  const fs::path before = fs::current_path();
  fs::current_path(scratch_.path());
  Config relative = Config::from_variables({{"HOME", "relhome"}, {"PATH", ""}});
  fs::current_path(before);
  EXPECT_EQ(relative.cache_dir, scratch_.path() / "relhome" / ".deep_gemm");
}

TEST_F(ConfigTest, TheSameDirectoryTwiceThroughALinkIsAnError) {
  fs::create_directories(scratch_.path() / "d1");
  fs::create_directory_symlink(scratch_.path() / "d1", scratch_.path() / "d1link");
  const std::string message = config_error(
      with({{"DG_JIT_CACHE_DIR", (scratch_.path() / "d1").string() + ":" + (scratch_.path() / "d1link").string()}}));
  EXPECT_THAT(message, HasSubstr("the same directory"));
}

TEST_F(ConfigTest, SizesNeedAUnitBeforeIb) {
  EXPECT_EQ(*parse_byte_size("5KiB"), 5u << 10);
  EXPECT_EQ(*parse_byte_size("5kb"), 5u << 10);
  EXPECT_EQ(*parse_byte_size("5b"), 5u);
  for (const char* bad : {"5ib", "5iB", "5xib", "5kibb"}) EXPECT_FALSE(parse_byte_size(bad).has_value()) << bad;
}

// A variable no setting reads is listed, with the nearest known name when it is a near miss.
TEST_F(ConfigTest, UnknownVariablesAreListedWithANearMiss) {
  Config c = Config::from_variables(
      with({{"DG_JIT_USE_NVRT", "1"}, {"DG_PRINT_CONFIG", "1"}, {"DG_JIT_SOMETHING_ELSE_ENTIRELY", "1"},
            {"DG_JIT_USE_NVRTC", "0"}, {"OTHER", "1"}}));
  ASSERT_EQ(c.unknown_variables().size(), 3u);
  EXPECT_EQ(c.unknown_variables()[0].name, "DG_JIT_SOMETHING_ELSE_ENTIRELY");
  EXPECT_EQ(c.unknown_variables()[0].hint, "");
  EXPECT_EQ(c.unknown_variables()[1].name, "DG_JIT_USE_NVRT");
  EXPECT_EQ(c.unknown_variables()[1].hint, " (did you mean DG_JIT_USE_NVRTC?)");
  EXPECT_EQ(c.unknown_variables()[2].name, "DG_PRINT_CONFIG");
  EXPECT_EQ(c.unknown_variables()[2].hint, " (did you mean DG_PRINT_CONFIGS?)");
}

TEST_F(ConfigTest, ToStrings) {
  EXPECT_STREQ(to_string(Backend::kNvcc), "nvcc");
  EXPECT_STREQ(to_string(Backend::kNvrtc), "nvrtc");
  EXPECT_STREQ(to_string(LaunchApi::kDriver), "driver");
  EXPECT_STREQ(to_string(LaunchApi::kRuntime), "runtime");
  EXPECT_STREQ(to_string(Origin::kDefault), "default");
  EXPECT_STREQ(to_string(Origin::kEnvironment), "environment");
}

// config() reads the environment once: later changes are not seen, and a bad environment fails the same
// way every time. Both run in a child so this process's configuration stays untouched.
TEST(ConfigOnce, EnvironmentIsReadOnce) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("DG_JIT_CPP_STANDARD", "17", 1);
    setenv("DG_JIT_USE_NVRTC", "1", 1);
    const Config* first = &config();
    if (first->cpp_standard != 17 || first->backend != Backend::kNvrtc) _exit(10);
    setenv("DG_JIT_CPP_STANDARD", "banana", 1);
    unsetenv("DG_JIT_USE_NVRTC");
    const Config* second = &config();
    if (second != first || second->cpp_standard != 17 || second->backend != Backend::kNvrtc) _exit(11);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ConfigOnce, ThreadsRacingForTheFirstReadGetTheSameValue) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("DG_JIT_CPP_STANDARD", "17", 1);
    std::vector<const Config*> seen(16, nullptr);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&seen, i] { seen[i] = &config(); });
    for (auto& t : threads) t.join();
    for (const Config* c : seen)
      if (c != seen[0] || c->cpp_standard != 17) _exit(10);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ConfigOnce, BadEnvironmentFailsTheSameWayEveryTime) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("DG_JIT_USE_NVRTC", "yes please", 1);
    std::string first, second;
    try {
      config();
      _exit(10);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kConfigError) _exit(11);
      first = e.what();
    }
    setenv("DG_JIT_USE_NVRTC", "1", 1);  // not reread
    try {
      config();
      _exit(12);
    } catch (const Error& e) {
      second = e.what();
    }
    if (first != second || first.find("DG_JIT_USE_NVRTC='yes please'") == std::string::npos) _exit(13);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ConfigOnce, FromEnvironmentReadsTheProcessEnvironment) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("DG_PRINT_CONFIGS", "on", 1);
    setenv("DG_JIT_COMPILE_TIMEOUT", "42", 1);
    Config c = Config::from_environment();
    _exit(c.print_configs && c.compile_timeout_s == 42 ? 0 : 10);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace kiln
