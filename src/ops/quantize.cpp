// FP8 quantisation with DeepSeek-V3 fine-grained scaling: validation, kernel choice and launch.
//
// Launch path: validate (no allocation on success) -> compact key {op, device, k} -> lock-free table of
// loaded kernels -> on a miss only: spec -> JIT (memory, disk, compile) -> insert -> fill the POD params ->
// LoadedKernel::launch. No strings, no map lookups by string and no environment reads on a hit.
#include "ops/quantize.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "jit/jit_runtime.hpp"
#include "jit/kernel_table.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels/quantize_params.h"
#include "kiln/ops.hpp"
#include "ops/validate.hpp"

namespace kiln::ops {
namespace {

constexpr const char* kPerTokenOp = "per_token_cast_to_fp8";
constexpr const char* kPerBlockOp = "per_block_cast_to_fp8";
constexpr const char* kMnMajorOp = "to_mn_major_scales";
constexpr const char* kHeader = "kiln/kernels/quantize.cuh";

// The quantisation kernels build for any arch from sm_90 (griddepcontrol, programmatic dependent launch; e4m3
// conversions need sm_89).
const ArchNeeds kQuantizeArch{9, 0, false, "griddepcontrol for programmatic dependent launch"};

// The first word of each table key: which op (each op has its own table, so this only keeps keys honest).
enum : int64_t { kPerTokenKeyId = 1, kPerBlockKeyId = 2, kMnMajorKeyId = 3 };

// A loaded kernel with what its launches need, resolved once on the miss.
struct CastKernel {
  const cuda::LoadedKernel* kernel = nullptr;
  CastPlan plan;
  int sm_count = 0;  // the device's
};

// Owns CastKernel values for the process's lifetime (KernelTable stores pointers). Appends only.
class KernelStore {
 public:
  const CastKernel* add(const CastKernel& k) {
    std::lock_guard<std::mutex> lock(mutex_);
    return &items_.emplace_back(k);
  }

 private:
  std::mutex mutex_;
  std::deque<CastKernel> items_;
};

void require_multiple_of_128(const char* op, const char* param, int64_t value) {
  if (value <= 0 || value % kFp8GroupSize != 0)
    throw Error(ErrorKind::kValueError, std::string(op) + ": " + param + " must be a positive multiple of 128, got " +
                                            std::to_string(value));
}

// The SMs a kernel may use on a device with `device_sms`: set_num_sms() when set (and not above the device's).
int usable_sms(int device_sms) {
  const int limit = get_num_sms();
  return limit > 0 ? std::min(limit, device_sms) : device_sms;
}

uint32_t grid_size(uint64_t work_ctas, const CastKernel& k) {
  const uint64_t cap = static_cast<uint64_t>(usable_sms(k.sm_count)) * static_cast<uint64_t>(k.plan.ctas_per_sm);
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(work_ctas, cap)));
}

// The miss path: build (or fetch) and load the kernel, remember it. Prints the choice once per distinct
// kernel when DG_PRINT_CONFIGS is set.
template <typename Table>
const CastKernel* resolve(Table& table, KernelStore& store, const typename Table::Key& key,
                          const codegen::KernelSpec& spec, const CastPlan& plan, const cuda::DeviceInfo& info,
                          int device, CUstream stream) {
  CastKernel entry;
  entry.kernel = &jit::runtime().kernel(spec, device, stream);
  entry.plan = plan;
  entry.sm_count = info.sm_count;
  const CastKernel* stored = store.add(entry);
  const CastKernel* winner = table.insert(key, stored);
  if (winner == stored && config().print_configs)
    std::fprintf(stderr, "kiln: %s on cuda:%d (%s, %d SMs): %s, %d threads/CTA, %d CTAs/SM, grid-stride, PDL %s\n",
                 spec.op.c_str(), device, info.name.c_str(), info.sm_count, spec.describe().c_str(), plan.threads,
                 plan.ctas_per_sm, get_pdl() ? "on" : "off");
  return winner;
}

// One cast's loaded kernels: a lock-free table keyed by {op, device, k} over the store that owns them.
struct CastKernels {
  jit::KernelTable<CastKernel> table;
  KernelStore store;
};

// The kernel of `kernels`' op for (device, k): a table hit, or on a miss (first call for that key) the spec
// and plan `choose(k, target)` returns, built or fetched by the JIT and remembered.
template <typename Choose>
const CastKernel& cast_kernel(CastKernels& kernels, int64_t key_id, int device, int64_t k, CUstream stream,
                              Choose choose) {
  jit::KernelTable<CastKernel>::Key key;
  key.words[0] = key_id;
  key.words[1] = device;
  key.words[2] = k;
  if (const CastKernel* hit = kernels.table.find(key)) return *hit;
  const cuda::DeviceInfo info = cuda::device_info(device);
  const TargetInfo target = device_target(info, info.sm_count);
  const auto [spec, plan] = choose(k, target);
  check_dg_jit_arch(spec.op, kQuantizeArch, config().arch);
  return *resolve(kernels.table, kernels.store, key, spec, plan, info, device, stream);
}

cuda::LaunchConfig launch_config(uint32_t grid, const CastKernel& k, Stream stream) {
  cuda::LaunchConfig c;
  c.grid[0] = grid;
  c.block[0] = static_cast<uint32_t>(k.plan.threads);
  c.pdl = get_pdl();
  c.stream = static_cast<CUstream>(stream);
  return c;
}

}  // namespace

// ---- Kernel choices (shared with the registry) ------------------------------------------------------------

CastPlan per_token_cast_plan(int64_t k, const TargetInfo& /*target*/) {
  require_multiple_of_128(kPerTokenOp, "k", k);
  // 256 threads x 4 vectors x 16 bytes = 16 KB of loads in flight per CTA, 4 CTAs per SM (<= 64 registers):
  // 64 KB per SM. Measured on an H200 (16384 x 7168, L2 flushed): 3.22 TB/s, 79.8 % of a device copy of
  // the same bytes in the same run. A layout with 4 lanes per group (one division and a 2-step butterfly
  // per 4 vectors, 2.5x fewer instructions) and 2x the bytes in flight was slower (3.0-3.06 TB/s over 7
  // variants of groups per thread and CTAs per SM): its loads touch 64-byte pieces of 8 lines per warp
  // instruction instead of whole 256-byte runs.
  return CastPlan{256, 4, 4};
}

codegen::KernelSpec per_token_cast_spec(int64_t k, const TargetInfo& target) {
  const CastPlan plan = per_token_cast_plan(k, target);
  codegen::KernelSpec spec;
  spec.op = kPerTokenOp;
  spec.header = kHeader;
  spec.kernel_template = "kiln::kernels::PerTokenCast";
  spec.params_type = "kiln::PerTokenCastParams";
  spec.arg("k", k).arg("threads", int64_t{plan.threads}).arg("vecs_per_thread", int64_t{plan.vecs_per_thread});
  spec.block_threads = plan.threads;
  spec.min_blocks_per_sm = plan.ctas_per_sm;
  return spec;
}

CastPlan per_block_cast_plan(const TargetInfo& /*target*/) {
  // 256 threads hold a 128x128 block (8 vectors each, 32 KB of loads in flight per CTA); 4 CTAs per SM
  // (64 registers). Measured on an H200: 3.55-3.62 TB/s on 7168 x 16384, 92 % of a device copy.
  return CastPlan{256, 8, 4};
}

namespace {

// A kernel of quantize.cuh specialised on its thread count only: one kernel for every shape.
codegen::KernelSpec shape_free_spec(const char* op, const char* kernel_template, const char* params_type,
                                    const CastPlan& plan) {
  codegen::KernelSpec spec;
  spec.op = op;
  spec.header = kHeader;
  spec.kernel_template = kernel_template;
  spec.params_type = params_type;
  spec.arg("threads", int64_t{plan.threads});
  spec.block_threads = plan.threads;
  spec.min_blocks_per_sm = plan.ctas_per_sm;
  return spec;
}

}  // namespace

codegen::KernelSpec per_block_cast_spec(const TargetInfo& target) {
  return shape_free_spec(kPerBlockOp, "kiln::kernels::PerBlockCast", "kiln::PerBlockCastParams",
                         per_block_cast_plan(target));
}

CastPlan mn_major_scales_plan(const TargetInfo& /*target*/) {
  // 256 threads move a 32 x 32 tile (4 KB) per step; 8 CTAs per SM. The scales are small (224 KB at
  // m = 4096, k = 7168): the launch dominates.
  return CastPlan{256, 1, 8};
}

codegen::KernelSpec mn_major_scales_spec(const TargetInfo& target) {
  return shape_free_spec(kMnMajorOp, "kiln::kernels::MnMajorScales", "kiln::MnMajorScalesParams",
                         mn_major_scales_plan(target));
}

namespace {

// A parameter that takes one value (validate_problem has refused a range for it).
int64_t param(const Problem& problem, const char* name) { return problem.at(name).lo; }
// The largest value of a parameter that may be a range: a kernel is needed when it is > 0.
int64_t param_max(const Problem& problem, const char* name) { return problem.at(name).hi; }

}  // namespace

OpDescriptor per_token_cast_descriptor() {
  OpDescriptor op;
  op.name = kPerTokenOp;
  op.arch = kQuantizeArch;
  op.summary = "bf16 [m, k] -> e4m3 with one fp32 scale per token and 128 channels (MN-major, TMA-aligned scales)";
  op.params = {{"m", "rows of x (tokens), or a range lo..hi; m = 0 needs no kernel", true, true},
               {"k", "columns of x, a positive multiple of 128 (the kernel is specialised on it)", true}};
  op.kernels = [](const Problem& problem, const TargetInfo& target) {
    validate_problem(find_op(kPerTokenOp), problem);
    const int64_t k = param(problem, "k");
    require_multiple_of_128(kPerTokenOp, "k", k);
    std::vector<codegen::KernelSpec> specs;
    if (param_max(problem, "m") > 0) specs.push_back(per_token_cast_spec(k, target));
    return specs;
  };
  return op;
}

OpDescriptor per_block_cast_descriptor() {
  OpDescriptor op;
  op.name = kPerBlockOp;
  op.arch = kQuantizeArch;
  op.summary = "bf16 [n, k] -> e4m3 with one fp32 scale per 128x128 block (weights)";
  op.params = {{"n", "rows of x; any n >= 0 (n = 0 needs no kernel), or a range lo..hi", true, true},
               {"k", "columns of x, a positive multiple of 128", true}};
  op.kernels = [](const Problem& problem, const TargetInfo& target) {
    validate_problem(find_op(kPerBlockOp), problem);
    require_multiple_of_128(kPerBlockOp, "k", param(problem, "k"));
    std::vector<codegen::KernelSpec> specs;
    if (param_max(problem, "n") > 0) specs.push_back(per_block_cast_spec(target));
    return specs;
  };
  return op;
}

OpDescriptor mn_major_scales_descriptor() {
  OpDescriptor op;
  op.name = kMnMajorOp;
  op.arch = kQuantizeArch;
  op.summary = "fp32 scales [mn, g] row-major -> the MN-major, TMA-aligned layout the FP8 GEMM reads";
  op.params = {{"mn", "rows of the scales (m or n), or a range lo..hi; 0 needs no kernel", true, true},
               {"k", "the reduction the scales cover: g = ceil(k / 128) columns; k > 0", true}};
  op.kernels = [](const Problem& problem, const TargetInfo& target) {
    validate_problem(find_op(kMnMajorOp), problem);
    if (param(problem, "k") <= 0)
      throw Error(ErrorKind::kValueError,
                  std::string(kMnMajorOp) + ": k must be positive, got " + std::to_string(param(problem, "k")));
    std::vector<codegen::KernelSpec> specs;
    if (param_max(problem, "mn") > 0) specs.push_back(mn_major_scales_spec(target));
    return specs;
  };
  return op;
}

}  // namespace kiln::ops

// ---- Public API -------------------------------------------------------------------------------------------

namespace kiln {

using ops::Arg;

int64_t per_token_scales_storage(int64_t m, int64_t k) {
  if (m < 0) throw Error(ErrorKind::kValueError, "per_token_scales_storage: m must be >= 0, got " + std::to_string(m));
  if (k < 0 || k % kFp8GroupSize != 0)
    throw Error(ErrorKind::kValueError,
                "per_token_scales_storage: k must be a non-negative multiple of 128, got " + std::to_string(k));
  return (k / kFp8GroupSize) * get_tma_aligned_size(m, 4);
}

namespace {

// The checks both casts share: dtypes, devices, 2-D shapes, k % 128, dense 16-byte-aligned rows of x,
// contiguous 16-byte-aligned out. Returns x's row stride in elements.
int64_t check_cast_common(const char* fn, const TensorView& x, const TensorView& out, const TensorView& out_scales) {
  const Arg ax{fn, "x"}, aout{fn, "out"}, ascales{fn, "out_scales"};
  ops::check_dtype(ax, x, DType::kBFloat16);
  ops::check_dtype(aout, out, DType::kFloat8E4M3);
  ops::check_dtype(ascales, out_scales, DType::kFloat32);
  ops::check_on_cuda(ax, x);
  ops::check_same_device(aout, out, ax, x);
  ops::check_same_device(ascales, out_scales, ax, x);
  ops::check_ndim(ax, x, 2);
  ops::check_size_multiple(ax, x, 1, "k", kFp8GroupSize);
  ops::check_shape(aout, out, {x.shape[0], x.shape[1]}, "(the shape of x)");
  const int64_t row_stride = ops::check_rows_dense(ax, x, 16);
  ops::check_pointer_aligned(ax, x, 16);
  ops::check_contiguous(aout, out);
  ops::check_pointer_aligned(aout, out, 16);
  return row_stride;
}

// After every other check of a cast (the scales' shape and layout included): the outputs clear of x and of each
// other. The kernels read x while they write, and write the values and the scales from different threads.
void check_cast_overlaps(const char* fn, const TensorView& x, const TensorView& out, const TensorView& out_scales) {
  const Arg aout{fn, "out"}, ascales{fn, "out_scales"};
  ops::check_no_overlap(aout, out, "x", x);
  ops::check_no_overlap(ascales, out_scales, "x", x);
  ops::check_no_overlap(ascales, out_scales, "out", out);
}

}  // namespace

void per_token_cast_to_fp8(const TensorView& x, const TensorView& out, const TensorView& out_scales, Stream stream) {
  constexpr const char* fn = "per_token_cast_to_fp8";
  const int64_t row_stride = check_cast_common(fn, x, out, out_scales);
  const int64_t m = x.shape[0], k = x.shape[1];
  const Arg ascales{fn, "out_scales"};
  ops::check_shape(ascales, out_scales, {m, k / kFp8GroupSize}, "(m, k / 128)");
  const int64_t aligned_m = get_tma_aligned_size(m, 4);
  ops::check_strides(ascales, out_scales, {1, aligned_m},
                     "the MN-major, TMA-aligned layout (per_token_scales_storage(m, k) floats)");
  ops::check_pointer_aligned(ascales, out_scales, 16);
  check_cast_overlaps(fn, x, out, out_scales);
  if (m == 0 || k == 0) return;  // nothing to do: no compile, no launch

  static ops::CastKernels kernels;
  const ops::CastKernel& kernel =
      ops::cast_kernel(kernels, ops::kPerTokenKeyId, x.device, k, static_cast<CUstream>(stream),
                       [](int64_t cols, const ops::TargetInfo& t) {
                         return std::pair{ops::per_token_cast_spec(cols, t), ops::per_token_cast_plan(cols, t)};
                       });

  PerTokenCastParams params;
  params.x = x.data;
  params.out = out.data;
  params.out_scales = static_cast<float*>(out_scales.data);
  params.m = static_cast<u64>(m);
  params.x_row_stride = static_cast<u64>(row_stride);
  params.scales_stride = static_cast<u64>(aligned_m);
  const uint64_t vectors = static_cast<uint64_t>(m) * static_cast<uint64_t>(k / 8);
  const uint64_t per_cta = static_cast<uint64_t>(kernel.plan.threads) * static_cast<uint64_t>(kernel.plan.vecs_per_thread);
  const cuda::LaunchConfig config =
      ops::launch_config(ops::grid_size((vectors + per_cta - 1) / per_cta, kernel), kernel, stream);
  kernel.kernel->launch(config, &params);
}

void to_mn_major_scales(const TensorView& sf, const TensorView& out, Stream stream) {
  constexpr const char* fn = "to_mn_major_scales";
  const Arg asf{fn, "sf"}, aout{fn, "out"};
  ops::check_dtype(asf, sf, DType::kFloat32);
  ops::check_dtype(aout, out, DType::kFloat32);
  ops::check_on_cuda(asf, sf);
  ops::check_same_device(aout, out, asf, sf);
  ops::check_ndim(asf, sf, 2);
  const int64_t rows = sf.shape[0], cols = sf.shape[1];
  ops::check_shape(aout, out, {rows, cols}, "(the shape of sf)");
  const int64_t in_stride = ops::check_rows_dense(asf, sf, 4);
  const int64_t out_stride = ops::check_mn_major_scales(aout, out, rows, cols, "mn");
  ops::check_pointer_aligned(asf, sf, 4);
  ops::check_pointer_aligned(aout, out, 16);
  if (rows == 0 || cols == 0) return;  // nothing to do: no compile, no launch
  // A transpose cannot run in place: the bytes each spans must not meet.
  ops::check_no_overlap(aout, out, "sf", sf);

  // One kernel serves every shape: the key's shape word is 0.
  static ops::CastKernels kernels;
  const ops::CastKernel& kernel =
      ops::cast_kernel(kernels, ops::kMnMajorKeyId, sf.device, 0, static_cast<CUstream>(stream),
                       [](int64_t, const ops::TargetInfo& t) {
                         return std::pair{ops::mn_major_scales_spec(t), ops::mn_major_scales_plan(t)};
                       });
  MnMajorScalesParams params;
  params.in = static_cast<const float*>(sf.data);
  params.out = static_cast<float*>(out.data);
  params.rows = static_cast<u64>(rows);
  params.cols = static_cast<u64>(cols);
  params.in_stride = static_cast<u64>(in_stride);
  params.out_stride = static_cast<u64>(out_stride);
  const uint64_t tiles = static_cast<uint64_t>(ceil_div(rows, 32)) * static_cast<uint64_t>(ceil_div(cols, 32));
  const cuda::LaunchConfig config = ops::launch_config(ops::grid_size(tiles, kernel), kernel, stream);
  kernel.kernel->launch(config, &params);
}

void per_block_cast_to_fp8(const TensorView& x, const TensorView& out, const TensorView& out_scales, Stream stream) {
  constexpr const char* fn = "per_block_cast_to_fp8";
  const int64_t row_stride = check_cast_common(fn, x, out, out_scales);
  const int64_t n = x.shape[0], k = x.shape[1];
  const Arg ascales{fn, "out_scales"};
  ops::check_shape(ascales, out_scales, {ceil_div(n, kFp8GroupSize), k / kFp8GroupSize}, "(ceil(n / 128), k / 128)");
  ops::check_contiguous(ascales, out_scales);
  ops::check_pointer_aligned(ascales, out_scales, 4);
  check_cast_overlaps(fn, x, out, out_scales);
  if (n == 0 || k == 0) return;  // nothing to do: no compile, no launch

  // One kernel serves every k (k is a runtime parameter of this cast): the key's k is 0.
  static ops::CastKernels kernels;
  const ops::CastKernel& kernel =
      ops::cast_kernel(kernels, ops::kPerBlockKeyId, x.device, 0, static_cast<CUstream>(stream),
                       [](int64_t, const ops::TargetInfo& t) {
                         return std::pair{ops::per_block_cast_spec(t), ops::per_block_cast_plan(t)};
                       });

  PerBlockCastParams params;
  params.x = x.data;
  params.out = out.data;
  params.out_scales = static_cast<float*>(out_scales.data);
  params.n = static_cast<u64>(n);
  params.k = static_cast<u64>(k);
  params.x_row_stride = static_cast<u64>(row_stride);
  const uint64_t blocks = static_cast<uint64_t>(ceil_div(n, kFp8GroupSize)) * static_cast<uint64_t>(k / kFp8GroupSize);
  const cuda::LaunchConfig config = ops::launch_config(ops::grid_size(blocks, kernel), kernel, stream);
  kernel.kernel->launch(config, &params);
}

}  // namespace kiln
