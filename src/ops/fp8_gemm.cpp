// FP8 GEMM with DeepSeek-V3 fine-grained scaling: validation, kernel choice, tensor maps and launch, for the
// inference form (bf16 D) and the weight-gradient form (fp32 D accumulated into, B scaled per row).
//
// Launch path: validate every argument (no allocation, no string on success) -> compact key {op and form,
// device, n, k, usable SMs, packed overrides} -> lock-free table of per-shape plans -> the bucket of m
// (binary search over the plan's upper ends) -> the bucket's loaded kernel (an atomic pointer; loaded on
// first use) -> tensor maps from the per-thread cache -> POD params -> LoadedKernel::launch. No environment
// read, no string, no map lookup by string on a hit. The weight-gradient form's general entry point may
// first zero D or copy C into it on the caller's stream (a memset or a 2-D copy; nothing is allocated).
#include "ops/fp8_gemm.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "jit/jit_runtime.hpp"
#include "jit/kernel_table.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels/fp8_gemm_layout.h"
#include "kiln/kernels/fp8_gemm_params.h"
#include "kiln/ops.hpp"
#include "ops/c_into_d.hpp"
#include "ops/grouped_checks.hpp"
#include "ops/k_groups.hpp"
#include "ops/plan_store.hpp"
#include "ops/tensor_map.hpp"
#include "ops/validate.hpp"

namespace kiln::ops {
namespace {

constexpr const char* kOp = "fp8_gemm_nt";
// The first word of each table key: the casts use 1 and 2; each plan of the GEMM (Fp8GemmForm, and k-grouped
// kernels or not) has a word of its own.
constexpr int64_t kGemmKeyId = 3;
constexpr int64_t kGemmAccumulateKeyId = 4;     // the weight-gradient form with C
constexpr int64_t kGemmKGroupedKeyId = 5;       // the same plan, its kernels k-grouped
constexpr int64_t kGemmStoreKeyId = 6;          // the weight-gradient form without C (Fp8GemmForm::kFp32Store)
constexpr int64_t kGemmKGroupedStoreKeyId = 7;  // the same plan, its kernels k-grouped
constexpr int64_t kGemmMGroupedKeyId = 8;       // the m-grouped contiguous form (fp8_gemm_m_grouped_plan)
constexpr int64_t kGemmMGroupedMaskedKeyId = 9;  // the m-grouped masked form (the same plan, its kernels masked)
constexpr const char* kAccumulateOp = "fp8_gemm_nt_accumulate";
constexpr const char* kWgradOp = "fp8_gemm_nt_wgrad";
constexpr const char* kKGroupedOp = "k_grouped_fp8_gemm_nt_contiguous";
constexpr const char* kMGroupedOp = "m_grouped_fp8_gemm_nt_contiguous";
constexpr const char* kMGroupedMaskedOp = "m_grouped_fp8_gemm_nt_masked";
constexpr int64_t kScaleBlock = 128;  // K (and N, for B) per scale



int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Sizes and strides narrowed (or widened) to the kernels' parameter and tensor-map widths: every value passed is
// checked against its bound first (check_arguments, the plan's tile sizes).
uint32_t w32(int64_t v) { return static_cast<uint32_t>(v); }
uint64_t w64(int64_t v) { return static_cast<uint64_t>(v); }

// ---- process-wide overrides ----------------------------------------------------------------------------

// The overrides packed into one word (16 bits for the block sizes, 8 for the others; check_fp8_gemm_overrides
// bounds them far below),
// read with one relaxed load per launch and used as a word of the table key: equal overrides find the same
// plan again, so setting them back and forth neither re-plans nor prints the choices again.
std::atomic<uint64_t> g_overrides{0};

uint64_t pack(const Fp8GemmOverrides& o) {
  return static_cast<uint64_t>(o.block_m) | static_cast<uint64_t>(o.block_n) << 16 |
         static_cast<uint64_t>(o.stages) << 32 | static_cast<uint64_t>(o.cluster_m) << 40 |
         static_cast<uint64_t>(o.cluster_n) << 48 | static_cast<uint64_t>(o.split_k) << 56;
}

Fp8GemmOverrides unpack(uint64_t w) {
  Fp8GemmOverrides o;
  o.block_m = static_cast<int>(w & 0xffff);
  o.block_n = static_cast<int>((w >> 16) & 0xffff);
  o.stages = static_cast<int>((w >> 32) & 0xff);
  o.cluster_m = static_cast<int>((w >> 40) & 0xff);
  o.cluster_n = static_cast<int>((w >> 48) & 0xff);
  o.split_k = static_cast<int>((w >> 56) & 0xff);
  return o;
}

// ---- loaded kernels -------------------------------------------------------------------------------------

struct GemmKernel {
  const cuda::LoadedKernel* kernel = nullptr;
  Fp8GemmConfig config;
  uint32_t threads = 0;
  uint32_t shared_bytes = 0;
  uint32_t store_cols = 0;   // the TMA-store epilogue's box columns
  uint32_t reduce_cols = 0;  // the weight-gradient form's reduce-add box columns
};

// Everything one (device, n, k, usable SMs, overrides) needs: the plan and its kernels, loaded on first use.
struct ShapeEntry {
  Fp8GemmPlan plan;
  int device = 0;
  int sm_count = 0;  // the SMs the kernels may use
  int64_t l2_bytes = 0;  // the device's L2, which sets how far ahead a weight-gradient pipeline runs at short K
  int64_t n = 0, k = 0;
  Fp8GemmForm form = Fp8GemmForm::kInference;
  bool stages_forced = false;  // the plan was made with a stage count overridden (fp8_gemm_ring_stages)
  std::string device_name;
  // Filled on first use of each of plan.kernels (mutable: the table hands out const entries).
  mutable std::array<std::atomic<const GemmKernel*>, kFp8GemmMaxKernels> kernels{};
  mutable std::mutex mutex;  // serialises loading
};

using Store = PlanStore<ShapeEntry, GemmKernel>;

using Table = jit::KernelTable<ShapeEntry>;

Table& table() {
  static Table t;
  return t;
}
Store& store() {
  static Store s;
  return s;
}

// The miss path for a shape: check the device, make the plan, publish it. `function` names the caller in
// errors; the form is the key's first word.
const ShapeEntry* resolve_shape(const Table::Key& key, const TensorView& a, int64_t n, int64_t k, int usable_limit,
                                const char* function) {
  const cuda::DeviceInfo info = check_sm90_device(Arg{function, "a"}, a);
  check_dg_jit_arch(function, kWgmmaArchNeeds, config().arch);
  Fp8GemmOverrides overrides = unpack(static_cast<uint64_t>(key.words[5]));  // what the key was made with
  ShapeEntry* entry = store().add_entry();
  entry->device = a.device;
  entry->sm_count = usable_limit > 0 ? std::min(usable_limit, info.sm_count) : info.sm_count;
  entry->n = n;
  entry->k = k;
  entry->device_name = info.name;
  entry->l2_bytes = info.l2_bytes;
  const int64_t id = key.words[0];
  const bool k_grouped = id == kGemmKGroupedKeyId || id == kGemmKGroupedStoreKeyId;
  const Fp8GemmForm form = id == kGemmKeyId                                           ? Fp8GemmForm::kInference
                           : id == kGemmStoreKeyId || id == kGemmKGroupedStoreKeyId ? Fp8GemmForm::kFp32Store
                                                                                    : Fp8GemmForm::kAccumulate;
  // The process-wide overrides serve both forms; the weight-gradient kernel has no cluster variant, so a
  // cluster_m, cluster_n or split_k set for the bf16 form does not apply to it (a plan request asking for both is
  // refused instead).
  if (weight_gradient(form)) overrides.cluster_m = overrides.cluster_n = overrides.split_k = 0;
  // Likewise the m-grouped kernel has no pair sharing B (its two m blocks may be two groups'): a cluster_m set for
  // the bf16 form does not apply to it.
  const bool m_grouped = id == kGemmMGroupedKeyId || id == kGemmMGroupedMaskedKeyId;
  if (m_grouped) overrides.cluster_m = 0;
  entry->form = form;
  entry->stages_forced = overrides.stages > 0;
  const TargetInfo target = device_target(info, entry->sm_count);
  entry->plan = m_grouped ? fp8_gemm_m_grouped_plan(target, n, k, overrides, id == kGemmMGroupedMaskedKeyId)
                          : fp8_gemm_plan(target, n, k, overrides, form);
  for (Fp8GemmConfig& cfg : entry->plan.kernels) cfg.k_grouped = k_grouped;
  return table().insert(key, entry);
}

// The miss path for a bucket's kernel: build (or fetch) and load it, once per entry and kernel.
const GemmKernel* resolve_kernel(const ShapeEntry& entry, int index, CUstream stream) {
  std::lock_guard<std::mutex> lock(entry.mutex);
  if (const GemmKernel* k = entry.kernels[static_cast<size_t>(index)].load(std::memory_order_acquire)) return k;
  const Fp8GemmConfig& cfg = entry.plan.kernels[static_cast<size_t>(index)];
  const codegen::KernelSpec spec = fp8_gemm_spec(entry.n, entry.k, cfg);
  GemmKernel k;
  k.kernel = &jit::runtime().kernel(spec, entry.device, stream);
  k.config = cfg;
  k.threads = fp8_gemm_threads(cfg);
  k.shared_bytes = fp8_gemm_shared_bytes(cfg);
  k.store_cols = kernels::fp8_gemm_store_cols(static_cast<uint32_t>(cfg.block_n));
  k.reduce_cols =
      kernels::fp8_gemm_reduce_staging(w32(cfg.block_m), w32(cfg.block_n), w32(cfg.stages), w32(cfg.split_k)).cols;
  const GemmKernel* stored = store().add_kernel(k);
  entry.kernels[static_cast<size_t>(index)].store(stored, std::memory_order_release);
  if (config().print_configs) {
    std::string ranges;
    for (const Fp8GemmBucket& b : entry.plan.buckets)
      if (b.kernel == index) ranges += (ranges.empty() ? "" : ", ") + describe_m_range(b.m_lo, b.m_hi);
    // A weight-gradient call at short K runs fewer of the kernel's stages (fp8_gemm_ring_stages), told here at the
    // entry's K (a k-grouped call's plan K: its groups each run their own K's length).
    const int ring = fp8_gemm_ring_stages(cfg, entry.k, entry.form, entry.stages_forced, entry.l2_bytes);
    const std::string ring_note = ring < cfg.stages ? "; runs " + std::to_string(ring) + " of its " +
                                                          std::to_string(cfg.stages) + " stages at this k"
                                                    : "";
    std::fprintf(stderr,
                 "kiln: %s on cuda:%d (%s, %d SMs usable): n=%lld k=%lld, m in %s: %s%s; %u threads/CTA, %u bytes "
                 "shared memory, persistent grid <= %d CTAs, PDL %s (kernel %d of %zu for this shape)\n",
                 cfg.k_grouped   ? kKGroupedOp
                 : cfg.masked    ? kMGroupedMaskedOp
                 : cfg.m_grouped ? kMGroupedOp
                 : cfg.accumulate ? kWgradOp
                                  : kOp,
                 entry.device, entry.device_name.c_str(),
                 entry.sm_count, static_cast<long long>(entry.n), static_cast<long long>(entry.k), ranges.c_str(),
                 cfg.describe().c_str(), ring_note.c_str(), k.threads, k.shared_bytes, entry.sm_count,
                 get_pdl() ? "on" : "off", index + 1, entry.plan.kernels.size());
  }
  return stored;
}

// ---- argument checks ----------------------------------------------------------------------------------------

std::string shape_text(std::initializer_list<int64_t> dims) { return format_dims(dims.begin(), static_cast<int>(dims.size())); }

struct Checked {
  int64_t m, n, k, lda, ldb, ldd, sfa_stride;
  int64_t sfb_stride = 0;  // weight-gradient form: the column stride of B's per-row scales
  int64_t ldc = 0;         // weight-gradient form with a separate C: its row stride
};

// An e4m3 operand (A or B) as the kernels load it: K-major, `rows` rows of k bytes with row stride `ld`, boxed
// {128 (one K block), box_rows} with a 128-byte swizzle; B's rows read interleaved where fp8_gemm_interleaved_b.
TensorMapKey operand_key(const TensorView& x, int64_t k, int64_t rows, int64_t ld, uint32_t box_rows,
                         bool interleaved_rows = false) {
  return {reinterpret_cast<uint64_t>(x.data), static_cast<uint64_t>(k), static_cast<uint64_t>(rows),
          static_cast<uint64_t>(ld), 128, box_rows, CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_SWIZZLE_128B,
          interleaved_rows};
}

// Per-row scales (A's, and B's in the weight-gradient form) as the kernels load them: MN-major fp32, `rows`
// contiguous with `k_blocks` columns `stride` elements apart, boxed {box_rows, 1} (one K block's), no swizzle.
TensorMapKey scale_key(const TensorView& sf, int64_t rows, uint64_t k_blocks, int64_t stride, uint32_t box_rows) {
  return {reinterpret_cast<uint64_t>(sf.data), static_cast<uint64_t>(rows), k_blocks, static_cast<uint64_t>(stride * 4),
          box_rows, 1, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_SWIZZLE_NONE};
}

// The weight-gradient form's D as its epilogue's reduce-adds (or stores) address it: fp32 [m, n] with row stride
// ldd, boxed {cols, 64}: the kernel's reduce staging (GemmKernel::reduce_cols, fp8_gemm_layout.h).
TensorMapKey reduce_d_key(const TensorView& d, const Checked& c, uint32_t cols) {
  return {reinterpret_cast<uint64_t>(d.data), static_cast<uint64_t>(c.n), static_cast<uint64_t>(c.m),
          static_cast<uint64_t>(c.ldd * 4), cols, kernels::kFp8GemmReduceRows, CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
          row_swizzle(cols * 4)};
}

// The table key's first word for the weight-gradient form: its plan with C or without (kFp32Store: the same
// kernels, other tiles at short K), k-grouped kernels or not.
int64_t weight_gradient_key(CMode mode, bool k_grouped) {
  if (mode == CMode::kZero) return k_grouped ? kGemmKGroupedStoreKeyId : kGemmStoreKeyId;
  return k_grouped ? kGemmKGroupedKeyId : kGemmAccumulateKeyId;
}

// Every operand on a CUDA device, a's (c when given).
void check_devices(const char* function, const TensorView& a, const TensorView& sfa, const TensorView& b,
                   const TensorView& sfb, const TensorView& d, const TensorView* c) {
  const Arg aa{function, "a"};
  check_on_cuda(aa, a);
  check_same_device(Arg{function, "sfa"}, sfa, aa, a);
  check_same_device(Arg{function, "b"}, b, aa, a);
  check_same_device(Arg{function, "sfb"}, sfb, aa, a);
  check_same_device(Arg{function, "d"}, d, aa, a);
  if (c) check_same_device(Arg{function, "c"}, *c, aa, a);
}

// D clear of every tensor the kernel reads while it stores tiles: D sharing their memory would be read after being
// written. (C, which the weight-gradient form may take as D itself, is checked against D apart: check_c_against_d,
// check_k_grouped_c.)
void check_d_overlaps(const char* function, const TensorView& d, const TensorView& a, const TensorView& sfa,
                      const TensorView& b, const TensorView& sfb) {
  const Arg ad{function, "d"};
  check_no_overlap(ad, d, "a", a);
  check_no_overlap(ad, d, "sfa", sfa);
  check_no_overlap(ad, d, "b", b);
  check_no_overlap(ad, d, "sfb", sfb);
}

// The checks both forms share, in the order their errors are reported: dtypes, devices, shapes, strides,
// alignment, overlap. `accumulate` selects the weight-gradient form's d (fp32), sfb (per row, MN-major) and c.
Checked check_arguments(const char* function, const TensorView& a, const TensorView& sfa, const TensorView& b,
                        const TensorView& sfb, const TensorView& d, bool accumulate = false,
                        const TensorView* c_tensor = nullptr) {
  const Arg aa{function, "a"}, asfa{function, "sfa"}, ab{function, "b"}, asfb{function, "sfb"}, ad{function, "d"},
      ac{function, "c"};
  check_dtype(aa, a, DType::kFloat8E4M3);
  check_dtype(asfa, sfa, DType::kFloat32);
  check_dtype(ab, b, DType::kFloat8E4M3);
  check_dtype(asfb, sfb, DType::kFloat32);
  if (!accumulate) {
    check_dtype(ad, d, DType::kBFloat16);
  } else if (d.dtype != DType::kFloat32) {
    fail(ErrorKind::kTypeError, ad, d,
         "float32 (the weight-gradient form adds into an fp32 D; fp8_gemm_nt writes a bfloat16 one)",
         to_string(d.dtype));
  }
  if (c_tensor) check_dtype(ac, *c_tensor, DType::kFloat32);
  check_devices(function, a, sfa, b, sfb, d, c_tensor);
  check_ndim(aa, a, 2);
  check_ndim(ab, b, 2);
  Checked c{};
  c.m = a.shape[0];
  c.k = a.shape[1];
  c.n = b.shape[0];
  const int64_t k_blocks = cdiv(c.k, kScaleBlock);
  if (b.shape[1] != c.k)
    fail(ErrorKind::kValueError, ab, b, "of shape (n, k) with k == " + std::to_string(c.k) + " (a's k)",
         "shape " + format_dims(b.shape.data(), 2));
  check_shape(ad, d, {c.m, c.n}, "(m of a, n of b)");
  if (c_tensor) check_shape(ac, *c_tensor, {c.m, c.n}, "(m of a, n of b), as d");
  check_shape(asfa, sfa, {c.m, k_blocks}, "(m, ceil(k / 128))");
  if (!accumulate) {
    check_shape(asfb, sfb, {cdiv(c.n, kScaleBlock), k_blocks}, "(ceil(n / 128), ceil(k / 128))");
  } else {
    check_ndim(asfb, sfb, 2);
    if (sfb.shape[0] != c.n || sfb.shape[1] != k_blocks) {
      const bool block_scales = sfb.shape[0] == cdiv(c.n, kScaleBlock) && sfb.shape[1] == k_blocks;
      fail(ErrorKind::kValueError, asfb, sfb,
           "of shape " + shape_text({c.n, k_blocks}) +
               " (n, ceil(k / 128)): per-row 1x128 scales, one per row of B per 128 K, as "
               "per_token_cast_to_fp8 writes them" +
               (block_scales ? "; 128x128-block scales (ceil(n / 128), ceil(k / 128)) are for fp8_gemm_nt's bfloat16 "
                               "form, the weight-gradient form needs B scaled per row"
                             : ""),
           "shape " + format_dims(sfb.shape.data(), 2));
    }
  }
  if (c.n % 8 != 0) fail(ErrorKind::kValueError, ab, b, "of a size(0) (n) that is a multiple of 8", "n == " + std::to_string(c.n));
  if (c.k % 16 != 0 || (c.k == 0 && c.m > 0 && c.n > 0))
    fail(ErrorKind::kValueError, aa, a, "of a size(1) (k) that is a positive multiple of 16", "k == " + std::to_string(c.k));
  if (c.m > INT32_MAX)
    fail(ErrorKind::kValueError, aa, a, "at most 2147483647 rows", "m == " + std::to_string(c.m));
  c.lda = check_rows_dense(aa, a, 16);
  c.ldb = check_rows_dense(ab, b, 16);
  // Both epilogues want 16-byte rows of D: TMA stores (bf16) and, for fp32, keeping every row's 8-byte
  // read-add-writes aligned with the simplest rule.
  c.ldd = check_rows_dense(ad, d, 16);
  if (c_tensor) c.ldc = check_rows_dense(ac, *c_tensor, 4);  // copied with cuMemcpy2DAsync: any pitch
  c.sfa_stride = check_mn_major_scales(asfa, sfa, c.m, k_blocks, "m");
  if (!accumulate)
    check_contiguous(asfb, sfb);
  else
    c.sfb_stride = check_mn_major_scales(asfb, sfb, c.n, k_blocks, "n");
  check_pointer_aligned(aa, a, 16);
  check_pointer_aligned(asfa, sfa, 16);
  check_pointer_aligned(ab, b, 16);
  check_pointer_aligned(asfb, sfb, accumulate ? 16 : 4);
  check_pointer_aligned(ad, d, 16);
  if (c_tensor) check_pointer_aligned(ac, *c_tensor, 4);
  check_d_overlaps(function, d, a, sfa, b, sfb);
  return c;
}

int64_t value_of(const Problem& problem, const char* name, int64_t fallback) {
  auto it = problem.find(name);
  return it == problem.end() ? fallback : it->second.lo;
}

// A 0/1 problem parameter of fp8_gemm_nt (problem_flag).
bool flag(const Problem& problem, const char* name, const char* allowed) {
  return problem_flag(kOp, problem, name, allowed);
}

int narrow(const Problem& problem, const char* name) {
  const int64_t v = value_of(problem, name, 0);
  if (v > INT32_MAX)
    throw Error(ErrorKind::kValueError, std::string(kOp) + ": parameter " + name + " is too large, got " + std::to_string(v));
  return static_cast<int>(v);
}

// The most values of k a range may cover (multiples of 16): a plan each, about 0.4 ms apiece.
constexpr int64_t kMaxTokenCounts = 65536;

// The weight-gradient form over a range of k (token counts) at one m: each multiple of 16 in the range is planned,
// and the kernel serving m is listed with the pieces of the range it serves. Its kernels take K at run time, so
// the list is short (at most eight for every n tried up to k = 65536, across all m as well).
std::vector<KernelUse> token_count_uses(const ProblemValue& m, int64_t n, const ProblemValue& k,
                                        const Fp8GemmOverrides& overrides, const TargetInfo& target, bool k_grouped,
                                        Fp8GemmForm form) {
  const std::string who = std::string(kOp) + ": ";
  if (m.is_range())
    throw Error(ErrorKind::kValueError, who + "give a range for m or for k, not both (got m=" + m.text() + " and k=" +
                                            k.text() + ")");
  const int64_t first = (k.lo + 15) / 16 * 16, last = k.hi / 16 * 16;
  if (first < 16 || first > last)
    throw Error(ErrorKind::kValueError, who + "parameter k must be a range holding a positive multiple of 16, got " +
                                            k.text());
  if ((last - first) / 16 + 1 > kMaxTokenCounts)
    throw Error(ErrorKind::kValueError, who + "parameter k's range may hold at most " +
                                            std::to_string(kMaxTokenCounts) + " multiples of 16, got " + k.text() +
                                            " (" + std::to_string((last - first) / 16 + 1) + ")");
  std::vector<KernelUse> uses;
  if (m.hi == 0 || n == 0) {
    (void)fp8_gemm_plan(target, n, first, overrides, form);  // still validates n and the overrides
    return uses;
  }
  std::map<std::string, size_t> by_spec;  // rendered source -> index in uses
  for (int64_t kk = first; kk <= last; kk += 16) {
    const Fp8GemmPlan plan = fp8_gemm_plan(target, n, kk, overrides, form);
    Fp8GemmConfig config = plan.kernels[static_cast<size_t>(plan.bucket_of(m.lo).kernel)];
    config.k_grouped = k_grouped;
    codegen::KernelSpec spec = fp8_gemm_spec(n, kk, config);
    auto [it, fresh] = by_spec.emplace(codegen::render_source(spec), uses.size());
    if (fresh) {
      KernelUse use;
      use.spec = std::move(spec);
      use.range_param = "k";
      use.detail = "n=" + std::to_string(n) + " m=" + std::to_string(m.lo) + " (k at run time): " + config.describe();
      uses.push_back(std::move(use));
    }
    auto& ranges = uses[it->second].ranges;
    if (!ranges.empty() && ranges.back().second == kk - 16)
      ranges.back().second = kk;
    else
      ranges.emplace_back(kk, kk);
  }
  return uses;  // in order of first use as k grows
}

std::vector<KernelUse> uses_of(const Problem& problem, const TargetInfo& target) {
  validate_problem(find_op(kOp), problem);
  const ProblemValue m = problem.at("m");
  const ProblemValue k_value = problem.at("k");
  const int64_t n = problem.at("n").lo, k = k_value.lo;
  const bool accumulate =
      flag(problem, "accumulate", "0 (the bf16 form) or 1 (the weight-gradient form, D (fp32) += A . B^T)");
  const bool no_c = flag(problem, "no_c", "0 (calls with C) or 1 (calls without C, c=None)");
  if (no_c && !accumulate)
    throw Error(ErrorKind::kValueError,
                std::string(kOp) + ": parameter no_c=1 needs accumulate=1 (C is the weight-gradient form's), got "
                                   "accumulate=0");
  const Fp8GemmForm form = !accumulate ? Fp8GemmForm::kInference
                           : no_c      ? Fp8GemmForm::kFp32Store
                                       : Fp8GemmForm::kAccumulate;
  if (k_value.is_range() && !accumulate)
    throw Error(ErrorKind::kValueError,
                std::string(kOp) + ": parameter k may be a range only with accumulate=1 (the weight-gradient form's "
                                   "kernels take k at run time; the bf16 form's are specialised on it), got " +
                    k_value.text());
  const bool k_grouped =
      flag(problem, "k_grouped", "0 or 1 (the k-grouped kernels of k_grouped_fp8_gemm_nt_contiguous)");
  if (k_grouped && !accumulate)
    throw Error(ErrorKind::kValueError,
                std::string(kOp) + ": parameter k_grouped=1 needs accumulate=1 (the k-grouped kernels are the weight-"
                                   "gradient form's), got accumulate=0");
  const bool m_grouped =
      flag(problem, "m_grouped", "0 or 1 (the m-grouped kernels of m_grouped_fp8_gemm_nt_contiguous)");
  if (m_grouped && accumulate)
    throw Error(ErrorKind::kValueError,
                std::string(kOp) + ": parameter m_grouped=1 needs accumulate=0 (the m-grouped kernels are the bf16 "
                                   "form's), got accumulate=1");
  const bool masked = flag(problem, "masked", "0 or 1 (with m_grouped=1: the kernels of m_grouped_fp8_gemm_nt_masked)");
  if (masked && !m_grouped)
    throw Error(ErrorKind::kValueError,
                std::string(kOp) + ": parameter masked=1 needs m_grouped=1 (the masked kernels are m-grouped ones), "
                                   "got m_grouped=0");
  // A parameter the request leaves out takes the process-wide setting, as a launch does (set_fp8_gemm_overrides,
  // set_num_sms), so that plan() and precompile() in a process that set them list the kernels its launches use (the
  // command line's process sets none). As resolve_shape does, the weight-gradient form drops a process-wide
  // cluster_m, cluster_n and split_k, and the m-grouped forms cluster_m; asked for in the request, they are refused.
  Fp8GemmOverrides process = get_fp8_gemm_overrides();
  if (accumulate) process.cluster_m = process.cluster_n = process.split_k = 0;
  if (m_grouped) process.cluster_m = 0;
  const auto setting = [&](const char* name, int process_value) {
    return problem.contains(name) ? narrow(problem, name) : process_value;
  };
  Fp8GemmOverrides overrides;
  overrides.block_m = setting("block_m", process.block_m);
  overrides.block_n = setting("block_n", process.block_n);
  overrides.stages = setting("stages", process.stages);
  overrides.cluster_m = setting("cluster_m", process.cluster_m);
  overrides.cluster_n = setting("cluster_n", process.cluster_n);
  overrides.split_k = setting("split_k", process.split_k);
  TargetInfo t = target;
  const int num_sms = setting("num_sms", get_num_sms());
  if (num_sms > 0) t.sm_count = std::min(num_sms, target.sm_count);
  if (k_value.is_range()) return token_count_uses(m, n, k_value, overrides, t, k_grouped, form);
  // Either validates n, k and the overrides.
  const Fp8GemmPlan plan =
      m_grouped ? fp8_gemm_m_grouped_plan(t, n, k, overrides, masked) : fp8_gemm_plan(t, n, k, overrides, form);
  std::vector<KernelUse> uses;
  if (m.hi == 0 || n == 0) return uses;  // m = 0: nothing to launch
  const std::vector<Fp8GemmBucket> covered = plan.covering(std::max<int64_t>(1, m.lo), m.hi);
  for (size_t index = 0; index < plan.kernels.size(); ++index) {
    KernelUse use;
    for (const Fp8GemmBucket& b : covered)
      if (b.kernel == static_cast<int>(index)) use.ranges.emplace_back(b.m_lo, b.m_hi);
    if (use.ranges.empty()) continue;
    Fp8GemmConfig config = plan.kernels[index];
    config.k_grouped = k_grouped;
    use.spec = fp8_gemm_spec(n, k, config);
    use.range_param = "m";
    use.detail = "n=" + std::to_string(n) + " k=" + std::to_string(k) + ": " + config.describe();
    uses.push_back(std::move(use));
  }
  // In order of first use as m grows.
  std::sort(uses.begin(), uses.end(), [](const KernelUse& x, const KernelUse& y) { return x.ranges[0] < y.ranges[0]; });
  return uses;
}

// ---- launch ---------------------------------------------------------------------------------------------------

// The plan's entry and the loaded kernel for a checked problem: a table lookup and an atomic load on a hit; the
// first call per shape checks the device and plans, the first per kernel compiles or loads it.
struct Resolved {
  const ShapeEntry* entry;
  const GemmKernel* kernel;
};

// `key_id`: the plan (kGemmKeyId, kGemmAccumulateKeyId, ...; weight_gradient_key for that form).
Resolved resolve(const char* function, const Checked& c, const TensorView& a, CUstream stream, int64_t key_id) {
  const int usable_limit = get_num_sms();
  Table::Key key;
  key.words[0] = key_id;
  key.words[1] = a.device;
  key.words[2] = c.n;
  key.words[3] = c.k;
  key.words[4] = usable_limit;
  key.words[5] = static_cast<int64_t>(g_overrides.load(std::memory_order_relaxed));
  const ShapeEntry* entry = table().find(key);
  if (!entry) entry = resolve_shape(key, a, c.n, c.k, usable_limit, function);

  const Fp8GemmBucket& bucket = entry->plan.bucket_of(c.m);
  const GemmKernel* kernel = entry->kernels[static_cast<size_t>(bucket.kernel)].load(std::memory_order_acquire);
  if (!kernel) kernel = resolve_kernel(*entry, bucket.kernel, stream);
  return {entry, kernel};
}

// The m-grouped forms' extra: their groups (B is `groups` [n, k] one after the other) and, contiguous, each row's
// group, or, masked, each group's row count.
struct MGrouped {
  int64_t groups = 0;
  const int32_t* layout = nullptr;  // Fp8GemmParams::grouped_layout
  // The masked form: A and D are `groups` blocks of Checked::m rows each (A's one after the other, D's d_plane_stride
  // elements apart), and the call's kernel is the one its plan picks at M = plan_m (groups * expected_m).
  bool masked = false;
  int64_t plan_m = 0;
  int64_t d_plane_stride = 0;
};

// Everything after the checks, for both forms: the plan and kernel (resolve), D's preparation (weight-gradient
// form), tensor maps, launch. m, n > 0. `m_grouped`: the m-grouped form (its own plan; B's maps over every group's
// rows).
void launch(const char* function, const Checked& c, const TensorView& a, const TensorView& sfa, const TensorView& b,
            const TensorView& sfb, const TensorView& d, CUstream stream, bool accumulate, CMode mode,
            const TensorView* c_tensor, const MGrouped* m_grouped = nullptr) {
  const bool masked = m_grouped && m_grouped->masked;
  Checked planned = c;  // the masked form picks its kernel at groups * expected_m rows
  if (masked) planned.m = m_grouped->plan_m;
  const auto [entry, kernel] = resolve(function, planned, a, stream,
                                       masked       ? kGemmMGroupedMaskedKeyId
                                       : m_grouped  ? kGemmMGroupedKeyId
                                       : accumulate ? weight_gradient_key(mode, false)
                                                    : kGemmKeyId);
  const Fp8GemmConfig& cfg = kernel->config;

  Fp8GemmParams params;
  const uint64_t k_blocks = w64(cdiv(c.k, kScaleBlock));
  // A and its scales, boxed whole (pairs sharing A: each CTA half of the tile's rows) and, for a last m block
  // with fewer rows, boxed to them (fp8_gemm_last_box_rows): only the maps the kernel reads are encoded. The masked
  // form's maps span every group: A's rows g * m + .., its scales' K-block columns g * k_blocks + .. (both checked
  // to follow each other so), always boxed whole (a box past a group's rows reads the next group's, whose rows of D
  // are never stored).
  const int64_t groups = masked ? m_grouped->groups : 1;
  const uint32_t block_m = w32(cfg.block_m);
  const uint32_t last_box_rows =
      masked ? block_m : kernels::fp8_gemm_last_box_rows(block_m, w32(c.m), w32(cfg.cluster_n));
  const auto a_map = [&](uint32_t rows) {
    return tensor_map_2d(operand_key(a, c.k, c.m * groups, c.lda, rows / w32(cfg.cluster_n)), "a");
  };
  const auto sfa_map = [&](uint32_t rows) {
    return tensor_map_2d(scale_key(sfa, c.m, k_blocks * w64(groups), c.sfa_stride, rows), "sfa");
  };
  const bool short_last = last_box_rows != block_m;
  if (!short_last || c.m > cfg.block_m) {
    copy_map(params.tma_a, a_map(block_m));
    copy_map(params.tma_sfa, sfa_map(block_m));
  }
  if (short_last) {
    copy_map(params.tma_a_last, a_map(last_box_rows));
    copy_map(params.tma_sfa_last, sfa_map(last_box_rows));
  }
  params.b_cache_policy = kernels::fp8_gemm_b_cache_policy(block_m, w32(planned.m));
  // B likewise (fp8_gemm_b_boxes): boxed whole (pairs sharing B: each CTA block_n / 2 rows) and, for a last n
  // block with fewer rows, boxed to them; column-mapped tiles (fp8_gemm_column_map) piece by piece, a map per
  // piece's width, all of them read, and no short box.
  const uint32_t block_n = w32(cfg.block_n);
  const kernels::Fp8GemmBBoxes b_boxes = kernels::fp8_gemm_b_boxes(block_m, block_n, w32(cfg.math_warpgroups),
                                                                   accumulate, w32(cfg.cluster_m), w32(c.n));
  // The weight-gradient form reads B's rows interleaved in 16s for 128x160 and 128x176 where N allows
  // (fp8_gemm_interleaved_b); its boxes are then whole 16-row groups (N and BLOCK_N multiples of 16).
  const bool interleaved_b = kernels::fp8_gemm_interleaved_b(accumulate, w32(c.n), w32(cfg.block_n));
  const int64_t b_rows = m_grouped ? c.n * m_grouped->groups : c.n;  // every group's, in the m-grouped form
  const auto b_map = [&](uint32_t rows) {
    return tensor_map_2d(operand_key(b, c.k, b_rows, c.ldb, rows, interleaved_b), "b");
  };
  const bool column_map = kernels::fp8_gemm_column_map(block_m, block_n, w32(cfg.math_warpgroups), accumulate);
  const bool short_last_b = b_boxes.last_b_box_rows != block_n;
  if (column_map || !short_last_b || c.n > cfg.block_n) copy_map(params.tma_b, b_map(b_boxes.b_rows));
  if (column_map || short_last_b) copy_map(params.tma_b_last, b_map(b_boxes.b_last_rows));
  if (b_boxes.narrow_rows != 0) copy_map(params.tma_b_narrow, b_map(b_boxes.narrow_rows));
  if (accumulate) {
    // B's per-row scales, loaded per stage exactly like A's, with n in place of m.
    copy_map(params.tma_sfb, tensor_map_2d(scale_key(sfb, c.n, k_blocks, c.sfb_stride, block_n), "sfb"));
    params.sfb = nullptr;
  } else {
    params.sfb = static_cast<const float*>(sfb.data);
  }
  if (cfg.tma_store) {
    TensorMapKey d_key{reinterpret_cast<uint64_t>(d.data), w64(c.n), w64(c.m), w64(c.ldd * 2),
                       kernel->store_cols, kernels::kFp8GemmStoreRows, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                       row_swizzle(kernel->store_cols * 2)};
    if (masked) {  // each group's rows a plane: a store past them is clipped, not written into the next group's
      d_key.planes = w64(groups);
      d_key.plane_bytes = w64(m_grouped->d_plane_stride * 2);
    }
    copy_map(params.tma_d, tensor_map_2d(d_key, "d"));
  } else if (accumulate) {  // the weight-gradient form's reduce-add epilogue
    copy_map(params.tma_d, tensor_map_2d(reduce_d_key(d, c, kernel->reduce_cols), "d"));
  }
  params.d = d.data;
  params.ldd = w64(c.ldd);
  params.m = w32(c.m);
  params.last_box_rows = last_box_rows;
  params.last_b_box_rows = b_boxes.last_b_box_rows;
  params.num_k_blocks = w32(k_blocks);  // read by the kernels with K at run time (the weight-gradient form's)
  params.group_m = w32(cfg.group_m);
  params.store_d = accumulate && mode == CMode::kZero;  // no C: the kernel stores D rather than adding to zeros
  // The weight-gradient form runs fewer of its stages at short K (fp8_gemm_ring_stages); the others all of them.
  params.ring_stages = w32(fp8_gemm_ring_stages(cfg, c.k, entry->form, entry->stages_forced, entry->l2_bytes));
  params.grouped_layout = m_grouped ? m_grouped->layout : nullptr;
  params.num_groups = m_grouped ? w32(m_grouped->groups) : 0;

  cuda::LaunchConfig config;
  config.grid[0] = fp8_gemm_grid(cfg, c.m * groups, c.n, entry->sm_count);  // masked: the most m blocks there can be
  config.block[0] = kernel->threads;
  config.cluster[0] = static_cast<uint32_t>(cfg.cluster_size());
  config.shared_bytes = kernel->shared_bytes;
  // The kernel executes griddepcontrol.wait before its first global read, so with set_pdl(true) it may start
  // (barrier set-up, descriptor prefetch) while the previous kernel on the stream finishes -- including the
  // copy of C into D below, which it waits for like any earlier work on the stream.
  config.pdl = get_pdl();
  config.stream = stream;
  if (mode == CMode::kCopy) prepare_d(function, mode, d, c_tensor, c.m, c.n, c.ldc, c.ldd, a.device, stream);
  kernel->kernel->launch(config, &params);
}

// ---- the m-grouped contiguous GEMM (MoE experts' forward pass) ---------------------------------------------------

// What the m-grouped checks leave for the launch: fp8_gemm_nt's checked sizes and strides (of A, D, and group 0's B
// and scales) and the groups.
struct MGroupedChecked {
  Checked c{};
  MGrouped grouped;
};

// B's and its scales' layouts in both m-grouped forms: one tensor map reads every group's rows of B, so the groups
// must follow each other at n rows' distance; the scale loader indexes the scales as one dense array.
void check_grouped_b_layout(const char* function, const TensorView& b, const TensorView& sfb, int64_t groups) {
  const int64_t n = b.shape[1];
  if (groups > 1 && b.strides[0] != n * b.strides[1])
    fail(ErrorKind::kValueError, Arg{function, "b"}, b,
         "groups one after the other: strides (n * s, s, 1), here stride(0) == " + std::to_string(n * b.strides[1]),
         strides_text(b));
  check_contiguous(Arg{function, "sfb"}, sfb);
}

// Every check of m_grouped_fp8_gemm_nt_contiguous, in the order its errors are reported: the grouped tensors' dtypes,
// ranks, shapes and layouts (B's groups one after the other, their scales and m_indices dense), then everything
// fp8_gemm_nt checks, on group 0's [n, k] views of B and its scales (each group's are alike).
MGroupedChecked check_m_grouped(const TensorView& a, const TensorView& sfa, const TensorView& b, const TensorView& sfb,
                                const TensorView& d, const TensorView& m_indices) {
  const Arg aa{kMGroupedOp, "a"}, ab{kMGroupedOp, "b"}, asfb{kMGroupedOp, "sfb"}, ai{kMGroupedOp, "m_indices"};
  check_dtype(ab, b, DType::kFloat8E4M3);
  check_dtype(asfb, sfb, DType::kFloat32);
  check_dtype(ai, m_indices, DType::kInt32);
  check_on_cuda(aa, a);
  check_same_device(ai, m_indices, aa, a);
  check_ndim(aa, a, 2);
  check_ndim(ab, b, 3);
  check_ndim(asfb, sfb, 3);
  check_ndim(ai, m_indices, 1);
  const int64_t m = a.shape[0], k = a.shape[1], groups = b.shape[0], n = b.shape[1];
  check_contiguous_b_shape(ab, b, k);
  check_shape(asfb, sfb, {groups, cdiv(n, kScaleBlock), cdiv(k, kScaleBlock)},
              "(groups, ceil(n / 128), ceil(k / 128)): each group's 128x128-block scales");
  check_m_indices(ai, m_indices, m);
  check_grouped_b_layout(kMGroupedOp, b, sfb, groups);
  check_grouped_n_and_k(aa, a, 1, 16, ab, b, 1);
  const int64_t k_blocks = cdiv(k, kScaleBlock);
  const TensorView b0 = view_2d(b, 0, n, k, b.strides[1], b.strides[2]);
  const TensorView sfb0 = view_2d(sfb, 0, cdiv(n, kScaleBlock), k_blocks, k_blocks, 1);
  MGroupedChecked out;
  out.c = check_arguments(kMGroupedOp, a, sfa, b0, sfb0, d);
  // fp8_gemm_nt's checks have seen group 0's B; D must be clear of every group's, and of the indices.
  check_d_overlaps(kMGroupedOp, d, a, sfa, b, sfb);
  check_no_overlap(Arg{kMGroupedOp, "d"}, d, "m_indices", m_indices);
  out.grouped.groups = groups;
  out.grouped.layout = static_cast<const int32_t*>(m_indices.data);
  return out;
}

// ---- the m-grouped masked GEMM (MoE experts' decode pass) ---------------------------------------------------------

// Every check of m_grouped_fp8_gemm_nt_masked, in the order its errors are reported: the grouped tensors' dtypes,
// ranks and shapes, the layouts that let one map span every group (A's and its scales' groups one after the other,
// D's planes apart, B's as the contiguous form's), expected_m, then everything fp8_gemm_nt checks on group 0's [m, k],
// [n, k] and [m, n] views (each group's are alike). Checked::m is one group's rows (a's size(1)).
MGroupedChecked check_m_grouped_masked(const TensorView& a, const TensorView& sfa, const TensorView& b,
                                       const TensorView& sfb, const TensorView& d, const TensorView& masked_m,
                                       int64_t expected_m) {
  const char* fn = kMGroupedMaskedOp;
  const Arg aa{fn, "a"}, asfa{fn, "sfa"}, ab{fn, "b"}, asfb{fn, "sfb"}, ad{fn, "d"}, amask{fn, "masked_m"};
  check_dtype(aa, a, DType::kFloat8E4M3);
  check_dtype(asfa, sfa, DType::kFloat32);
  check_dtype(ab, b, DType::kFloat8E4M3);
  check_dtype(asfb, sfb, DType::kFloat32);
  check_dtype(ad, d, DType::kBFloat16);
  check_dtype(amask, masked_m, DType::kInt32);
  check_on_cuda(aa, a);
  check_same_device(amask, masked_m, aa, a);
  check_ndim(aa, a, 3);
  check_ndim(asfa, sfa, 3);
  check_ndim(ab, b, 3);
  check_ndim(asfb, sfb, 3);
  check_ndim(ad, d, 3);
  check_ndim(amask, masked_m, 1);
  const int64_t groups = a.shape[0], m = a.shape[1], k = a.shape[2], n = b.shape[1];
  check_group_count(aa, a, "(groups, m, k)");
  check_masked_b_shape(ab, b, groups, k);
  const int64_t k_blocks = cdiv(k, kScaleBlock);
  check_shape(asfa, sfa, {groups, m, k_blocks}, "(groups, m, ceil(k / 128)): each group's per-token 1x128 scales");
  check_shape(asfb, sfb, {groups, cdiv(n, kScaleBlock), k_blocks},
              "(groups, ceil(n / 128), ceil(k / 128)): each group's 128x128-block scales");
  check_shape(ad, d, {groups, m, n}, "(groups, m of a, n of b)");
  check_masked_m(amask, masked_m, groups);
  check_expected_m(fn, expected_m);
  check_masked_rows(aa, a, groups, m);
  check_grouped_b_layout(fn, b, sfb, groups);
  check_grouped_n_and_k(aa, a, 2, 16, ab, b, 1);
  const TensorView a0 = view_2d(a, 0, m, k, a.strides[1], a.strides[2]);
  const TensorView sfa0 = view_2d(sfa, 0, m, k_blocks, sfa.strides[1], sfa.strides[2]);
  const TensorView b0 = view_2d(b, 0, n, k, b.strides[1], b.strides[2]);
  const TensorView sfb0 = view_2d(sfb, 0, cdiv(n, kScaleBlock), k_blocks, k_blocks, 1);
  const TensorView d0 = view_2d(d, 0, m, n, d.strides[1], d.strides[2]);
  MGroupedChecked out;
  out.c = check_arguments(fn, a0, sfa0, b0, sfb0, d0);
  Checked& c = out.c;
  // One map reads every group's rows of A (row stride lda), and one every group's scales (K-block columns
  // sfa_stride apart): the groups must follow each other at those distances. D's groups are the planes of a 3-D
  // map (check_masked_a_and_d).
  check_masked_a_and_d(fn, a, d, groups, m, n, c.lda, c.ldd);
  if (groups > 1 && m > 0 && n > 0) {
    if (k_blocks == 1) {
      // One K block: the groups are the scale map's columns, so their distance is its column stride.
      if (sfa.strides[0] < m || sfa.strides[0] % 4 != 0)
        fail(ErrorKind::kValueError, asfa, sfa,
             "groups at least m == " + std::to_string(m) + " floats apart and a multiple of 4 (16-byte TMA rows)",
             strides_text(sfa));
      c.sfa_stride = sfa.strides[0];
    } else if (sfa.strides[0] != k_blocks * c.sfa_stride) {
      fail(ErrorKind::kValueError, asfa, sfa,
           "groups one after the other, each MN-major: strides (ceil(k / 128) * s, 1, s), here stride(0) == " +
               std::to_string(k_blocks * c.sfa_stride) + " (get_mn_major_tma_aligned_tensor(sfa) makes that layout)",
           strides_text(sfa));
    }
  }
  // fp8_gemm_nt's checks have seen group 0's views; D (every group's) must be clear of every group's A, B and scales,
  // and of the counts.
  check_d_overlaps(fn, d, a, sfa, b, sfb);
  check_no_overlap(ad, d, "masked_m", masked_m);
  out.grouped.groups = groups;
  out.grouped.layout = static_cast<const int32_t*>(masked_m.data);
  out.grouped.masked = true;
  out.grouped.plan_m = masked_plan_m(groups, expected_m, m);
  out.grouped.d_plane_stride = groups > 1 ? d.strides[0] : m * c.ldd;
  return out;
}

// ---- the k-grouped weight-gradient GEMM (one weight gradient per MoE expert) --------------------------------------

// One group's problem: views of its part of the grouped tensors, checked as fp8_gemm_nt_wgrad checks its own.
struct GroupProblem {
  int64_t k = 0;
  TensorView a, sfa, b, sfb, d, c;
  Checked checked{};
};

[[noreturn]] void fail_grouped(const std::string& what) {
  throw Error(ErrorKind::kValueError, std::string(kKGroupedOp) + ": " + what);
}

// Every check of the grouped call, in the order its errors are reported (the grouped tensors, then each group's
// views as fp8_gemm_nt_wgrad would check them); what it does with D (C's mode) comes back in `mode`.
std::vector<GroupProblem> check_k_grouped(const TensorView& a, const TensorView& sfa, const TensorView& b,
                                          const TensorView& sfb, const TensorView& d, const std::vector<int64_t>& ks,
                                          const TensorView* c_tensor, CMode& mode) {
  const char* fn = kKGroupedOp;
  const Arg aa{fn, "a"}, asfa{fn, "sfa"}, ab{fn, "b"}, asfb{fn, "sfb"}, ad{fn, "d"}, ac{fn, "c"};
  check_dtype(aa, a, DType::kFloat8E4M3);
  check_dtype(asfa, sfa, DType::kFloat32);
  check_dtype(ab, b, DType::kFloat8E4M3);
  check_dtype(asfb, sfb, DType::kFloat32);
  check_dtype(ad, d, DType::kFloat32);
  if (c_tensor) check_dtype(ac, *c_tensor, DType::kFloat32);
  check_devices(fn, a, sfa, b, sfb, d, c_tensor);
  check_ndim(aa, a, 1);
  check_ndim(ab, b, 1);
  check_ndim(ad, d, 3);
  const int64_t groups = d.shape[0], m = d.shape[1], n = d.shape[2];
  if (c_tensor) check_shape(ac, *c_tensor, {groups, m, n}, "(groups, m, n), as d");
  if (static_cast<int64_t>(ks.size()) != groups)
    fail_grouped("ks must hold one token count per group (d.size(0) == " + std::to_string(groups) + "), got " +
                 std::to_string(ks.size()) + " counts");
  // The counts one by one, and their running sum: each in 32 bits as the bf16 form's, and the sum too (the scales'
  // K blocks and each group's first one are 32-bit in the kernel's parameters), so nothing below can overflow.
  int64_t total = 0;
  for (size_t g = 0; g < ks.size(); ++g) {
    if (ks[g] < 0 || ks[g] > INT32_MAX)
      fail_grouped("ks[" + std::to_string(g) + "] must be a token count in 0..2147483647, got " +
                   std::to_string(ks[g]));
    if (ks[g] % kScaleBlock != 0)
      fail_grouped("ks[" + std::to_string(g) + "] must be a non-negative multiple of 128 (a group's tokens are whole "
                   "blocks of the 1x128 scales), got " + std::to_string(ks[g]));
    total += ks[g];
    if (total > INT32_MAX)
      fail_grouped("ks must hold at most 2147483647 tokens in all, got " + std::to_string(total) + " in ks[0.." +
                   std::to_string(g) + "]");
  }
  // m and n in 32 bits, as the kernel's parameters take them (and so m * sum(ks) and n * sum(ks) fit in 64).
  if (m > INT32_MAX || n > INT32_MAX)
    fail(ErrorKind::kValueError, ad, d, "at most 2147483647 rows and columns (m and n)",
         "shape " + format_dims(d.shape.data(), 3));
  const int64_t k_blocks = total / kScaleBlock;
  const auto check_operand = [&](const Arg& arg, const TensorView& t, int64_t rows, const char* r) {
    if (t.shape[0] != rows * total)
      fail(ErrorKind::kValueError, arg, t,
           "of " + std::to_string(rows * total) + " elements (" + r + " * sum(ks): group g's rows of ks[g] tokens, " +
               "row-major, after the groups before it)",
           "size " + std::to_string(t.shape[0]));
    check_contiguous(arg, t);
  };
  check_operand(aa, a, m, "m");
  check_operand(ab, b, n, "n");
  check_shape(asfa, sfa, {m, k_blocks}, "(m, sum(ks) / 128)");
  check_shape(asfb, sfb, {n, k_blocks}, "(n, sum(ks) / 128)");
  const int64_t sfa_stride = check_mn_major_scales(asfa, sfa, m, k_blocks, "m");
  const int64_t sfb_stride = check_mn_major_scales(asfb, sfb, n, k_blocks, "n");
  // D and C: groups of [m, n] with dense rows, apart from each other; D's each 16-byte aligned (the row strides are
  // checked per group, on views that take stride(2) as 1).
  check_k_grouped_planes(ad, d, true);
  if (c_tensor) check_k_grouped_planes(ac, *c_tensor, false);
  mode = check_k_grouped_c(ac, c_tensor, d);
  // Every group's D clear of every group's A, B and scales (each group's views are checked again below).
  check_d_overlaps(fn, d, a, sfa, b, sfb);

  std::vector<GroupProblem> out(static_cast<size_t>(groups));
  int64_t k_offset = 0;
  for (int64_t g = 0; g < groups; ++g) {
    GroupProblem& p = out[static_cast<size_t>(g)];
    p.k = ks[static_cast<size_t>(g)];
    const int64_t kb0 = k_offset / kScaleBlock, kb = p.k / kScaleBlock;
    p.a = view_2d(a, m * k_offset, m, p.k, p.k, 1);
    p.b = view_2d(b, n * k_offset, n, p.k, p.k, 1);
    p.sfa = view_2d(sfa, kb0 * sfa_stride, m, kb, 1, sfa_stride);
    p.sfb = view_2d(sfb, kb0 * sfb_stride, n, kb, 1, sfb_stride);
    p.d = view_2d(d, g * d.strides[0], m, n, d.strides[1], 1);
    if (c_tensor) p.c = view_2d(*c_tensor, g * c_tensor->strides[0], m, n, c_tensor->strides[1], 1);
    const TensorView* c_view = mode == CMode::kCopy ? &p.c : mode == CMode::kAccumulate ? &p.d : nullptr;
    try {
      if (p.k > 0) {
        p.checked = check_arguments(fn, p.a, p.sfa, p.b, p.sfb, p.d, true, c_view);
      } else {  // no product: D is only zeroed, copied into or left alone
        p.checked.m = m;
        p.checked.n = n;
        p.checked.ldd = check_rows_dense(ad, p.d, 16);
        check_pointer_aligned(ad, p.d, 16);
        if (mode == CMode::kCopy) p.checked.ldc = check_rows_dense(ac, p.c, 4);
      }
    } catch (const Error& e) {
      throw Error(e.kind(), std::string(e.what()) + " (group " + std::to_string(g) + " of " + std::to_string(groups) +
                                ", ks[" + std::to_string(g) + "] = " + std::to_string(p.k) + ")");
    }
    k_offset += p.k;
  }
  return out;
}

// One launch of the k-grouped kernel `r` for the groups `launch_groups` of `groups` (each with tokens): the maps
// every group shares (the scales over all K blocks, D as [G, M, N]) and each group's A and B, in one
// Fp8GemmGroupedParams. D was prepared before where needed (prepare_d); with no C (`store_d`) the kernel stores
// its groups' planes instead of adding into them. The pipeline runs `ring_stages` of the kernel's stages.
void launch_k_grouped(const std::vector<GroupProblem>& groups, const std::vector<size_t>& launch_groups,
                      const Resolved& r, int ring_stages, const TensorView& sfa, const TensorView& sfb,
                      const TensorView& d, bool store_d, CUstream stream) {
  const Fp8GemmConfig& cfg = r.kernel->config;
  const Checked& c = groups[launch_groups.front()].checked;  // m, n, ldd and the scales' strides: every group's
  int64_t total_k = 0;
  for (const GroupProblem& p : groups) total_k += p.k;
  const uint64_t total_kb = w64(total_k / kScaleBlock);
  const uint32_t block_m = w32(cfg.block_m), block_n = w32(cfg.block_n);

  Fp8GemmGroupedParams params{};
  Fp8GemmParams& base = params.base;
  // Whole boxes only: a group's own maps have no short variant for the last m or n block (TMA zero-fills the rows
  // past M and N, which are never stored).
  copy_map(base.tma_sfa, tensor_map_2d(scale_key(sfa, c.m, total_kb, c.sfa_stride, block_m), "sfa"));
  copy_map(base.tma_sfb, tensor_map_2d(scale_key(sfb, c.n, total_kb, c.sfb_stride, block_n), "sfb"));
  TensorMapKey d_key = reduce_d_key(d, c, r.kernel->reduce_cols);
  d_key.planes = w64(d.shape[0]);
  d_key.plane_bytes = w64(d.strides[0] * 4);
  copy_map(base.tma_d, tensor_map_2d(d_key, "d"));
  base.d = d.data;
  base.ldd = w64(c.ldd);
  base.m = w32(c.m);
  base.last_box_rows = block_m;
  base.last_b_box_rows = block_n;
  base.b_cache_policy = kernels::fp8_gemm_b_cache_policy(block_m, w32(c.m));
  base.num_k_blocks = 0;  // each group's own (k_blocks)
  base.group_m = w32(cfg.group_m);
  base.store_d = store_d ? 1u : 0u;
  base.ring_stages = w32(ring_stages);

  const bool interleaved_b = kernels::fp8_gemm_interleaved_b(true, w32(c.n), block_n);
  int64_t kb_offset = 0;
  size_t next = 0;  // the next of launch_groups
  for (size_t g = 0; g < groups.size() && next < launch_groups.size(); ++g) {
    const GroupProblem& p = groups[g];
    if (g == launch_groups[next]) {
      const Checked& gc = p.checked;
      copy_map(params.tma_a[next], tensor_map_2d(operand_key(p.a, gc.k, gc.m, gc.lda, block_m), "a"));
      copy_map(params.tma_b[next], tensor_map_2d(operand_key(p.b, gc.k, gc.n, gc.ldb, block_n, interleaved_b), "b"));
      params.k_blocks[next] = w32(p.k / kScaleBlock);
      params.kb_offset[next] = w32(kb_offset / kScaleBlock);
      params.d_group[next] = w32(g);
      ++next;
    }
    kb_offset += p.k;
  }
  params.num_groups = w32(launch_groups.size());

  cuda::LaunchConfig config;
  const int64_t units = cfg.units(c.m, c.n) * static_cast<int64_t>(launch_groups.size());
  config.grid[0] = static_cast<uint32_t>(std::min<int64_t>(units, r.entry->sm_count));
  config.block[0] = r.kernel->threads;
  config.shared_bytes = r.kernel->shared_bytes;
  config.pdl = get_pdl();  // as launch(): the kernel waits for earlier work (D's preparation too) before reading
  config.stream = stream;
  r.kernel->kernel->launch(config, &params);
}

}  // namespace

codegen::KernelSpec fp8_gemm_spec(int64_t n, int64_t k, const Fp8GemmConfig& c) {
  codegen::KernelSpec spec;
  spec.op = kOp;
  spec.header = "kiln/kernels/fp8_gemm.cuh";
  spec.kernel_template = "kiln::kernels::Fp8Gemm";
  spec.params_type = "kiln::Fp8GemmParams";
  // The weight-gradient form's kernels take K (a token count) and the tile order's group height at run time, so one
  // kernel serves a weight's gradient over every token count (a plan is still made per K: the tile may differ).
  const bool run_time_k = c.accumulate;
  spec.arg("n", n)
      .arg("k", run_time_k ? int64_t{kernels::kFp8GemmRunTimeK} : k)
      .arg("block_m", int64_t{c.block_m})
      .arg("block_n", int64_t{c.block_n})
      .arg("stages", int64_t{c.stages})
      .arg("math_warpgroups", int64_t{c.math_warpgroups})
      .arg("tma_store", c.tma_store)
      .arg("cluster_m", int64_t{c.cluster_m})
      .arg("cluster_n", int64_t{c.cluster_n})
      .arg("overlap_promotion", c.overlap_promotion)
      .arg("accumulate", c.accumulate)
      .arg("split_k", int64_t{c.split_k});
  // Rendered only where it is not the kernel's default, so every other kernel's source (and cache key) stays
  // what it was before the parameter existed.
  if (!run_time_k && (c.m_grouped || c.group_m != static_cast<int>(kernels::kFp8GemmDefaultGroupM)))
    spec.arg("group_m", int64_t{c.group_m});
  // The m-grouped kernel: the template's last argument, after k_grouped's.
  if (c.m_grouped) spec.arg("k_grouped", false).arg("m_grouped", true);
  if (c.masked) spec.arg("masked", true);  // the masked form: the argument after m_grouped's
  // The k-grouped kernel takes Fp8GemmGroupedParams; its template argument follows the group height's (whose
  // default it spells out: the kernel reads the height from its parameters, as every kernel with K at run time).
  if (c.k_grouped) {
    spec.params_type = "kiln::Fp8GemmGroupedParams";
    spec.arg("group_m", int64_t{kernels::kFp8GemmDefaultGroupM}).arg("k_grouped", true);
  }
  spec.block_threads = static_cast<int>(fp8_gemm_threads(c));
  spec.min_blocks_per_sm = 1;
  // The 256-row kernels (two waves, serial promotion) with ptxas's most register-hungry scheduling, as
  // DeepGEMM compiles every kernel: on the H200 (fp8_gemm_test, 2026-11-30, A B A B) 4096 x 4096 x 7168 ran
  // 182.7 -> 178.2 us and 4096 x 32768 x 512 129.5 -> 128.0, the other 256x128 shapes within 0.3 %. The
  // overlapped-promotion kernels lost 1-2 % with it (128x192 at 4096 x 2112 x 7168, 128x160 at 4096 x 576 x
  // 7168), and the decode tiles were level, so they keep the default.
  if (c.block_m == 256) spec.register_usage_level = 10;
  return spec;
}

OpDescriptor fp8_gemm_nt_descriptor() {
  OpDescriptor op;
  op.name = kOp;
  op.arch = kWgmmaArchNeeds;
  op.summary =
      "D[m, n] (bf16) = A[m, k] (e4m3, per-token 1x128 scales) . B[n, k]^T (e4m3, 128x128 block scales); "
      "accumulate=1: D (fp32) += A . B^T with B scaled per row (1x128); m_grouped=1: MoE experts' rows in one call";
  op.params = {
      {"m", "rows of A and D, or a range lo..hi (a serving warm-up: m=1..16384); m = 0 needs no kernel", true, true},
      {"n", "rows of B, columns of D: a positive multiple of 8 (the kernel is specialised on it)", true},
      {"k", "the reduction: a positive multiple of 16 (the bf16 form's kernels are specialised on it); with "
            "accumulate=1 (tokens: its kernels take k at run time) also a range lo..hi, every multiple of 16 in it",
       true, true},
      {"block_m", "override: 64, 128 or 256 rows per tile (0: heuristic; 256 only on request, bf16 form)", false},
      {"block_n", "override: columns per tile, a multiple of 16 in 16..192 (0: heuristic)", false},
      {"stages",
       "override: pipeline stages, 1..16 (0: heuristic: as many as fit, or a stage fewer where that widens the "
       "weight-gradient form's reduce-add staging)",
       false},
      {"cluster_m", "override: 2 for CTA pairs multicasting B (0: heuristic, which uses 1)", false},
      {"cluster_n", "override: 2 for CTA pairs multicasting A (0: heuristic)", false},
      {"split_k", "override: 2 for CTA pairs splitting K in halves, 1 never (0: heuristic; bf16 form)", false},
      {"num_sms", "SMs the kernel may use, as set_num_sms (0: all of the target's)", false},
      {"accumulate", "1: the weight-gradient form, D (fp32) += A . B^T with B's scales per row per 128 K "
                     "(fp8_gemm_nt_accumulate / fp8_gemm_nt_wgrad); 0 (default): the bf16 form", false},
      {"k_grouped", "1 (with accumulate=1): that form's k-grouped kernels, every MoE expert's weight gradient in one "
                    "launch (k_grouped_fp8_gemm_nt_contiguous, which picks a group's at k = its token count rounded up "
                    "to a power of two); 0 (default): one GEMM's", false},
      {"no_c", "1 (with accumulate=1): the kernels of calls without C (c=None: D = A . B^T, stored), whose tiles "
               "may differ from those of calls with C at short k; 0 (default): calls with C (D += A . B^T)", false},
      {"m_grouped", "1 (bf16 form): the m-grouped kernels of m_grouped_fp8_gemm_nt_contiguous, MoE experts' rows one "
                    "group after another (m: all their rows; 64- and 128-row tiles only); 0 (default): one GEMM's",
       false},
      {"masked", "1 (with m_grouped=1): the kernels of m_grouped_fp8_gemm_nt_masked (m: groups * expected_m, the rows "
                 "a call picks its kernel at); 0 (default): the contiguous form's",
       false},
  };
  op.uses = uses_of;
  op.kernels = [](const Problem& problem, const TargetInfo& target) {
    std::vector<codegen::KernelSpec> specs;
    for (KernelUse& use : uses_of(problem, target)) specs.push_back(std::move(use.spec));
    return specs;
  };
  return op;
}

}  // namespace kiln::ops

// ---- Public API -------------------------------------------------------------------------------------------

namespace kiln {

void set_fp8_gemm_overrides(const Fp8GemmOverrides& overrides) {
  ops::check_fp8_gemm_overrides(overrides, "set_fp8_gemm_overrides");
  ops::g_overrides.store(ops::pack(overrides), std::memory_order_relaxed);
}

Fp8GemmOverrides get_fp8_gemm_overrides() {
  return ops::unpack(ops::g_overrides.load(std::memory_order_relaxed));
}

void fp8_gemm_nt(const TensorView& a, const TensorView& sfa, const TensorView& b, const TensorView& sfb,
                 const TensorView& d, Stream stream) {
  const ops::Checked c = ops::check_arguments(ops::kOp, a, sfa, b, sfb, d);
  if (c.m == 0 || c.n == 0) return;  // nothing to do: no compile, no launch
  ops::launch(ops::kOp, c, a, sfa, b, sfb, d, static_cast<CUstream>(stream), false, ops::CMode::kAccumulate, nullptr);
}

void fp8_gemm_nt_accumulate(const TensorView& a, const TensorView& sfa, const TensorView& b, const TensorView& sfb,
                            const TensorView& d, Stream stream) {
  const ops::Checked c = ops::check_arguments(ops::kAccumulateOp, a, sfa, b, sfb, d, true);
  if (c.m == 0 || c.n == 0) return;
  ops::launch(ops::kAccumulateOp, c, a, sfa, b, sfb, d, static_cast<CUstream>(stream), true, ops::CMode::kAccumulate,
              nullptr);
}

void fp8_gemm_nt_wgrad(const TensorView& a, const TensorView& sfa, const TensorView& b, const TensorView& sfb,
                       const TensorView& d, const TensorView* c_tensor, Stream stream) {
  const ops::Checked c = ops::check_arguments(ops::kWgradOp, a, sfa, b, sfb, d, true, c_tensor);
  const ops::CMode mode = ops::check_c_against_d(ops::kWgradOp, c_tensor, d, c.m, c.n, c.ldc, c.ldd);
  if (c.m == 0 || c.n == 0) return;
  ops::launch(ops::kWgradOp, c, a, sfa, b, sfb, d, static_cast<CUstream>(stream), true, mode, c_tensor);
}

void m_grouped_fp8_gemm_nt_contiguous(const TensorView& a, const TensorView& sfa, const TensorView& b,
                                      const TensorView& sfb, const TensorView& d, const TensorView& m_indices,
                                      Stream stream) {
  const ops::MGroupedChecked checked = ops::check_m_grouped(a, sfa, b, sfb, d, m_indices);
  if (checked.c.m == 0 || checked.c.n == 0) return;  // nothing to do: no compile, no launch
  ops::launch(ops::kMGroupedOp, checked.c, a, sfa, b, sfb, d, static_cast<CUstream>(stream), false,
              ops::CMode::kAccumulate, nullptr, &checked.grouped);
}

void m_grouped_fp8_gemm_nt_masked(const TensorView& a, const TensorView& sfa, const TensorView& b,
                                  const TensorView& sfb, const TensorView& d, const TensorView& masked_m,
                                  int64_t expected_m, Stream stream) {
  const ops::MGroupedChecked checked = ops::check_m_grouped_masked(a, sfa, b, sfb, d, masked_m, expected_m);
  if (checked.c.m == 0 || checked.c.n == 0) return;  // nothing to do: no compile, no launch
  ops::launch(ops::kMGroupedMaskedOp, checked.c, a, sfa, b, sfb, d, static_cast<CUstream>(stream), false,
              ops::CMode::kAccumulate, nullptr, &checked.grouped);
}

void k_grouped_fp8_gemm_nt_contiguous(const TensorView& a, const TensorView& sfa, const TensorView& b,
                                      const TensorView& sfb, const TensorView& d, const std::vector<int64_t>& ks,
                                      const TensorView* c, Stream stream) {
  ops::CMode mode = ops::CMode::kZero;
  const std::vector<ops::GroupProblem> groups = ops::check_k_grouped(a, sfa, b, sfb, d, ks, c, mode);
  if (groups.empty() || d.shape[1] == 0 || d.shape[2] == 0) return;
  const auto s = static_cast<CUstream>(stream);
  // The kernels first (a first call plans and may compile), so that an error leaves D untouched. Each group runs on
  // the kernel its own K's plan picks (k_grouped_plan_k): at short K that is another tile than at long K (with C,
  // kReduceShortKSlowdown), and with its pipeline's length at its own K (fp8_gemm_ring_stages: fewer stages at short
  // K). Groups that share the configuration and that length share launches.
  std::vector<ops::Resolved> kernels;               // distinct configurations, in order of first use
  std::vector<std::pair<int64_t, int>> planned_at;  // plan k -> index into kernels
  std::vector<std::pair<int, int>> launch_classes;  // (index into kernels, ring stages), in order of first use
  std::vector<int> class_of(groups.size(), -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    const ops::GroupProblem& p = groups[g];
    if (p.k == 0) continue;
    const int64_t plan_k = ops::k_grouped_plan_k(p.k, ops::kScaleBlock);
    auto known = std::find_if(planned_at.begin(), planned_at.end(), [&](const auto& e) { return e.first == plan_k; });
    if (known == planned_at.end()) {
      ops::Checked planned = p.checked;
      planned.k = plan_k;
      const ops::Resolved r = ops::resolve(ops::kKGroupedOp, planned, p.a, s, ops::weight_gradient_key(mode, true));
      auto same = std::find_if(kernels.begin(), kernels.end(),
                               [&](const ops::Resolved& k) { return k.kernel->config == r.kernel->config; });
      if (same == kernels.end()) same = kernels.insert(kernels.end(), r);
      known = planned_at.insert(planned_at.end(), {plan_k, static_cast<int>(same - kernels.begin())});
    }
    const ops::Resolved& r = kernels[static_cast<size_t>(known->second)];
    const std::pair<int, int> cls{
        known->second,
        ops::fp8_gemm_ring_stages(r.kernel->config, p.k, r.entry->form, r.entry->stages_forced, r.entry->l2_bytes)};
    auto same_class = std::find(launch_classes.begin(), launch_classes.end(), cls);
    if (same_class == launch_classes.end()) same_class = launch_classes.insert(launch_classes.end(), cls);
    class_of[g] = static_cast<int>(same_class - launch_classes.begin());
  }
  // Every group's D where the kernel adds into it (a copy of C; nothing for c=d) or does not write it at all (zeros
  // for the groups without tokens when there is no C: the others' planes the kernel stores whole), then the
  // launches, each of up to kFp8GemmMaxLaunchGroups groups of one kernel and pipeline length.
  const bool store_d = mode == ops::CMode::kZero;
  ops::prepare_k_grouped_d(ops::kKGroupedOp, mode, d, c, ks, groups.front().checked.ldd, groups.front().checked.ldc,
                           a.device, s);
  for (const std::vector<size_t>& launch : ops::k_grouped_launches(class_of, kFp8GemmMaxLaunchGroups)) {
    const auto [kernel, ring] = launch_classes[static_cast<size_t>(class_of[launch.front()])];
    ops::launch_k_grouped(groups, launch, kernels[static_cast<size_t>(kernel)], ring, sfa, sfb, d, store_d, s);
  }
}

}  // namespace kiln
