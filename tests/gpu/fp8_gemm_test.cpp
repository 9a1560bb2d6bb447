// GPU test of the FP8 GEMM device kernel (include/kiln/kernels/fp8_gemm.cuh), driven directly through the
// compiler component and the loader: no op layer yet. For each shape it makes random FP8 inputs the way
// DeepSeek-V3 quantises (A per token per 128 K, B per 128x128 block, scale = amax / 448), poisons D with
// NaN, launches, and compares against a float64 reference computed from the dequantised inputs
// (DeepGEMM's calc_diff < 1e-5; NaN never passes), and against the unquantised product (< 1e-3). Large
// shapes check a sample of rows. Rows and columns outside D must stay poisoned. Shapes with M = 4096 (and
// the other dense shapes) are also timed with CUDA events, L2 flushed before each call.
//
// Prints one PASS/FAIL line per shape; exit status 0 only when everything passed, 77 when no GPU is there
// (after compiling every kernel, which needs none). DG_JIT_USE_NVRTC=1 compiles with NVRTC.
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels/fp8_gemm_layout.h"
#include "kiln/kernels/fp8_gemm_params.h"
#include "ops/fp8_gemm.hpp"
#include "ops/fp8_gemm_heuristic.hpp"
#include "fp8_reference.hpp"
#include "gpu_test_support.hpp"

namespace {

using kiln::gpu_test::DeviceBuffer;
using kiln::gpu_test::Timing;
using kiln::gpu_test::magnitude;
using kiln::gpu_test::mix;
using kiln::gpu_test::parallel_for;
using kiln::gpu_test::uniform;
using kiln::gpu_test::e4m3_to_double;
using kiln::gpu_test::float_to_e4m3;
using kiln::gpu_test::dot;
using kiln::gpu_test::bf16_to_double;
using kiln::gpu_test::calc_diff;

using kiln::kernels::fp8_gemm_layout;
using kiln::kernels::fp8_gemm_max_stages;
using kiln::kernels::fp8_gemm_num_threads;

static_assert(sizeof(CUtensorMap) == sizeof(kiln::TmaDescriptor), "TmaDescriptor must hold a CUtensorMap");
// CUDA 13 declares CUtensorMap 128-byte aligned (12.x: 64); TMA itself needs 64, which TmaDescriptor gives.
static_assert(alignof(kiln::TmaDescriptor) >= 64, "TMA descriptors must be 64-byte aligned");

// ---- e4m3 (OCP FN: bias 7, no infinities, 0x7f/0xff NaN, max 448) ------------------------------------------

bool check_e4m3_codec() {
  // Every finite code decodes and encodes back to itself; midpoints round to even; overflow saturates.
  for (int b = 0; b < 256; ++b) {
    const double v = e4m3_to_double(static_cast<uint8_t>(b));
    if (std::isnan(v)) continue;
    uint8_t back = float_to_e4m3(static_cast<float>(v));
    if (v == 0.0) back = static_cast<uint8_t>(back | (b & 0x80));  // +-0 both fine
    if (back != b) {
      std::printf("FAIL e4m3 codec: code 0x%02x -> %g -> 0x%02x\n", b, v, back);
      return false;
    }
  }
  const bool ok = float_to_e4m3(1.0625f) == 0x38 && float_to_e4m3(1.1875f) == 0x3a &&
                  float_to_e4m3(1000.0f) == 0x7e && float_to_e4m3(-1000.0f) == 0xfe &&
                  float_to_e4m3(std::ldexp(1.0f, -10)) == 0x00 && float_to_e4m3(std::ldexp(3.0f, -10)) == 0x02;
  std::printf("%s e4m3 codec (256 codes round-trip, ties to even, saturation)\n", ok ? "PASS" : "FAIL");
  return ok;
}

// ---- deterministic random inputs -----------------------------------------------------------------------

struct Gen {
  uint64_t seed;
  // A[m, k]: a per-row magnitude times a uniform value.
  float a(uint64_t m, uint64_t k) const {
    return magnitude(mix(seed ^ (m * 0x51ull))) * uniform(mix(seed * 31 + (m << 24) + k));
  }
  // B[n, k]: a per-128x128-block magnitude times a uniform value.
  float b(uint64_t n, uint64_t k) const {
    return magnitude(mix(~seed ^ (((n / 128) << 20) + k / 128))) * uniform(mix(~seed * 17 + (n << 24) + k));
  }
};

struct HostProblem {
  uint32_t m, n, k, kb_count, m_aligned;
  std::vector<uint8_t> a, b;  // [m][k], [n][k]
  std::vector<float> sfa;     // [kb][m_aligned], MN-major; padding rows NaN (never read into D)
  std::vector<float> sfb;     // [ceil(n/128)][kb]
};

HostProblem make_problem(uint32_t m, uint32_t n, uint32_t k, const Gen& g) {
  HostProblem p;
  p.m = m, p.n = n, p.k = k;
  p.kb_count = (k + 127) / 128;
  p.m_aligned = (m + 3) / 4 * 4;
  p.a.resize(static_cast<size_t>(m) * k);
  p.b.resize(static_cast<size_t>(n) * k);
  p.sfa.assign(static_cast<size_t>(p.kb_count) * p.m_aligned, std::nanf(""));
  const uint32_t nb_count = (n + 127) / 128;
  p.sfb.resize(static_cast<size_t>(nb_count) * p.kb_count);
  parallel_for(m, [&](size_t begin, size_t end) {
    for (size_t row = begin; row < end; ++row)
      for (uint32_t kb = 0; kb < p.kb_count; ++kb) {
        const uint32_t k0 = kb * 128, k1 = std::min(k, k0 + 128);
        float amax = 0;
        for (uint32_t c = k0; c < k1; ++c) amax = std::max(amax, std::fabs(g.a(row, c)));
        const float scale = std::max(amax, 1e-4f) / 448.0f;
        p.sfa[static_cast<size_t>(kb) * p.m_aligned + row] = scale;
        for (uint32_t c = k0; c < k1; ++c) p.a[row * k + c] = float_to_e4m3(g.a(row, c) / scale);
      }
  });
  parallel_for(static_cast<size_t>(nb_count) * p.kb_count, [&](size_t begin, size_t end) {
    for (size_t blk = begin; blk < end; ++blk) {
      const uint32_t nb = static_cast<uint32_t>(blk / p.kb_count), kb = static_cast<uint32_t>(blk % p.kb_count);
      const uint32_t n0 = nb * 128, n1 = std::min(n, n0 + 128), k0 = kb * 128, k1 = std::min(k, k0 + 128);
      float amax = 0;
      for (uint32_t r = n0; r < n1; ++r)
        for (uint32_t c = k0; c < k1; ++c) amax = std::max(amax, std::fabs(g.b(r, c)));
      const float scale = std::max(amax, 1e-4f) / 448.0f;
      p.sfb[blk] = scale;
      for (uint32_t r = n0; r < n1; ++r)
        for (uint32_t c = k0; c < k1; ++c) p.b[static_cast<size_t>(r) * k + c] = float_to_e4m3(g.b(r, c) / scale);
    }
  });
  return p;
}

// Reference rows: out_q from the dequantised inputs, out_f from the unquantised ones; float64 throughout.
void reference(const HostProblem& p, const Gen& g, const std::vector<uint32_t>& rows, std::vector<double>& out_q,
               std::vector<double>& out_f) {
  static double lut[256];
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < 256; ++i) lut[i] = e4m3_to_double(static_cast<uint8_t>(i));
  });
  const size_t r = rows.size(), k = p.k;
  std::vector<double> qa(r * k), fa(r * k);
  for (size_t i = 0; i < r; ++i)
    for (size_t c = 0; c < k; ++c) {
      qa[i * k + c] = lut[p.a[static_cast<size_t>(rows[i]) * k + c]];
      fa[i * k + c] = g.a(rows[i], c);
    }
  out_q.assign(r * p.n, 0.0);
  out_f.assign(r * p.n, 0.0);
  parallel_for(p.n, [&](size_t begin, size_t end) {
    std::vector<double> qb(k), fb(k);
    for (size_t n = begin; n < end; ++n) {
      for (size_t c = 0; c < k; ++c) {
        qb[c] = lut[p.b[n * k + c]];
        fb[c] = g.b(n, c);
      }
      for (size_t i = 0; i < r; ++i) {
        const double* qa_row = &qa[i * k];
        const double* fa_row = &fa[i * k];
        double acc_q = 0;
        for (uint32_t kb = 0; kb < p.kb_count; ++kb) {
          const size_t k0 = kb * 128u, k1 = std::min<size_t>(k, k0 + 128);
          acc_q += dot(qa_row + k0, qb.data() + k0, k1 - k0) * p.sfa[static_cast<size_t>(kb) * p.m_aligned + rows[i]] *
                   p.sfb[(n / 128) * p.kb_count + kb];
        }
        out_q[i * p.n + n] = acc_q;
        out_f[i * p.n + n] = dot(fa_row, fb.data(), k);
      }
    }
  });
}

// ---- kernels ---------------------------------------------------------------------------------------------

struct KernelConfig {
  uint32_t block_m, block_n, stages, math_warpgroups;
  bool tma_store;
  uint32_t cluster_m;  // 2: pairs of CTAs on vertically adjacent tiles share (multicast) the B tile
  bool overlap;        // two partial accumulators: the next K block's WGMMAs overlap the promotion
  uint32_t split_k = 1;  // 2: CTA pairs split K and reduce through distributed shared memory
  uint32_t cluster_n = 1;  // 2: pairs of CTAs on horizontally adjacent tiles share (multicast) the A tile
  uint32_t group_m = kiln::kernels::kFp8GemmDefaultGroupM;  // the tile order's group height (m units)
  uint32_t cluster() const { return cluster_m * cluster_n * split_k; }
  auto tie() const {
    return std::tie(block_m, block_n, stages, math_warpgroups, tma_store, cluster_m, overlap, split_k, cluster_n,
                    group_m);
  }
  bool operator<(const KernelConfig& o) const { return tie() < o.tie(); }
  bool operator==(const KernelConfig& o) const { return tie() == o.tie(); }
};

KernelConfig make_config(uint32_t block_m, uint32_t block_n, bool tma_store = true, uint32_t cluster_m = 1) {
  // 256 rows: two math warpgroups of two waves each, serial promotion (see fp8_gemm.cuh).
  return {block_m,   block_n,   fp8_gemm_max_stages(block_m, block_n, tma_store), std::min(2u, block_m / 64),
          tma_store, cluster_m, block_m <= 128 && kiln::kernels::fp8_gemm_can_overlap_promotion(block_n)};
}
KernelConfig multicast(uint32_t block_m, uint32_t block_n) { return make_config(block_m, block_n, true, 2); }
KernelConfig multicast_a(uint32_t block_m, uint32_t block_n, bool tma_store = true) {
  KernelConfig c = make_config(block_m, block_n, tma_store);
  c.cluster_n = 2;
  return c;
}
KernelConfig split_k(uint32_t block_m, uint32_t block_n) {
  KernelConfig c = make_config(block_m, block_n);
  c.split_k = 2;
  c.stages = fp8_gemm_max_stages(block_m, block_n, true, kiln::kernels::kHopperSmemPerBlock, false, 2);
  return c;
}
// The same tile with one partial accumulator (each K block's promotion waits for its WGMMAs): the baseline
// the overlapped promotion is measured against.
KernelConfig serial(uint32_t block_m, uint32_t block_n) {
  KernelConfig c = make_config(block_m, block_n);
  c.overlap = false;
  return c;
}

// v1's choice: 64-row tiles (one math warpgroup) up to M = 64, else 128-row tiles; BLOCK_N 128; TMA stores.
KernelConfig default_config(uint32_t m) { return m <= 64 ? make_config(64, 128) : make_config(128, 128); }

// With --sweep, the timed shapes also run these (each checked like the default) to see what the heuristic
// should pick.
std::vector<KernelConfig> sweep_configs(uint32_t m) {
  // 64x112 makes 128 tiles of N = 7168 per 64 rows (64x128: 112); 64x16 pairs are the plan's at 576 columns.
  if (m <= 16)  // decode sizes: A's box is align(M, 8) rows, so the narrowest tiles are worth a look too
    return {make_config(64, 64),  make_config(64, 32), make_config(64, 16), make_config(64, 112),
            make_config(128, 128), split_k(64, 128),   split_k(64, 64),    split_k(64, 32),
            split_k(64, 16)};
  if (m <= 64)
    return {make_config(64, 64), make_config(64, 32), make_config(64, 112), make_config(128, 128),
            split_k(64, 128),    split_k(64, 64),     split_k(64, 32),      split_k(64, 16)};
  // From 65 rows on, the 128-row split-K tiles too: one CTA pair per tile where 64-row tiles take two.
  if (m <= 128)
    return {make_config(64, 128), make_config(128, 64), make_config(64, 64), make_config(64, 32),
            make_config(64, 112), make_config(128, 32), split_k(64, 128),   split_k(64, 64),
            split_k(64, 32),      split_k(64, 16),      split_k(128, 128),  split_k(128, 64),
            split_k(128, 32)};
  if (m <= 192)
    return {make_config(128, 64), make_config(64, 128), make_config(64, 64), make_config(64, 32),
            make_config(128, 32), split_k(64, 32),      split_k(64, 16),     split_k(128, 64),
            split_k(128, 32)};
  return {serial(128, 128),        make_config(128, 160), make_config(128, 192),   serial(128, 192),
          multicast(128, 128),     multicast(128, 192),   multicast_a(128, 128),   make_config(128, 64),
          make_config(256, 128),   multicast(256, 128),   multicast_a(256, 128),   make_config(256, 112),
          multicast_a(256, 112)};
}

// The op's own spec of this configuration (so the test compiles what the op would, compile options included).
kiln::codegen::KernelSpec make_spec(uint32_t n, uint32_t k, const KernelConfig& c) {
  kiln::ops::Fp8GemmConfig config;
  config.block_m = static_cast<int>(c.block_m);
  config.block_n = static_cast<int>(c.block_n);
  config.stages = static_cast<int>(c.stages);
  config.math_warpgroups = static_cast<int>(c.math_warpgroups);
  config.tma_store = c.tma_store;
  config.cluster_m = static_cast<int>(c.cluster_m);
  config.cluster_n = static_cast<int>(c.cluster_n);
  config.overlap_promotion = c.overlap;
  config.accumulate = false;
  config.split_k = static_cast<int>(c.split_k);
  config.group_m = static_cast<int>(c.group_m);
  return kiln::ops::fp8_gemm_spec(n, k, config);
}

struct KernelKey {
  uint32_t n, k;
  KernelConfig config;
  bool operator<(const KernelKey& o) const {
    return std::tie(n, k) < std::tie(o.n, o.k) || (std::tie(n, k) == std::tie(o.n, o.k) && config < o.config);
  }
};

struct Built {
  kiln::compiler::CompiledKernel compiled;
  std::unique_ptr<kiln::cuda::LoadedKernel> loaded;
  std::string error;
};

// ---- shapes ------------------------------------------------------------------------------------------------

struct Case {
  uint32_t m, n, k;
  uint64_t ldd;                        // row stride of D in elements (>= n; a multiple of 8 for TMA stores)
  std::vector<KernelConfig> configs;   // each is launched and checked against the same reference
  bool timed;
  double deepgemm_us;                  // events time from the peers file; 0 when not listed
};

// DeepGEMM on the H200 (events, µs), from shared/bench/peers-h200.md.
double deepgemm_us(uint32_t m, uint32_t n, uint32_t k) {
  static const std::map<std::tuple<uint32_t, uint32_t, uint32_t>, double> kPeers = {
      {{128, 2112, 7168}, 13.8},  {{128, 24576, 1536}, 20.4},  {{128, 32768, 512}, 13.1},
      {{128, 7168, 16384}, 47.1}, {{128, 4096, 7168}, 16.6},   {{128, 7168, 2048}, 11.7},
      {{4096, 2112, 7168}, 97.6}, {{4096, 24576, 1536}, 233.0}, {{4096, 32768, 512}, 130.0},
      {{4096, 7168, 16384}, 653.1}, {{4096, 4096, 7168}, 193.1}, {{4096, 7168, 2048}, 97.7},
      {{64, 7168, 2048}, 10.8},   {{64, 4096, 7168}, 16.3},    {{1, 7168, 2048}, 11.4},
      {{1, 4096, 7168}, 18.3}};
  auto it = kPeers.find({m, n, k});
  return it == kPeers.end() ? 0.0 : it->second;
}

std::vector<Case> make_cases(bool sweep, const std::vector<uint32_t>& sweep_ms) {
  // shared/bench/shapes.json, dense_fp8.
  const uint32_t dense_nk[][2] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384},
                                  {4096, 7168}, {7168, 2048},  {576, 7168}};
  std::vector<Case> cases;
  // The sweep also covers two mid-range M, where the heuristic changes tiles.
  const std::vector<uint32_t> ms = !sweep                 ? std::vector<uint32_t>{1, 64, 128, 4096}
                                   : !sweep_ms.empty() ? sweep_ms
                                                       : std::vector<uint32_t>{1, 64, 128, 256, 1024, 4096};
  for (uint32_t m : ms)
    for (const auto& nk : dense_nk) {
      Case c{m, nk[0], nk[1], nk[0], {default_config(m)}, true, deepgemm_us(m, nk[0], nk[1])};
      if (sweep)
        for (const auto& alt : sweep_configs(m)) c.configs.push_back(alt);
      cases.push_back(c);
    }
  // Ragged edges: M not a multiple of the tile, N not a multiple of BLOCK_N, a padded D row stride, a K
  // tail inside the last 128-block, BLOCK_N = 112 (tiles straddling two of B's scale blocks; TMA-store
  // groups of 16 columns), both epilogues, and B multicast in CTA pairs with an odd number of m blocks (the
  // second CTA of the last pair works entirely beyond M).
  const std::vector<Case> ragged = {
      {1, 576, 512, 584, {default_config(1), make_config(64, 128, false)}, false, 0},
      {65, 2112, 7168, 2112, {default_config(65), make_config(128, 128, false), multicast(128, 128)}, false, 0},
      {200, 576, 7168, 640, {default_config(200), make_config(64, 112), multicast(64, 112)}, false, 0},
      {200, 2112, 512, 2112, {default_config(200), make_config(128, 112), make_config(128, 112, false)}, false, 0},
      {65, 576, 512, 576, {make_config(64, 128), make_config(64, 32)}, false, 0},
      {130, 2112, 720, 2120, {default_config(130), make_config(128, 160), multicast(64, 128)}, false, 0},
      {37, 576, 7168, 576, {make_config(64, 112), make_config(64, 112, false)}, false, 0},
      // 256-row tiles (two waves per math warpgroup): a partial second m block, a partial last n block, a K
      // tail, a padded D, B multicast with an odd number of m blocks, straddling B scale blocks (112, 96).
      {300, 2112, 720, 2120, {make_config(256, 128), multicast(256, 128), make_config(256, 112)}, false, 0},
      {600, 576, 2048, 576, {make_config(256, 96), multicast(256, 128)}, false, 0},
      // One, two and three K blocks (the two-wave K loop is unrolled only from three on), several tiles per CTA
      // (K must stay a multiple of 16: TMA strides are 16-byte units).
      {4100, 2112, 128, 2112, {multicast_a(256, 128)}, false, 0},
      {4100, 2112, 256, 2112, {multicast_a(256, 128), make_config(256, 128)}, false, 0},
      {600, 576, 304, 576, {multicast_a(256, 128)}, false, 0},  // three K blocks, the last 48 wide
      // M below BLOCK_M: A's box is align(M, 8) rows; with 128-row tiles the second math warpgroup computes
      // only stale rows, and with multicast the second CTA of the pair works wholly beyond M.
      {9, 2112, 7168, 2112, {make_config(128, 128), multicast(128, 128), make_config(64, 16), split_k(64, 32)}, false, 0},
      // A multicast (CTA pairs along N): an odd number of n blocks (17 of 128 with a partial last one; 9 of 64:
      // the second CTA of the last pair works wholly beyond N, and with direct stores its column masks must
      // hold although N is a multiple of BLOCK_N), a partial m block, 256-row tiles, M below half a tile (the
      // second half of A's box is all zero fill), a K tail and a padded D.
      {300, 2112, 720, 2120, {multicast_a(256, 128), multicast_a(128, 128), multicast_a(256, 112)}, false, 0},
      {130, 576, 2048, 576, {multicast_a(128, 64), multicast_a(64, 64, false)}, false, 0},
      {9, 2112, 7168, 2112, {multicast_a(128, 128), multicast_a(256, 128)}, false, 0},
      // Split-K: an even and an odd number of K blocks (5: the halves take 3 and 2), a K tail, padded D, a
      // persistent walk over several tiles per pair (M = 1000 with 64-row tiles), both tile heights.
      {200, 576, 640, 576, {split_k(64, 64), split_k(128, 128)}, false, 0},
      {1, 2112, 7168, 2120, {split_k(64, 128)}, false, 0},
      {37, 576, 720, 576, {split_k(64, 32)}, false, 0},
      {1000, 2112, 2048, 2112, {split_k(64, 128), split_k(128, 128)}, false, 0},
      // 128x32 pairs (the plan's at 2112 x 7168, M = 65..128): A's box short of the tile (100 rows: 104), a partial
      // last n block (2104 = 65 x 32 + 24), an odd K block count with a tail (720), a padded D; then three m
      // blocks (the last of 44 rows) walked by 66 pairs, several tiles each.
      {100, 2104, 720, 2112, {split_k(128, 32)}, false, 0},
      {300, 1544, 4096, 1544, {split_k(128, 32)}, false, 0},
      // Column-mapped tiles (which would straddle B's scale blocks, contiguous): 176 in three pieces (ragged M
      // and N, B multicast, split-K), 160 with A multicast (a tile beyond N: never stored), 144 in two, and 192
      // (contiguous, its switch chosen per slice) with a partial last n block.
      {1000, 2112, 7168, 2112, {make_config(128, 176), multicast(128, 176), make_config(64, 176)}, false, 0},
      {129, 576, 720, 584, {make_config(128, 176), split_k(64, 176), make_config(128, 160)}, false, 0},
      {300, 2112, 720, 2112, {multicast_a(128, 160), multicast_a(128, 192), make_config(128, 144)}, false, 0},
      {1000, 7168, 512, 7168, {make_config(128, 192), make_config(128, 176), make_config(128, 160)}, false, 0},
  };
  cases.insert(cases.end(), ragged.begin(), ragged.end());
  return cases;
}

// ---- device helpers ------------------------------------------------------------------------------------------

CUtensorMap encode_2d(CUtensorMapDataType type, CUdeviceptr base, uint64_t inner, uint64_t outer,
                      uint64_t row_bytes, uint32_t box_inner, uint32_t box_outer, CUtensorMapSwizzle swizzle,
                      const char* what) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t elem[2] = {1, 1};
  kiln::cuda::check(kiln::cuda::DriverApi::get().cuTensorMapEncodeTiled(
                        &map, type, 2, reinterpret_cast<void*>(base), dims, strides, box, elem,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                    "cuTensorMapEncodeTiled", std::string(" for ") + what);
  return map;
}

struct Launch {
  kiln::Fp8GemmParams params;
  kiln::cuda::LaunchConfig config;
};

struct DeviceProblem {
  CUdeviceptr a, b, sfa, sfb, d;
};

Launch prepare(const Case& c, const KernelConfig& k, const HostProblem& p, const DeviceProblem& dev, int sm_count) {
  Launch l{};
  // A and its scales boxed whole (A multicast pairs: each CTA block_m / 2 of the tile's rows) and, for the
  // last m block, to its rows (fp8_gemm_last_box_rows; the same box where it is whole).
  const uint32_t last_box_rows = kiln::kernels::fp8_gemm_last_box_rows(k.block_m, c.m, k.cluster_n);
  const auto a_map = [&](uint32_t rows) {
    return encode_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, dev.a, c.k, c.m, c.k, 128, rows / k.cluster_n,
                     CU_TENSOR_MAP_SWIZZLE_128B, "A");
  };
  const auto sfa_map = [&](uint32_t rows) {
    return encode_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, dev.sfa, p.m_aligned, p.kb_count,
                     static_cast<uint64_t>(p.m_aligned) * 4, rows, 1, CU_TENSOR_MAP_SWIZZLE_NONE, "A's scales");
  };
  const auto tma_a = a_map(k.block_m), tma_a_last = a_map(last_box_rows);
  const auto tma_sfa = sfa_map(k.block_m), tma_sfa_last = sfa_map(last_box_rows);
  // With a cluster each CTA loads (and multicasts) block_n / cluster_m rows of the B tile; the last n block's
  // box is cut to its rows like A's (KILN_X_WHOLE_LAST_B=1: whole, to time the difference in one binary).
  // Column-mapped tiles load B through a map per piece's width, and no short box (fp8_gemm_b_boxes).
  kiln::kernels::Fp8GemmBBoxes b_boxes =
      kiln::kernels::fp8_gemm_b_boxes(k.block_m, k.block_n, k.math_warpgroups, false, k.cluster_m, c.n);
  if (std::getenv("KILN_X_WHOLE_LAST_B") != nullptr && b_boxes.last_b_box_rows != k.block_n) {
    b_boxes.last_b_box_rows = k.block_n;
    b_boxes.b_last_rows = k.block_n / k.cluster_m;
  }
  const auto b_map = [&](uint32_t rows) {
    return encode_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, dev.b, c.k, c.n, c.k, 128, rows, CU_TENSOR_MAP_SWIZZLE_128B,
                     "B");
  };
  const auto tma_b = b_map(b_boxes.b_rows), tma_b_last = b_map(b_boxes.b_last_rows);
  const uint32_t store_cols = kiln::kernels::fp8_gemm_store_cols(k.block_n);
  const CUtensorMapSwizzle store_swizzle = store_cols == 64   ? CU_TENSOR_MAP_SWIZZLE_128B
                                           : store_cols == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                              : CU_TENSOR_MAP_SWIZZLE_32B;
  const auto tma_d = encode_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, dev.d, c.n, c.m, c.ldd * 2, store_cols,
                               kiln::kernels::kFp8GemmStoreRows, store_swizzle, "D");
  std::memcpy(&l.params.tma_a, &tma_a, sizeof(tma_a));
  std::memcpy(&l.params.tma_b, &tma_b, sizeof(tma_b));
  std::memcpy(&l.params.tma_sfa, &tma_sfa, sizeof(tma_sfa));
  std::memcpy(&l.params.tma_a_last, &tma_a_last, sizeof(tma_a_last));
  std::memcpy(&l.params.tma_sfa_last, &tma_sfa_last, sizeof(tma_sfa_last));
  std::memcpy(&l.params.tma_b_last, &tma_b_last, sizeof(tma_b_last));
  if (b_boxes.narrow_rows != 0) {
    const auto tma_b_narrow = b_map(b_boxes.narrow_rows);
    std::memcpy(&l.params.tma_b_narrow, &tma_b_narrow, sizeof(tma_b_narrow));
  }
  std::memcpy(&l.params.tma_d, &tma_d, sizeof(tma_d));
  l.params.sfb = reinterpret_cast<const float*>(dev.sfb);
  l.params.d = reinterpret_cast<void*>(dev.d);
  l.params.ldd = c.ldd;
  l.params.m = c.m;
  l.params.last_box_rows = last_box_rows;
  l.params.last_b_box_rows = b_boxes.last_b_box_rows;
  l.params.b_cache_policy = kiln::kernels::fp8_gemm_b_cache_policy(k.block_m, c.m);
  // Work units of cluster_m vertically or cluster_n horizontally adjacent tiles; the grid is a whole number of
  // clusters.
  const uint32_t m_blocks = (c.m + k.block_m - 1) / k.block_m, n_blocks = (c.n + k.block_n - 1) / k.block_n;
  const uint32_t units = (m_blocks + k.cluster_m - 1) / k.cluster_m * ((n_blocks + k.cluster_n - 1) / k.cluster_n);
  const uint32_t cluster = k.cluster();
  l.config.grid[0] = std::min<uint32_t>(units, static_cast<uint32_t>(sm_count) / cluster) * cluster;
  l.config.cluster[0] = cluster;
  l.config.block[0] = fp8_gemm_num_threads(k.math_warpgroups);
  l.config.shared_bytes = fp8_gemm_layout(k.block_m, k.block_n, k.stages, k.tma_store, false, k.split_k).total_bytes;
  return l;
}

// " <prefix><group height>" where the tile order's group height is not the kernel's default, else "".
std::string group_tag(const KernelConfig& k, const char* prefix) {
  return k.group_m != kiln::kernels::kFp8GemmDefaultGroupM ? " " + std::string(prefix) + std::to_string(k.group_m)
                                                          : std::string();
}

std::string describe(const Case& c, const KernelConfig& k) {
  char s[200];
  const std::string group = group_tag(k, "group-");
  std::snprintf(s, sizeof(s), "m=%u n=%u k=%u ldd=%llu block %ux%u stages=%u %s%s%s%s", c.m, c.n, c.k,
                static_cast<unsigned long long>(c.ldd), k.block_m, k.block_n, k.stages,
                k.tma_store ? "tma-store" : "direct-store",
                k.cluster_m > 1   ? " multicast-2"
                : k.cluster_n > 1 ? " multicast-a-2"
                : k.split_k > 1   ? " split-k-2"
                                  : "",
                k.overlap ? " overlap" : " serial", group.c_str());
  return s;
}

// --shape's words (M N K [TILE...]) as a timed case: with no tile named, the default configuration and its
// serial-promotion twin. A tile is BMxBN with a suffix s (serial promotion), m (B multicast), a (A multicast),
// k (split-K) or d (direct stores), then gGROUP_M for the tile order's group height and @S for at most S stages
// (128x192, 256x128ag16, 64x32k@8). False, with a FAIL line, when a word does not parse.
bool add_shape_case(const std::vector<std::string>& words, std::vector<Case>& cases) {
  const auto dim = [&](size_t i, uint32_t& v) {
    char* end = nullptr;
    v = static_cast<uint32_t>(std::strtoul(words[i].c_str(), &end, 10));
    return end != words[i].c_str() && *end == 0;
  };
  uint32_t m = 0, n = 0, k = 0;
  if (words.size() < 3 || !dim(0, m) || !dim(1, n) || !dim(2, k) || m == 0 || n == 0 || k == 0) {
    std::printf("FAIL --shape: expected M N K [TILE...], got %s\n", words.empty() ? "nothing" : words[0].c_str());
    return false;
  }
  const KernelConfig d = default_config(m);
  std::vector<KernelConfig> configs = {d, serial(d.block_m, d.block_n)};
  if (words.size() > 3) configs.clear();
  for (size_t i = 3; i < words.size(); ++i) {
    const char* word = words[i].c_str();
    unsigned bm = 0, bn = 0, stages = 0, group = 0;
    char suffix = 0;
    const char* at = std::strchr(word, '@');
    const char* g = std::strchr(word, 'g');
    if (std::sscanf(word, "%ux%u%c", &bm, &bn, &suffix) < 2 || (bm != 64 && bm != 128 && bm != 256) ||
        (at && std::sscanf(at, "@%u", &stages) != 1) || (g && (std::sscanf(g, "g%u", &group) != 1 || group == 0))) {
      std::printf("FAIL --shape: tile %s is not BMxBN[s|m|a|k|d][gGROUP_M][@STAGES] with BM 64, 128 or 256\n", word);
      return false;
    }
    KernelConfig kc = suffix == 's'   ? serial(bm, bn)
                      : suffix == 'm' ? multicast(bm, bn)
                      : suffix == 'a' ? multicast_a(bm, bn)
                      : suffix == 'k' ? split_k(bm, bn)
                      : suffix == 'd' ? make_config(bm, bn, false)
                                      : make_config(bm, bn);
    if (stages > 0) kc.stages = std::min(kc.stages, stages);
    if (group > 0) kc.group_m = group;
    configs.push_back(kc);
  }
  cases.push_back({m, n, k, n, configs, true, deepgemm_us(m, n, k)});
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // --sweep[=M,M,...]: the alternative configurations too (at those M only, e.g. --sweep=1,8,16). --shape M N
  // K [TILE...]: only that shape (add_shape_case), e.g. to profile one kernel under ncu. --shapes FILE: one such
  // shape per line, in one process (probes that time many shapes).
  const bool sweep = argc > 1 && std::strncmp(argv[1], "--sweep", 7) == 0;
  std::vector<uint32_t> sweep_ms;
  if (sweep && argv[1][7] == '=')
    for (const char* s = argv[1] + 8; *s;) {
      char* end = nullptr;
      sweep_ms.push_back(static_cast<uint32_t>(std::strtoul(s, &end, 10)));
      if (end == s || sweep_ms.back() == 0) {
        std::printf("FAIL --sweep=M,...: bad list %s\n", argv[1] + 8);
        return 2;
      }
      s = *end == ',' ? end + 1 : end;
    }
  const bool one_shape = argc >= 5 && std::strcmp(argv[1], "--shape") == 0;
  const bool shape_list = argc == 3 && std::strcmp(argv[1], "--shapes") == 0;
  int failures = 0;
  if (!check_e4m3_codec()) ++failures;

  const kiln::Config& config = kiln::config();
  std::vector<Case> cases;
  if (one_shape) {
    std::vector<std::string> words(argv + 2, argv + argc);
    if (!add_shape_case(words, cases)) return 2;
  } else if (shape_list) {
    // One shape per line, as --shape takes them (M N K [TILE...]); '#' starts a comment. One process for many
    // shapes: the kernels of all of them compile in parallel up front, and the device is set up once.
    std::FILE* f = std::fopen(argv[2], "r");
    if (!f) {
      std::printf("FAIL --shapes: cannot open %s\n", argv[2]);
      return 2;
    }
    char line[1024];
    while (std::fgets(line, sizeof line, f)) {
      if (char* hash = std::strchr(line, '#')) *hash = 0;
      std::vector<std::string> words;
      for (char* w = std::strtok(line, " \t\r\n"); w; w = std::strtok(nullptr, " \t\r\n")) words.emplace_back(w);
      if (words.empty()) continue;
      if (!add_shape_case(words, cases)) {
        std::fclose(f);
        return 2;
      }
    }
    std::fclose(f);
  } else {
    cases = make_cases(sweep, sweep_ms);
  }

  // Host-side check of the test's own quantiser: the dequantised product must be close to the exact one.
  {
    const Gen g{7};
    HostProblem p = make_problem(16, 256, 1024, g);
    std::vector<uint32_t> rows(16);
    for (uint32_t i = 0; i < 16; ++i) rows[i] = i;
    std::vector<double> q, f;
    reference(p, g, rows, q, f);
    const double diff = calc_diff(q, f);
    const bool ok = diff < 1e-3;
    std::printf("%s host quantiser: calc_diff(dequantised, exact) = %.3g (< 1e-3)\n", ok ? "PASS" : "FAIL", diff);
    if (!ok) ++failures;
  }

  // Compile every distinct kernel, in parallel (no GPU needed).
  std::map<KernelKey, Built> kernels;
  for (const Case& c : cases)
    for (const auto& k : c.configs) kernels[{c.n, c.k, k}];
  std::unique_ptr<kiln::compiler::Compiler> compiler;
  try {
    compiler = kiln::compiler::make_compiler(config.backend, config, {});
  } catch (const std::exception& e) {
    std::printf("FAIL compiler: %s\n", e.what());
    return 1;
  }
  {
    kiln::compiler::CompileOptions options;
    options.arch = kiln::compiler::Arch::parse("sm_90a");
    options.ptxas_verbose = true;  // the resource report (printed to stderr too): no spills, no local memory
    options.timeout_s = 300;
    std::vector<std::pair<const KernelKey*, Built*>> work;
    for (auto& [key, built] : kernels) work.emplace_back(&key, &built);
    std::atomic<size_t> next{0};
    const auto t0 = std::chrono::steady_clock::now();
    const size_t threads = std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), work.size()));
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < work.size();) {
          const auto& [key, built] = work[i];
          const auto spec = make_spec(key->n, key->k, key->config);
          try {
            built->compiled = compiler->compile(
                {kiln::codegen::render_source(spec), spec.kernel_name(), spec.op + " " + spec.describe()},
                kiln::jit::with_kernel_options(options, spec));
          } catch (const std::exception& e) {
            built->error = e.what();
          }
        }
      });
    for (auto& t : pool) t.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("compiled %zu kernels with %s in %.2f s (%zu threads)\n", work.size(), kiln::to_string(config.backend),
                secs, threads);
  }
  std::string sass_tool_error;
  for (auto& [key, built] : kernels) {
    const std::string name = make_spec(key.n, key.k, key.config).describe();
    if (!built.error.empty()) {
      std::printf("FAIL compile %s: %s\n", name.c_str(), built.error.c_str());
      ++failures;
      continue;
    }
    const auto& r = built.compiled.resources;
    // No local memory, setmaxnreg honoured (no C7508), the WGMMA pipeline kept (no C7514: ptxas serialises
    // every wgmma when it cannot follow which group an accumulator read waits for).
    bool ok = r.known() && !r.uses_local_memory() && built.compiled.log.find("C7508") == std::string::npos &&
              built.compiled.log.find("C7514") == std::string::npos;
    std::string sass_note;
    if (sass_tool_error.empty()) {
      try {
        const std::string sass = kiln::compiler::disassemble_sass(built.compiled.cubin, config);
        const bool qgmma = sass.find("QGMMA") != std::string::npos;
        ok = ok && qgmma;
        sass_note = qgmma ? ", QGMMA in SASS" : ", NO QGMMA in SASS";
      } catch (const std::exception& e) {
        sass_tool_error = e.what();
      }
    }
    if (sass_note.empty()) sass_note = ", SASS not checked";
    std::printf("%s compile %s: %s, %.0f ms, %zu bytes%s\n", ok ? "PASS" : "FAIL", name.c_str(),
                r.known() ? r.describe().c_str() : "no ptxas report", built.compiled.compile_ms,
                built.compiled.cubin.size(), sass_note.c_str());
    if (!ok) {
      ++failures;
      std::printf("%s\n", built.compiled.log.c_str());
    }
  }
  if (!sass_tool_error.empty()) std::printf("note: SASS not checked: %s\n", sass_tool_error.c_str());
  std::fflush(stdout);

  if (kiln::cuda::device_count() == 0) {
    std::printf("SKIP launches: no GPU (%d failures so far)\n", failures);
    return failures ? 1 : 77;
  }

  try {
    const int device = kiln::cuda::current_device();
    const auto info = kiln::cuda::device_info(device);
    std::printf("device %d: %s, %d SMs, %lld bytes shared memory per block\n", device, info.name.c_str(),
                info.sm_count, static_cast<long long>(info.shared_memory_per_block_optin));
    const auto& api = kiln::cuda::DriverApi::get();
    for (auto& [key, built] : kernels) {
      if (!built.error.empty()) continue;
      built.loaded = kiln::cuda::LoadedKernel::load(built.compiled.cubin, built.compiled.kernel_name, device,
                                                    config.launch_api, false);
    }
    Timing timing;  // events, a 512 MB memset (larger than the 60 MB L2) before each call, median of 20

    std::vector<std::string> timing_lines;
    // Two passes: every single-CTA configuration first, then the multicast (cluster) ones, so that a hang
    // in the newer cluster code cannot hide the results of the rest.
    for (int pass = 0; pass < 2; ++pass) {
      uint64_t seed = 1;
      for (const Case& c_all : cases) {
        Case c = c_all;
        c.configs.clear();
        for (const auto& kc : c_all.configs)
          if ((kc.cluster_m * kc.cluster_n > 1) == (pass == 1)) c.configs.push_back(kc);
        const Gen g{seed++};
        if (c.configs.empty()) continue;
        const HostProblem p = make_problem(c.m, c.n, c.k, g);
        DeviceBuffer a(p.a.size()), b(p.b.size()), sfa(p.sfa.size() * 4), sfb(p.sfb.size() * 4);
        // One guard row below D; columns ldd - n beyond each row are padding: both must stay poisoned.
        DeviceBuffer d((static_cast<size_t>(c.m) + 1) * c.ldd * 2);
        KILN_CU_CHECK(api.cuMemcpyHtoD(a.ptr, p.a.data(), p.a.size()));
        KILN_CU_CHECK(api.cuMemcpyHtoD(b.ptr, p.b.data(), p.b.size()));
        KILN_CU_CHECK(api.cuMemcpyHtoD(sfa.ptr, p.sfa.data(), p.sfa.size() * 4));
        KILN_CU_CHECK(api.cuMemcpyHtoD(sfb.ptr, p.sfb.data(), p.sfb.size() * 4));
        const DeviceProblem dev{a.ptr, b.ptr, sfa.ptr, sfb.ptr, d.ptr};

        // Rows to check: all for small M, else 64 (the first and last, tile edges, and random ones).
        std::vector<uint32_t> rows;
        if (c.m <= 256) {
          for (uint32_t r = 0; r < c.m; ++r) rows.push_back(r);
        } else {
          for (uint32_t r : {0u, 1u, 63u, 64u, 127u, 128u, c.m - 2, c.m - 1}) rows.push_back(r);
          for (uint64_t i = 0; rows.size() < 64; ++i) rows.push_back(static_cast<uint32_t>(mix(seed * 977 + i) % c.m));
        }
        std::vector<double> ref_q, ref_f;
        reference(p, g, rows, ref_q, ref_f);

        double best_us = 0;
        std::string best_name;
        for (const KernelConfig& kc : c.configs) {
          const std::string name = describe(c, kc);
          const auto& built = kernels.at({c.n, c.k, kc});
          if (!built.loaded) {
            std::printf("FAIL %s: kernel did not compile\n", name.c_str());
            ++failures;
            continue;
          }
          KILN_CU_CHECK(api.cuMemsetD8(d.ptr, 0xff, d.bytes));  // bf16 0xffff: NaN
          Launch l = prepare(c, kc, p, dev, info.sm_count);
          built.loaded->launch(l.config, &l.params);
          KILN_CU_CHECK(api.cuCtxSynchronize());

          std::vector<uint16_t> out(rows.size() * c.ldd), guard(c.ldd);
          for (size_t i = 0; i < rows.size(); ++i)
            KILN_CU_CHECK(api.cuMemcpyDtoH(out.data() + i * c.ldd, d.ptr + static_cast<size_t>(rows[i]) * c.ldd * 2,
                                           c.ldd * 2));
          KILN_CU_CHECK(api.cuMemcpyDtoH(guard.data(), d.ptr + static_cast<size_t>(c.m) * c.ldd * 2, c.ldd * 2));
          std::vector<double> got(rows.size() * c.n);
          bool finite = true, poison_kept = true;
          double max_abs = 0, max_ref = 0;
          for (size_t i = 0; i < rows.size(); ++i) {
            for (uint32_t n = 0; n < c.n; ++n) {
              const double v = bf16_to_double(out[i * c.ldd + n]);
              got[i * c.n + n] = v;
              if (!std::isfinite(v)) finite = false;
              max_abs = std::max(max_abs, std::fabs(v - ref_q[i * c.n + n]));
              max_ref = std::max(max_ref, std::fabs(ref_q[i * c.n + n]));
            }
            for (uint64_t n = c.n; n < c.ldd; ++n) poison_kept = poison_kept && out[i * c.ldd + n] == 0xffff;
          }
          for (uint16_t v : guard) poison_kept = poison_kept && v == 0xffff;
          const double diff_q = calc_diff(got, ref_q), diff_f = calc_diff(got, ref_f);
          const bool ok = finite && poison_kept && diff_q < 1e-5 && diff_f < 1e-3;
          std::printf("%s %s: calc_diff %.3g (dequantised ref, < 1e-5), %.3g (exact product, < 1e-3), max abs err "
                      "%.3g (max |ref| %.3g, rel %.3g)%s%s, %zu rows checked\n",
                      ok ? "PASS" : "FAIL", name.c_str(), diff_q, diff_f, max_abs, max_ref,
                      max_ref > 0 ? max_abs / max_ref : 0.0, finite ? "" : ", NON-FINITE OUTPUT",
                      poison_kept ? "" : ", WROTE OUTSIDE D", rows.size());
          std::fflush(stdout);
          if (!ok) ++failures;

          if (c.timed && ok) {
            const double us = timing.median_us([&] { built.loaded->launch(l.config, &l.params); });
            const double tflops = 2.0 * c.m * c.n * c.k / (us * 1e-6) / 1e12;
            const double bytes = static_cast<double>(c.m) * c.k + static_cast<double>(c.n) * c.k +
                                 p.sfa.size() * 4.0 + p.sfb.size() * 4.0 + 2.0 * c.m * c.n;
            char line[320];
            const std::string group = group_tag(kc, "g");
            std::snprintf(line, sizeof(line),
                          "time m=%-5u n=%-6u k=%-6u %3ux%-3u %2u st %-12s%s %s%s %9.1f us %7.1f TFLOPS %6.0f GB/s | DeepGEMM %7.1f us "
                          "(DeepGEMM/ours %.2f)",
                          c.m, c.n, c.k, kc.block_m, kc.block_n, kc.stages, kc.tma_store ? "tma-store" : "direct-store",
                          kc.cluster_m > 1   ? " mc2"
                          : kc.cluster_n > 1 ? " ma2"
                          : kc.split_k > 1   ? " sk2"
                                             : "    ",
                          kc.overlap ? "ovl" : "ser", group.c_str(), us, tflops,
                          bytes / (us * 1e-6) / 1e9, c.deepgemm_us, c.deepgemm_us > 0 ? c.deepgemm_us / us : 0.0);
            timing_lines.push_back(line);
            std::printf("%s\n", line);
            if (best_name.empty() || us < best_us) {
              best_us = us;
              best_name = line;
            }
          }
        }
        if (c.timed && c.configs.size() > 1 && !best_name.empty()) timing_lines.push_back("  best: " + best_name);
      }
    }
    std::printf("\ntimings (median of 20, events, L2 flushed before each call):\n");
    for (const auto& line : timing_lines) std::printf("  %s\n", line.c_str());
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    ++failures;
  }
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "ALL PASSED", failures);
  return failures ? 1 : 0;
}
