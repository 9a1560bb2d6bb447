#include <cctype>

#include "compiler/compiler.hpp"
#include "kiln/error.hpp"

namespace kiln::compiler {

Arch Arch::parse(const std::string& text) {
  // sm_<digits>[a]; the last digit is the minor version: sm_90a is 9.0, sm_100a is 10.0, sm_120a is 12.0. Two or
  // three digits, the first not 0, as every CUDA arch is named: "sm_9999a" or "sm_090a" is a typo to name here,
  // not a major version 999 for the compiler to refuse after the plan.
  // Parsed by hand: a std::regex costs a warm process about 0.1 ms to build, on the way to its first kernel.
  const std::string_view prefix = "sm_";
  std::string_view digits(text);
  const bool arch_specific = !digits.empty() && digits.back() == 'a';
  if (arch_specific) digits.remove_suffix(1);
  bool ok = digits.starts_with(prefix) && digits.size() >= prefix.size() + 2 && digits.size() <= prefix.size() + 3 &&
            digits[prefix.size()] != '0';
  if (ok) {
    digits.remove_prefix(prefix.size());
    for (char c : digits) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  }
  if (!ok)
    throw Error(ErrorKind::kConfigError,
                "invalid CUDA arch '" + text + "': expected sm_<major><minor>[a], for example sm_90a");
  Arch arch;
  arch.major = std::stoi(std::string(digits.substr(0, digits.size() - 1)));
  arch.minor = digits.back() - '0';
  arch.arch_specific = arch_specific;
  return arch;
}

std::string Arch::name() const {
  return "sm_" + std::to_string(major) + std::to_string(minor) + (arch_specific ? "a" : "");
}

Arch Arch::of_device(int cc_major, int cc_minor) { return Arch{cc_major, cc_minor, cc_major >= 9}; }

bool Arch::runs_on(int cc_major, int cc_minor) const {
  if (cc_major != major) return false;
  return arch_specific ? cc_minor == minor : cc_minor >= minor;
}

std::string Arch::compute_name() const {
  return "compute_" + std::to_string(major) + std::to_string(minor) + (arch_specific ? "a" : "");
}

}  // namespace kiln::compiler
