// The GEMM cost models' DRAM-bound term (fp8_gemm_heuristic.cpp, where it was fitted; bf16_gemm.cpp reuses it):
// a persistent kernel's time by rounds of work units, one per cluster of CTAs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kiln::ops {

// Where DRAM bounds the call, time goes by rounds of tiles (one per CTA): each round reads its share of the
// call's bytes and takes that long or one tile's time, whichever is longer; a partial last round reads less. On
// top of that, one tile's pipeline fill and drain do not hide behind DRAM: this share of a tile's time, fading as
// the call turns compute-bound (the DRAM time over the busiest CTA's, to the power kDramBoundFade). This form
// replaced a share of the busiest CTA's whole time (0.457), which charged a CTA of three short rounds as if none
// of its work overlapped DRAM: it took 128x192 (one round) at 65..128 x 24576 x 1536, where 64x128 (three rounds)
// is 4.5 % faster. Fitted with the FP8 model's epilogue rate and DRAM rate on 2026-11-30 to every table of its unit
// tests; every run of M it moved over N 256..32768, K 512..16384 was timed (kRoundsCheck, two passes averaged):
// 32 of 55 faster by over 1 % (up to 14 %), 15 within 1 %, 8 slower by 1.1-3.9 %.
constexpr double kDramBoundTileShare = 0.329;
constexpr double kDramBoundFade = 4.0;

// That time: `units` work units over `grid_units` clusters in `rounds` rounds (ceil(units / grid_units)), each
// unit `tile_us` long, the call's DRAM reads `dram_us` long. Every round takes at least a tile, so this covers the
// busiest CTA's time.
inline double dram_bound_rounds_us(double dram_us, double tile_us, int64_t units, int64_t grid_units,
                                   int64_t rounds) {
  const double full_rounds = static_cast<double>(rounds) - 1;
  const double last_round_units = static_cast<double>(units) - full_rounds * static_cast<double>(grid_units);
  const double rounds_us =
      full_rounds * std::max(dram_us * static_cast<double>(grid_units) / static_cast<double>(units), tile_us) +
      std::max(dram_us * last_round_units / static_cast<double>(units), tile_us);
  const double busiest_cta = static_cast<double>(rounds) * tile_us;
  const double exposed_us =
      kDramBoundTileShare * tile_us * std::pow(std::min(1.0, dram_us / busiest_cta), kDramBoundFade);
  return rounds_us + exposed_us;
}

}  // namespace kiln::ops
