// Compile options' key text, the ptxas resource report and DG_JIT_PTXAS_CHECK.
#include <regex>
#include <sstream>

#include "compiler/compiler.hpp"
#include "compiler/internal.hpp"
#include "kiln/error.hpp"

namespace kiln::compiler {
namespace {

template <size_t N>
std::string join_flags(const std::array<std::string_view, N>& flags) {
  std::string out;
  for (auto f : flags) {
    if (!out.empty()) out += ' ';
    out += f;
  }
  return out;
}

// The first integer captured by `pattern` in `line`, or nullopt.
std::optional<int64_t> find_number(const std::string& line, const std::regex& pattern) {
  std::smatch m;
  if (!std::regex_search(line, m, pattern)) return std::nullopt;
  return std::stoll(m[1]);
}

}  // namespace

std::string CompileOptions::key_text() const {
  // Only what changes the cubin. Both backends' fixed flags are listed because this text does not know the
  // backend (the compiler identity in the key does); print, verbose, report and PTX switches never appear.
  std::string text = "arch=" + arch.name() + ";std=c++" + std::to_string(cpp_standard) +
                     ";lineinfo=" + (lineinfo ? "1" : "0") + ";nvcc-flags=" + join_flags(detail::kNvccFixedFlags) +
                     ";nvrtc-flags=" + join_flags(detail::kNvrtcFixedFlags);
  // Only when set, so that the keys of kernels without it stay what they were.
  if (register_usage_level > 0) text += ";register-usage-level=" + std::to_string(register_usage_level);
  return text;
}

std::string detail::register_usage_level_option(const CompileOptions& options) {
  const int level = options.register_usage_level;
  if (level < 0 || level > 10)
    throw Error(ErrorKind::kValueError, "CompileOptions::register_usage_level: expected 0 (ptxas's default) or "
                                        "1..10, got " + std::to_string(level));
  return level == 0 ? std::string() : "--register-usage-level=" + std::to_string(level);
}

std::string ResourceUsage::describe() const {
  if (!known()) return "no ptxas resource report";
  std::ostringstream s;
  s << registers << " registers";
  if (shared_bytes >= 0) s << ", " << shared_bytes << " bytes shared memory";
  if (stack_frame_bytes >= 0) s << ", " << stack_frame_bytes << " bytes stack frame";
  if (spill_store_bytes >= 0) s << ", " << spill_store_bytes << " bytes spill stores";
  if (spill_load_bytes >= 0) s << ", " << spill_load_bytes << " bytes spill loads";
  if (local_bytes >= 0) s << ", " << local_bytes << " bytes local memory";
  return s.str();
}

ResourceUsage parse_ptxas_report(const std::string& log, const std::string& kernel_name) {
  // The report is line oriented and looks the same from nvcc and NVRTC except for the prefix of the
  // properties line ("    0 bytes stack frame" vs "ptxas         .     0 bytes stack frame"):
  //   ptxas info    : Compiling entry function 'NAME' for 'sm_90a'
  //   ptxas info    : Function properties for NAME
  //       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 168 registers, used 2 barriers, 1024 bytes cumulative stack size, 4096 bytes smem
  // Older toolkits add "N bytes lmem" and "N bytes cmem[0]" to the Used line. ptxas leaves out zero smem and
  // lmem, so once the Used line is found those default to 0. Non-entry functions have their own
  // "Function properties for" blocks, which are skipped by name.
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kProperties(R"(Function properties for (\S+))");
  static const std::regex kRegisters(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  static const std::regex kLmem(R"((\d+) bytes lmem)");
  static const std::regex kStack(R"((\d+) bytes stack frame)");
  static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
  static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");

  ResourceUsage usage;
  std::string current_entry, properties_of;
  std::istringstream lines(log);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, kEntry)) {
      current_entry = m[1];
      properties_of.clear();
      continue;
    }
    if (std::regex_search(line, m, kProperties)) {
      properties_of = m[1];
      continue;
    }
    if (line.find("bytes stack frame") != std::string::npos) {
      if (properties_of == kernel_name) {
        usage.stack_frame_bytes = find_number(line, kStack).value_or(-1);
        usage.spill_store_bytes = find_number(line, kSpillStores).value_or(-1);
        usage.spill_load_bytes = find_number(line, kSpillLoads).value_or(-1);
      }
      properties_of.clear();
      continue;
    }
    if (current_entry == kernel_name) {
      if (auto regs = find_number(line, kRegisters)) {
        usage.registers = static_cast<int>(*regs);
        usage.shared_bytes = find_number(line, kSmem).value_or(0);
        usage.local_bytes = find_number(line, kLmem).value_or(0);
      }
    }
  }
  return usage;
}

void check_resources(const CompiledKernel& kernel, const std::string& display_name) {
  const ResourceUsage& r = kernel.resources;
  if (!r.known())
    throw Error(ErrorKind::kCompileError,
                "DG_JIT_PTXAS_CHECK: cannot check kernel " + display_name + " (" + kernel.kernel_name +
                    "): the compile log has no ptxas resource report for it (compile with resource_report)");
  if (r.uses_local_memory())
    throw Error(ErrorKind::kCompileError,
                "DG_JIT_PTXAS_CHECK: kernel " + display_name + " (" + kernel.kernel_name +
                    ") uses local memory or spills registers: " + r.describe() +
                    "; expected 0 bytes stack frame, spill stores, spill loads and local memory");
}

}  // namespace kiln::compiler
