#include <regex>

#include "compiler/compiler.hpp"
#include "kiln/error.hpp"

namespace kiln::compiler {

Arch Arch::parse(const std::string& text) {
  // The last digit is the minor version: sm_90a is 9.0, sm_100a is 10.0, sm_120a is 12.0.
  static const std::regex kPattern(R"(sm_(\d+)(\d)(a?))");
  std::smatch m;
  if (!std::regex_match(text, m, kPattern))
    throw Error(ErrorKind::kConfigError,
                "invalid CUDA arch '" + text + "': expected sm_<major><minor>[a], for example sm_90a");
  Arch arch;
  arch.major = std::stoi(m[1]);
  arch.minor = std::stoi(m[2]);
  arch.arch_specific = m[3].length() > 0;
  return arch;
}

std::string Arch::name() const {
  return "sm_" + std::to_string(major) + std::to_string(minor) + (arch_specific ? "a" : "");
}

std::string Arch::compute_name() const {
  return "compute_" + std::to_string(major) + std::to_string(minor) + (arch_specific ? "a" : "");
}

}  // namespace kiln::compiler
