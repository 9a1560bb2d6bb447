// GPU test of kiln::k_grouped_bf16_gemm_tn_contiguous (the MoE experts' weight gradients, DeepGEMM's form):
//   D[g] (float32 [m, n]) = C[g] + A_g^T . B_g,   A_g = a[t_g : t_g + ks[g]] ([k_g, m]), B_g likewise of b ([k_g, n]).
// Cases: token counts that are not multiples of the 64-token K block (1, 37, 65, 300: each group's K tail must read
// TMA's zeros, not the next group's tokens) beside whole ones, groups without tokens (D[g] zeroed, or C[g] kept),
// every C mode (none, d itself, another tensor), M off the 64-row boxes and N off the tiles, forced 64-, 128- and
// 256-row tiles, 40 groups (two launches of one kernel) and groups whose counts pick different kernels, padded row
// strides of a and b (NaN in the padding, which must never be read into D), padded D planes, and DeepSeek-V3's expert
// shapes (m x n = 4096 x 7168 and 7168 x 2048) with router-like token counts.
//
// Inputs are random bf16 with per-token magnitudes over 2^-4..2^4 (never zeros); C is random float32. D (all of its
// planes, their padding and a guard plane after them) is poisoned with NaN first. Checked rows of each group (all for
// m <= 256, else 48: first, last, tile edges, random) are compared with a float64 reference of the same inputs:
// calc_diff below 1e-7, and every element within 2^-23 of its magnitude plus 2^-23 of the sum of |a_i b_i| per 16-wide
// WGMMA step (the tensor cores' float32 worst case). NaN never passes, and nothing outside D's elements may change.
// Prints PASS/FAIL lines; exit 0 only if all pass, 77 without a GPU.
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
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
using kiln::gpu_test::strided_view;
using kiln::gpu_test::g_failures;
using kiln::gpu_test::report;

// C's values: random float32 in [-4, 4), never zero.
float random_c(uint64_t seed, uint64_t index) {
  const double u = static_cast<double>(mix(seed * 131 + index) >> 11) / 9007199254740992.0 * 8.0 - 4.0;
  return static_cast<float>(std::fabs(u) < 1e-3 ? 1e-3 : u);
}

enum class CMode { kNone, kInPlace, kOther };

struct Case {
  std::vector<int64_t> ks;
  int64_t m, n;
  CMode c_mode = CMode::kNone;
  kiln::Bf16GemmOverrides forced{};
  int64_t pad_ab = 0;     // extra elements per token row of a and b (NaN)
  int64_t pad_plane = 0;  // extra elements between D's planes (poison that must stay)
};

std::string name_of(const Case& c) {
  std::string ks;
  if (c.ks.size() <= 10) {
    for (const int64_t k : c.ks) ks += (ks.empty() ? "" : ",") + std::to_string(k);
  } else {
    int64_t total = 0;
    for (const int64_t k : c.ks) total += k;
    ks = std::to_string(c.ks.size()) + " groups, " + std::to_string(total) + " tokens";
  }
  std::string name = "k_grouped m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " ks=[" + ks + "]";
  name += c.c_mode == CMode::kNone ? " c=None" : c.c_mode == CMode::kInPlace ? " c=d" : " c=other";
  if (c.forced.block_m)
    name += " forced " + std::to_string(c.forced.block_m) + "x" + std::to_string(c.forced.block_n);
  if (c.pad_ab) name += " padded a/b rows";
  if (c.pad_plane) name += " padded planes";
  return name;
}

// The rows of a group's D the check compares: all up to 256, else 48 (first, last, around 64-row tile edges, random).
std::vector<int64_t> checked_rows(int64_t m, uint64_t seed) {
  std::vector<int64_t> rows;
  if (m <= 256) {
    for (int64_t r = 0; r < m; ++r) rows.push_back(r);
    return rows;
  }
  for (const int64_t r : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{127}, int64_t{128}, m / 2,
                          m - 65, m - 64, m - 2, m - 1})
    rows.push_back(r);
  for (uint64_t i = 0; rows.size() < 48; ++i) rows.push_back(static_cast<int64_t>(mix(seed + i) % m));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

void run_case(const Case& c, uint64_t seed) {
  const std::string name = name_of(c);
  const int64_t groups = static_cast<int64_t>(c.ks.size());
  std::vector<int64_t> first(c.ks.size());
  int64_t total = 0;
  for (size_t g = 0; g < c.ks.size(); ++g) {
    first[g] = total;
    total += c.ks[g];
  }
  // a [total, m] and b [total, n] with rows of m (rounded up to 8) + pad and n + pad (the padding NaN), and their
  // values transposed as floats ([m][total], [n][total]) for the reference's inner loops.
  // One token in all: a [1, m] tensor as it comes, its row stride m (not 16-byte aligned where m is not a multiple of
  // 8), which the call must take: a single row has no stride to align.
  const int64_t lda = total == 1 && c.pad_ab == 0 ? c.m : (c.m + 7) / 8 * 8 + c.pad_ab, ldb = c.n + c.pad_ab;
  std::vector<uint16_t> a(static_cast<size_t>(std::max<int64_t>(total, 1) * lda), 0x7fc0);
  std::vector<uint16_t> b(static_cast<size_t>(std::max<int64_t>(total, 1) * ldb), 0x7fc0);
  std::vector<float> at(static_cast<size_t>(c.m * total)), bt(static_cast<size_t>(c.n * total));
  kiln::gpu_test::parallel_for(static_cast<size_t>(total), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      for (int64_t r = 0; r < c.m; ++r) {
        const uint16_t v = random_bf16(seed, t, static_cast<uint64_t>(r));
        a[t * static_cast<size_t>(lda) + static_cast<size_t>(r)] = v;
        at[static_cast<size_t>(r * total) + t] = bf16_to_f32(v);
      }
      for (int64_t j = 0; j < c.n; ++j) {
        const uint16_t v = random_bf16(~seed, t, static_cast<uint64_t>(j));
        b[t * static_cast<size_t>(ldb) + static_cast<size_t>(j)] = v;
        bt[static_cast<size_t>(j * total) + t] = bf16_to_f32(v);
      }
    }
  });
  // D: `groups` planes of m rows of n, plane stride m * n + pad_plane, then a guard plane; all NaN (0xffffffff).
  const int64_t plane = c.m * c.n + c.pad_plane;
  const size_t d_elems = static_cast<size_t>((groups + 1) * plane);
  DeviceBuffer da(a.size() * 2), db(b.size() * 2), dd(d_elems * 4);
  DeviceBuffer dc(c.c_mode == CMode::kOther ? static_cast<size_t>(groups * c.m * c.n) * 4 : 4);
  da.upload(a.data());
  db.upload(b.data());
  dd.poison();
  // C as the reference adds it, [G][m][n]: in D's planes (c=d) or its own dense tensor (c=other).
  std::vector<float> initial_c;
  if (c.c_mode != CMode::kNone) {
    initial_c.resize(static_cast<size_t>(groups * c.m * c.n));
    for (size_t i = 0; i < initial_c.size(); ++i) initial_c[i] = random_c(seed, i);
    if (c.c_mode == CMode::kOther) {
      dc.upload(initial_c.data());
    } else {
      std::vector<uint32_t> host(d_elems, 0xffffffffu);
      for (int64_t g = 0; g < groups; ++g)
        std::memcpy(&host[static_cast<size_t>(g * plane)], &initial_c[static_cast<size_t>(g * c.m * c.n)],
                    static_cast<size_t>(c.m * c.n) * 4);
      dd.upload(host.data(), d_elems * 4);
    }
  }
  const kiln::TensorView ta = strided_view(da.data(), kiln::DType::kBFloat16, {total, c.m}, {lda, 1});
  const kiln::TensorView tb = strided_view(db.data(), kiln::DType::kBFloat16, {total, c.n}, {ldb, 1});
  const kiln::TensorView td = strided_view(dd.data(), kiln::DType::kFloat32, {groups, c.m, c.n}, {plane, c.n, 1});
  const kiln::TensorView tc = strided_view(dc.data(), kiln::DType::kFloat32, {groups, c.m, c.n}, {c.m * c.n, c.n, 1});
  const kiln::cuda::DriverApi& api = kiln::cuda::DriverApi::get();
  try {
    kiln::set_bf16_gemm_overrides(c.forced);
    kiln::k_grouped_bf16_gemm_tn_contiguous(ta, tb, td, c.ks,
                                            c.c_mode == CMode::kNone      ? nullptr
                                            : c.c_mode == CMode::kInPlace ? &td
                                                                          : &tc);
    KILN_CU_CHECK(api.cuCtxSynchronize());
  } catch (const std::exception& e) {
    report(false, name + ": " + e.what());
  }
  kiln::set_bf16_gemm_overrides({});

  std::vector<uint32_t> got_bits(d_elems);
  dd.download(got_bits.data());
  struct Task {
    int64_t g, r;
  };
  std::vector<Task> tasks;
  for (int64_t g = 0; g < groups; ++g)
    for (const int64_t r : checked_rows(c.m, seed + static_cast<uint64_t>(g))) tasks.push_back({g, r});
  struct Sums {
    double num = 0.0, den = 0.0, worst = 0.0;
    int64_t bad = 0;
  };
  std::vector<Sums> sums(tasks.size());
  kiln::gpu_test::parallel_for(tasks.size(), [&](size_t begin, size_t end) {
    for (size_t index = begin; index < end; ++index) {
      const auto [g, r] = tasks[index];
      const size_t k = static_cast<size_t>(c.ks[static_cast<size_t>(g)]);
      const float* ar = at.data() + r * total + first[static_cast<size_t>(g)];
      // Per 16-wide WGMMA step the float32 sum may lose 2^-23 of its magnitude (at most the sum of |a_i b_i|).
      const double sum_bound = std::ldexp(static_cast<double>((k + 15) / 16 + 1), -23);
      Sums& s = sums[index];
      for (int64_t j = 0; j < c.n; ++j) {
        const float* br = bt.data() + j * total + first[static_cast<size_t>(g)];
        double ref = 0.0, abs_sum = 0.0;
        for (size_t i = 0; i < k; ++i) {
          const double prod = static_cast<double>(ar[i]) * static_cast<double>(br[i]);
          ref += prod;
          abs_sum += std::fabs(prod);
        }
        if (!initial_c.empty()) ref += initial_c[static_cast<size_t>((g * c.m + r) * c.n + j)];
        float got;
        std::memcpy(&got, &got_bits[static_cast<size_t>(g * plane + r * c.n + j)], 4);
        const double err = std::fabs(static_cast<double>(got) - ref);
        const double bound = std::ldexp(std::fabs(ref), -23) + sum_bound * abs_sum;
        if (!std::isfinite(got) || err > bound) ++s.bad;
        if (std::isfinite(got)) s.worst = std::max(s.worst, err / std::max(bound, 1e-30));
        s.num += (got - ref) * (got - ref);
        s.den += static_cast<double>(got) * got + ref * ref;
      }
    }
  });
  double num = 0.0, den = 0.0, worst = 0.0;
  int64_t bad = 0;
  for (const Sums& s : sums) {
    num += s.num;
    den += s.den;
    worst = std::max(worst, s.worst);
    bad += s.bad;
  }
  // Nothing outside D's elements changed: each plane's padding and the guard plane keep their poison.
  int64_t outside_changed = 0;
  for (int64_t g = 0; g <= groups; ++g)
    for (int64_t i = g < groups ? c.m * c.n : 0; i < plane; ++i)
      if (got_bits[static_cast<size_t>(g * plane + i)] != 0xffffffffu) ++outside_changed;
  const double diff = den > 0 ? num / den : 0.0;
  char detail[200];
  std::snprintf(detail, sizeof(detail), ": calc_diff %.2e, worst error %.2f of its bound, %lld out of bounds, "
                "%lld elements outside D changed", diff, worst, static_cast<long long>(bad),
                static_cast<long long>(outside_changed));
  report(bad == 0 && outside_changed == 0 && diff < 1e-7 && std::isfinite(diff), name + detail);
}

}  // namespace

int main() {
  if (!kiln::gpu_test::start_launches("bf16_gemm_k_grouped_test", g_failures)) return 77;
  std::vector<Case> cases;
  // Token counts off the 64-token K block beside whole ones, and a group without tokens, in every C mode; M off the
  // 64-row boxes (300: a last box of 44 rows) and N off the tiles.
  const std::vector<int64_t> mix8 = {37, 0, 300, 64, 1, 65, 1000, 128};
  for (const CMode mode : {CMode::kNone, CMode::kInPlace, CMode::kOther}) {
    cases.push_back({mix8, 256, 576, mode});
    cases.push_back({mix8, 300, 136, mode});
  }
  // Forced tiles: 64x64 (one math warpgroup), 128x128, 128x256 (a float32 staging tile in passes), 256x64 (two
  // waves), 128x192.
  for (const kiln::Bf16GemmOverrides& t : {kiln::Bf16GemmOverrides{64, 64, 0, 0}, kiln::Bf16GemmOverrides{128, 128, 0, 0},
                                           kiln::Bf16GemmOverrides{128, 256, 0, 0},
                                           kiln::Bf16GemmOverrides{256, 64, 0, 0},
                                           kiln::Bf16GemmOverrides{128, 192, 0, 0}}) {
    cases.push_back({mix8, 300, 576, CMode::kNone, t});
    cases.push_back({mix8, 256, 1024, CMode::kInPlace, t});
  }
  // 40 groups of one kernel's counts (two launches: 32 + 8), and of mixed counts (several kernels, interleaved).
  std::vector<int64_t> forty_same, forty_mixed;
  for (uint64_t g = 0; g < 40; ++g) {
    forty_same.push_back(257 + static_cast<int64_t>(mix(0x243f6a88ull + g) % 700));
    forty_mixed.push_back(static_cast<int64_t>(mix(0x85a308d3ull + g) % 1500));
  }
  forty_same[7] = 0;
  cases.push_back({forty_same, 128, 256, CMode::kNone});
  cases.push_back({forty_mixed, 192, 512, CMode::kOther});
  // Padded rows of a and b (NaN padding) and padded D planes; one group; every group without tokens.
  cases.push_back({mix8, 256, 576, CMode::kNone, {}, 24, 0});
  cases.push_back({mix8, 200, 520, CMode::kInPlace, {}, 8, 100});
  cases.push_back({{777}, 512, 1024, CMode::kNone});
  cases.push_back({{0, 1, 0}, 300, 136, CMode::kOther});
  cases.push_back({{0, 0, 0}, 64, 128, CMode::kNone});
  cases.push_back({{0, 0}, 64, 128, CMode::kOther});
  // DeepSeek-V3's experts: the gate/up projection's gradient (m x n = 4096 x 7168) and the down projection's (7168 x
  // 2048), 8 experts with router-like counts.
  const std::vector<int64_t> routed = {512, 1536, 96, 0, 2048, 700, 1024, 181};
  cases.push_back({routed, 4096, 7168, CMode::kNone});
  cases.push_back({routed, 7168, 2048, CMode::kInPlace});
  uint64_t seed = 0x3c6ef372;
  for (const Case& c : cases) run_case(c, seed++);
  std::printf("%s: %d failures\n", g_failures ? "FAIL" : "PASS", g_failures);
  return g_failures ? 1 : 0;
}
