// GPU test of the FP8 GEMM's weight-gradient form through the public C++ API:
//
//   D[m, n] (fp32) = C + (A * sfa) . (B * sfb)^T      A and B e4m3, both scaled per row per 128 K (1 x 128)
//
// with the three ways of giving C: D itself (kiln::fp8_gemm_nt_accumulate, and kiln::fp8_gemm_nt_wgrad with
// c = &d), a separate fp32 tensor (copied into D on the stream first), and none (D zeroed first). Shapes are
// typical weight gradients (m x n = a weight's shape, k = tokens): 7168 x 2112 x 4096, 2048 x 7168 x 8192,
// a ragged 200 x 576 x 720 (M, N not multiples of any tile, a K tail), N = 584 (an odd multiple of 8: B's rows
// in plain order, not interleaved), M = 1 and 37, padded row strides of D
// and C and padded column strides of both scale tensors, a created non-blocking stream, PDL switched on (the
// kernel must still see the copy of C into D).
//
// Inputs are fresh random data every run (the seed is printed; `--seed N` repeats a run), never zeros: A and
// B have magnitudes spread over 2^-4..2^4 per row and 128-K block, and are quantised the DeepSeek way, per
// row per 128 K with scale = amax / 448. C is random too, of the product's size, so a wrong C or a lost
// product cannot hide behind the other. D is filled with C (accumulating cases) or with NaN (the others);
// the padding columns of D (ldd > n) and one guard row after D are NaN-poisoned and must stay untouched.
//
// Checks per case: no NaN/Inf in D; DeepGEMM's calc_diff (1 - 2 sum(xy) / sum(x^2 + y^2)) on checked rows
// (all for m <= 256, else 64: first, last, tile edges, random) of D against the float64 reference
// C + dequant(A) . dequant(B)^T (< 1e-5), of D - C against dequant(A) . dequant(B)^T alone (< 1e-5, so a
// product lost under C shows), and of D - C against the unquantised product (< 1e-3); over ALL of D, the row
// sums and column sums of D - C against the reference's (calc_diff < 1e-4: a tile missing or added twice
// anywhere moves them by ~1e-3); padding, guard row and a separate C unchanged.
//
// The k-grouped call (kiln::k_grouped_fp8_gemm_nt_contiguous, one launch per 32 groups with tokens) is checked
// per group the same way (run_k_grouped), with D's groups apart (a poisoned gap row between them) and empty groups.
//
// Timing (informational): the two large shapes, CUDA events, 512 MB memset before each call (L2 flush),
// median of 20 after 3 warm-ups, TFLOPS printed.
//
// Prints PASS/FAIL lines; exit 0 only if all pass, 77 when there is no GPU (after precompiling the kernels,
// which needs none), 1 otherwise.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
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

using kiln::gpu_test::DeviceBuffer;
using kiln::gpu_test::magnitude;
using kiln::gpu_test::mix;
using kiln::gpu_test::parallel_for;
using kiln::gpu_test::e4m3_to_double;
using kiln::gpu_test::float_to_e4m3;
using kiln::gpu_test::e4m3_lut;
using kiln::gpu_test::dot;
using kiln::gpu_test::calc_diff;
using kiln::gpu_test::Timing;
using kiln::gpu_test::g_failures;
using kiln::gpu_test::report;

const kiln::cuda::DriverApi& cu() { return kiln::cuda::DriverApi::get(); }

// ---- random inputs ------------------------------------------------------------------------------------------------

// Uniform in [-1, 1), never exactly 0 (an all-zero input would hide a kernel that adds nothing).
float uniform_nonzero(uint64_t h) {
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
  return u == 0.0f ? 0.5f : u;
}

// One operand quantised per row per 128 K: e4m3 values [rows][k] and scales [rows][kb] (row-major here; the
// cases lay them out MN-major), plus the unquantised values for the exact reference.
struct Operand {
  int64_t rows = 0, k = 0, kb = 0;
  std::vector<float> exact;    // [rows][k]
  std::vector<uint8_t> q;      // [rows][k]
  std::vector<float> scale;    // [rows][kb]
  double dequant(int64_t r, int64_t c) const {
    return e4m3_lut()[q[static_cast<size_t>(r * k + c)]] * static_cast<double>(scale[static_cast<size_t>(r * kb + c / 128)]);
  }
};

Operand make_operand(int64_t rows, int64_t k, uint64_t seed) {
  Operand o;
  o.rows = rows;
  o.k = k;
  o.kb = (k + 127) / 128;
  o.exact.resize(static_cast<size_t>(rows * k));
  o.q.resize(o.exact.size());
  o.scale.resize(static_cast<size_t>(rows * o.kb));
  parallel_for(static_cast<size_t>(rows), [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r)
      for (int64_t b = 0; b < o.kb; ++b) {
        const int64_t k0 = b * 128, k1 = std::min(k, k0 + 128);
        // A magnitude per (row, 128-K block): every scale differs, and each is exercised.
        const float mag = magnitude(mix(seed ^ (r * 0x9e37ull + static_cast<uint64_t>(b) * 0x51ull)));
        float amax = 0;
        for (int64_t c = k0; c < k1; ++c) {
          const float v = mag * uniform_nonzero(mix(seed * 31 + (r << 24) + static_cast<uint64_t>(c)));
          o.exact[r * static_cast<size_t>(k) + static_cast<size_t>(c)] = v;
          amax = std::max(amax, std::fabs(v));
        }
        const float s = std::max(amax, 1e-4f) / 448.0f;
        o.scale[r * static_cast<size_t>(o.kb) + static_cast<size_t>(b)] = s;
        for (int64_t c = k0; c < k1; ++c) {
          const size_t i = r * static_cast<size_t>(k) + static_cast<size_t>(c);
          o.q[i] = float_to_e4m3(o.exact[i] / s);
        }
      }
  });
  return o;
}

// The reference for one (m, n, k): the product (dequantised and exact) for a set of rows, and the row and
// column sums of the whole dequantised product (sum_n P[r, n] = sum_k A[r, k] (sum_n B[n, k]); likewise for
// columns), which check every element of D at O((m + n) k) cost.
struct Reference {
  std::map<int64_t, size_t> index;  // row -> position in q / f
  std::vector<double> q, f;         // [rows][n]
  std::vector<double> row_sums, col_sums;
};

Reference reference(const Operand& a, const Operand& b, const std::vector<int64_t>& rows_in) {
  Reference ref;
  std::vector<int64_t> rows;
  for (int64_t r : rows_in)
    if (ref.index.emplace(r, rows.size()).second) rows.push_back(r);
  const size_t R = rows.size(), K = static_cast<size_t>(a.k), N = static_cast<size_t>(b.rows), M = static_cast<size_t>(a.rows);
  std::vector<double> a_q(R * K), a_f(R * K);
  for (size_t i = 0; i < R; ++i)
    for (size_t c = 0; c < K; ++c) {
      a_q[i * K + c] = a.dequant(rows[i], static_cast<int64_t>(c));
      a_f[i * K + c] = a.exact[static_cast<size_t>(rows[i]) * K + c];
    }
  ref.q.assign(R * N, 0.0);
  ref.f.assign(R * N, 0.0);
  std::vector<double> b_colsum(K, 0.0);  // sum over n of dequantised B[n, k]
  std::mutex sum_mutex;
  parallel_for(N, [&](size_t begin, size_t end) {
    std::vector<double> b_q(K), b_f(K), partial(K, 0.0);
    for (size_t col = begin; col < end; ++col) {
      for (size_t c = 0; c < K; ++c) {
        b_q[c] = b.dequant(static_cast<int64_t>(col), static_cast<int64_t>(c));
        b_f[c] = b.exact[col * K + c];
        partial[c] += b_q[c];
      }
      for (size_t i = 0; i < R; ++i) {
        ref.q[i * N + col] = dot(&a_q[i * K], b_q.data(), K);
        ref.f[i * N + col] = dot(&a_f[i * K], b_f.data(), K);
      }
    }
    std::lock_guard<std::mutex> lock(sum_mutex);
    for (size_t c = 0; c < K; ++c) b_colsum[c] += partial[c];
  });
  std::vector<double> a_rowsum(K, 0.0);  // sum over m of dequantised A[m, k]
  ref.row_sums.assign(M, 0.0);
  parallel_for(M, [&](size_t begin, size_t end) {
    std::vector<double> row(K), partial(K, 0.0);
    for (size_t r = begin; r < end; ++r) {
      for (size_t c = 0; c < K; ++c) {
        row[c] = a.dequant(static_cast<int64_t>(r), static_cast<int64_t>(c));
        partial[c] += row[c];
      }
      ref.row_sums[r] = dot(row.data(), b_colsum.data(), K);
    }
    std::lock_guard<std::mutex> lock(sum_mutex);
    for (size_t c = 0; c < K; ++c) a_rowsum[c] += partial[c];
  });
  ref.col_sums.assign(N, 0.0);
  parallel_for(N, [&](size_t begin, size_t end) {
    std::vector<double> col(K);
    for (size_t n = begin; n < end; ++n) {
      for (size_t c = 0; c < K; ++c) col[c] = b.dequant(static_cast<int64_t>(n), static_cast<int64_t>(c));
      ref.col_sums[n] = dot(a_rowsum.data(), col.data(), K);
    }
  });
  return ref;
}

std::vector<int64_t> rows_to_check(int64_t m, uint64_t seed) {
  std::vector<int64_t> rows;
  if (m <= 256) {
    for (int64_t r = 0; r < m; ++r) rows.push_back(r);
    return rows;
  }
  for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{127}, int64_t{128}, m / 2, m - 2, m - 1})
    rows.push_back(r);
  for (uint64_t i = 0; rows.size() < 64; ++i) rows.push_back(static_cast<int64_t>(mix(seed * 977 + i) % static_cast<uint64_t>(m)));
  return rows;
}

// ---- cases -----------------------------------------------------------------------------------------------------------

enum class Form {
  kAccumulateApi,  // fp8_gemm_nt_accumulate(a, sfa, b, sfb, d)
  kWgradSelf,      // fp8_gemm_nt_wgrad(..., d, &d)
  kWgradSeparate,  // fp8_gemm_nt_wgrad(..., d, &c): C copied into D first
  kWgradZero,      // fp8_gemm_nt_wgrad(..., d, nullptr): D zeroed first
};

const char* form_name(Form f) {
  switch (f) {
    case Form::kAccumulateApi: return "fp8_gemm_nt_accumulate (D += A.B^T)";
    case Form::kWgradSelf: return "fp8_gemm_nt_wgrad c=d (D += A.B^T)";
    case Form::kWgradSeparate: return "fp8_gemm_nt_wgrad c=C (D = C + A.B^T)";
    case Form::kWgradZero: return "fp8_gemm_nt_wgrad c=nullptr (D = A.B^T)";
  }
  return "?";
}

struct Case {
  int64_t m, n, k;
  Form form = Form::kAccumulateApi;
  int64_t ldd_pad = 0, ldc_pad = 0, sfa_pad = 0, sfb_pad = 0;  // elements beyond the tight strides
  bool timed = false;
  bool on_stream = false;  // a created non-blocking stream instead of the legacy default stream
  bool pdl = false;        // set_pdl(true) around the call: the kernel must still wait for the copy of C
};

uint64_t g_seed = 0;
std::vector<std::string> g_timings;

// The kernel the public plan says serves one problem (what DG_PRINT_CONFIGS would print), with the
// process-wide tile overrides the launch applies passed as the request's parameters.
std::string kernel_for(int64_t m, int64_t n, int64_t k) {
  kiln::CompileRequest r{"fp8_gemm_nt", {{"m", m}, {"n", n}, {"k", k}, {"accumulate", 1}}, std::nullopt, std::nullopt};
  const kiln::Fp8GemmOverrides o = kiln::get_fp8_gemm_overrides();
  if (o.block_m > 0) r.problem["block_m"] = o.block_m;
  if (o.block_n > 0) r.problem["block_n"] = o.block_n;
  const auto reports = kiln::plan(r);
  if (reports.empty()) return "-";
  const std::string& d = reports[0].detail;
  const size_t colon = d.find(": ");
  return colon == std::string::npos ? d : d.substr(colon + 2);
}

kiln::TensorView view(void* data, kiln::DType dtype, int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  kiln::TensorView t = kiln::TensorView::contiguous(data, dtype, {rows, cols});
  t.strides = {s0, s1, 0, 0};
  return t;
}

// Scales [rows][kb] laid out MN-major with column stride `stride` (padding rows NaN: never read).
std::vector<float> mn_major(const Operand& o, int64_t stride) {
  std::vector<float> out(static_cast<size_t>(o.kb * stride), std::nanf(""));
  for (int64_t r = 0; r < o.rows; ++r)
    for (int64_t b = 0; b < o.kb; ++b) out[static_cast<size_t>(b * stride + r)] = o.scale[static_cast<size_t>(r * o.kb + b)];
  return out;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

constexpr uint32_t kPoison = 0xffffffffu;  // a NaN as fp32: what DeviceBuffer::poison writes

// One shape's operands on the device (A and B as tight row-major e4m3; the scales per case).
struct ShapeData {
  Operand a, b;
  std::unique_ptr<DeviceBuffer> da, db;
};

void run_case(const Case& c, const ShapeData& s, const Reference& ref, Timing& timing) {
  const int64_t m = c.m, n = c.n, k = c.k, kb = s.a.kb;
  const int64_t ldd = n + c.ldd_pad, ldc = n + c.ldc_pad;
  const int64_t sfa_stride = kiln::get_tma_aligned_size(m, 4) + c.sfa_pad;
  const int64_t sfb_stride = kiln::get_tma_aligned_size(n, 4) + c.sfb_pad;
  char name[320];
  std::snprintf(name, sizeof name, "m=%lld n=%lld k=%lld ldd=%lld%s%s%s %s%s%s [%s]", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(ldd),
                c.form == Form::kWgradSeparate ? (" ldc=" + std::to_string(ldc)).c_str() : "",
                c.sfa_pad ? " sfa-stride+pad" : "", c.sfb_pad ? " sfb-stride+pad" : "", form_name(c.form),
                c.on_stream ? " on a created non-blocking stream" : "", c.pdl ? " with PDL on" : "",
                kernel_for(m, n, k).c_str());
  try {
    // C: random, of the product's typical size (the reference rows' rms), in [m][n] (host) and as laid out.
    double rms = 0;
    for (double v : ref.q) rms += v * v;
    rms = ref.q.empty() ? 1.0 : std::sqrt(rms / static_cast<double>(ref.q.size()));
    std::vector<float> c_host(static_cast<size_t>(m * n));
    const uint64_t c_seed = mix(g_seed ^ static_cast<uint64_t>(m * 7 + n * 13 + k * 17 + static_cast<int64_t>(c.form)));
    parallel_for(static_cast<size_t>(m), [&](size_t begin, size_t end) {
      for (size_t r = begin; r < end; ++r)
        for (int64_t col = 0; col < n; ++col)
          c_host[r * static_cast<size_t>(n) + static_cast<size_t>(col)] =
              static_cast<float>(rms) * uniform_nonzero(mix(c_seed + (r << 24) + static_cast<uint64_t>(col)));
    });
    const bool has_c = c.form != Form::kWgradZero;

    // D with padding columns and a guard row, poisoned; for the accumulating forms its first m x n hold C.
    DeviceBuffer d(static_cast<size_t>((m + 1) * ldd) * 4);
    d.poison();
    std::vector<float> rows_buf(static_cast<size_t>(m * ldd));
    if (c.form == Form::kAccumulateApi || c.form == Form::kWgradSelf) {
      for (size_t i = 0; i < rows_buf.size(); ++i) std::memcpy(&rows_buf[i], &kPoison, 4);
      for (int64_t r = 0; r < m; ++r)
        std::memcpy(&rows_buf[static_cast<size_t>(r * ldd)], &c_host[static_cast<size_t>(r * n)], static_cast<size_t>(n) * 4);
      d.upload(rows_buf.data(), rows_buf.size() * 4);
    }
    // A separate C with its own row stride (padding NaN: must not be copied into D's padding).
    std::unique_ptr<DeviceBuffer> dc;
    std::vector<float> c_laid;
    if (c.form == Form::kWgradSeparate) {
      c_laid.assign(static_cast<size_t>(m * ldc), std::nanf(""));
      for (int64_t r = 0; r < m; ++r)
        std::memcpy(&c_laid[static_cast<size_t>(r * ldc)], &c_host[static_cast<size_t>(r * n)], static_cast<size_t>(n) * 4);
      dc = std::make_unique<DeviceBuffer>(c_laid.size() * 4);
      dc->upload(c_laid.data(), c_laid.size() * 4);
    }
    const std::vector<float> sfa = mn_major(s.a, sfa_stride), sfb = mn_major(s.b, sfb_stride);
    DeviceBuffer dsfa(sfa.size() * 4), dsfb(sfb.size() * 4);
    dsfa.upload(sfa.data(), sfa.size() * 4);
    dsfb.upload(sfb.data(), sfb.size() * 4);

    const kiln::TensorView ta = view(s.da->data(), kiln::DType::kFloat8E4M3, m, k, k, 1);
    const kiln::TensorView tb = view(s.db->data(), kiln::DType::kFloat8E4M3, n, k, k, 1);
    const kiln::TensorView tsfa = view(dsfa.data(), kiln::DType::kFloat32, m, kb, 1, sfa_stride);
    const kiln::TensorView tsfb = view(dsfb.data(), kiln::DType::kFloat32, n, kb, 1, sfb_stride);
    const kiln::TensorView td = view(d.data(), kiln::DType::kFloat32, m, n, ldd, 1);
    const kiln::TensorView tc = dc ? view(dc->data(), kiln::DType::kFloat32, m, n, ldc, 1) : td;

    CUstream stream = nullptr;
    if (c.on_stream) KILN_CU_CHECK(cu().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    const auto call = [&](CUstream st) {
      switch (c.form) {
        case Form::kAccumulateApi: kiln::fp8_gemm_nt_accumulate(ta, tsfa, tb, tsfb, td, st); break;
        case Form::kWgradSelf: kiln::fp8_gemm_nt_wgrad(ta, tsfa, tb, tsfb, td, &td, st); break;
        case Form::kWgradSeparate: kiln::fp8_gemm_nt_wgrad(ta, tsfa, tb, tsfb, td, &tc, st); break;
        case Form::kWgradZero: kiln::fp8_gemm_nt_wgrad(ta, tsfa, tb, tsfb, td, nullptr, st); break;
      }
    };
    if (c.pdl) kiln::set_pdl(true);
    try {
      call(stream);
    } catch (...) {
      kiln::set_pdl(false);
      throw;
    }
    kiln::set_pdl(false);
    if (stream) KILN_CU_CHECK(cu().cuStreamSynchronize(stream));
    KILN_CU_CHECK(cu().cuCtxSynchronize());
    if (stream) (void)cu().cuStreamDestroy(stream);

    // All of D (with padding) and the guard row.
    std::vector<float> out(static_cast<size_t>((m + 1) * ldd));
    d.download(out.data());
    bool finite = true, untouched = true;
    std::vector<double> row_sums(static_cast<size_t>(m), 0.0), col_sums(static_cast<size_t>(n), 0.0);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t col = 0; col < ldd; ++col) {
        const float v = out[static_cast<size_t>(r * ldd + col)];
        if (col >= n) {
          untouched = untouched && bits_of(v) == kPoison;
          continue;
        }
        finite = finite && std::isfinite(v);
        const double p = static_cast<double>(v) - (has_c ? static_cast<double>(c_host[static_cast<size_t>(r * n + col)]) : 0.0);
        row_sums[static_cast<size_t>(r)] += p;
        col_sums[static_cast<size_t>(col)] += p;
      }
    }
    for (int64_t col = 0; col < ldd; ++col) untouched = untouched && bits_of(out[static_cast<size_t>(m * ldd + col)]) == kPoison;
    bool c_kept = true;
    if (dc) {
      std::vector<float> c_after(c_laid.size());
      dc->download(c_after.data());
      c_kept = std::memcmp(c_after.data(), c_laid.data(), c_laid.size() * 4) == 0;
    }

    // The checked rows against the float64 references.
    std::vector<double> got, got_minus_c, want_total, want_q, want_f;
    for (int64_t r : rows_to_check(m, static_cast<uint64_t>(m * 131 + n))) {
      const size_t at = ref.index.at(r) * static_cast<size_t>(n);
      for (int64_t col = 0; col < n; ++col) {
        const double v = out[static_cast<size_t>(r * ldd + col)];
        const double cv = has_c ? static_cast<double>(c_host[static_cast<size_t>(r * n + col)]) : 0.0;
        got.push_back(v);
        got_minus_c.push_back(v - cv);
        want_total.push_back(cv + ref.q[at + static_cast<size_t>(col)]);
        want_q.push_back(ref.q[at + static_cast<size_t>(col)]);
        want_f.push_back(ref.f[at + static_cast<size_t>(col)]);
      }
    }
    const double diff_total = calc_diff(got, want_total), diff_q = calc_diff(got_minus_c, want_q);
    const double diff_f = calc_diff(got_minus_c, want_f);
    const double diff_rows = calc_diff(row_sums, ref.row_sums), diff_cols = calc_diff(col_sums, ref.col_sums);
    const bool ok = finite && untouched && c_kept && diff_total < 1e-5 && diff_q < 1e-5 && diff_f < 1e-3 &&
                    diff_rows < 1e-4 && diff_cols < 1e-4;
    char line[900];
    std::snprintf(line, sizeof line,
                  "%s: calc_diff %.3g (D vs C + dequantised product, < 1e-5), %.3g (D - C vs dequantised product, "
                  "< 1e-5), %.3g (D - C vs exact product, < 1e-3), all rows/columns sums %.3g / %.3g (< 1e-4)%s%s%s%s",
                  name, diff_total, diff_q, diff_f, diff_rows, diff_cols, finite ? "" : ", NON-FINITE OUTPUT",
                  untouched ? "" : ", WROTE OUTSIDE D (padding columns or guard row)", c_kept ? "" : ", C CHANGED",
                  ok ? "" : (", seed " + std::to_string(g_seed)).c_str());
    report(ok, line);

    if (ok && c.timed) {
      // D keeps accumulating across the repetitions: the values grow, the work does not change.
      const double us = timing.median_us([&] { call(nullptr); });
      const double tflops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / (us * 1e-6) / 1e12;
      const double bytes = static_cast<double>(m * k + n * k) + 4.0 * static_cast<double>(kb * (m + n)) +
                           (c.form == Form::kWgradZero ? 4.0 : 8.0) * static_cast<double>(m * n);
      std::snprintf(line, sizeof line, "m=%-5lld n=%-5lld k=%-5lld %-40s %-70s %8.1f us %7.1f TFLOPS %6.0f GB/s",
                    static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), form_name(c.form),
                    kernel_for(m, n, k).c_str(), us, tflops, bytes / (us * 1e-6) / 1e9);
      g_timings.push_back(line);
      std::printf("time %s\n", line);
    }
  } catch (const std::exception& e) {
    report(false, std::string(name) + ": " + e.what() + " (seed " + std::to_string(g_seed) + ")");
  }
}

// Generates one shape's data and reference, then runs its cases (all with that shape's m, n, k).
void run_shape(const std::vector<Case>& cases, uint64_t salt, Timing& timing) {
  const int64_t m = cases[0].m, n = cases[0].n, k = cases[0].k;
  const auto t0 = std::chrono::steady_clock::now();
  ShapeData s;
  s.a = make_operand(m, k, mix(g_seed ^ (salt * 2 + 1)));
  s.b = make_operand(n, k, mix(g_seed ^ (salt * 2 + 2)));
  std::vector<int64_t> rows = rows_to_check(m, static_cast<uint64_t>(m * 131 + n));
  const Reference ref = reference(s.a, s.b, rows);
  std::printf("(m=%lld n=%lld k=%lld: inputs and reference (%zu rows, all row/column sums) in %.1f s)\n",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), ref.index.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  s.da = std::make_unique<DeviceBuffer>(s.a.q.size());
  s.db = std::make_unique<DeviceBuffer>(s.b.q.size());
  s.da->upload(s.a.q.data(), s.a.q.size());
  s.db->upload(s.b.q.data(), s.b.q.size());
  for (const Case& c : cases) run_case(c, s, ref, timing);
}

// ---- the k-grouped call (k_grouped_fp8_gemm_nt_contiguous) ------------------------------------------------------

enum class GroupedC { kSelf, kSeparate, kNone };

// G groups of ks[g] tokens in DeepGEMM's layout: A and B flat (group g's [rows, ks[g]] row-major after the groups
// before it), their scales MN-major over every group's K blocks, D [G, m, n] with a poisoned gap row between the
// groups (its plane stride (m + 1) * n: not packed) and C [G, m, n] packed. Checks per group with tokens: the
// checked rows against C + the float64 dequantised product (< 1e-5), D - C against that product (< 1e-5) and all of
// the group's row and column sums (< 1e-4); per empty group D = C bit for bit (zeros without C); the gap rows and
// a separate C untouched; nothing non-finite.
void run_k_grouped(int64_t m, int64_t n, const std::vector<int64_t>& ks, GroupedC mode, uint64_t salt,
                   const char* note = "") {
  const auto groups = static_cast<int64_t>(ks.size());
  int64_t total = 0, with_tokens = 0;
  for (int64_t k : ks) {
    total += k;
    with_tokens += k > 0 ? 1 : 0;
  }
  const int64_t total_kb = total / 128;
  char name[320];
  std::snprintf(name, sizeof name,
                "k_grouped_fp8_gemm_nt_contiguous m=%lld n=%lld, %lld groups (%lld with tokens, %lld tokens), c=%s%s", static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(groups),
                static_cast<long long>(with_tokens), static_cast<long long>(total),
                mode == GroupedC::kSelf ? "d" : mode == GroupedC::kSeparate ? "C" : "None", note);
  try {
    std::vector<Operand> as, bs;
    std::vector<Reference> refs;
    const std::vector<int64_t> rows = rows_to_check(m, static_cast<uint64_t>(m * 131 + n));
    const int64_t sfa_stride = kiln::get_tma_aligned_size(m, 4), sfb_stride = kiln::get_tma_aligned_size(n, 4);
    std::vector<uint8_t> a_flat, b_flat;
    std::vector<float> sfa(static_cast<size_t>(std::max<int64_t>(total_kb, 1) * sfa_stride), std::nanf(""));
    std::vector<float> sfb(static_cast<size_t>(std::max<int64_t>(total_kb, 1) * sfb_stride), std::nanf(""));
    int64_t kb0 = 0;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t k = ks[static_cast<size_t>(g)];
      as.push_back(k ? make_operand(m, k, mix(g_seed ^ (salt * 977 + static_cast<uint64_t>(2 * g + 1)))) : Operand{});
      bs.push_back(k ? make_operand(n, k, mix(g_seed ^ (salt * 977 + static_cast<uint64_t>(2 * g + 2)))) : Operand{});
      refs.push_back(k ? reference(as.back(), bs.back(), rows) : Reference{});
      if (!k) continue;
      a_flat.insert(a_flat.end(), as.back().q.begin(), as.back().q.end());
      b_flat.insert(b_flat.end(), bs.back().q.begin(), bs.back().q.end());
      const int64_t kb = k / 128;
      for (int64_t b = 0; b < kb; ++b) {
        for (int64_t r = 0; r < m; ++r)
          sfa[static_cast<size_t>((kb0 + b) * sfa_stride + r)] = as.back().scale[static_cast<size_t>(r * kb + b)];
        for (int64_t r = 0; r < n; ++r)
          sfb[static_cast<size_t>((kb0 + b) * sfb_stride + r)] = bs.back().scale[static_cast<size_t>(r * kb + b)];
      }
      kb0 += k / 128;
    }
    // C per group, of the products' size.
    double rms = 0;
    size_t count = 0;
    for (const Reference& r : refs)
      for (double v : r.q) {
        rms += v * v;
        ++count;
      }
    rms = count ? std::sqrt(rms / static_cast<double>(count)) : 1.0;
    std::vector<float> c_host(static_cast<size_t>(groups * m * n));
    for (size_t i = 0; i < c_host.size(); ++i)
      c_host[i] = static_cast<float>(rms) * uniform_nonzero(mix(g_seed * 7919 + salt * 131 + i));
    // D: G planes of m rows and a gap row each, poisoned; with c=d its rows hold C.
    const int64_t plane = (m + 1) * n;
    std::vector<float> d_host(static_cast<size_t>(groups * plane));
    for (float& v : d_host) std::memcpy(&v, &kPoison, 4);
    if (mode == GroupedC::kSelf)
      for (int64_t g = 0; g < groups; ++g)
        std::memcpy(&d_host[static_cast<size_t>(g * plane)], &c_host[static_cast<size_t>(g * m * n)],
                    static_cast<size_t>(m * n) * 4);
    DeviceBuffer da(std::max<size_t>(a_flat.size(), 16)), db(std::max<size_t>(b_flat.size(), 16));
    DeviceBuffer dsfa(sfa.size() * 4), dsfb(sfb.size() * 4), dd(d_host.size() * 4), dc(c_host.size() * 4);
    if (!a_flat.empty()) da.upload(a_flat.data(), a_flat.size());
    if (!b_flat.empty()) db.upload(b_flat.data(), b_flat.size());
    dsfa.upload(sfa.data(), sfa.size() * 4);
    dsfb.upload(sfb.data(), sfb.size() * 4);
    dd.upload(d_host.data(), d_host.size() * 4);
    dc.upload(c_host.data(), c_host.size() * 4);

    kiln::TensorView ta = kiln::TensorView::contiguous(da.data(), kiln::DType::kFloat8E4M3, {m * total});
    kiln::TensorView tb = kiln::TensorView::contiguous(db.data(), kiln::DType::kFloat8E4M3, {n * total});
    const kiln::TensorView tsfa = view(dsfa.data(), kiln::DType::kFloat32, m, total_kb, 1, sfa_stride);
    const kiln::TensorView tsfb = view(dsfb.data(), kiln::DType::kFloat32, n, total_kb, 1, sfb_stride);
    kiln::TensorView td = kiln::TensorView::contiguous(dd.data(), kiln::DType::kFloat32, {groups, m, n});
    td.strides = {plane, n, 1, 0};
    const kiln::TensorView tc = kiln::TensorView::contiguous(dc.data(), kiln::DType::kFloat32, {groups, m, n});
    const kiln::TensorView* c_arg = mode == GroupedC::kSelf ? &td : mode == GroupedC::kSeparate ? &tc : nullptr;
    kiln::k_grouped_fp8_gemm_nt_contiguous(ta, tsfa, tb, tsfb, td, ks, c_arg, nullptr);
    KILN_CU_CHECK(cu().cuCtxSynchronize());

    std::vector<float> out(d_host.size()), c_after(c_host.size());
    dd.download(out.data());
    dc.download(c_after.data());
    bool finite = true, gaps = true, empties = true;
    double worst_total = 0, worst_q = 0, worst_sums = 0;
    const bool has_c = mode != GroupedC::kNone;
    for (int64_t g = 0; g < groups; ++g) {
      const float* dg = &out[static_cast<size_t>(g * plane)];
      const float* cg = &c_host[static_cast<size_t>(g * m * n)];
      for (int64_t col = 0; col < n; ++col) gaps = gaps && bits_of(dg[m * n + col]) == kPoison;
      const int64_t k = ks[static_cast<size_t>(g)];
      if (!k) {
        for (int64_t i = 0; i < m * n; ++i) empties = empties && bits_of(dg[i]) == bits_of(has_c ? cg[i] : 0.0f);
        continue;
      }
      const Reference& ref = refs[static_cast<size_t>(g)];
      std::vector<double> row_sums(static_cast<size_t>(m), 0.0), col_sums(static_cast<size_t>(n), 0.0);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t col = 0; col < n; ++col) {
          const float v = dg[r * n + col];
          finite = finite && std::isfinite(v);
          const double p = static_cast<double>(v) - (has_c ? static_cast<double>(cg[r * n + col]) : 0.0);
          row_sums[static_cast<size_t>(r)] += p;
          col_sums[static_cast<size_t>(col)] += p;
        }
      std::vector<double> got, got_minus_c, want_total, want_q;
      for (int64_t r : rows) {
        const size_t at = ref.index.at(r) * static_cast<size_t>(n);
        for (int64_t col = 0; col < n; ++col) {
          const double v = dg[r * n + col], cv = has_c ? static_cast<double>(cg[r * n + col]) : 0.0;
          got.push_back(v);
          got_minus_c.push_back(v - cv);
          want_total.push_back(cv + ref.q[at + static_cast<size_t>(col)]);
          want_q.push_back(ref.q[at + static_cast<size_t>(col)]);
        }
      }
      worst_total = std::max(worst_total, calc_diff(got, want_total));
      worst_q = std::max(worst_q, calc_diff(got_minus_c, want_q));
      worst_sums = std::max({worst_sums, calc_diff(row_sums, ref.row_sums), calc_diff(col_sums, ref.col_sums)});
    }
    const bool c_kept = std::memcmp(c_after.data(), c_host.data(), c_host.size() * 4) == 0;
    const bool ok = finite && gaps && empties && c_kept && worst_total < 1e-5 && worst_q < 1e-5 && worst_sums < 1e-4;
    char line[900];
    std::snprintf(line, sizeof line,
                  "%s: worst group calc_diff %.3g (D vs C + dequantised product, < 1e-5), %.3g (D - C vs the product, "
                  "< 1e-5), sums %.3g (< 1e-4)%s%s%s%s%s",
                  name, worst_total, worst_q, worst_sums, finite ? "" : ", NON-FINITE OUTPUT",
                  gaps ? "" : ", WROTE INTO THE GAP ROWS", empties ? "" : ", AN EMPTY GROUP IS NOT C",
                  c_kept ? "" : ", C CHANGED", ok ? "" : (", seed " + std::to_string(g_seed)).c_str());
    report(ok, line);
  } catch (const std::exception& e) {
    report(false, std::string(name) + ": " + e.what() + " (seed " + std::to_string(g_seed) + ")");
  }
}

// The test's own quantiser and reference: the dequantised product is close to the exact one, and the
// all-elements sums agree with a direct sum of the product.
void check_host_reference() {
  const Operand a = make_operand(16, 1024, mix(g_seed ^ 0x1234)), b = make_operand(256, 1024, mix(g_seed ^ 0x5678));
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < 16; ++r) rows.push_back(r);
  const Reference ref = reference(a, b, rows);
  const double diff = calc_diff(ref.q, ref.f);
  std::vector<double> rs(16, 0.0), cs(256, 0.0);
  for (size_t r = 0; r < 16; ++r)
    for (size_t col = 0; col < 256; ++col) {
      rs[r] += ref.q[r * 256 + col];
      cs[col] += ref.q[r * 256 + col];
    }
  const double sums = std::max(calc_diff(rs, ref.row_sums), calc_diff(cs, ref.col_sums));
  char line[200];
  std::snprintf(line, sizeof line, "host quantiser: calc_diff(dequantised, exact) = %.3g (in (0, 1e-3)); sums identity %.3g "
                "(< 1e-12)", diff, sums);
  report(diff > 0 && diff < 1e-3 && std::fabs(sums) < 1e-12, line);
}

}  // namespace

int main(int argc, char** argv) {
  g_seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) {
      g_seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--seed N]\n", argv[0]);
      return 2;
    }
  }
  std::printf("fp8_gemm_wgrad_test: seed %llu (repeat with --seed %llu)\n", static_cast<unsigned long long>(g_seed),
              static_cast<unsigned long long>(g_seed));

  // The shapes and their cases.
  std::vector<std::vector<Case>> shapes;
  {
    std::vector<Case> big;  // a typical weight gradient: 7168 x 2112 weights, 4096 tokens
    big.push_back(Case{7168, 2112, 4096, Form::kAccumulateApi, 0, 0, 0, 0, true});
    big.push_back(Case{7168, 2112, 4096, Form::kWgradZero});
    big.push_back(Case{7168, 2112, 4096, Form::kWgradSelf, 8});  // ldd = 2120 > n
    shapes.push_back(big);
    std::vector<Case> wide;  // 2048 x 7168 weights, 8192 tokens
    wide.push_back(Case{2048, 7168, 8192, Form::kWgradSelf, 0, 0, 0, 0, true});
    wide.push_back(Case{2048, 7168, 8192, Form::kWgradSeparate, 64, 32});
    shapes.push_back(wide);
    std::vector<Case> ragged;  // M and N not multiples of any tile, a K tail (720 = 5 x 128 + 80)
    ragged.push_back(Case{200, 576, 720, Form::kAccumulateApi});
    ragged.push_back(Case{200, 576, 720, Form::kWgradZero});
    ragged.push_back(Case{200, 576, 720, Form::kWgradSeparate, 8, 24, 8, 8, false, true});
    ragged.push_back(Case{200, 576, 720, Form::kWgradSelf, 8, 0, 4, 4});
    ragged.push_back(Case{200, 576, 720, Form::kWgradZero, 0, 0, 0, 0, false, false, true});
    ragged.push_back(Case{200, 576, 720, Form::kWgradSeparate, 0, 0, 0, 0, false, false, true});
    shapes.push_back(ragged);
    shapes.push_back({Case{37, 576, 720, Form::kAccumulateApi}, Case{37, 576, 720, Form::kWgradZero, 8}});
    shapes.push_back({Case{1, 2112, 4096, Form::kWgradSeparate}, Case{1, 2112, 4096, Form::kAccumulateApi}});
    // N an odd multiple of 8: B's rows in their plain order (fp8_gemm_interleaved_b needs N % 16 == 0). (Every
    // case of a shape shares its M, N and K: the inputs and the reference are made once per shape.)
    shapes.push_back({Case{200, 584, 720, Form::kAccumulateApi}, Case{200, 584, 720, Form::kWgradSelf, 8}});
    // B over 32 MiB at short K: the plan's tiles walk groups of 16 m units; 18 m blocks make a whole group and
    // a partial one.
    shapes.push_back({Case{2200, 24576, 1536, Form::kAccumulateApi}});
  }

  // Precompile every kernel the cases need (needs no GPU): the launches below then only load.
  try {
    std::vector<kiln::CompileRequest> requests;
    for (const auto& cases : shapes) {
      kiln::CompileRequest r{"fp8_gemm_nt", {{"n", cases[0].n}, {"k", cases[0].k}, {"accumulate", 1}, {"m", cases[0].m}},
                             std::nullopt, std::nullopt};
      requests.push_back(r);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto reports = kiln::precompile(requests, kiln::PrecompileOptions{});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    size_t hits = 0;
    bool all_accumulate = true;
    for (const auto& r : reports) {
      hits += r.hit ? 1 : 0;
      all_accumulate = all_accumulate && r.spec.find("accumulate=true") != std::string::npos;
    }
    char line[240];
    std::snprintf(line, sizeof line, "precompile: %zu weight-gradient kernels (%zu already cached) for %zu shapes in %.2f s with %s",
                  reports.size(), hits, shapes.size(), secs, reports.empty() ? "-" : kiln::to_string(reports[0].backend));
    report(!reports.empty() && all_accumulate, line);
  } catch (const std::exception& e) {
    report(false, std::string("precompile: ") + e.what());
  }
  check_host_reference();

  try {
    if (!kiln::gpu_test::start_launches("fp8_gemm_wgrad_test", g_failures)) return g_failures ? 1 : 77;
    Timing timing;
    uint64_t salt = 1;
    for (const auto& cases : shapes) run_shape(cases, salt++, timing);
    // Tiles forced, since the heuristic picks few of them for these shapes: the wide ones issue each K block
    // in two column slices when the promotion overlaps (160, 176 and 192 columns); 128x128 reads 12 of each
    // thread's 16 chunks of B scales ahead of the WGMMA wait and the other 4 in the promotion
    // (kEarlyScaleChunks), 64x128 and 128x64 all of them. Ragged N (576 is no multiple of any), a K tail, and a
    // persistent walk over several tiles per CTA.
    for (const auto& [block_m, block_n] : {std::pair{128, 160}, {128, 176}, {128, 192}, {128, 128}, {64, 128},
                                           {128, 64}}) {
      kiln::Fp8GemmOverrides o;
      o.block_m = block_m;
      o.block_n = block_n;
      kiln::set_fp8_gemm_overrides(o);
      run_shape({Case{200, 576, 720, Form::kWgradSelf}, Case{200, 576, 720, Form::kWgradZero, 8}}, salt++, timing);
      run_shape({Case{1000, 2112, 2048, Form::kAccumulateApi}}, salt++, timing);
      // 160 and 176 read B interleaved where N is a multiple of 16 (above), in plain order here.
      run_shape({Case{200, 584, 720, Form::kWgradSelf}}, salt++, timing);
    }
    kiln::set_fp8_gemm_overrides({});

    // One kernel for every token count: the form's kernels take K at run time, so problems that differ only in K
    // (one block of 16, whole blocks, tails, odd and even block counts) run the kernel the first one loaded, with
    // no compile and no read of the disk cache.
    {
      kiln::Fp8GemmOverrides o;
      o.block_m = 128;
      o.block_n = 128;
      kiln::set_fp8_gemm_overrides(o);
      run_shape({Case{300, 1024, 4096, Form::kAccumulateApi}}, salt++, timing);
      const kiln::CacheStats before = kiln::cache_stats();
      for (const int64_t k : {16, 112, 128, 1040, 2960, 6160})
        run_shape({Case{300, 1024, k, k % 128 == 0 ? Form::kWgradSelf : Form::kWgradZero}}, salt++, timing);
      const kiln::CacheStats after = kiln::cache_stats();
      char line[240];
      std::snprintf(line, sizeof line,
                    "six token counts (k = 16..6160) on the kernel of k = 4096: compiles %llu -> %llu, disk hits "
                    "%llu -> %llu, misses %llu -> %llu (all unchanged)",
                    static_cast<unsigned long long>(before.compiles), static_cast<unsigned long long>(after.compiles),
                    static_cast<unsigned long long>(before.hits), static_cast<unsigned long long>(after.hits),
                    static_cast<unsigned long long>(before.misses), static_cast<unsigned long long>(after.misses));
      report(before.compiles == after.compiles && before.hits == after.hits && before.misses == after.misses, line);
      kiln::set_fp8_gemm_overrides({});
    }
    // The plan's own tiles at token counts no other case has (its choice may differ with K; the kernels do not).
    for (const int64_t k : {1008, 3088, 5136}) run_shape({Case{1536, 2112, k, Form::kWgradSelf}}, salt++, timing);

    // The k-grouped call: one launch per 32 groups with tokens that share a kernel, each tile with its group's K.
    // Ragged M and N (a partial last m block, N = 576 no multiple of the tile), an empty group, the three ways of
    // giving C; 40 groups (two launches or more, one of 8 or fewer); then forced tiles: 128x160 reads B interleaved (N
    // a multiple of 16), 128x192 issues each K block in two slices, 64x128 runs one math warpgroup.
    const std::vector<int64_t> ks = {1024, 384, 0, 640, 128};
    run_k_grouped(200, 576, ks, GroupedC::kSelf, salt++);
    run_k_grouped(200, 576, ks, GroupedC::kNone, salt++);
    run_k_grouped(200, 576, ks, GroupedC::kSeparate, salt++);
    std::vector<int64_t> many;
    for (uint64_t g = 0; g < 40; ++g) many.push_back(static_cast<int64_t>(mix(g_seed + g * 31) % 9) * 128);
    many[5] = 0;
    many[33] = 1152;
    run_k_grouped(128, 256, many, GroupedC::kSelf, salt++);
    // Groups on different kernels in one call: with C at 2048 x 2048 the plan takes 64x128 up to 512 tokens and
    // 128x128 from 1024 (`kiln plan fp8_gemm_nt n=2048 m=2048 k=128..4096 accumulate=1 k_grouped=1`), so the groups
    // of 128, 256 and 512 tokens go in one launch and those of 2048 and 4096 in another; without C one kernel serves
    // them all.
    const std::vector<int64_t> mixed = {128, 4096, 256, 0, 2048, 512};
    run_k_grouped(2048, 2048, mixed, GroupedC::kSelf, salt++, ", two kernels");
    run_k_grouped(2048, 2048, mixed, GroupedC::kSeparate, salt++, ", two kernels");
    run_k_grouped(2048, 2048, mixed, GroupedC::kNone, salt++);
    for (const auto& [block_m, block_n] : {std::pair{128, 160}, {128, 192}, {64, 128}}) {
      kiln::Fp8GemmOverrides o;
      o.block_m = block_m;
      o.block_n = block_n;
      kiln::set_fp8_gemm_overrides(o);
      char note[64];
      std::snprintf(note, sizeof note, ", %dx%d forced", block_m, block_n);
      run_k_grouped(200, 576, ks, GroupedC::kSelf, salt++, note);
    }
    kiln::set_fp8_gemm_overrides({});
  } catch (const std::exception& e) {
    report(false, std::string("fp8_gemm_wgrad_test: ") + e.what());
  }

  std::printf("\nsummary (events, L2 flushed, median of 20):\n");
  for (const auto& line : g_timings) std::printf("  %s\n", line.c_str());
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
