// GPU test of the BF16 GEMM through the public C++ API (kiln::bf16_gemm_nt, kiln::bf16_gemm_nt_accumulate): the
// plan's kernels for every dense_bf16 shape of shared/bench/shapes.json at M = 1, 128 and 4096, one M per kernel of a
// whole plan (N = 7168, K = 2048), every tile family forced (64-row tiles 16..256 wide, 128-row tiles alone and in
// pairs sharing B, 256-row tiles of two waves alone and in pairs), ragged shapes (M = 1, 37, 200, 1000; N = 8, 136,
// 576; K = 8, 520, a K tail inside a 64-block), padded row strides of A, B and D, set_num_sms, a created stream, and
// validation errors that need a GPU. The float32 forms (D stored as summed; D += A . B^T in place; D = C + A . B^T from
// another C) on dense shapes, ragged ones, forced tiles (16- and 32-column boxes, pairs, two waves, four store passes)
// and padded strides. MN-major operands (A stored [k, m], B stored [k, n], or both) on the plan's kernels and forced
// tiles. The m-grouped forms (kiln::m_grouped_bf16_gemm_nt_contiguous and _masked: MoE experts, each with its own B):
// group mixes with empty groups, padding rows and padding-only blocks, one group, ragged N and K, forced 64x64,
// 128x128 and 128x256 tiles, out-of-range group indices (their blocks NaN), masked counts of 0, m, past m and below 0
// (clamped), groups of 64, 192 and 256 rows, and padded strides; rows the kernel must not write keep their poison.
// `--quick`: the dense and ragged shapes, the layouts and float32 forms on the plan's kernels, and three m-grouped
// cases. `--grouped`: every m-grouped case, nothing else. `--layouts`: every case with an MN-major operand, nothing
// else.
//
// Inputs are random bf16 with per-row magnitudes over 2^-4..2^4 (never zeros); C is random float32. D, its padding
// columns and a guard row are poisoned with NaN before each call (in place, D's own columns hold C). Checked rows
// (all for M <= 256, else 64: first, last, tile edges, random) are compared with a float64 reference of the same
// inputs: DeepGEMM's calc_diff below 1e-5 (1e-7 for a float32 D, which a D rounded to bf16 anywhere would fail), and
// every element within its rounding (2^-8 relative for bf16, 2^-24 for float32) plus a float32 summation bound (2^-20
// of the sum of |a_i b_i| for bf16; for float32, 2^-23 of it per 16-wide WGMMA step, the tensor cores' worst case).
// NaN or Inf never passes, and nothing outside D may change. Prints PASS/FAIL lines; exit 0 only if all pass, 77
// without a GPU.
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/driver.hpp"
#include "fp8_reference.hpp"
#include "gpu_test_support.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln.hpp"
#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace {

using kiln::gpu_test::bf16_to_f32;
using kiln::gpu_test::DeviceBuffer;
using kiln::gpu_test::mix;
using kiln::gpu_test::random_bf16;
using kiln::gpu_test::g_failures;
using kiln::gpu_test::report;

kiln::TensorView view(void* data, int64_t rows, int64_t cols, int64_t ld) {
  kiln::TensorView t = kiln::TensorView::contiguous(data, kiln::DType::kBFloat16, {rows, cols});
  t.strides[0] = ld;
  return t;
}

// What D is and what the call does with it.
enum class Form {
  kBf16,        // bf16_gemm_nt into a bfloat16 D
  kF32,         // bf16_gemm_nt into a float32 D
  kAddInPlace,  // bf16_gemm_nt_accumulate with c = d: D += A . B^T
  kAddFromC,    // bf16_gemm_nt_accumulate with another c (row stride n + 3): D = C + A . B^T
};

struct Case {
  int64_t m, n, k;
  kiln::Bf16GemmOverrides forced{};
  int64_t pad_a = 0, pad_b = 0, pad_d = 0;  // extra elements per row
  int num_sms = 0;
  bool own_stream = false;
  Form form = Form::kBf16;
  bool a_mn = false, b_mn = false;  // A stored M-major ([k, m], transposed), B N-major ([k, n])
};

Case with_layout(Case c, bool a_mn, bool b_mn) {
  c.a_mn = a_mn;
  c.b_mn = b_mn;
  return c;
}

Case with_form(Case c, Form form) {
  c.form = form;
  return c;
}

std::string name_of(const Case& c) {
  std::string s = std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k);
  if (c.forced.block_m)
    s += " forced " + std::to_string(c.forced.block_m) + "x" + std::to_string(c.forced.block_n) +
         (c.forced.cluster_m == 2 ? " pair" : "") + (c.forced.stages ? " s" + std::to_string(c.forced.stages) : "");
  if (c.pad_a || c.pad_b || c.pad_d)
    s += " padded " + std::to_string(c.pad_a) + "/" + std::to_string(c.pad_b) + "/" + std::to_string(c.pad_d);
  if (c.num_sms) s += " num_sms " + std::to_string(c.num_sms);
  if (c.own_stream) s += " own stream";
  if (c.form == Form::kF32) s += " float32 D";
  if (c.form == Form::kAddInPlace) s += " D += A.B^T";
  if (c.form == Form::kAddFromC) s += " D = C + A.B^T";
  if (c.a_mn || c.b_mn) s += std::string(" layout ") + (c.a_mn ? "t" : "n") + (c.b_mn ? "n" : "t");
  return s;
}

// C's values: random float32 in [-4, 4), never zero.
float random_c(uint64_t seed, int64_t row, int64_t col) {
  const uint64_t bits = mix(seed * 977 + (static_cast<uint64_t>(row) << 24) + static_cast<uint64_t>(col));
  const double u = static_cast<double>(bits >> 11) / 9007199254740992.0 * 8.0 - 4.0;
  return static_cast<float>(std::fabs(u) < 1e-3 ? 1e-3 : u);
}

// Rows the check compares: all of them up to 256, else 64 (first, last, around 64-row tile edges, random).
std::vector<int64_t> checked_rows(int64_t m, uint64_t seed) {
  std::vector<int64_t> rows;
  if (m <= 256) {
    for (int64_t r = 0; r < m; ++r) rows.push_back(r);
    return rows;
  }
  for (const int64_t r : {int64_t{0}, int64_t{1}, m - 2, m - 1}) rows.push_back(r);
  for (int64_t e = 64; e < m && rows.size() < 40; e += std::max<int64_t>(64, m / 18 / 64 * 64)) {
    rows.push_back(e - 1);
    rows.push_back(e);
  }
  while (rows.size() < 64) rows.push_back(static_cast<int64_t>(mix(seed + rows.size()) % static_cast<uint64_t>(m)));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

void run_case(const Case& c) {
  const std::string name = name_of(c);
  const uint64_t seed = mix(static_cast<uint64_t>(c.m * 131 + c.n * 7 + c.k));
  // An operand's device layout: K-major, `rows` rows of k (row stride k + pad), or MN-major, k rows of `rows` (row
  // stride rows rounded up to 8, + pad); the padding is NaN. `logical` gets its values as [rows][k] floats.
  const auto make_operand = [&](uint64_t operand_seed, int64_t rows, bool mn_major, int64_t pad, int64_t& ld,
                                std::vector<float>& logical) {
    ld = mn_major ? (rows + 7) / 8 * 8 + pad : c.k + pad;
    std::vector<uint16_t> device(static_cast<size_t>((mn_major ? c.k : rows) * ld), 0x7fc0);
    logical.resize(static_cast<size_t>(rows * c.k));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < c.k; ++i) {
        const uint16_t v = random_bf16(operand_seed, static_cast<uint64_t>(r), static_cast<uint64_t>(i));
        device[static_cast<size_t>(mn_major ? i * ld + r : r * ld + i)] = v;
        logical[static_cast<size_t>(r * c.k + i)] = bf16_to_f32(v);
      }
    return device;
  };
  int64_t lda = 0, ldb = 0;
  const int64_t ldd = c.n + c.pad_d;
  std::vector<float> af, bf;
  const std::vector<uint16_t> a = make_operand(seed, c.m, c.a_mn, c.pad_a, lda, af);
  const std::vector<uint16_t> b = make_operand(~seed, c.n, c.b_mn, c.pad_b, ldb, bf);
  DeviceBuffer da(a.size() * 2), db(b.size() * 2);
  // D and one guard row after it, poisoned (NaN everywhere, the padding columns included); for D += A . B^T, D's own
  // columns hold C. Another C has a row stride of n + 3 (any pitch is copied).
  const bool f32 = c.form != Form::kBf16;
  const size_t out_bytes = f32 ? 4 : 2;
  DeviceBuffer dd(static_cast<size_t>((c.m + 1) * ldd) * out_bytes);
  const int64_t ldc = c.n + 3;
  DeviceBuffer dc(c.form == Form::kAddFromC ? static_cast<size_t>(c.m * ldc * 4) : 1);
  std::vector<float> initial_c;  // C as the reference adds it, [m][n]
  da.upload(a.data());
  db.upload(b.data());
  dd.poison();
  if (c.form == Form::kAddInPlace || c.form == Form::kAddFromC) {
    initial_c.resize(static_cast<size_t>(c.m * c.n));
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t j = 0; j < c.n; ++j) initial_c[static_cast<size_t>(r * c.n + j)] = random_c(seed, r, j);
    const int64_t ld = c.form == Form::kAddInPlace ? ldd : ldc;
    uint32_t nan_bits = 0xffffffffu;
    float nan;
    std::memcpy(&nan, &nan_bits, 4);
    std::vector<float> host(static_cast<size_t>((c.form == Form::kAddInPlace ? c.m + 1 : c.m) * ld), nan);
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t j = 0; j < c.n; ++j)
        host[static_cast<size_t>(r * ld + j)] = initial_c[static_cast<size_t>(r * c.n + j)];
    (c.form == Form::kAddInPlace ? dd : dc).upload(host.data(), host.size() * 4);
  }
  kiln::TensorView ta = view(da.data(), c.m, c.k, lda), tb = view(db.data(), c.n, c.k, ldb);
  if (c.a_mn) ta.strides[0] = 1, ta.strides[1] = lda;
  if (c.b_mn) tb.strides[0] = 1, tb.strides[1] = ldb;
  kiln::TensorView td = view(dd.data(), c.m, c.n, ldd), tc;
  if (f32) td.dtype = kiln::DType::kFloat32;
  if (c.form == Form::kAddInPlace) tc = td;
  if (c.form == Form::kAddFromC) {
    tc = view(dc.data(), c.m, c.n, ldc);
    tc.dtype = kiln::DType::kFloat32;
  }
  const kiln::cuda::DriverApi& api = kiln::cuda::DriverApi::get();
  CUstream stream = nullptr;
  try {
    kiln::set_bf16_gemm_overrides(c.forced);
    kiln::set_num_sms(c.num_sms);
    if (c.own_stream) KILN_CU_CHECK(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    if (c.form == Form::kAddInPlace || c.form == Form::kAddFromC)
      kiln::bf16_gemm_nt_accumulate(ta, tb, td, tc, stream);
    else
      kiln::bf16_gemm_nt(ta, tb, td, stream);
    KILN_CU_CHECK(c.own_stream ? api.cuStreamSynchronize(stream) : api.cuCtxSynchronize());
  } catch (const std::exception& e) {
    report(false, name + ": " + e.what());
  }
  if (stream) (void)api.cuStreamDestroy(stream);
  kiln::set_bf16_gemm_overrides({});
  kiln::set_num_sms(0);

  // D as float (bf16 widened), and whether each element still holds the poison.
  std::vector<uint16_t> d16(f32 ? 0 : static_cast<size_t>((c.m + 1) * ldd));
  std::vector<uint32_t> d32(f32 ? static_cast<size_t>((c.m + 1) * ldd) : 0);
  if (f32)
    dd.download(d32.data());
  else
    dd.download(d16.data());
  const auto got_at = [&](size_t i) {
    if (!f32) return static_cast<double>(bf16_to_f32(d16[i]));
    float v;
    std::memcpy(&v, &d32[i], 4);
    return static_cast<double>(v);
  };
  const auto poisoned = [&](size_t i) { return f32 ? d32[i] == 0xffffffffu : d16[i] == 0xffff; };
  // Per 16-wide WGMMA step, the tensor cores' float32 sum may lose 2^-23 of its magnitude (which is at most the sum
  // of |a_i b_i|): the worst case of their accumulation, and what a float32 D is held to.
  const double f32_sum_bound = std::ldexp(static_cast<double>((c.k + 15) / 16 + 1), -23);
  // Each checked row's sums, on every core (a 4096 x 7168 x 16384 check is 7.5e9 multiply-adds).
  struct RowCheck {
    double num = 0.0, den = 0.0, worst = 0.0;
    int64_t bad = 0, untouched_changed = 0;
  };
  const std::vector<int64_t> rows = checked_rows(c.m, seed);
  std::vector<RowCheck> checks(rows.size());
  kiln::gpu_test::parallel_for(rows.size(), [&](size_t begin, size_t end) {
    for (size_t index = begin; index < end; ++index) {
      const int64_t r = rows[index];
      RowCheck& rc = checks[index];
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0.0, abs_sum = 0.0;
        const float* ar = af.data() + r * c.k;
        const float* br = bf.data() + j * c.k;
        for (int64_t i = 0; i < c.k; ++i) {
          const double prod = static_cast<double>(ar[i]) * static_cast<double>(br[i]);
          ref += prod;
          abs_sum += std::fabs(prod);
        }
        if (!initial_c.empty()) ref += initial_c[static_cast<size_t>(r * c.n + j)];
        const double got = got_at(static_cast<size_t>(r * ldd + j));
        const double err = std::fabs(got - ref);
        const double bound = f32 ? std::ldexp(std::fabs(ref), -23) + f32_sum_bound * abs_sum
                                 : std::ldexp(std::fabs(ref), -8) + std::ldexp(abs_sum, -20);
        if (!std::isfinite(got) || err > bound) ++rc.bad;
        if (std::isfinite(got)) rc.worst = std::max(rc.worst, err / std::max(bound, 1e-30));
        rc.num += (got - ref) * (got - ref);
        rc.den += got * got + ref * ref;
      }
      for (int64_t j = c.n; j < ldd; ++j)
        if (!poisoned(static_cast<size_t>(r * ldd + j))) ++rc.untouched_changed;
    }
  });
  double num = 0.0, den = 0.0, worst = 0.0;
  int64_t bad = 0, untouched_changed = 0;
  for (const RowCheck& rc : checks) {
    num += rc.num;
    den += rc.den;
    worst = std::max(worst, rc.worst);
    bad += rc.bad;
    untouched_changed += rc.untouched_changed;
  }
  for (int64_t j = 0; j < ldd; ++j)
    if (!poisoned(static_cast<size_t>(c.m * ldd + j))) ++untouched_changed;
  const double diff = den > 0 ? num / den : 1.0;  // DeepGEMM's calc_diff is 1 - 2 xy / (x^2 + y^2): about this
  char detail[200];
  std::snprintf(detail, sizeof(detail), ": calc_diff %.2e, worst error %.2f of its bound, %lld out of bounds, "
                "%lld bytes outside D changed", diff, worst, static_cast<long long>(bad),
                static_cast<long long>(untouched_changed));
  report(bad == 0 && untouched_changed == 0 && diff < (f32 ? 1e-7 : 1e-5) && std::isfinite(diff), name + detail);
}

// Errors that only a GPU can produce (a device ordinal past the last).
void check_errors() {
  DeviceBuffer buf(1 << 16);
  kiln::TensorView a = view(buf.data(), 64, 64, 64), b = view(buf.data(), 64, 64, 64);
  DeviceBuffer dbuf(1 << 16);
  kiln::TensorView d = view(dbuf.data(), 64, 64, 64);
  a.device = 99;
  b.device = 99;
  d.device = 99;
  try {
    kiln::bf16_gemm_nt(a, b, d);
    report(false, "device 99: no error");
  } catch (const kiln::Error& e) {
    report(std::string(e.what()).find("existing CUDA device") != std::string::npos,
           std::string("device 99: ") + e.what());
  }
}

// ---- the m-grouped forms (MoE experts) ------------------------------------------------------------------------------

// `rows` rows of k random bf16 (row r from random_bf16(seed, first_row + r, .)) into a device image with row stride
// ld, whose padding stays as it was, and their values as floats, [rows][k].
void fill_rows(uint64_t seed, int64_t first_row, int64_t rows, int64_t k, int64_t ld, uint16_t* device,
               float* logical) {
  kiln::gpu_test::parallel_for(static_cast<size_t>(rows), [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r)
      for (int64_t i = 0; i < k; ++i) {
        const uint16_t v = random_bf16(seed, static_cast<uint64_t>(first_row) + r, static_cast<uint64_t>(i));
        device[r * static_cast<size_t>(ld) + static_cast<size_t>(i)] = v;
        logical[r * static_cast<size_t>(k) + static_cast<size_t>(i)] = bf16_to_f32(v);
      }
  });
}

// One row of a bf16 D to compare with the float64 product of A's row and its group's B ([n][k] floats).
struct RowTask {
  const uint16_t* got;
  const float* a;
  const float* b;
};

struct RowsChecked {
  double diff = 1.0, worst = 0.0;
  int64_t bad = 0;
};

// run_case's check of a bf16 D, over the rows of several groups: every element within 2^-8 of the reference plus
// 2^-20 of its sum of |a_i b_i|, finite, and calc_diff (about num / den) of them all.
RowsChecked check_rows(const std::vector<RowTask>& tasks, int64_t n, int64_t k) {
  struct Sums {
    double num = 0.0, den = 0.0, worst = 0.0;
    int64_t bad = 0;
  };
  std::vector<Sums> sums(tasks.size());
  kiln::gpu_test::parallel_for(tasks.size(), [&](size_t begin, size_t end) {
    for (size_t index = begin; index < end; ++index) {
      const RowTask& t = tasks[index];
      Sums& s = sums[index];
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0.0, abs_sum = 0.0;
        const float* br = t.b + j * k;
        for (int64_t i = 0; i < k; ++i) {
          const double prod = static_cast<double>(t.a[i]) * static_cast<double>(br[i]);
          ref += prod;
          abs_sum += std::fabs(prod);
        }
        const double got = static_cast<double>(bf16_to_f32(t.got[j]));
        const double err = std::fabs(got - ref);
        const double bound = std::ldexp(std::fabs(ref), -8) + std::ldexp(abs_sum, -20);
        if (!std::isfinite(got) || err > bound) ++s.bad;
        if (std::isfinite(got)) s.worst = std::max(s.worst, err / std::max(bound, 1e-30));
        s.num += (got - ref) * (got - ref);
        s.den += got * got + ref * ref;
      }
    }
  });
  double num = 0.0, den = 0.0;
  RowsChecked out;
  for (const Sums& s : sums) {
    num += s.num;
    den += s.den;
    out.worst = std::max(out.worst, s.worst);
    out.bad += s.bad;
  }
  out.diff = den > 0 ? num / den : 1.0;
  return out;
}

// The kernel the plan picks for an m-grouped problem, with the overrides as problem parameters (what
// `kiln plan bf16_gemm_nt ... m_grouped=1` prints), for the case's name.
std::string grouped_kernel(int64_t m, int64_t n, int64_t k, bool masked, const kiln::Bf16GemmOverrides& o,
                           bool n_major_b = false) {
  kiln::CompileRequest r{"bf16_gemm_nt", {{"m", m}, {"n", n}, {"k", k}, {"m_grouped", 1}}, std::nullopt,
                         std::nullopt};
  if (masked) r.problem["masked"] = 1;
  if (n_major_b) r.problem["n_major_b"] = 1;
  for (const auto& [name, value] : {std::pair<const char*, int>{"block_m", o.block_m}, {"block_n", o.block_n},
                                    {"stages", o.stages}})
    if (value != 0) r.problem[name] = value;
  try {
    const std::vector<kiln::KernelReport> reports = kiln::plan(r);
    if (reports.empty()) return "-";
    const std::string& d = reports[0].detail;
    const size_t colon = d.find(": ");
    return colon == std::string::npos ? d : d.substr(colon + 2);
  } catch (const std::exception& e) {
    return std::string("plan failed: ") + e.what();
  }
}

std::string list_text(const std::vector<int64_t>& values) {
  std::string s;
  for (const int64_t v : values) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

std::string forced_text(const kiln::Bf16GemmOverrides& o) {
  return o.block_m ? " forced " + std::to_string(o.block_m) + "x" + std::to_string(o.block_n) : "";
}

// m_grouped_bf16_gemm_nt_contiguous.
struct ContiguousCase {
  std::vector<int64_t> sizes;  // each group's rows (0 allowed), each run padded to a multiple of 128 with -1 rows
  int64_t n, k;
  kiln::Bf16GemmOverrides forced{};
  int64_t tail_blocks = 0;  // 128-row blocks of padding only after the groups (a serving engine's fixed buffer)
  int64_t pad = 0;          // extra elements per row of A, B and D (NaN in A and B)
  int64_t bad_block = -1;   // a 128-row block whose every index is bad_index (out of range): its rows must be NaN
  int32_t bad_index = 0;
  bool nn = false;  // m_grouped_bf16_gemm_nn_contiguous: B stored [G, k, n] (rows of n + pad, the padding NaN)
};

// Each group has its own rows of A and its own B (fresh random values); A's padding rows and the padding of its and
// B's rows are NaN, so that one leaking into a valid row shows. D (with a guard row after it) is poisoned: every
// valid row outside the bad block is checked (all of a group's up to 256, else checked_rows' 64) against the float64
// reference, the bad block's rows must all be NaN, and D's padding columns, guard row and blocks of padding only (128
// rows of -1: skipped by the kernel at either tile height) keep their poison. Rows of -1 inside a group's last block
// are not checked (they come out NaN from A's NaN rows).
void run_contiguous(const ContiguousCase& c, uint64_t seed) {
  const int64_t groups = static_cast<int64_t>(c.sizes.size()), n = c.n, k = c.k;
  std::vector<int64_t> first(c.sizes.size());
  int64_t m = 0;
  for (size_t g = 0; g < c.sizes.size(); ++g) {
    first[g] = m;
    m += (c.sizes[g] + 127) / 128 * 128;
  }
  m += c.tail_blocks * 128;
  const int64_t ld = k + c.pad, ldd = n + c.pad;
  std::string name = std::string(c.nn ? "m_grouped_bf16_gemm_nn_contiguous " : "m_grouped_bf16_gemm_nt_contiguous ") +
                     std::to_string(groups) + " groups (" + list_text(c.sizes) + " rows), m=" + std::to_string(m) +
                     " n=" + std::to_string(n) + " k=" + std::to_string(k) + " [" +
                     grouped_kernel(m, n, k, false, c.forced, c.nn) + "]" + forced_text(c.forced);
  if (c.tail_blocks) name += " +" + std::to_string(c.tail_blocks) + " padding blocks";
  if (c.pad) name += " padded " + std::to_string(c.pad);
  if (c.bad_block >= 0)
    name += " block " + std::to_string(c.bad_block) + " index " + std::to_string(c.bad_index) + " (out of range)";
  try {
    std::vector<uint16_t> a(static_cast<size_t>(m * ld), 0x7fc0), b(static_cast<size_t>(groups * n * ld), 0x7fc0);
    std::vector<float> af(static_cast<size_t>(m * k)), bf(static_cast<size_t>(groups * n * k));
    std::vector<int32_t> layout(static_cast<size_t>(m), -1);
    for (size_t g = 0; g < c.sizes.size(); ++g) {
      fill_rows(seed, first[g], c.sizes[g], k, ld, &a[static_cast<size_t>(first[g] * ld)],
                &af[static_cast<size_t>(first[g] * k)]);
      const int64_t gi = static_cast<int64_t>(g);
      fill_rows(~seed + g, 0, n, k, ld, &b[static_cast<size_t>(gi * n * ld)], &bf[static_cast<size_t>(gi * n * k)]);
      std::fill_n(layout.begin() + first[g], c.sizes[g], static_cast<int32_t>(g));
    }
    // Every index of the block, so that each m block inside it (64 or 128 rows) starts with one.
    if (c.bad_block >= 0) std::fill_n(layout.begin() + c.bad_block * 128, 128, c.bad_index);
    // The nn form: the same weights stored [G, k, n], rows of ldn (their padding NaN).
    const int64_t ldn = n + c.pad;
    if (c.nn) {
      std::vector<uint16_t> t(static_cast<size_t>(groups * k * ldn), 0x7fc0);
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t kk = 0; kk < k; ++kk)
            t[static_cast<size_t>((g * k + kk) * ldn + j)] = b[static_cast<size_t>((g * n + j) * ld + kk)];
      b = std::move(t);
    }
    DeviceBuffer da(a.size() * 2), db(b.size() * 2), dl(layout.size() * 4),
        dd(static_cast<size_t>((m + 1) * ldd) * 2);
    da.upload(a.data());
    db.upload(b.data());
    dl.upload(layout.data());
    dd.poison();
    const kiln::TensorView tb =
        c.nn ? kiln::gpu_test::strided_view(db.data(), kiln::DType::kBFloat16, {groups, k, n}, {k * ldn, ldn, 1})
             : kiln::gpu_test::strided_view(db.data(), kiln::DType::kBFloat16, {groups, n, k}, {n * ld, ld, 1});
    const kiln::TensorView tl = kiln::TensorView::contiguous(dl.data(), kiln::DType::kInt32, {m});
    try {
      kiln::set_bf16_gemm_overrides(c.forced);
      if (c.nn)
        kiln::m_grouped_bf16_gemm_nn_contiguous(view(da.data(), m, k, ld), tb, view(dd.data(), m, n, ldd), tl);
      else
        kiln::m_grouped_bf16_gemm_nt_contiguous(view(da.data(), m, k, ld), tb, view(dd.data(), m, n, ldd), tl);
      KILN_CU_CHECK(kiln::cuda::DriverApi::get().cuCtxSynchronize());
    } catch (...) {
      kiln::set_bf16_gemm_overrides({});
      throw;
    }
    kiln::set_bf16_gemm_overrides({});

    std::vector<uint16_t> out(static_cast<size_t>((m + 1) * ldd));
    dd.download(out.data());
    const auto in_bad_block = [&](int64_t row) { return c.bad_block >= 0 && row / 128 == c.bad_block; };
    std::vector<RowTask> tasks;
    for (size_t g = 0; g < c.sizes.size(); ++g)
      for (const int64_t r : checked_rows(c.sizes[g], seed + g)) {
        const int64_t row = first[g] + r;
        if (in_bad_block(row)) continue;
        tasks.push_back({&out[static_cast<size_t>(row * ldd)], &af[static_cast<size_t>(row * k)],
                         &bf[static_cast<size_t>(static_cast<int64_t>(g) * n * k)]});
      }
    const RowsChecked rc = check_rows(tasks, n, k);
    // Outside D (its padding columns, the guard row) and in every 128-row block of padding only.
    const auto padding_only = [&](int64_t row) {
      const auto block = layout.begin() + row / 128 * 128;
      return row < m && std::all_of(block, block + 128, [](int32_t index) { return index == -1; });
    };
    int64_t changed = 0, bad_not_nan = 0;
    for (int64_t row = 0; row <= m; ++row)
      for (int64_t j = row < m && !padding_only(row) ? n : 0; j < ldd; ++j)
        changed += out[static_cast<size_t>(row * ldd + j)] != 0xffff;
    if (c.bad_block >= 0)
      for (int64_t row = c.bad_block * 128; row < (c.bad_block + 1) * 128; ++row)
        for (int64_t j = 0; j < n; ++j)
          bad_not_nan += !std::isnan(bf16_to_f32(out[static_cast<size_t>(row * ldd + j)]));
    char detail[300];
    std::snprintf(detail, sizeof(detail), ": calc_diff %.2e over %zu rows, worst error %.2f of its bound, %lld out of "
                  "bounds, %lld elements outside D or in padding-only blocks changed%s", rc.diff, tasks.size(),
                  rc.worst, static_cast<long long>(rc.bad), static_cast<long long>(changed),
                  c.bad_block < 0 ? "" : (", " + std::to_string(bad_not_nan) + " of the bad block not NaN").c_str());
    report(!tasks.empty() && rc.bad == 0 && changed == 0 && bad_not_nan == 0 && rc.diff < 1e-5 &&
               std::isfinite(rc.diff),
           name + detail);
  } catch (const std::exception& e) {
    report(false, name + ": " + e.what());
  }
}

// m_grouped_bf16_gemm_nt_masked.
struct MaskedCase {
  std::vector<int64_t> counts;  // masked_m (clamped into [0, m] by the kernel)
  int64_t m, n, k, expected_m;
  kiln::Bf16GemmOverrides forced{};
  bool padded = false;  // D's rows n + 8 apart and its planes 64 elements further apart than its rows need; A's
                        // and B's rows k + 8 apart
};

// Each group has its own rows of A and its own B (fresh random values); A's rows past the (clamped) count and all
// padding are NaN, so that a row of another group or past the count leaking into a valid one shows. D and a guard
// row after its last plane are poisoned: each group's valid rows are checked against the float64 reference (all up
// to 256, else checked_rows' 64), and every row of a plane from the count rounded up to the tile height on (128
// unless a 64-row tile is forced: the plan may pick either, and the rows of the last block past the count are the
// only others the kernel may write), the padding columns, the gaps between planes and the guard row must keep their
// poison.
void run_masked(const MaskedCase& c, uint64_t seed) {
  const int64_t groups = static_cast<int64_t>(c.counts.size()), m = c.m, n = c.n, k = c.k;
  const int64_t ld = c.padded ? k + 8 : k, ldd = c.padded ? n + 8 : n, plane = c.padded ? m * ldd + 64 : m * ldd;
  const int64_t block = c.forced.block_m == 64 ? 64 : 128;
  const int64_t plan_m = groups * std::clamp<int64_t>(c.expected_m, 1, m);
  std::string name = "m_grouped_bf16_gemm_nt_masked " + std::to_string(groups) + " groups (masked_m " +
                     list_text(c.counts) + ") of m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                     " k=" + std::to_string(k) + " expected_m=" + std::to_string(c.expected_m) + " [" +
                     grouped_kernel(plan_m, n, k, true, c.forced) + "]" + forced_text(c.forced) +
                     (c.padded ? " padded strides" : "");
  try {
    const auto rows_of = [&](size_t g) { return std::clamp<int64_t>(c.counts[g], 0, m); };
    std::vector<uint16_t> a(static_cast<size_t>(groups * m * ld), 0x7fc0);
    std::vector<uint16_t> b(static_cast<size_t>(groups * n * ld), 0x7fc0);
    std::vector<float> af(static_cast<size_t>(groups * m * k)), bf(static_cast<size_t>(groups * n * k));
    std::vector<int32_t> masked(c.counts.size());
    for (size_t g = 0; g < c.counts.size(); ++g) {
      const int64_t gi = static_cast<int64_t>(g);
      masked[g] = static_cast<int32_t>(c.counts[g]);
      fill_rows(seed + g, 0, rows_of(g), k, ld, &a[static_cast<size_t>(gi * m * ld)],
                &af[static_cast<size_t>(gi * m * k)]);
      fill_rows(~seed + g, 0, n, k, ld, &b[static_cast<size_t>(gi * n * ld)], &bf[static_cast<size_t>(gi * n * k)]);
    }
    DeviceBuffer da(a.size() * 2), db(b.size() * 2), dmask(masked.size() * 4),
        dd(static_cast<size_t>(groups * plane + ldd) * 2);
    da.upload(a.data());
    db.upload(b.data());
    dmask.upload(masked.data());
    dd.poison();
    const auto tensor = kiln::gpu_test::strided_view;
    const kiln::TensorView ta = tensor(da.data(), kiln::DType::kBFloat16, {groups, m, k}, {m * ld, ld, 1});
    const kiln::TensorView tb = tensor(db.data(), kiln::DType::kBFloat16, {groups, n, k}, {n * ld, ld, 1});
    const kiln::TensorView td = tensor(dd.data(), kiln::DType::kBFloat16, {groups, m, n}, {plane, ldd, 1});
    const kiln::TensorView tmask = kiln::TensorView::contiguous(dmask.data(), kiln::DType::kInt32, {groups});
    try {
      kiln::set_bf16_gemm_overrides(c.forced);
      kiln::m_grouped_bf16_gemm_nt_masked(ta, tb, td, tmask, c.expected_m);
      KILN_CU_CHECK(kiln::cuda::DriverApi::get().cuCtxSynchronize());
    } catch (...) {
      kiln::set_bf16_gemm_overrides({});
      throw;
    }
    kiln::set_bf16_gemm_overrides({});

    std::vector<uint16_t> out(static_cast<size_t>(groups * plane + ldd));
    dd.download(out.data());
    std::vector<RowTask> tasks;
    int64_t changed = 0;
    for (size_t g = 0; g < c.counts.size(); ++g) {
      const int64_t gi = static_cast<int64_t>(g), rows = rows_of(g);
      const uint16_t* d_plane = &out[static_cast<size_t>(gi * plane)];
      const int64_t written = std::min(m, (rows + block - 1) / block * block);
      for (int64_t row = 0; row < m; ++row)
        for (int64_t j = row < written ? n : 0; j < ldd; ++j) changed += d_plane[row * ldd + j] != 0xffff;
      for (int64_t i = m * ldd; i < plane; ++i) changed += d_plane[i] != 0xffff;
      for (const int64_t r : checked_rows(rows, seed + g))
        tasks.push_back({d_plane + r * ldd, &af[static_cast<size_t>((gi * m + r) * k)],
                         &bf[static_cast<size_t>(gi * n * k)]});
    }
    for (int64_t j = 0; j < ldd; ++j) changed += out[static_cast<size_t>(groups * plane + j)] != 0xffff;
    const RowsChecked rc = check_rows(tasks, n, k);
    char detail[300];
    std::snprintf(detail, sizeof(detail), ": calc_diff %.2e over %zu rows, worst error %.2f of its bound, %lld out of "
                  "bounds, %lld elements changed where nothing may be written", rc.diff, tasks.size(), rc.worst,
                  static_cast<long long>(rc.bad), static_cast<long long>(changed));
    report(!tasks.empty() && rc.bad == 0 && changed == 0 && rc.diff < 1e-5 && std::isfinite(rc.diff), name + detail);
  } catch (const std::exception& e) {
    report(false, name + ": " + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool grouped_only = mode == "--grouped", quick = mode == "--quick", layouts_only = mode == "--layouts";
  if (!kiln::gpu_test::start_launches("bf16_gemm_test", g_failures)) return 77;
  std::vector<Case> cases;
  // Every dense_bf16 shape at M = 1, 128, 4096 (the plan's kernels).
  const int64_t nk[][2] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168}, {7168, 2048}};
  for (const int64_t m : {1, 128, 4096})
    for (const auto& s : nk) cases.push_back({m, s[0], s[1]});
  // Ragged edges: M, N and K off the tiles, a K tail inside a 64-block, tiny K.
  for (const int64_t m : {1, 37, 200, 1000}) cases.push_back({m, 576, 520});
  cases.push_back({77, 136, 8});
  cases.push_back({3, 8, 72});
  cases.push_back({300, 2112, 7176});
  if (!quick) {
    // One M per kernel of a whole plan.
    for (const int64_t m : {64, 100, 256, 384, 640, 1100, 2000, 3000, 9000}) cases.push_back({m, 7168, 2048});
    // Every tile family forced, at a ragged shape and at one with whole tiles.
    const kiln::Bf16GemmOverrides tiles[] = {
        {64, 16, 0, 1},  {64, 48, 0, 1},  {64, 128, 0, 1},  {64, 256, 0, 1}, {64, 64, 0, 2},
        {128, 64, 0, 1}, {128, 112, 0, 2}, {128, 128, 0, 1}, {128, 176, 0, 1}, {128, 256, 0, 1},
        {128, 256, 0, 2}, {256, 64, 0, 1}, {256, 128, 0, 1}, {256, 128, 0, 2}, {128, 128, 2, 1},
        {128, 256, 4, 1}, {128, 192, 5, 2},  // more stages than a whole staging tile leaves room for: stores in passes
    };
    for (const auto& t : tiles) {
      cases.push_back({333, 1000, 1048, t});
      cases.push_back({512, 1024, 2048, t});
    }
    // Fewer rows than a tile (A's short box) in a pair whose second tile lies past M, and a last block of 8 rows.
    cases.push_back({50, 1024, 1048, {128, 128, 0, 2}});
    cases.push_back({200, 1024, 1048, {64, 64, 0, 1}});
    // Padded row strides, fewer SMs, a created stream.
    cases.push_back({500, 2112, 1024, {}, 8, 16, 24});
    cases.push_back({4096, 4096, 1024, {}, 0, 0, 0, 66});
    cases.push_back({1000, 4096, 1024, {128, 256, 0, 2}, 0, 0, 0, 67});
    cases.push_back({256, 2048, 2048, {}, 0, 0, 0, 0, true});
  }
  // MN-major operands (DeepGEMM's nn, tn and tt: B stored [k, n], A stored [k, m], both): dense and ragged shapes
  // (M off the 64-row boxes, a K tail), forced tiles (64-row, 256-row pairs, 128x256 pairs each loading two boxes of
  // an N-major B, 128x128 pairs, 128x192 alone) and padded strides, with a bf16 D, and with D += A . B^T. The pairs
  // with an N-major B summed wrong in the second CTA until its descriptors' start addresses were masked
  // (ptx::smem_desc_start_units); their M = 512 case has every second m block in a second CTA and none past M.
  for (const auto& [a_mn, b_mn] : {std::pair{false, true}, std::pair{true, false}, std::pair{true, true}}) {
    for (const Case& base : {Case{1, 2112, 7168}, Case{128, 7168, 2048}, Case{4096, 4096, 7168}, Case{37, 576, 520},
                             Case{1000, 136, 72}})
      cases.push_back(with_layout(base, a_mn, b_mn));
    cases.push_back(with_layout(with_form({300, 2112, 7176}, Form::kAddInPlace), a_mn, b_mn));
    if (quick) continue;
    for (const kiln::Bf16GemmOverrides& t :
         {kiln::Bf16GemmOverrides{64, 64, 0, 1}, kiln::Bf16GemmOverrides{256, 128, 0, 2},
          kiln::Bf16GemmOverrides{128, 256, 0, 2}, kiln::Bf16GemmOverrides{128, 192, 0, 1}})
      cases.push_back(with_layout({333, 1024, 1048, t}, a_mn, b_mn));
    cases.push_back(with_layout({512, 1024, 1024, {128, 128, 0, 2}}, a_mn, b_mn));
    cases.push_back(with_layout({500, 2112, 1024, {}, 8, 16, 24}, a_mn, b_mn));
  }
  // The float32 forms: each on dense and ragged shapes (the plan's kernels), and forced tiles that cover the fp32
  // epilogue's variants: 16-column boxes (64x48), 32-column boxes in pairs (128x192), two waves (256x128 pairs), and
  // 128x256 with four stages, stored in four passes of 64 columns.
  for (const Form form : {Form::kF32, Form::kAddInPlace, Form::kAddFromC}) {
    for (const Case& base : {Case{1, 2112, 7168}, Case{128, 7168, 2048}, Case{4096, 4096, 7168}, Case{37, 576, 520},
                             Case{1000, 136, 72}})
      cases.push_back(with_form(base, form));
    if (quick) continue;
    for (const kiln::Bf16GemmOverrides& t :
         {kiln::Bf16GemmOverrides{64, 48, 0, 1}, kiln::Bf16GemmOverrides{128, 192, 0, 2},
          kiln::Bf16GemmOverrides{256, 128, 0, 2}, kiln::Bf16GemmOverrides{128, 256, 4, 1}})
      cases.push_back(with_form({333, 1000, 1048, t}, form));
    cases.push_back(with_form({500, 2112, 1024, {}, 8, 16, 24}, form));
    cases.push_back(with_form({256, 2048, 2048, {}, 0, 0, 0, 0, true}, form));
  }
  if (!grouped_only)
    for (const Case& c : cases)
      if (!layouts_only || c.a_mn || c.b_mn) run_case(c);

  // The m-grouped contiguous form: group mixes with empty groups, -1 rows padding each group to 128 and blocks of
  // padding only, one group, a ragged N and K (576 x 520), forced 64- and 128-row tiles, and out-of-range indices.
  const std::vector<int64_t> mix6 = {37, 0, 300, 128, 1, 200};
  std::vector<ContiguousCase> contiguous = {{mix6, 576, 520, {}, 2},
                                            {mix6, 576, 520, {}, 1, 0, 2, 6}};
  std::vector<MaskedCase> masked;
  // Counts for groups of m rows: ragged, none, all, past m (clamped to m), negative (none), one, m - 1, 64.
  const auto counts_for = [](int64_t m) { return std::vector<int64_t>{37, 0, m, m + 100, -5, 1, m - 1, 64}; };
  masked.push_back({counts_for(192), 192, 576, 520, 96, {}, true});
  if (!quick) {
    std::vector<int64_t> random_sizes;  // rows in 0..599, drawn once
    for (uint64_t g = 0; g < 8; ++g) random_sizes.push_back(static_cast<int64_t>(mix(0x6a09e667ull + g) % 600));
    const std::vector<ContiguousCase> more = {
        {{128, 0, 384, 256}, 4096, 7168},
        {random_sizes, 7168, 2048, {}, 1},
        {{1000}, 2112, 7168},
        {{128}, 2112, 7168},
        {{37}, 576, 520},
        {mix6, 576, 520, {}, 0, 8},  // padded strides of A, B and D
        {mix6, 576, 520, {64, 64, 0, 0}, 2},
        {mix6, 576, 520, {128, 128, 0, 0}, 1},
        {mix6, 576, 520, {128, 256, 0, 0}, 1},
        {random_sizes, 7168, 2048, {64, 64, 0, 0}},
        {{128, 0, 384, 256}, 4096, 7168, {128, 256, 0, 0}},
        // -5 in a block of group 2 (rows 256..383), 64-row tiles: both of its m blocks start with it.
        {{128, 0, 384, 256}, 576, 520, {64, 64, 0, 0}, 0, 0, 2, -5},
        {random_sizes, 7168, 2048, {128, 128, 0, 0}, 0, 0, 1, 8},
        // A buffer mostly padding (a serving engine's worst-case size): the producer and the math warps skip the same
        // blocks, among their valid ones (tiles walk m first).
        {mix6, 4096, 2048, {}, 24},
        {mix6, 4096, 2048, {64, 64, 0, 0}, 13},
        // The nn form (B stored [G, k, n]): the plan's tiles, forced 64- and 128-row tiles, a K tail inside a box (520:
        // each expert's plane zero-fills it, where one 2-D map would read the next expert's rows), padded strides, a
        // bad block and a tail of padding blocks.
        {mix6, 576, 520, {}, 2, 0, -1, 0, true},
        {mix6, 576, 520, {64, 64, 0, 0}, 1, 8, -1, 0, true},
        {mix6, 576, 520, {128, 256, 0, 0}, 0, 0, 3, 9, true},
        {random_sizes, 7168, 2048, {}, 3, 0, -1, 0, true},
        {{128, 0, 384, 256}, 4096, 7168, {128, 128, 0, 0}, 0, 8, -1, 0, true},
    };
    contiguous.insert(contiguous.end(), more.begin(), more.end());
    // The masked form: m of 64, 192 (not a multiple of 128: a group's last 128-row block reads the next group's rows
    // of A, and must not write past its plane) and 256, expected_m m / 2 and a decode count, dense and padded D, and
    // forced tiles.
    masked.push_back({counts_for(64), 64, 7168, 2048, 32});
    masked.push_back({counts_for(64), 64, 4096, 7168, 4, {}, true});
    masked.push_back({{37, 0, 256, 1000, -3, 129}, 256, 2112, 7168, 128, {}, true});
    masked.push_back({{200, 256, 0, 37}, 256, 4096, 7168, 4});
    masked.push_back({{5, 192, 0, 191, 100}, 192, 7168, 2048, 192});
    for (const kiln::Bf16GemmOverrides& t : {kiln::Bf16GemmOverrides{64, 64, 0, 0},
                                             kiln::Bf16GemmOverrides{128, 128, 0, 0},
                                             kiln::Bf16GemmOverrides{128, 256, 0, 0}})
      masked.push_back({counts_for(192), 192, 576, 520, 96, t, true});
    masked.push_back({counts_for(256), 256, 7168, 2048, 128, {64, 64, 0, 0}});
  }
  uint64_t seed = 0x51ed270b;
  if (!layouts_only) {
    for (const ContiguousCase& c : contiguous) run_contiguous(c, seed++);
    for (const MaskedCase& c : masked) run_masked(c, seed++);
  }
  if (!grouped_only && !layouts_only) check_errors();
  std::printf("%s: %d failures\n", g_failures ? "FAIL" : "PASS", g_failures);
  return g_failures ? 1 : 0;
}
