// Compiles a kernel spec for sm_90a with one backend, as the registry tests do for every operation, and checks
// what every kiln kernel must satisfy: a real cubin, a ptxas report, no local memory or spills.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/config.hpp"

namespace kiln::test {

// Returns the compiled kernel so the caller can add its own checks (register budget, setmaxnreg; with
// `keep_ptx`, the PTX too).
inline compiler::CompiledKernel compile_for_sm90a_and_check(Backend backend, const codegen::KernelSpec& spec,
                                                           const std::filesystem::path& home,
                                                           const std::filesystem::path& state,
                                                           bool keep_ptx = false) {
  Config config = Config::from_variables({{"HOME", home.string()}});
  auto compiler = compiler::make_compiler(backend, config, state);
  compiler::CompileOptions options;
  options.arch = compiler::Arch::parse("sm_90a");
  options.resource_report = true;
  options.keep_ptx = keep_ptx;
  options = jit::with_kernel_options(options, spec);  // the kernel's own options, as the runtime passes them
  compiler::CompileInput input{codegen::render_source(spec), spec.kernel_name(), spec.op + " " + spec.describe()};
  compiler::CompiledKernel k = compiler->compile(input, options);
  EXPECT_GT(k.cubin.size(), 1000u) << input.display_name;
  EXPECT_TRUE(k.resources.known()) << input.display_name << "\n" << k.log;
  EXPECT_FALSE(k.resources.uses_local_memory()) << input.display_name << ": " << k.resources.describe();
  EXPECT_NO_THROW(compiler::check_resources(k, input.display_name));
  // ptxas advisories that mean the kernel will not run as written: setmaxnreg ignored (C7508), every wgmma
  // serialised because registers ran short (C7512) or because it could not follow the asynchronous pipeline
  // (C7514).
  EXPECT_EQ(k.log.find("C7508"), std::string::npos) << input.display_name << ": setmaxnreg ignored\n" << k.log;
  EXPECT_EQ(k.log.find("C7512"), std::string::npos) << input.display_name << ": wgmma serialised\n" << k.log;
  EXPECT_EQ(k.log.find("C7514"), std::string::npos) << input.display_name << ": wgmma serialised\n" << k.log;
  if (spec.register_usage_level > 0)
    EXPECT_NE(k.command.find("--register-usage-level=" + std::to_string(spec.register_usage_level)), std::string::npos)
        << input.display_name << ": " << k.command;
  return k;
}

}  // namespace kiln::test
