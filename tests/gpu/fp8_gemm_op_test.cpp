// GPU test of the FP8 GEMM operation through the public C++ API (kiln::fp8_gemm_nt, kiln::precompile,
// kiln::plan): the heuristic's kernels for every dense_fp8 shape of shared/bench/shapes.json at M = 1, 64,
// 128 and 4096, one M per kernel of a whole plan (N = 2112, K = 7168), ragged shapes (M = 1, 37, 200, 1000;
// N = 576; K = 512 and a K tail), padded row strides of A, B, D and A's scales, set_num_sms, a created
// stream, overrides, the casts feeding the GEMM on the GPU, validation errors that need a GPU, and the
// tensor-map cache on repeated calls; with --multicast, B multicast.
//
// Inputs are quantised the DeepSeek way (per-row / per-block magnitudes over 2^-4..2^4, scale = amax / 448);
// A's scale padding rows are NaN; D, its padding columns and one guard row are poisoned with NaN before each
// call. Checked rows (all for M <= 256, else 64: first, last, tile edges, random) are compared with a
// float64 reference from the dequantised inputs (DeepGEMM's calc_diff < 1e-5) and from the unquantised
// ones (< 1e-3); NaN or Inf never passes, and nothing outside D may change. The dense shapes are timed
// (CUDA events, 512 MB memset before each call to flush the 60 MB L2, median of 20 after 3 warm-ups).
//
// Prints PASS/FAIL lines; exit 0 only if all pass, 77 when there is no GPU (after precompiling, which needs
// none). `--quick`: the dense shapes and the ragged ones only (for a second run with DG_JIT_USE_NVRTC=1).
// `--multicast`: only B multicast (cluster_m = 2) against the same tiles without it, in a run of its own
// because that path has not run on a GPU since its last change and could hang.
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cuda/driver.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln.hpp"
#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"
#include "ops/tensor_map.hpp"
#include "fp8_reference.hpp"
#include "gpu_test_support.hpp"

namespace {

using kiln::gpu_test::DeviceBuffer;
using kiln::gpu_test::mix;
using kiln::gpu_test::uniform;
using kiln::gpu_test::magnitude;
using kiln::gpu_test::parallel_for;
using kiln::gpu_test::e4m3_to_double;
using kiln::gpu_test::float_to_e4m3;
using kiln::gpu_test::e4m3_lut;
using kiln::gpu_test::dot;
using kiln::gpu_test::bf16_to_double;
using kiln::gpu_test::calc_diff;
using kiln::gpu_test::Timing;
using kiln::gpu_test::f32_to_bf16;
using kiln::gpu_test::g_failures;
using kiln::gpu_test::report;

// ---- deterministic inputs ---------------------------------------------------------------------------------------

struct Gen {
  uint64_t seed;
  float a(uint64_t m, uint64_t k) const { return magnitude(mix(seed ^ (m * 0x51ull))) * uniform(mix(seed * 31 + (m << 24) + k)); }
  float b(uint64_t n, uint64_t k) const {
    return magnitude(mix(~seed ^ (((n / 128) << 20) + k / 128))) * uniform(mix(~seed * 17 + (n << 24) + k));
  }
};

// Quantised inputs for one (N, K) and up to m_max rows of A (rows are quantised independently, so the first
// M rows serve every M <= m_max).
struct HostData {
  int64_t m_max, n, k, kb;
  Gen g;
  std::vector<uint8_t> a, b;      // [m_max][k], [n][k]
  std::vector<float> a_scale;     // [m_max][kb] (row-major here; the test lays it out MN-major per call)
  std::vector<float> sfb;         // [ceil(n/128)][kb]
};

HostData make_data(int64_t m_max, int64_t n, int64_t k, uint64_t seed) {
  HostData p{m_max, n, k, (k + 127) / 128, Gen{seed}, {}, {}, {}, {}};
  p.a.resize(static_cast<size_t>(m_max * k));
  p.b.resize(static_cast<size_t>(n * k));
  p.a_scale.resize(static_cast<size_t>(m_max * p.kb));
  const int64_t nb = (n + 127) / 128;
  p.sfb.resize(static_cast<size_t>(nb * p.kb));
  parallel_for(static_cast<size_t>(m_max), [&](size_t begin, size_t end) {
    for (size_t row = begin; row < end; ++row)
      for (int64_t kb = 0; kb < p.kb; ++kb) {
        const int64_t k0 = kb * 128, k1 = std::min(k, k0 + 128);
        float amax = 0;
        for (int64_t c = k0; c < k1; ++c) amax = std::max(amax, std::fabs(p.g.a(row, static_cast<uint64_t>(c))));
        const float scale = std::max(amax, 1e-4f) / 448.0f;
        p.a_scale[row * static_cast<size_t>(p.kb) + static_cast<size_t>(kb)] = scale;
        for (int64_t c = k0; c < k1; ++c)
          p.a[row * static_cast<size_t>(k) + static_cast<size_t>(c)] = float_to_e4m3(p.g.a(row, static_cast<uint64_t>(c)) / scale);
      }
  });
  parallel_for(static_cast<size_t>(nb * p.kb), [&](size_t begin, size_t end) {
    for (size_t blk = begin; blk < end; ++blk) {
      const int64_t bn = static_cast<int64_t>(blk) / p.kb, bk = static_cast<int64_t>(blk) % p.kb;
      const int64_t n0 = bn * 128, n1 = std::min(n, n0 + 128), k0 = bk * 128, k1 = std::min(k, k0 + 128);
      float amax = 0;
      for (int64_t r = n0; r < n1; ++r)
        for (int64_t c = k0; c < k1; ++c) amax = std::max(amax, std::fabs(p.g.b(static_cast<uint64_t>(r), static_cast<uint64_t>(c))));
      const float scale = std::max(amax, 1e-4f) / 448.0f;
      p.sfb[blk] = scale;
      for (int64_t r = n0; r < n1; ++r)
        for (int64_t c = k0; c < k1; ++c)
          p.b[static_cast<size_t>(r * k + c)] = float_to_e4m3(p.g.b(static_cast<uint64_t>(r), static_cast<uint64_t>(c)) / scale);
    }
  });
  return p;
}

// Reference rows of D: q from the dequantised inputs, f from the unquantised ones (float64). `exact_a` /
// `exact_b` give the unquantised values (null: skip f).
struct Reference {
  std::map<int64_t, size_t> index;  // row -> position
  std::vector<double> q, f;
};

Reference reference(const std::vector<int64_t>& rows_in, int64_t n, int64_t k, const std::function<double(int64_t, int64_t)>& qa,
                    const std::function<double(int64_t, int64_t)>& qb, const std::function<double(int64_t, int64_t)>& fa,
                    const std::function<double(int64_t, int64_t)>& fb) {
  Reference ref;
  std::vector<int64_t> rows;
  for (int64_t r : rows_in)
    if (ref.index.emplace(r, rows.size()).second) rows.push_back(r);
  const size_t R = rows.size(), K = static_cast<size_t>(k);
  std::vector<double> a_q(R * K), a_f(fa ? R * K : 0);
  parallel_for(R, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      for (size_t c = 0; c < K; ++c) {
        a_q[i * K + c] = qa(rows[i], static_cast<int64_t>(c));
        if (fa) a_f[i * K + c] = fa(rows[i], static_cast<int64_t>(c));
      }
  });
  ref.q.assign(R * static_cast<size_t>(n), 0.0);
  ref.f.assign(fa ? R * static_cast<size_t>(n) : 0, 0.0);
  parallel_for(static_cast<size_t>(n), [&](size_t begin, size_t end) {
    std::vector<double> b_q(K), b_f(fb ? K : 0);
    for (size_t col = begin; col < end; ++col) {
      for (size_t c = 0; c < K; ++c) {
        b_q[c] = qb(static_cast<int64_t>(col), static_cast<int64_t>(c));
        if (fb) b_f[c] = fb(static_cast<int64_t>(col), static_cast<int64_t>(c));
      }
      for (size_t i = 0; i < R; ++i) {
        ref.q[i * static_cast<size_t>(n) + col] = dot(&a_q[i * K], b_q.data(), K);
        if (fa) ref.f[i * static_cast<size_t>(n) + col] = dot(&a_f[i * K], b_f.data(), K);
      }
    }
  });
  return ref;
}

// The reference rows of `rows` for one HostData: its dequantised inputs and the generator's unquantised ones.
Reference reference_of(const HostData& h, const std::vector<int64_t>& rows) {
  const double* lut = e4m3_lut();
  const auto at = [](int64_t i) { return static_cast<size_t>(i); };
  const int64_t k = h.k, kb = h.kb;
  return reference(
      rows, h.n, k, [&](int64_t r, int64_t c) { return lut[h.a[at(r * k + c)]] * h.a_scale[at(r * kb + c / 128)]; },
      [&](int64_t r, int64_t c) { return lut[h.b[at(r * k + c)]] * h.sfb[at((r / 128) * kb + c / 128)]; },
      [&](int64_t r, int64_t c) { return static_cast<double>(h.g.a(static_cast<uint64_t>(r), static_cast<uint64_t>(c))); },
      [&](int64_t r, int64_t c) { return static_cast<double>(h.g.b(static_cast<uint64_t>(r), static_cast<uint64_t>(c))); });
}

// ---- device helpers -----------------------------------------------------------------------------------------------

const kiln::cuda::DriverApi& cu() { return kiln::cuda::DriverApi::get(); }

kiln::TensorView view(void* data, kiln::DType dtype, int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  kiln::TensorView t = kiln::TensorView::contiguous(data, dtype, {rows, cols});
  t.strides = {s0, s1, 0, 0};
  return t;
}

std::vector<int64_t> rows_to_check(int64_t m, uint64_t seed) {
  std::vector<int64_t> rows;
  if (m <= 256) {
    for (int64_t r = 0; r < m; ++r) rows.push_back(r);
    return rows;
  }
  for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{127}, int64_t{128}, m - 2, m - 1}) rows.push_back(r);
  for (uint64_t i = 0; rows.size() < 64; ++i) rows.push_back(static_cast<int64_t>(mix(seed * 977 + i) % static_cast<uint64_t>(m)));
  return rows;
}

// ---- cases --------------------------------------------------------------------------------------------------------

struct Case {
  int64_t m, n, k;
  int64_t ldd = 0, lda_pad = 0, ldb_pad = 0, sfa_pad = 0;  // extra elements beyond the tight strides
  bool timed = false;
  std::string note;  // what the case adds
  std::function<void()> before, after;  // settings around the call (set_num_sms, overrides)
  CUstream stream = nullptr;
};

double deepgemm_us(int64_t m, int64_t n, int64_t k) {
  static const std::map<std::tuple<int64_t, int64_t, int64_t>, double> kPeers = {
      {{128, 2112, 7168}, 13.8},   {{128, 24576, 1536}, 20.4},  {{128, 32768, 512}, 13.1},   {{128, 7168, 16384}, 47.1},
      {{128, 4096, 7168}, 16.6},   {{128, 7168, 2048}, 11.7},   {{4096, 2112, 7168}, 97.6},  {{4096, 24576, 1536}, 233.0},
      {{4096, 32768, 512}, 130.0}, {{4096, 7168, 16384}, 653.1}, {{4096, 4096, 7168}, 193.1}, {{4096, 7168, 2048}, 97.7},
      {{64, 7168, 2048}, 10.8},    {{64, 4096, 7168}, 16.3},    {{1, 7168, 2048}, 11.4},     {{1, 4096, 7168}, 18.3}};
  auto it = kPeers.find({m, n, k});
  return it == kPeers.end() ? 0.0 : it->second;
}

// The kernel the public plan says serves request `r` with overrides `o` (what DG_PRINT_CONFIGS would print), in
// words ("-" when none).
std::string kernel_for(kiln::CompileRequest r, const kiln::Fp8GemmOverrides& o) {
  for (const auto& [name, value] : {std::pair<const char*, int>{"block_m", o.block_m}, {"block_n", o.block_n},
                                    {"stages", o.stages}, {"cluster_m", o.cluster_m}, {"cluster_n", o.cluster_n},
                                    {"split_k", o.split_k}})
    if (value != 0) r.problem[name] = value;
  const auto reports = kiln::plan(r);
  if (reports.empty()) return "-";
  const std::string& d = reports[0].detail;
  const size_t colon = d.find(": ");
  return colon == std::string::npos ? d : d.substr(colon + 2);
}

// The same for one dense problem, with the process-wide overrides in force.
std::string kernel_for(int64_t m, int64_t n, int64_t k) {
  return kernel_for({"fp8_gemm_nt", {{"m", m}, {"n", n}, {"k", k}}, std::nullopt, std::nullopt},
                    kiln::get_fp8_gemm_overrides());
}

std::vector<std::string> g_timings;

// One problem size's device copies of A, B and B's scales (A with m_max rows, strides padded per case).
struct DeviceData {
  const HostData& h;
  int64_t lda, ldb;
  std::unique_ptr<DeviceBuffer> a, b, sfb;
  DeviceData(const HostData& host, int64_t lda_pad, int64_t ldb_pad) : h(host), lda(host.k + lda_pad), ldb(host.k + ldb_pad) {
    // Padding bytes of A and B rows are 0x7f (NaN in e4m3): never read into D.
    std::vector<uint8_t> pa(static_cast<size_t>(std::max<int64_t>(h.m_max, 1) * lda), 0x7f), pb(static_cast<size_t>(h.n * ldb), 0x7f);
    for (int64_t r = 0; r < h.m_max; ++r) std::memcpy(&pa[static_cast<size_t>(r * lda)], &h.a[static_cast<size_t>(r * h.k)], static_cast<size_t>(h.k));
    for (int64_t r = 0; r < h.n; ++r) std::memcpy(&pb[static_cast<size_t>(r * ldb)], &h.b[static_cast<size_t>(r * h.k)], static_cast<size_t>(h.k));
    a = std::make_unique<DeviceBuffer>(pa.size());
    b = std::make_unique<DeviceBuffer>(pb.size());
    sfb = std::make_unique<DeviceBuffer>(h.sfb.size() * 4);
    a->upload(pa.data(), pa.size());
    b->upload(pb.data(), pb.size());
    sfb->upload(h.sfb.data(), h.sfb.size() * 4);
  }
};

// Runs one case against data already on the device and a reference covering its rows.
void run_case(const Case& c, const DeviceData& dev, const Reference& ref, Timing* timing) {
  const HostData& h = dev.h;
  const int64_t m = c.m, n = c.n, k = c.k, kb = h.kb;
  const int64_t ldd = c.ldd ? c.ldd : n;
  const int64_t sfa_stride = kiln::get_tma_aligned_size(m, 4) + c.sfa_pad;
  // A's scales, MN-major: sfa[kb][stride], rows >= m NaN.
  std::vector<float> sfa(static_cast<size_t>(kb * sfa_stride), std::nanf(""));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < kb; ++b) sfa[static_cast<size_t>(b * sfa_stride + r)] = h.a_scale[static_cast<size_t>(r * kb + b)];
  DeviceBuffer dsfa(sfa.size() * 4), d(static_cast<size_t>((m + 1) * ldd * 2));
  dsfa.upload(sfa.data(), sfa.size() * 4);

  const kiln::TensorView ta = view(dev.a->data(), kiln::DType::kFloat8E4M3, m, k, dev.lda, 1);
  const kiln::TensorView tb = view(dev.b->data(), kiln::DType::kFloat8E4M3, n, k, dev.ldb, 1);
  const kiln::TensorView tsfa = view(dsfa.data(), kiln::DType::kFloat32, m, kb, 1, sfa_stride);
  const kiln::TensorView tsfb = kiln::TensorView::contiguous(dev.sfb->data(), kiln::DType::kFloat32, {(n + 127) / 128, kb});
  const kiln::TensorView td = view(d.data(), kiln::DType::kBFloat16, m, n, ldd, 1);

  // The overrides first: the name shows the kernel they make the op choose.
  if (c.before) c.before();
  char name[256];
  std::snprintf(name, sizeof name, "m=%lld n=%lld k=%lld ldd=%lld%s%s%s [%s]%s%s", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(ldd),
                c.lda_pad ? " lda+pad" : "", c.ldb_pad ? " ldb+pad" : "", c.sfa_pad ? " sfa-stride+pad" : "",
                kernel_for(m, n, k).c_str(), c.note.empty() ? "" : " ", c.note.c_str());
  try {
    d.poison();
    KILN_CU_CHECK(cu().cuCtxSynchronize());
    kiln::fp8_gemm_nt(ta, tsfa, tb, tsfb, td, c.stream);
    if (c.stream) KILN_CU_CHECK(cu().cuStreamSynchronize(c.stream));
    KILN_CU_CHECK(cu().cuCtxSynchronize());
  } catch (const std::exception& e) {
    if (c.after) c.after();
    report(false, std::string(name) + ": " + e.what());
    return;
  }

  const std::vector<int64_t> rows = rows_to_check(m, static_cast<uint64_t>(m * 131 + n));
  std::vector<uint16_t> out(static_cast<size_t>(ldd)), guard(static_cast<size_t>(ldd));
  std::vector<double> got, want_q, want_f;
  bool finite = true, poison_kept = true;
  for (int64_t r : rows) {
    KILN_CU_CHECK(cu().cuMemcpyDtoH(out.data(), d.ptr + static_cast<size_t>(r * ldd * 2), static_cast<size_t>(ldd * 2)));
    const size_t at = ref.index.at(r) * static_cast<size_t>(n);
    for (int64_t col = 0; col < n; ++col) {
      const double v = bf16_to_double(out[static_cast<size_t>(col)]);
      finite = finite && std::isfinite(v);
      got.push_back(v);
      want_q.push_back(ref.q[at + static_cast<size_t>(col)]);
      if (!ref.f.empty()) want_f.push_back(ref.f[at + static_cast<size_t>(col)]);
    }
    for (int64_t col = n; col < ldd; ++col) poison_kept = poison_kept && out[static_cast<size_t>(col)] == 0xffff;
  }
  KILN_CU_CHECK(cu().cuMemcpyDtoH(guard.data(), d.ptr + static_cast<size_t>(m * ldd * 2), static_cast<size_t>(ldd * 2)));
  for (uint16_t v : guard) poison_kept = poison_kept && v == 0xffff;
  const double diff_q = calc_diff(got, want_q);
  const double diff_f = want_f.empty() ? 0.0 : calc_diff(got, want_f);
  const bool ok = finite && poison_kept && diff_q < 1e-5 && diff_f < 1e-3;
  char line[640];
  std::snprintf(line, sizeof line, "%s: calc_diff %.3g (dequantised, < 1e-5), %.3g (exact, < 1e-3), %zu rows%s%s", name,
                diff_q, diff_f, rows.size(), finite ? "" : ", NON-FINITE OUTPUT", poison_kept ? "" : ", WROTE OUTSIDE D");
  report(ok, line);

  if (ok && timing && c.timed) {
    const double us = timing->median_us([&] { kiln::fp8_gemm_nt(ta, tsfa, tb, tsfb, td, nullptr); });
    const double tflops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / (us * 1e-6) / 1e12;
    const double bytes = static_cast<double>(m * k + n * k) + 4.0 * static_cast<double>(kb) * static_cast<double>(m + (n + 127) / 128) +
                         2.0 * static_cast<double>(m * n);
    const double peer = deepgemm_us(m, n, k);
    std::snprintf(line, sizeof line, "m=%-5lld n=%-6lld k=%-6lld %-44s %8.1f us %7.1f TFLOPS %6.0f GB/s | DeepGEMM %6.1f us (x%.2f)",
                  static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), kernel_for(m, n, k).c_str(),
                  us, tflops, bytes / (us * 1e-6) / 1e9, peer, peer > 0 ? peer / us : 0.0);
    g_timings.push_back(line);
    std::printf("time %s\n", line);
  }
  if (c.after) c.after();
}

// Generates the data for every case of one (N, K), the reference rows they need, and runs them.
void run_group(const std::vector<Case>& cases, uint64_t seed, Timing* timing) {
  if (cases.empty()) return;
  const int64_t n = cases[0].n, k = cases[0].k;
  int64_t m_max = 1;
  for (const Case& c : cases) m_max = std::max(m_max, c.m);
  const auto t0 = std::chrono::steady_clock::now();
  const HostData h = make_data(m_max, n, k, seed);
  std::vector<int64_t> rows;
  for (const Case& c : cases)
    for (int64_t r : rows_to_check(c.m, static_cast<uint64_t>(c.m * 131 + n))) rows.push_back(r);
  const Reference ref = reference_of(h, rows);
  const double host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("(n=%lld k=%lld: inputs for m <= %lld and %zu reference rows in %.1f s)\n", static_cast<long long>(n),
              static_cast<long long>(k), static_cast<long long>(m_max), ref.index.size(), host_s);
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<DeviceData>> devs;
  for (const Case& c : cases) {
    auto& dev = devs[{c.lda_pad, c.ldb_pad}];
    if (!dev) dev = std::make_unique<DeviceData>(h, c.lda_pad, c.ldb_pad);
    run_case(c, *dev, ref, timing);
  }
}

// Cases of several (N, K): one group per (N, K), in order of first appearance, each with a seed of its own.
void run_groups(const std::vector<Case>& cases, uint64_t& seed, Timing* timing) {
  std::vector<std::vector<Case>> groups;
  for (const Case& c : cases) {
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const std::vector<Case>& g) { return g[0].n == c.n && g[0].k == c.k; });
    if (same == groups.end())
      groups.push_back({c});
    else
      same->push_back(c);
  }
  for (const std::vector<Case>& g : groups) run_group(g, seed++, timing);
}

// ---- the m-grouped contiguous GEMM (MoE experts' forward pass) ----------------------------------------------------

// One m-grouped call: `sizes[g]` rows for expert g (0 allowed), each expert's run padded to a multiple of 128 with
// rows marked -1, then `tail_blocks` 128-row blocks of padding only (a serving engine's fixed-size buffer). Each
// expert has its own A rows and B (make_data per expert); padding rows of A are NaN bytes and their scales NaN, so
// a padding row leaking into a valid one shows. D is poisoned and has a guard row; every valid row of an expert
// with at most 256 rows is checked (64 of larger ones) against the float64 references, and the guard, the ldd
// padding and the blocks of padding only (128 rows of -1, skipped by the kernel at either tile height) must keep their
// poison. `bad_block`: the indices of that 128-row block are set to `groups` (out of
// range): its rows must come out NaN (the kernel's answer to an index it cannot use) and the others stay right.
void test_m_grouped(const std::vector<int64_t>& sizes, int64_t n, int64_t k, int64_t tail_blocks, const char* note,
                    kiln::Fp8GemmOverrides overrides, uint64_t seed, int64_t bad_block = -1) {
  const int64_t groups = static_cast<int64_t>(sizes.size()), kb = (k + 127) / 128, nb = (n + 127) / 128;
  std::vector<int64_t> first(sizes.size());
  int64_t m = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    first[g] = m;
    m += (sizes[g] + 127) / 128 * 128;
  }
  m += tail_blocks * 128;
  const int64_t ldd = n + 8, sfa_stride = kiln::get_tma_aligned_size(m, 4);
  std::vector<uint8_t> a(static_cast<size_t>(m * k), 0x7f), b(static_cast<size_t>(groups * n * k));
  std::vector<float> sfa(static_cast<size_t>(kb * sfa_stride), std::nanf(""));
  std::vector<float> sfb(static_cast<size_t>(groups * nb * kb));
  std::vector<int32_t> layout(static_cast<size_t>(m), -1);
  std::vector<HostData> hosts;
  for (size_t g = 0; g < sizes.size(); ++g) {
    hosts.push_back(make_data(std::max<int64_t>(sizes[g], 1), n, k, seed * 1000 + g));
    const HostData& h = hosts.back();
    for (int64_t r = 0; r < sizes[g]; ++r) {
      const int64_t row = first[g] + r;
      layout[static_cast<size_t>(row)] = static_cast<int32_t>(g);
      std::memcpy(&a[static_cast<size_t>(row * k)], &h.a[static_cast<size_t>(r * k)], static_cast<size_t>(k));
      for (int64_t c = 0; c < kb; ++c)
        sfa[static_cast<size_t>(c * sfa_stride + row)] = h.a_scale[static_cast<size_t>(r * kb + c)];
    }
    std::memcpy(&b[static_cast<size_t>(static_cast<int64_t>(g) * n * k)], h.b.data(), h.b.size());
    std::memcpy(&sfb[static_cast<size_t>(static_cast<int64_t>(g) * nb * kb)], h.sfb.data(), h.sfb.size() * 4);
  }
  // Every index of that block out of range, so that every m block inside it (64 or 128 rows) starts with one.
  if (bad_block >= 0)
    for (int64_t row = bad_block * 128; row < (bad_block + 1) * 128; ++row)
      layout[static_cast<size_t>(row)] = static_cast<int32_t>(groups);
  DeviceBuffer da(a.size()), db(b.size()), dsfa(sfa.size() * 4), dsfb(sfb.size() * 4), dl(layout.size() * 4),
      dd(static_cast<size_t>((m + 1) * ldd * 2));
  da.upload(a.data());
  db.upload(b.data());
  dsfa.upload(sfa.data());
  dsfb.upload(sfb.data());
  dl.upload(layout.data());
  dd.poison();
  kiln::TensorView tb = kiln::TensorView::contiguous(db.data(), kiln::DType::kFloat8E4M3, {groups, n, k});
  const kiln::TensorView tsfb = kiln::TensorView::contiguous(dsfb.data(), kiln::DType::kFloat32, {groups, nb, kb});
  const kiln::TensorView tl = kiln::TensorView::contiguous(dl.data(), kiln::DType::kInt32, {m});

  const std::string kernel = kernel_for(
      {"fp8_gemm_nt", {{"m", m}, {"n", n}, {"k", k}, {"m_grouped", 1}}, std::nullopt, std::nullopt}, overrides);
  std::string sizes_text;
  for (int64_t s : sizes) sizes_text += (sizes_text.empty() ? "" : ",") + std::to_string(s);
  char name[400];
  std::snprintf(name, sizeof name,
                "m_grouped_fp8_gemm_nt_contiguous %lld experts (%s rows), m=%lld n=%lld k=%lld [%s]%s%s",
                static_cast<long long>(groups), sizes_text.c_str(), static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), kernel.c_str(), note[0] ? " " : "", note);
  try {
    kiln::set_fp8_gemm_overrides(overrides);
    kiln::m_grouped_fp8_gemm_nt_contiguous(view(da.data(), kiln::DType::kFloat8E4M3, m, k, k, 1),
                                           view(dsfa.data(), kiln::DType::kFloat32, m, kb, 1, sfa_stride), tb, tsfb,
                                           view(dd.data(), kiln::DType::kBFloat16, m, n, ldd, 1), tl);
    KILN_CU_CHECK(cu().cuCtxSynchronize());
    kiln::set_fp8_gemm_overrides({});
  } catch (const std::exception& e) {
    kiln::set_fp8_gemm_overrides({});
    report(false, std::string(name) + ": " + e.what());
    return;
  }
  std::vector<uint16_t> out(static_cast<size_t>((m + 1) * ldd));
  dd.download(out.data());
  std::vector<double> got, want_q, want_f;
  bool finite = true, poison_kept = true, bad_is_nan = true;
  size_t checked_rows = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (sizes[g] == 0) continue;
    const HostData& h = hosts[g];
    std::vector<int64_t> rows;  // the expert's own rows, outside the bad block
    for (int64_t row : rows_to_check(sizes[g], seed + g))
      if (bad_block < 0 || (first[g] + row) / 128 != bad_block) rows.push_back(row);
    const Reference ref = reference_of(h, rows);
    for (int64_t row : rows) {
      const size_t at = ref.index.at(row) * static_cast<size_t>(n);
      const uint16_t* line = &out[static_cast<size_t>((first[g] + row) * ldd)];
      for (int64_t col = 0; col < n; ++col) {
        const double v = bf16_to_double(line[col]);
        finite = finite && std::isfinite(v);
        got.push_back(v);
        want_q.push_back(ref.q[at + static_cast<size_t>(col)]);
        want_f.push_back(ref.f[at + static_cast<size_t>(col)]);
      }
      for (int64_t col = n; col < ldd; ++col) poison_kept = poison_kept && line[col] == 0xffff;
      ++checked_rows;
    }
  }
  for (int64_t col = 0; col < ldd; ++col)
    poison_kept = poison_kept && out[static_cast<size_t>(m * ldd + col)] == 0xffff;
  for (int64_t block = 0; block < m / 128; ++block) {
    const auto first_index = layout.begin() + block * 128;
    if (!std::all_of(first_index, first_index + 128, [](int32_t index) { return index == -1; })) continue;
    for (int64_t row = block * 128; row < (block + 1) * 128; ++row)
      for (int64_t col = 0; col < ldd; ++col)
        poison_kept = poison_kept && out[static_cast<size_t>(row * ldd + col)] == 0xffff;
  }
  if (bad_block >= 0)  // every row and column of the block NaN (bf16 NaN: exponent all ones, mantissa not 0)
    for (int64_t row = bad_block * 128; row < (bad_block + 1) * 128; ++row)
      for (int64_t col = 0; col < n; ++col)
        bad_is_nan = bad_is_nan && std::isnan(bf16_to_double(out[static_cast<size_t>(row * ldd + col)]));
  const double diff_q = calc_diff(got, want_q), diff_f = calc_diff(got, want_f);
  const bool ok = checked_rows > 0 && finite && poison_kept && bad_is_nan && diff_q < 1e-5 && diff_f < 1e-3;
  char line[800];
  const char* bad_note = bad_block < 0 ? "" : bad_is_nan ? ", out-of-range block NaN" : ", OUT-OF-RANGE BLOCK NOT NaN";
  std::snprintf(line, sizeof line, "%s: calc_diff %.3g (dequantised, < 1e-5), %.3g (exact, < 1e-3), %zu rows%s%s%s",
                name, diff_q, diff_f, checked_rows, bad_note, finite ? "" : ", NON-FINITE OUTPUT",
                poison_kept ? "" : ", WROTE OUTSIDE D OR IN A PADDING-ONLY BLOCK");
  report(ok, line);
}

// ---- the m-grouped masked GEMM (MoE decode) -----------------------------------------------------------------------

// m_grouped_fp8_gemm_nt_masked over experts with `counts[g]` rows each (masked_m; a count above `m` or below 0 is
// clamped by the kernel) in blocks of `m` rows. Each expert has its own A rows and B (make_data per expert); A's rows
// past the count are NaN bytes with NaN scales, so a row of another expert or past the count leaking into a valid
// one shows. D is [G, m, n] with a padded row stride and its planes 64 elements further apart than its rows need,
// poisoned first: the valid rows are checked against the float64 references (every row up to 256, else 64), and the
// ldd padding, the gaps between planes and every row from the count rounded up to 128 on must keep their poison (a
// tile's rows past the count are the only ones the kernel may write besides the valid ones). `expected_m` picks the
// kernel (its plan at G * expected_m rows).
void test_masked(const std::vector<int64_t>& counts, int64_t m, int64_t n, int64_t k, int64_t expected_m,
                 const char* note, kiln::Fp8GemmOverrides overrides, uint64_t seed) {
  const int64_t groups = static_cast<int64_t>(counts.size()), kb = (k + 127) / 128, nb = (n + 127) / 128;
  const int64_t ldd = n + 8, plane = m * ldd + 64, sfa_stride = kiln::get_tma_aligned_size(m, 4);
  const auto rows_of = [&](size_t g) { return std::clamp<int64_t>(counts[g], 0, m); };
  std::vector<uint8_t> a(static_cast<size_t>(groups * m * k), 0x7f), b(static_cast<size_t>(groups * n * k));
  std::vector<float> sfa(static_cast<size_t>(groups * kb * sfa_stride), std::nanf(""));
  std::vector<float> sfb(static_cast<size_t>(groups * nb * kb));
  std::vector<int32_t> masked(counts.begin(), counts.end());
  std::vector<HostData> hosts;
  for (size_t g = 0; g < counts.size(); ++g) {
    hosts.push_back(make_data(std::max<int64_t>(rows_of(g), 1), n, k, seed * 1000 + g));
    const HostData& h = hosts.back();
    const int64_t gi = static_cast<int64_t>(g);
    for (int64_t r = 0; r < rows_of(g); ++r) {
      std::memcpy(&a[static_cast<size_t>((gi * m + r) * k)], &h.a[static_cast<size_t>(r * k)], static_cast<size_t>(k));
      for (int64_t c = 0; c < kb; ++c)
        sfa[static_cast<size_t>((gi * kb + c) * sfa_stride + r)] = h.a_scale[static_cast<size_t>(r * kb + c)];
    }
    std::memcpy(&b[static_cast<size_t>(gi * n * k)], h.b.data(), h.b.size());
    std::memcpy(&sfb[static_cast<size_t>(gi * nb * kb)], h.sfb.data(), h.sfb.size() * 4);
  }
  DeviceBuffer da(a.size()), db(b.size()), dsfa(sfa.size() * 4), dsfb(sfb.size() * 4), dmask(masked.size() * 4),
      dd(static_cast<size_t>(groups * plane * 2));
  da.upload(a.data());
  db.upload(b.data());
  dsfa.upload(sfa.data());
  dsfb.upload(sfb.data());
  dmask.upload(masked.data());
  dd.poison();
  const auto tensor = kiln::gpu_test::strided_view;
  const kiln::TensorView ta = tensor(da.data(), kiln::DType::kFloat8E4M3, {groups, m, k}, {m * k, k, 1});
  const kiln::TensorView tsfa =
      tensor(dsfa.data(), kiln::DType::kFloat32, {groups, m, kb}, {kb * sfa_stride, 1, sfa_stride});
  const kiln::TensorView tb = kiln::TensorView::contiguous(db.data(), kiln::DType::kFloat8E4M3, {groups, n, k});
  const kiln::TensorView tsfb = kiln::TensorView::contiguous(dsfb.data(), kiln::DType::kFloat32, {groups, nb, kb});
  const kiln::TensorView td = tensor(dd.data(), kiln::DType::kBFloat16, {groups, m, n}, {plane, ldd, 1});
  const kiln::TensorView tmask = kiln::TensorView::contiguous(dmask.data(), kiln::DType::kInt32, {groups});

  const int64_t plan_m = groups * std::clamp<int64_t>(expected_m, 1, m);
  const std::string kernel = kernel_for(
      {"fp8_gemm_nt", {{"m", plan_m}, {"n", n}, {"k", k}, {"m_grouped", 1}, {"masked", 1}}, std::nullopt, std::nullopt},
      overrides);
  std::string counts_text;
  for (int64_t c : counts) counts_text += (counts_text.empty() ? "" : ",") + std::to_string(c);
  char name[400];
  std::snprintf(name, sizeof name,
                "m_grouped_fp8_gemm_nt_masked %lld experts (masked_m %s) of m=%lld, n=%lld k=%lld expected_m=%lld "
                "[%s]%s%s",
                static_cast<long long>(groups), counts_text.c_str(), static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(expected_m),
                kernel.c_str(), note[0] ? " " : "", note);
  try {
    kiln::set_fp8_gemm_overrides(overrides);
    kiln::m_grouped_fp8_gemm_nt_masked(ta, tsfa, tb, tsfb, td, tmask, expected_m);
    KILN_CU_CHECK(cu().cuCtxSynchronize());
    kiln::set_fp8_gemm_overrides({});
  } catch (const std::exception& e) {
    kiln::set_fp8_gemm_overrides({});
    report(false, std::string(name) + ": " + e.what());
    return;
  }
  std::vector<uint16_t> out(static_cast<size_t>(groups * plane));
  dd.download(out.data());
  std::vector<double> got, want_q, want_f;
  bool finite = true, poison_kept = true;
  size_t checked_rows = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    const uint16_t* d_plane = &out[g * static_cast<size_t>(plane)];
    const int64_t rows = rows_of(g), written = std::min(m, (rows + 127) / 128 * 128);
    for (int64_t row = 0; row < m; ++row)
      for (int64_t col = row < written ? n : 0; col < ldd; ++col)
        poison_kept = poison_kept && d_plane[row * ldd + col] == 0xffff;
    for (int64_t i = m * ldd; i < plane; ++i) poison_kept = poison_kept && d_plane[i] == 0xffff;
    if (rows == 0) continue;
    const std::vector<int64_t> check = rows_to_check(rows, seed + g);
    const Reference ref = reference_of(hosts[g], check);
    for (int64_t row : check) {
      const size_t at = ref.index.at(row) * static_cast<size_t>(n);
      for (int64_t col = 0; col < n; ++col) {
        const double v = bf16_to_double(d_plane[row * ldd + col]);
        finite = finite && std::isfinite(v);
        got.push_back(v);
        want_q.push_back(ref.q[at + static_cast<size_t>(col)]);
        want_f.push_back(ref.f[at + static_cast<size_t>(col)]);
      }
      ++checked_rows;
    }
  }
  const double diff_q = calc_diff(got, want_q), diff_f = calc_diff(got, want_f);
  const bool ok = checked_rows > 0 && finite && poison_kept && diff_q < 1e-5 && diff_f < 1e-3;
  char line[800];
  std::snprintf(line, sizeof line, "%s: calc_diff %.3g (dequantised, < 1e-5), %.3g (exact, < 1e-3), %zu rows%s%s",
                name, diff_q, diff_f, checked_rows, finite ? "" : ", NON-FINITE OUTPUT",
                poison_kept ? "" : ", WROTE WHERE IT MUST NOT");
  report(ok, line);
}

// ---- the casts feeding the GEMM on the GPU ------------------------------------------------------------------------

void test_casts_then_gemm(int64_t m, int64_t n, int64_t k) {
  char name[160];
  std::snprintf(name, sizeof name, "per_token_cast_to_fp8 + per_block_cast_to_fp8 -> fp8_gemm_nt, m=%lld n=%lld k=%lld",
                static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k));
  try {
    const Gen g{99};
    std::vector<uint16_t> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < k; ++c) x[static_cast<size_t>(r * k + c)] = f32_to_bf16(g.a(static_cast<uint64_t>(r), static_cast<uint64_t>(c)));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) w[static_cast<size_t>(r * k + c)] = f32_to_bf16(g.b(static_cast<uint64_t>(r), static_cast<uint64_t>(c)));
    const int64_t kb = k / 128, nb = (n + 127) / 128, aligned = kiln::get_tma_aligned_size(m, 4);
    DeviceBuffer dx(x.size() * 2), dw(w.size() * 2), da(x.size()), db(w.size()), dsfa(static_cast<size_t>(kiln::per_token_scales_storage(m, k)) * 4),
        dsfb(static_cast<size_t>(nb * kb) * 4), dd(static_cast<size_t>(m * n) * 2);
    dx.upload(x.data(), x.size() * 2);
    dw.upload(w.data(), w.size() * 2);
    const auto tx = kiln::TensorView::contiguous(dx.data(), kiln::DType::kBFloat16, {m, k});
    const auto tw = kiln::TensorView::contiguous(dw.data(), kiln::DType::kBFloat16, {n, k});
    const auto ta = kiln::TensorView::contiguous(da.data(), kiln::DType::kFloat8E4M3, {m, k});
    const auto tb = kiln::TensorView::contiguous(db.data(), kiln::DType::kFloat8E4M3, {n, k});
    const auto tsfa = view(dsfa.data(), kiln::DType::kFloat32, m, kb, 1, aligned);
    const auto tsfb = kiln::TensorView::contiguous(dsfb.data(), kiln::DType::kFloat32, {nb, kb});
    const auto td = kiln::TensorView::contiguous(dd.data(), kiln::DType::kBFloat16, {m, n});
    dd.poison();
    kiln::per_token_cast_to_fp8(tx, ta, tsfa);
    kiln::per_block_cast_to_fp8(tw, tb, tsfb);
    kiln::fp8_gemm_nt(ta, tsfa, tb, tsfb, td);
    KILN_CU_CHECK(cu().cuCtxSynchronize());
    std::vector<uint8_t> a(x.size()), b(w.size());
    std::vector<float> sfa(static_cast<size_t>(kb * aligned)), sfb(static_cast<size_t>(nb * kb));
    std::vector<uint16_t> out(static_cast<size_t>(m * n));
    KILN_CU_CHECK(cu().cuMemcpyDtoH(a.data(), da.ptr, a.size()));
    KILN_CU_CHECK(cu().cuMemcpyDtoH(b.data(), db.ptr, b.size()));
    KILN_CU_CHECK(cu().cuMemcpyDtoH(sfa.data(), dsfa.ptr, sfa.size() * 4));
    KILN_CU_CHECK(cu().cuMemcpyDtoH(sfb.data(), dsfb.ptr, sfb.size() * 4));
    KILN_CU_CHECK(cu().cuMemcpyDtoH(out.data(), dd.ptr, out.size() * 2));
    const double* lut = e4m3_lut();
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < m; ++r) rows.push_back(r);
    const Reference ref = reference(
        rows, n, k, [&](int64_t r, int64_t c) { return lut[a[static_cast<size_t>(r * k + c)]] * sfa[static_cast<size_t>((c / 128) * aligned + r)]; },
        [&](int64_t r, int64_t c) { return lut[b[static_cast<size_t>(r * k + c)]] * sfb[static_cast<size_t>((r / 128) * kb + c / 128)]; },
        [&](int64_t r, int64_t c) { return bf16_to_double(x[static_cast<size_t>(r * k + c)]); },
        [&](int64_t r, int64_t c) { return bf16_to_double(w[static_cast<size_t>(r * k + c)]); });
    std::vector<double> got(out.size());
    bool finite = true;
    for (size_t i = 0; i < out.size(); ++i) {
      got[i] = bf16_to_double(out[i]);
      finite = finite && std::isfinite(got[i]);
    }
    const double dq = calc_diff(got, ref.q), df = calc_diff(got, ref.f);
    char line[400];
    std::snprintf(line, sizeof line, "%s: calc_diff %.3g (dequantised, < 1e-5), %.3g (bf16 inputs, < 1e-3)%s", name, dq, df,
                  finite ? "" : ", NON-FINITE OUTPUT");
    report(finite && dq < 1e-5 && df < 1e-3, line);
  } catch (const std::exception& e) {
    report(false, std::string(name) + ": " + e.what());
  }
}

// ---- errors that need a GPU, the tensor-map cache, host overhead ---------------------------------------------------

void test_gpu_errors_and_hot_path() {
  const int64_t m = 1, n = 7168, k = 2048, kb = 16;
  DeviceBuffer a(m * k), b(n * k), sfa(4 * kb * 4), sfb(56 * kb * 4), d(m * n * 2);
  kiln::TensorView ta = kiln::TensorView::contiguous(a.data(), kiln::DType::kFloat8E4M3, {m, k});
  kiln::TensorView tb = kiln::TensorView::contiguous(b.data(), kiln::DType::kFloat8E4M3, {n, k});
  kiln::TensorView tsfa = view(sfa.data(), kiln::DType::kFloat32, m, kb, 1, 4);
  kiln::TensorView tsfb = kiln::TensorView::contiguous(sfb.data(), kiln::DType::kFloat32, {56, kb});
  kiln::TensorView td = kiln::TensorView::contiguous(d.data(), kiln::DType::kBFloat16, {m, n});
  KILN_CU_CHECK(cu().cuMemsetD8(a.ptr, 0, a.bytes));
  KILN_CU_CHECK(cu().cuMemsetD8(b.ptr, 0, b.bytes));
  KILN_CU_CHECK(cu().cuMemsetD8(sfa.ptr, 0, sfa.bytes));
  KILN_CU_CHECK(cu().cuMemsetD8(sfb.ptr, 0, sfb.bytes));

  auto expect_error = [](const char* what, const std::function<void()>& call, kiln::ErrorKind kind, const char* needle) {
    try {
      call();
      report(false, std::string("error: ") + what + ": no error");
    } catch (const kiln::Error& e) {
      const bool ok = e.kind() == kind && std::string(e.what()).find(needle) != std::string::npos;
      report(ok, std::string("error: ") + what + ": " + e.what());
    }
  };
  // Tensors on a device that does not exist: the first device query refuses it, before anything launches.
  const int count = kiln::cuda::device_count();
  expect_error("all tensors on a device that does not exist", [&] {
    kiln::TensorView x[5] = {ta, tsfa, tb, tsfb, td};
    for (auto& t : x) t.device = count;
    kiln::fp8_gemm_nt(x[0], x[1], x[2], x[3], x[4]);
  }, kiln::ErrorKind::kValueError, "fp8_gemm_nt: a must be on an existing CUDA device");
  expect_error("b on another device than a", [&] {
    kiln::TensorView other = tb;
    other.device = count;
    kiln::fp8_gemm_nt(ta, tsfa, other, tsfb, td);
  }, kiln::ErrorKind::kValueError, "b must be on the same device as a");
  expect_error("contiguous [1, kb] scales of A (not TMA-aligned)", [&] {
    kiln::fp8_gemm_nt(ta, view(sfa.data(), kiln::DType::kFloat32, m, kb, kb, 1), tb, tsfb, td);
  }, kiln::ErrorKind::kValueError, "sfa must be MN-major and TMA-aligned");

  // Repeated calls with the same tensors: no tensor map is encoded again; host time per call.
  kiln::fp8_gemm_nt(ta, tsfa, tb, tsfb, td);
  KILN_CU_CHECK(cu().cuCtxSynchronize());
  const uint64_t encodes = kiln::ops::tensor_map_encodes();
  const int calls = 500;  // below the launch queue's depth, so the host never waits for the GPU
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) kiln::fp8_gemm_nt(ta, tsfa, tb, tsfb, td);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  KILN_CU_CHECK(cu().cuCtxSynchronize());
  char line[200];
  std::snprintf(line, sizeof line, "hot path: %d repeated calls encoded %llu tensor maps (want 0); %.2f us host time per call "
                "(validation + lookup + launch, m=1 n=7168 k=2048)", calls,
                static_cast<unsigned long long>(kiln::ops::tensor_map_encodes() - encodes), us);
  report(kiln::ops::tensor_map_encodes() == encodes, line);
  g_timings.push_back(line);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool quick = mode == "--quick", multicast_only = mode == "--multicast";
  const int64_t dense_nk[][2] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168}, {7168, 2048}, {576, 7168}};

  // Precompile the whole serving warm-up of these shapes (M = 1..16384 for each (N, K)) plus the ragged
  // shapes, in parallel: the launches below then only load. Needs no GPU.
  try {
    std::vector<kiln::CompileRequest> requests;
    for (const auto& nk : dense_nk) {
      kiln::CompileRequest r{"fp8_gemm_nt", {{"n", nk[0]}, {"k", nk[1]}}, std::nullopt, std::nullopt};
      r.ranges["m"] = {1, 16384};
      requests.push_back(r);
    }
    for (auto nk : {std::pair<int64_t, int64_t>{576, 512}, {576, 720}, {2112, 512}, {2112, 720}}) {
      kiln::CompileRequest r{"fp8_gemm_nt", {{"n", nk.first}, {"k", nk.second}}, std::nullopt, std::nullopt};
      r.ranges["m"] = {1, 1000};
      requests.push_back(r);
    }
    const auto t0 = std::chrono::steady_clock::now();
    kiln::PrecompileOptions options;
    const auto reports = kiln::precompile(requests, options);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    size_t hits = 0;
    for (const auto& r : reports) hits += r.hit ? 1 : 0;
    char line[200];
    std::snprintf(line, sizeof line, "precompile: %zu kernels (%zu already cached) for 7 shapes x M = 1..16384 and 4 ragged "
                  "shapes in %.2f s with %s, %u threads", reports.size(), hits, s,
                  reports.empty() ? "-" : kiln::to_string(reports[0].backend), std::thread::hardware_concurrency());
    report(!reports.empty(), line);
    g_timings.push_back(line);
  } catch (const std::exception& e) {
    report(false, std::string("precompile: ") + e.what());
  }

  // The test's own quantiser and reference: the dequantised product is close to the exact one.
  {
    const HostData h = make_data(16, 256, 1024, 7);
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < 16; ++r) rows.push_back(r);
    const Reference ref = reference_of(h, rows);
    const double diff = calc_diff(ref.q, ref.f);
    char line[120];
    std::snprintf(line, sizeof line, "host quantiser: calc_diff(dequantised, exact) = %.3g (in (0, 1e-3))", diff);
    report(diff > 0 && diff < 1e-3, line);
  }

  try {
    if (!kiln::gpu_test::start_launches("fp8_gemm_op_test", g_failures)) return g_failures ? 1 : 77;
    Timing timing;
    uint64_t seed = 1;

    // Dense shapes at M = 1, 64, 128, 4096 (timed), plus (for N = 2112) one M per kernel of the whole plan.
    for (const auto& nk : dense_nk) {
      if (multicast_only) break;
      std::vector<Case> cases;
      for (int64_t m : {1, 64, 128, 4096}) {
        Case c{m, nk[0], nk[1]};
        c.timed = true;
        cases.push_back(c);
      }
      if (nk[0] == 2112 && !quick) {
        kiln::CompileRequest r{"fp8_gemm_nt", {{"n", nk[0]}, {"k", nk[1]}}, std::nullopt, std::nullopt};
        r.ranges["m"] = {1, 16384};
        for (const auto& kernel : kiln::plan(r)) {
          Case c{kernel.ranges.front().second, nk[0], nk[1]};
          c.note = "(one M per kernel of the plan)";
          cases.push_back(c);
        }
      }
      run_group(cases, seed++, &timing);
    }

    // Ragged: M not a multiple of any tile, N = 576 (not a multiple of 128 or 192), padded strides, a K tail.
    if (!multicast_only) {
      std::vector<Case> cases;
      for (int64_t m : {1, 37, 200, 1000}) cases.push_back(Case{m, 576, 512});
      Case padded_d{37, 576, 512};
      padded_d.ldd = 584;
      cases.push_back(padded_d);
      Case padded_all{200, 576, 512};
      padded_all.ldd = 640;
      padded_all.lda_pad = 128;
      padded_all.ldb_pad = 16;
      padded_all.sfa_pad = 8;
      cases.push_back(padded_all);
      // The plan's own fill tiles: 64x96 at 400 x 1536 x 2048, 128x96 at 2881 x 1024 x 2048 (ragged M).
      Case fill_64{400, 1536, 2048};
      fill_64.note = "the plan's 64x96 fill tile";
      cases.push_back(fill_64);
      Case fill_128{2881, 1024, 2048};
      fill_128.note = "the plan's 128x96 fill tile";
      cases.push_back(fill_128);
      if (!quick) {
        Case few_sms{1000, 576, 512};
        few_sms.note = "set_num_sms(7)";
        few_sms.before = [] { kiln::set_num_sms(7); };
        few_sms.after = [] { kiln::set_num_sms(0); };
        cases.push_back(few_sms);
        // A case run under kernel overrides (and, with num_sms > 0, set_num_sms), cleared again after it.
        const auto forced_at = [](int64_t m, int64_t n, int64_t k, const char* note, kiln::Fp8GemmOverrides o,
                                  int num_sms = 0) {
          Case c{m, n, k};
          c.note = note;
          c.before = [o, num_sms] {
            if (num_sms > 0) kiln::set_num_sms(num_sms);
            kiln::set_fp8_gemm_overrides(o);
          };
          c.after = [num_sms] {
            if (num_sms > 0) kiln::set_num_sms(0);
            kiln::set_fp8_gemm_overrides({});
          };
          return c;
        };
        const auto forced = [&forced_at](int64_t m, const char* note, kiln::Fp8GemmOverrides o, int num_sms = 0) {
          return forced_at(m, 576, 512, note, o, num_sms);
        };
        cases.push_back(forced(1000, "overrides block_m=64 block_n=32 stages=3", {64, 32, 3, 0}));
        cases.push_back(forced(200, "overrides block_m=128 block_n=144", {128, 144, 0, 0}));
        // 176-column tiles take their columns by the column map (three pieces, each in its own scale block);
        // with few SMs each CTA walks many tiles.
        cases.push_back(forced(1000, "overrides block_m=128 block_n=176", {128, 176, 0, 0}));
        cases.push_back(forced(1000, "overrides block_m=128 block_n=176, set_num_sms(4)", {128, 176, 0, 0}, 4));
        cases.push_back(forced(1000, "overrides block_m=128 block_n=160, set_num_sms(5)", {128, 160, 0, 0}, 5));
        cases.push_back(forced(300, "overrides block_m=256 (two waves per math warpgroup)", {256, 0, 0, 0}));
        cases.push_back(forced(300, "overrides block_m=256 block_n=64 cluster_n=2 (A multicast, 9 n blocks: odd)",
                               {256, 64, 0, 0, 2}));
        cases.push_back(forced(200, "overrides block_n=64 split_k=2 (split-K pairs on 128x64 and 64x64)",
                               {0, 64, 0, 0, 0, 2}));
        // The fill tiles the plan swaps in at little N (kFillTiles), each with a ragged last tile in M, N and K
        // (584 = 6 x 96 + 8 = 4 x 144 + 8, 1000 = 10 x 96 + 40 = 12 x 80 + 40; 720 = 5 x 128 + 80) and, for one,
        // a few SMs walking many tiles.
        cases.push_back(forced_at(1000, 584, 720, "overrides block_m=64 block_n=96", {64, 96, 0, 0}));
        cases.push_back(forced_at(1000, 584, 720, "overrides block_m=64 block_n=144", {64, 144, 0, 0}));
        cases.push_back(forced_at(999, 1000, 2048, "overrides block_m=128 block_n=80", {128, 80, 0, 0}));
        cases.push_back(forced_at(999, 1000, 2048, "overrides block_m=128 block_n=96, set_num_sms(5)",
                                  {128, 96, 0, 0}, 5));
      }
      run_groups(cases, seed, &timing);
      run_group({Case{37, 576, 720}, Case{1000, 576, 720}}, seed++, &timing);  // K tail: 720 = 5 x 128 + 80
      if (!quick) {
        // The third: the plan's 128x32 split-K pairs (2112 x 7168 at M = 65..128) with A's box short of the tile.
        std::vector<Case> more = {Case{65, 2112, 512}, Case{130, 2112, 720}, Case{100, 2112, 7168}};
        more[1].ldd = 2120;
        CUstream stream = nullptr;
        KILN_CU_CHECK(cu().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
        Case on_stream{300, 2112, 512};
        on_stream.stream = stream;
        on_stream.note = "on a created non-blocking stream";
        more.push_back(on_stream);
        run_group({more[0]}, seed++, &timing);
        run_group({more[1]}, seed++, &timing);
        run_group({more[2]}, seed++, &timing);
        run_group({more[3]}, seed++, &timing);
        (void)cu().cuStreamDestroy(stream);
        // The plan's 128x64 where B is streamed (kNarrowL2Weight): 129..256 x 4096 x 7168 and 257..512 x 2048 x
        // 4096, each with a partial last m block.
        run_group({Case{200, 4096, 7168}}, seed++, &timing);
        run_group({Case{300, 2048, 4096}}, seed++, &timing);
        // The plan's 128x112 fill tile (kFill112: three column-mapped pieces, 64 + 32 + 16) at 7168 x 2048, over
        // two m blocks and over four, each with a partial last one.
        run_group({Case{200, 7168, 2048}}, seed++, &timing);
        run_group({Case{448, 7168, 2048}}, seed++, &timing);
        // The plan's groups of 16 m units (24576 x 1536): 128x192 over 19 m blocks (a whole group, then three
        // blocks, the last partial) and 256x128 pairs over 17 units (the last group one unit, partial).
        run_group({Case{2400, 24576, 1536}}, seed++, &timing);
        run_group({Case{4300, 24576, 1536}}, seed++, &timing);
      }
    }

    if (!multicast_only) {
      // The m-grouped GEMM: the plan's kernel for all the rows, and forced tiles over its paths (64-row tiles,
      // split-K pairs, column-mapped 144/160-column tiles, 192 columns in two slices), a ragged N (576) and K
      // (720), experts without rows, padding-only blocks, and an out-of-range index.
      const std::vector<int64_t> experts = {37, 0, 300, 128, 1, 200};
      test_m_grouped(experts, 576, 7168, 2, "", {}, seed++);
      test_m_grouped(experts, 576, 720, 1, "", {}, seed++);
      test_m_grouped({100, 0}, 2112, 7168, 0, "(the plan's 128x32 split-K pairs)", {}, seed++);
      test_m_grouped(experts, 576, 720, 2, "overrides block_m=64 block_n=32 split_k=2", {64, 32, 0, 0, 0, 2}, seed++);
      test_m_grouped(experts, 576, 720, 1, "overrides block_m=64 block_n=128", {64, 128, 0, 0}, seed++);
      test_m_grouped(experts, 576, 720, 0, "overrides block_m=128 block_n=144", {128, 144, 0, 0}, seed++);
      test_m_grouped(experts, 1000, 2048, 0, "overrides block_m=128 block_n=160", {128, 160, 0, 0}, seed++);
      test_m_grouped(experts, 1000, 2048, 0, "overrides block_m=128 block_n=192", {128, 192, 0, 0}, seed++);
      test_m_grouped({700, 900, 0, 1200, 333, 64, 2000, 1000}, 4096, 512, 3, "(eight experts)", {}, seed++);
      test_m_grouped(experts, 576, 720, 1, "(block 2's first index out of range)", {}, seed++, 2);
      // A buffer mostly padding (a serving engine's worst-case size): every walker skips the same blocks, here among
      // its valid ones (their tiles walk m first), with A multicast to a pair (both CTAs skip alike) and without.
      test_m_grouped(experts, 4096, 2048, 24, "(mostly padding)", {}, seed++);
      test_m_grouped(experts, 4096, 2048, 13, "overrides block_m=128 block_n=128 cluster_n=2 (mostly padding)",
                     {128, 128, 0, 0, 2}, seed++);
      // The masked GEMM: the plan's kernels at a decode and a prefill expected_m, forced tiles over the same paths
      // plus pairs sharing A, experts without rows, counts past m and below 0 (clamped), and m not a multiple of
      // the tile (a group's last block reads into the next group's rows, whose rows of D it must not write).
      const std::vector<int64_t> counts = {37, 0, 300, 128, 1, 200, 400, -5};
      test_masked(counts, 384, 576, 7168, 20, "", {}, seed++);
      test_masked(counts, 384, 4096, 512, 192, "", {}, seed++);
      test_masked(counts, 300, 576, 720, 64, "(m not a multiple of 64 or 128)", {}, seed++);
      test_masked({100, 3}, 256, 2112, 7168, 16, "(the plan's split-K pairs)", {}, seed++);
      test_masked(counts, 384, 576, 720, 64, "overrides block_m=64 block_n=32 split_k=2", {64, 32, 0, 0, 0, 2}, seed++);
      test_masked(counts, 300, 576, 720, 64, "overrides block_m=64 block_n=128", {64, 128, 0, 0}, seed++);
      test_masked(counts, 384, 1024, 720, 64, "overrides block_m=64 block_n=128 cluster_n=2", {64, 128, 0, 0, 2},
                  seed++);
      test_masked(counts, 384, 576, 720, 64, "overrides block_m=128 block_n=144", {128, 144, 0, 0}, seed++);
      test_masked(counts, 300, 1000, 2048, 64, "overrides block_m=128 block_n=160", {128, 160, 0, 0}, seed++);
      test_masked(counts, 384, 1000, 2048, 64, "overrides block_m=128 block_n=192", {128, 192, 0, 0}, seed++);
      test_masked({1, 2, 3, 4}, 64, 7168, 2048, 2, "(a decode batch)", {}, seed++);
    }
    if (!quick && !multicast_only) {
      test_casts_then_gemm(200, 576, 512);
      test_casts_then_gemm(1, 2112, 7168);
      test_gpu_errors_and_hot_path();
    }
    if (multicast_only) {
      // A run of its own, since it may hang: B multicast in CTA pairs (compile-checked since its last fix,
      // not yet run), against the same shapes without it.
      std::vector<Case> mc;
      for (int64_t m : {4096, 384}) {
        Case c{m, 7168, 2048};
        c.note = "overrides 128x128 cluster_m=1 (baseline)";
        c.timed = m == 4096;
        c.before = [] { kiln::set_fp8_gemm_overrides({128, 128, 0, 1}); };
        c.after = [] { kiln::set_fp8_gemm_overrides({}); };
        mc.push_back(c);
      }
      for (int64_t m : {4096, 384}) {  // 384: three 128-row blocks, an odd number
        Case c{m, 7168, 2048};
        c.note = "overrides 128x128 cluster_m=2 (B multicast)";
        c.timed = m == 4096;
        c.before = [] { kiln::set_fp8_gemm_overrides({128, 128, 0, 2}); };
        c.after = [] { kiln::set_fp8_gemm_overrides({}); };
        mc.push_back(c);
      }
      run_group(mc, seed++, &timing);
    }
  } catch (const std::exception& e) {
    report(false, std::string("fp8_gemm_op_test: ") + e.what());
  }

  std::printf("\nsummary (events, L2 flushed, median of 20):\n");
  for (const auto& line : g_timings) std::printf("  %s\n", line.c_str());
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
