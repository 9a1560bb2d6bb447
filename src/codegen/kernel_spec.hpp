// A kernel spec: an operation plus the values its device template is specialised on. Rendering a spec gives
// a small CUDA source that includes one device header and instantiates the template behind a plain
// `extern "C"` kernel, so both compilers, both launch APIs and the cache see the same unmangled name.
//
// Every kiln kernel takes one argument, a POD parameter struct shared by host and device code
// (`const __grid_constant__ Params`), so the wrapper needs no per-operation parameter list.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::codegen {

struct TemplateArg {
  std::string name;   // for humans and metadata: "k", "block_m"
  std::string value;  // rendered verbatim as a template argument: "7168", "true"
};

struct KernelSpec {
  std::string op;               // operation name, e.g. "per_token_cast_to_fp8"
  std::string header;           // device header, e.g. "kiln/kernels/quantize.cuh"
  std::string kernel_template;  // e.g. "kiln::kernels::PerTokenCast"; must have `static __device__ run(params)`
  std::string params_type;      // e.g. "kiln::PerTokenCastParams"
  std::vector<TemplateArg> args;
  int block_threads = 128;      // __launch_bounds__ maximum threads
  int min_blocks_per_sm = 1;    // __launch_bounds__ minimum blocks (1 lets setmaxnreg work)
  // ptxas --register-usage-level (1..10) for this kernel, 0 for ptxas's default (5). A compile option, not
  // source: it reaches the compiler through CompileOptions and the cache key through their key_text().
  int register_usage_level = 0;

  KernelSpec& arg(std::string name, int64_t value);
  KernelSpec& arg(std::string name, bool value);

  // The extern "C" symbol: "kiln_" + op.
  std::string kernel_name() const;
  // "k=7168 threads=256": for metadata, `kiln cache ls` and logs. Stable order (the order of args), then the
  // compile options that are set ("register_usage_level=10").
  std::string describe() const;
};

// The generated translation unit. Deterministic: the same spec always renders byte-identical text.
std::string render_source(const KernelSpec& spec);

}  // namespace kiln::codegen
