// SASS for DG_JIT_DUMP_SASS: nvdisasm (or cuobjdump) over a cubin written to a private temporary file.
#include <unistd.h>

#include "compiler/compiler.hpp"
#include "compiler/internal.hpp"
#include "kiln/error.hpp"
#include "util/subprocess.hpp"

namespace kiln::compiler {
namespace fs = std::filesystem;

namespace {
constexpr int64_t kDisassembleTimeoutMs = 120'000;
}

std::string disassemble_sass(const std::vector<uint8_t>& cubin, const Config& config) {
  if (cubin.empty()) throw Error(ErrorKind::kValueError, "disassemble_sass: the cubin is empty");

  // nvdisasm first: it is the disassembler (cuobjdump -sass only runs nvdisasm, and fails when it cannot find
  // it beside itself or on PATH), and `nvdisasm -c` prints just the code sections; `-hex` adds each
  // instruction's encoding, as cuobjdump prints it, whose control bits (stall cycles, yield, barriers) the
  // instruction text leaves out (scripts/sass_loop_path.py sums the stalls). Each tool is looked for in the
  // toolkit's bin directory, then on PATH.
  const fs::path cuda_home = detail::resolve_cuda_home(config);
  fs::path tool;
  std::string tool_name;
  for (const std::string name : {"nvdisasm", "cuobjdump"}) {
    if (!cuda_home.empty()) {
      fs::path candidate = cuda_home / "bin" / name;
      if (::access(candidate.c_str(), X_OK) == 0 && fs::is_regular_file(candidate)) tool = candidate;
    }
    if (tool.empty()) tool = util::find_in_path(name);
    if (!tool.empty()) {
      tool_name = name;
      break;
    }
  }
  if (tool.empty())
    throw Error(ErrorKind::kNotFound,
                "SASS disassembly needs nvdisasm or cuobjdump; looked in " +
                    (cuda_home.empty() ? std::string() : (cuda_home / "bin").string() + " and ") +
                    "PATH and found neither. Install the CUDA toolkit's nvdisasm and cuobjdump (e.g. `pip install "
                    "nvidia-cuda-nvdisasm`, or the cuda-nvdisasm package) or `pip install triton`, and put the "
                    "directory holding them (triton/backends/nvidia/bin for triton) on PATH");

  detail::PrivateTempDir work("kiln-sass-");
  const fs::path file = work.path() / "kernel.cubin";
  detail::write_whole_file(file, std::string_view(reinterpret_cast<const char*>(cubin.data()), cubin.size()));

  util::SubprocessOptions run;
  run.argv = tool_name == "nvdisasm" ? std::vector<std::string>{tool.string(), "-c", "-hex", file.string()}
                                     : std::vector<std::string>{tool.string(), "-sass", file.string()};
  run.timeout_ms = kDisassembleTimeoutMs;
  util::SubprocessResult r = util::run_subprocess(run);
  if (!r.succeeded())
    throw Error(ErrorKind::kCompileError, "disassembling a cubin failed: `" + util::join_command(run.argv) + "` " +
                                              r.describe_status() + "; output:\n" + r.output);
  return std::move(r.output);
}

}  // namespace kiln::compiler
