// Two compilers behind one interface. A compiler turns a source into a cubin for one arch; it knows nothing
// of the cache. Its identity (name + exact version) and the flags that change the binary go into the cache
// key; flags that only change what is printed (ptxas -v) do not.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/config.hpp"

namespace kiln::compiler {

// A CUDA target: sm_90a, sm_90, sm_100a...
struct Arch {
  int major = 9;
  int minor = 0;
  bool arch_specific = true;  // the "a" suffix: needed for wgmma and setmaxnreg

  // "sm_90a". Throws Error(kConfigError) for anything that is not sm_<2 or 3 digits, the first not 0>[a].
  static Arch parse(const std::string& text);
  // What a kernel for a GPU of compute capability cc_major.cc_minor is built for: its own arch, arch-specific from
  // Hopper on (wgmma, setmaxnreg and their successors exist only there). The JIT's and the plans' target alike.
  static Arch of_device(int cc_major, int cc_minor);
  std::string name() const;            // "sm_90a"
  std::string compute_name() const;    // "compute_90a"
  // Whether a cubin built for this arch loads on a GPU of compute capability cc_major.cc_minor: an arch-specific
  // one ("a") on that exact capability only, another on the same major at the same or a later minor.
  bool runs_on(int cc_major, int cc_minor) const;
  bool operator==(const Arch&) const = default;
};

struct CompileOptions {
  Arch arch;
  int cpp_standard = 20;
  bool lineinfo = false;         // changes the binary: part of the key
  int register_usage_level = 0;  // ptxas --register-usage-level 1..10, 0: ptxas's default; part of the key
  bool ptxas_verbose = false;    // print the ptxas report (never part of the key)
  bool print_command = false;    // print the command / NVRTC options (never part of the key)
  bool keep_ptx = false;         // also return the PTX (for DG_JIT_DUMP_PTX)
  bool resource_report = false;  // ask ptxas for its report (-v) and fill CompiledKernel::resources
  int timeout_s = 600;           // NVCC only: the child is killed after this

  // The options that change the binary, rendered canonically for the cache key.
  std::string key_text() const;
};

// Registers, shared memory and spills as ptxas reported them.
struct ResourceUsage {
  int registers = -1;
  int64_t shared_bytes = -1;
  int64_t stack_frame_bytes = -1;
  int64_t spill_store_bytes = -1;
  int64_t spill_load_bytes = -1;
  int64_t local_bytes = -1;  // lmem
  bool known() const { return registers >= 0; }
  bool uses_local_memory() const {
    return spill_store_bytes > 0 || spill_load_bytes > 0 || local_bytes > 0 || stack_frame_bytes > 0;
  }
  std::string describe() const;  // "128 registers, 0 bytes stack frame, 0 bytes spill stores, ..."
};

struct CompileInput {
  std::string source;        // the rendered translation unit
  std::string kernel_name;   // the extern "C" symbol to find in the cubin
  std::string display_name;  // "per_token_cast_to_fp8 k=7168" for messages
};

struct CompiledKernel {
  std::vector<uint8_t> cubin;
  std::string ptx;           // empty unless CompileOptions::keep_ptx
  std::string log;           // compiler + ptxas output (includes the -v report)
  std::string command;       // the NVCC argv joined for display, or "nvrtc <options>"
  std::string kernel_name;   // the name to look up in the loaded module
  ResourceUsage resources;
  double compile_ms = 0;
};

// "nvcc 13.0.88" / "nvrtc 13.0": part of the cache key, obtained without a subprocess on a warm start.
struct ToolchainId {
  std::string name;      // "nvcc" or "nvrtc"
  std::string version;   // exact version, e.g. "13.0.88" (nvcc) or "13.0" (nvrtc)
  std::string text() const { return name + ' ' + version; }
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual Backend backend() const = 0;
  // Cheap after the first call; never runs a subprocess on a warm start (memoised under the cache dir).
  virtual const ToolchainId& identity() = 0;
  // Thread-safe. Throws CompileError (with the command and full log) when the compile fails, times out
  // (NVCC), or yields no cubin or no kernel named input.kernel_name; Error(kCudaError) when NVRTC cannot be
  // loaded. The PTXAS check is check_resources(), applied by the caller to a kernel compiled with
  // resource_report (which fills CompiledKernel::resources).
  virtual CompiledKernel compile(const CompileInput& input, const CompileOptions& options) = 0;
  // What, outside kiln's settings, changes this compiler's binaries as the process stands now, rendered for the
  // cache key; empty when nothing does. NVCC reads NVCC_PREPEND_FLAGS and NVCC_APPEND_FLAGS from the environment
  // it inherits, and either may change the cubin (-Xptxas -O0, -maxrregcount=32, -G): a kernel built under them
  // must not be served to a process without them.
  virtual std::string environment_key_text() const { return {}; }
};

// Builds the compiler the configuration selects. `state_dir` is a writable directory for memoised toolchain
// versions and NVCC's copy of the embedded headers (normally <cache>/toolchain); it may be empty, in which
// case nothing is memoised on disk. Loads nothing and runs nothing. Throws Error(kConfigError) when
// Config::nvcc_path is set but is not an executable file, Error(kNotFound) when NVCC is selected and no nvcc
// is found ($CUDA_HOME/bin, then PATH). CUDA_HOME is Config::cuda_home, else the toolkit kiln was built with.
std::unique_ptr<Compiler> make_compiler(Backend backend, const Config& config,
                                        const std::filesystem::path& state_dir);

// Rejects a kernel that uses local memory or spills: Error(kCompileError) naming the kernel and the figures.
void check_resources(const CompiledKernel& kernel, const std::string& display_name);

// Parses the ptxas -v report for `kernel_name` out of a compiler log.
ResourceUsage parse_ptxas_report(const std::string& log, const std::string& kernel_name);

// Disassembles a cubin to SASS text with nvdisasm, else cuobjdump (each searched in $CUDA_HOME/bin, then
// PATH). Throws Error(kNotFound) saying which tools were looked for and where, when none is found, and
// Error(kCompileError) with the tool's output when it fails (cuobjdump fails when it cannot find nvdisasm).
std::string disassemble_sass(const std::vector<uint8_t>& cubin, const Config& config);

}  // namespace kiln::compiler
