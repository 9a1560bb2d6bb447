// The weight-gradient form's reduce-add staging (fp8_gemm_layout.h), simulated on the host: every thread of a
// warpgroup writes its accumulator values where Fp8Gemm::reduce_tile_tma writes them (the same functions), and the
// buffer is then read back as TMA reads a box with the map's swizzle. Checked for each staging the kernels use
// (16- and 32-column boxes, B's rows interleaved or not): every element of every box is D's element of that box,
// written once; every accumulator value is staged once; and at 128-byte rows no warp's store has a bank conflict.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <ostream>
#include <set>
#include <vector>

#include "kiln/kernels/fp8_gemm_layout.h"

namespace kiln {
namespace {


struct Element {
  u32 row = ~0u, col = ~0u;  // D's row within the warpgroup's 64, D's column within the tile
  bool operator==(const Element&) const = default;
};

// WGMMA's fp32 accumulator fragment (PTX ISA, wgmma .m64nNk32 D fragment): value k of lane `lane` in warp `warp`
// holds row 16 warp + lane / 4 + 8 ((k % 4) / 2) and WGMMA column 8 (k / 4) + 2 (lane % 4) + k % 2.
// With B's rows interleaved (fp8_gemm_interleaved_b) WGMMA column 16g + 8a + 2q + e is D's column 16g + 4q + 2a + e.
Element fragment_element(u32 warp, u32 lane, u32 k, bool interleaved_b) {
  const u32 row = 16 * warp + lane / 4 + 8 * ((k % 4) / 2);
  const u32 wgmma_col = 8 * (k / 4) + 2 * (lane % 4) + k % 2;
  if (!interleaved_b) return {row, wgmma_col};
  const u32 g = wgmma_col / 16, a = wgmma_col % 16 / 8, q = wgmma_col % 8 / 2, e = wgmma_col % 2;
  return {row, 16 * g + 4 * q + 2 * a + e};
}

// Where TMA reads byte `addr` of a box from a buffer with the given swizzle (row_bytes 64: bits 4-5 XOR bits 7-8;
// 128: bits 4-6 XOR bits 7-9; the buffers are 1024-byte aligned).
u32 swizzled(u32 addr, u32 row_bytes) {
  const u32 mask = row_bytes / 16 - 1;
  return addr ^ (((addr >> 7) & mask) << 4);
}

struct Staging {
  u32 cols;
  bool interleaved_b;
  friend void PrintTo(const Staging& s, std::ostream* os) {
    *os << s.cols << " columns, B " << (s.interleaved_b ? "interleaved" : "plain");
  }
};

class ReduceStaging : public ::testing::TestWithParam<Staging> {};

// One store instruction of a warp: each lane's byte address and width.
using WarpStore = std::vector<std::pair<u32, u32>>;

// Wavefronts of a warp's shared-memory store: lanes go in phases of 128 bytes (8 lanes of 16 bytes, 16 of 8); a
// phase takes as many wavefronts as the most distinct 4-byte words one of the 32 banks is asked for.
u32 wavefronts(const WarpStore& store) {
  const u32 width = store.front().second, lanes_per_phase = 128 / width;
  u32 total = 0;
  for (u32 first = 0; first < store.size(); first += lanes_per_phase) {
    std::array<std::set<u32>, 32> words;
    for (u32 lane = first; lane < first + lanes_per_phase; ++lane)
      for (u32 b = 0; b < width; b += 4) words[(store[lane].first + b) / 4 % 32].insert((store[lane].first + b) / 4);
    total += static_cast<u32>(std::max_element(words.begin(), words.end(), [](const auto& x, const auto& y) {
                                return x.size() < y.size();
                              })->size());
  }
  return total;
}

TEST_P(ReduceStaging, EveryBoxElementIsDsOnceAndTheWritesAreConflictFreeAtWholeLines) {
  const auto [cols, interleaved_b] = GetParam();
  const u32 row_bytes = cols * 4;
  const u32 piece_cols = kernels::fp8_gemm_reduce_piece_cols(interleaved_b);
  const u32 pieces = cols / piece_cols;
  const u32 flip = kernels::fp8_gemm_reduce_piece_flip(cols, interleaved_b);
  const u32 boxes = 3;                           // three boxes of a tile of 3 * cols columns
  const u32 values_per_thread = 3 * cols / 2;    // the fragment's fp32 values a thread holds for the tile
  const std::vector<u32> firsts = interleaved_b ? std::vector<u32>{0, 1, 4, 5} : std::vector<u32>{0, 1};
  ASSERT_EQ(piece_cols / 4, static_cast<u32>(firsts.size()));  // a piece: a quarter of its columns, one row

  std::vector<std::vector<bool>> staged(4 * 32, std::vector<bool>(values_per_thread, false));
  for (u32 box = 0; box < boxes; ++box) {
    std::map<u32, Element> buffer;  // byte address -> the element written there
    for (u32 warp = 0; warp < 4; ++warp)
      for (u32 step = 0; step < pieces; ++step)
        for (u32 r = 0; r < 2; ++r) {
          WarpStore store;
          for (u32 lane = 0; lane < 32; ++lane) {
            const u32 row = 16 * warp + lane / 4 + 8 * r, q = lane % 4;
            const bool odd_row = (lane / 4) % 2 == 1;
            const u32 piece = odd_row ? step ^ flip : step;
            const u32 first = kernels::fp8_gemm_reduce_accum_index(cols, interleaved_b, box, piece, r);
            const u32 offset = kernels::fp8_gemm_reduce_piece_offset(cols, interleaved_b, row, piece, q);
            ASSERT_EQ(offset % (4 * firsts.size()), 0u) << "misaligned store";
            ASSERT_LT(offset, 64 * row_bytes);
            store.emplace_back(offset, static_cast<u32>(4 * firsts.size()));
            for (u32 f = 0; f < firsts.size(); ++f) {
              const u32 k = first + firsts[f];
              ASSERT_LT(k, values_per_thread);
              EXPECT_FALSE(staged[32 * warp + lane][k]) << "value " << k << " of lane " << lane << " staged twice";
              staged[32 * warp + lane][k] = true;
              const Element e = fragment_element(warp, lane, k, interleaved_b);
              EXPECT_EQ(e.row, row) << "a thread writes only its own rows";
              EXPECT_TRUE(buffer.emplace(offset + 4 * f, e).second) << "byte " << offset + 4 * f << " written twice";
            }
          }
          if (row_bytes == 128)  // the minimum: one wavefront a phase of 128 bytes
            EXPECT_EQ(wavefronts(store), 32 * store.front().second / 128)
                << "warp " << warp << " step " << step << " r " << r;
        }
    // TMA reads element (row, col) of the box at the swizzled address of its place in the box.
    ASSERT_EQ(buffer.size(), 64 * cols) << "every element of the box written";
    for (u32 row = 0; row < 64; ++row)
      for (u32 col = 0; col < cols; ++col) {
        const auto at = buffer.find(swizzled(row * row_bytes + col * 4, row_bytes));
        ASSERT_NE(at, buffer.end());
        EXPECT_EQ(at->second, (Element{row, box * cols + col})) << "box " << box << " (" << row << ", " << col << ")";
      }
  }
  for (const auto& values : staged)
    EXPECT_EQ(std::count(values.begin(), values.end(), true), static_cast<long>(values_per_thread));
}

INSTANTIATE_TEST_SUITE_P(Stagings, ReduceStaging,
                         ::testing::Values(Staging{16, false}, Staging{16, true}, Staging{32, false},
                                           Staging{32, true}),
                         [](const auto& info) {
                           return std::to_string(info.param.cols) + "Columns" +
                                  (info.param.interleaved_b ? "InterleavedB" : "PlainB");
                         });

// The offsets are those of the swizzle the map declares: fp8_gemm_reduce_offset's row-based form against the
// address bits TMA uses, for every row and unit of both row widths.
TEST(ReduceStagingOffset, IsTheMapsSwizzleOfTheUnitsPlace) {
  for (u32 cols : {16u, 32u})
    for (u32 row = 0; row < 64; ++row)
      for (u32 unit = 0; unit < cols / 4; ++unit)
        EXPECT_EQ(kernels::fp8_gemm_reduce_offset(cols, row, unit), swizzled(row * cols * 4 + unit * 16, cols * 4))
            << cols << " columns, row " << row << ", unit " << unit;
}

}  // namespace
}  // namespace kiln
