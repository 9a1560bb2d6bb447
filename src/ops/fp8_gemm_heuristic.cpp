#include "ops/fp8_gemm_heuristic.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "kiln/error.hpp"
#include "kiln/kernels/fp8_gemm_layout.h"
#include "ops/gemm_rounds.hpp"

namespace kiln::ops {
namespace {

// ---- the cost model's constants (H200, overlapped-promotion kernel, CUDA-event timings) ---------------------
// First fitted per shape to the sweep of 2026-11-29 (147 measurements at M = 64..4096); refitted on 2026-11-30
// against the plan itself: a coordinate descent over the constants below, scoring the tile fp8_gemm_plan picks
// (pruning included) against the best measured one at each of ~340 measured shapes (every table in
// ops_fp8_gemm_heuristic_test.cpp), holding every choice at M <= 128 as it was (the decode sweep's). That fit
// moved 69 M ranges of the warm-up shapes; each was timed on the H200 against the previous tile at its top M
// (kRefitCheck in the unit test: 45 faster by over 1 %, up to 22 %, 15 level, 9 slower, at most 7.7 %) and at
// the bottom M of each changed run (kRefitCheckLow, 81 shapes: 52 faster, up to 39 %, 18 level, 11 slower, at
// most 8.2 %), 3-4 % faster on geometric average. Refitted again by the nineteenth session (2026-11-30) after
// the two-wave loop made 256x128 pairs 2.3 % faster against the other tiles (the older tables' pairs rows scaled
// by that, shapes timed again judged on the new rows only; kPairsCheck in the unit test). Every run of M the refit
// moved was timed at its bottom or top M or both: of the 16, 9 are faster by over 1 % (up to 7 %), 4 within 1 %,
// 3 slower (N = 4096 at K = 7168 and 897-1024 x 7168 x 16384, 1.7-3.6 %), where pairs lose to the old tile by
// more than the model sees. The figures are a fit, not measurements of the parts they name: read them as weights
// that rank the tiles as the device does. No benchmark shape's tile moved.
// Fixed time of one call as the sweep's CUDA-event timings saw it (launch, prologue, pipeline fill, drain).
constexpr double kFixedUs = 4.22;
// A 128-wide K block never takes less than this per tile: the chain full-barrier wait -> WGMMA ->
// wait_group -> release -> promotion is latency-bound at small tiles.
constexpr double kFloorUsPerKBlock = 0.128;
// Per K block and tile, per math warpgroup: cycles per column of BLOCK_N and fixed cycles, with two
// warpgroups (they share the tensor cores) and with one (whose promotion, even overlapped, is on its path).
// 256-row tiles (two waves per warpgroup, serial promotion) take this many times a one-wave tile's cycles per
// K block: fitted to the H200 sweep of 2026-11-29 (256x128 with A multicast against 128x128 at M = 4096: 1.87x
// per K block at 4096 x 7168 x 16384, 1.88x at 4096 x 24576 x 1536); less than 2 because a stage of 256 rows
// streams A's and B's panels once for twice the multiply-adds.
constexpr double kCyclesPerColumnTwoWarpgroups = 1.94;
constexpr double kFixedCyclesTwoWarpgroups = 77.9;
constexpr double kCyclesPerColumnOneWarpgroup = 0.6642;
constexpr double kFixedCyclesOneWarpgroup = 167.0;
constexpr double kTwoWaveCycleFactor = 1.87;
// Clock used to turn the per-K-block cycle estimate into time (sustained under FP8 WGMMA load).
constexpr double kCyclesPerUs = 1600.0;
// What one SM's producer streams into shared memory at most.
constexpr double kSmLoadBytesPerUs = 89.4e3;
// Whole-device bounds: DRAM and L2 -> SM fills, both fitted figures that trade against the exposed share of the
// DRAM-bound calls (kDramBoundTileShare). DRAM reads only, as the round-wise form counts them, run above the 4.27
// TB/s of the device copy (whose figure counts a write for every read).
constexpr double kDramBytesPerUs = 4.554e6;
constexpr double kL2BytesPerUs = 10.0e6;
// 128x64 where B is the operand the call streams (N at least twice M) and K is long: its L2 reads count this much.
// Its A panel (two thirds of what it loads) is read by every CTA of the m block at once and stays hot in L2,
// and the device serves those reads faster than the figure above, which the wide tiles set at large M. Fitted
// on 2026-11-30 (H200, fp8_gemm_test) to 75 shapes where it and 64x128 (same loads, same tile count at whole m
// blocks, so the model tied them or took 64x128) were timed against each other, and checked at the one run it
// moved beyond them (kNarrowCheck in the unit tests): 128x64 is 7-9 % faster at 129..256 x 4096 x 7168 and
// 16384, 1-2 % at 2048 x K >= 4096, 2-6 % at 193..384 x 2560 x K >= 7168; at K <= 3072 the two are level,
// and where A is the larger operand (N = 256, M >= 2113) 64x128 is faster, up to 21 %.
constexpr double kNarrowL2Weight = 0.85;
// The L2 reads of 128x128 in the m-grouped plans (Fp8GemmConfig::m_grouped) count this much. Those plans are the
// only ones that rank the 128-row tiles at large M (elsewhere 256-row pairs take it), and there the figure above
// makes 128x128 look as fast as 128x160 and 128x192, which it is not: on an H100 (2026-12-06, forty-ninth session,
// L2 flushed) at 34048 x 4096 x 2048 it ran 496 us against 420 and 424, the model 478 against 486 and 480. With the
// weight the plans move 128x128 to a wider tile at 348 of 1920 (n, k, m) points (m >= 1792, six MoE weights);
// bench/probes/l2_weight_moves.py timed 28 of them (old and new tile in both orders, the m-grouped kernel): new /
// old 0.937 on geometric mean, 25 faster (down to 0.83), the worst 1.053 (2112 x 7168 at m = 4864). Weighing every
// m-grouped tile instead moved kernels at m <= 512 too, through the plan's pruning, and lost there (64x144 for
// 128x96 at 192 x 6144 x 7168: 1.6 times slower): 1.037 over 18 moves. The dense plans keep the figure they were
// fitted with.
constexpr double kMGroupedL2Weight = 1.12;
constexpr int64_t kNarrowMinNOverM = 2;
constexpr int64_t kNarrowMinKBlocks = 32;
// Epilogue per tile (convert, stmatrix, TMA store): it overlaps the next tile's first WGMMAs now, but its
// stores still compete with the loads.
constexpr double kEpilogueFixedUs = 0.0333;
constexpr double kEpilogueBytesPerUs = 45.144e3;
// A tile straddling two of B's scale blocks (BLOCK_N not dividing 128: 160, 192) issues narrower WGMMAs in
// two halves: a little slower per column than the linear model. It was 1.39 while the promotion selected B's
// scale per 8 columns; with the switch column compiled in, the fourth session's M = 4096 sweep fits 1.05
// (128x192 is then as fast per column as 128x128, 128x160 about 9 % slower).
constexpr double kStraddlePenalty = 1.05;
// The weight-gradient form (B scaled per row, D fp32 added to by TMA's reduce-add) against the model above,
// fitted on its own sweep (H200, 2026-12-01, thirty-second session, kAccumulateSweep in the unit tests: twelve
// weight-gradient shapes, M x N 576..32768 x 512..16384, K 4096 and 8192, seven tiles each, with B's scales
// read ahead of the WGMMA wait):
// - its promotion multiplies every element by its own a * b (a multiply and a multiply-add where the bf16 form
//   has one multiply-add) and reads B's scales per column from shared memory: the K block's cycles times 1.15
//   with two math warpgroups, 1.9 with one (64-row tiles);
// - the tiles whose width does not divide 128 (160, 176, 192) are kAccumulateWidePenalty slower per column than
//   the linear model, and 160 and 176 where they read B in plain order (N no multiple of 16; 192 always does) a
//   further kAccumulatePlainWidePenalty; the bf16 form's 128x176 penalty at a ragged N (its three boxes of B)
//   does not apply, one box serves here;
// - its epilogue stages 4 bytes per element of D for the reduce-add, which then reads and writes 8 in L2.
// With these the plan's tile is within 0.5 % of the sweep's fastest at all twelve shapes (32768 x 512 x 4096 since
// the form's plans model M to 32768 and offer 128x176 there, thirty-third session). The estimates of the other
// tiles are 0.88-1.07 of their times, 64x64's 1.23-1.32 (its promotion cost is not the per-column one of the
// wider tiles), which only keeps it out of plans it would lose anyway.
constexpr double kAccumulateCycleFactorTwoWarpgroups = 1.15;
constexpr double kAccumulateCycleFactorOneWarpgroup = 1.9;
// kAccumulateWidePenalty was 1 (and 192 paid the plain 1.04) until the forty-third session gave 128x128 and 128x192
// a stage fewer for the reduce staging's wide boxes (fp8_gemm_accumulate_stages). Re-timed on the H200 (forty-fourth
// session, kAccumulateSweep), against the model each tile's times over the twelve shapes relative to 128x128's were
// 160 1.036-1.090, 176 1.041-1.124 and 192 1.007-1.068 (with the 1.04 in its estimate): the same term for all
// three, 1.06, ranks the fastest tile first at all twelve, with C and without (the plan before was 1.6 % from the
// fastest on geometric mean, up to 5.3 %). It moves 44 % of the form's calls with C and 49 % without (N 256..24576,
// K 128..8192, M to 32768), mostly from 128x176 to 128x192 or 128x128 and from 128x160 to 128x128: 40 drawn at random
// took 0.969 of the previous plan's time with C (0.861-1.032) and 0.979 without (0.952-1.032) on an H100
// (bench/probes/wgrad_small_k_tiles.py; the H200 did not come for that call).
constexpr double kAccumulateWidePenalty = 1.06;
constexpr double kAccumulatePlainWidePenalty = 1.04;
constexpr double kAccumulateEpilogueBytesPerUs = 30.0e3;
// The reduce-adds of a 128-row tile (two math warpgroups) at short K, where every CTA spends most of its time in the
// epilogue and reading D dominates the call: the epilogue's reduce time takes 1 + kReduceShortKSlowdown x (1 - K
// blocks / kReduceShortKBlocks), fading to nothing at kReduceShortKBlocks. Fitted (H200, 2026-12-02, forty-first
// session, bench/probes/wgrad_small_k_tiles.py, kReduceShortK in the unit tests) to twenty weight-gradient calls
// with C at K = 256..1024 (five weights of 1536..7168 x 2048..7168), seven tiles each: at K <= 512 64x128 was
// fastest or within 5 % of it at every weight, 6-21 % ahead of the 128-row tiles the model had picked; at K = 768
// 128x64, at 1024 the model's own choice. 64-row tiles showed no such cost (their rate stays at the constant above),
// nor did calls without C, whose epilogue reads nothing (their plan, Fp8GemmForm::kFp32Store, has the term below
// instead). Why 128-row tiles pay it is not established: both kinds stage the same 32-column boxes in two buffers
// per warpgroup, so the two warpgroups' bursts of reduce-adds, with DRAM's reads of D behind them, are the likely
// suspect. At K = 4096 and 8192 the term is zero, so the form's sweep above keeps every choice. Timed against the
// tiles it moved from (bench/probes/wgrad_plan_moves.py, same session): the twenty calls 0.950 on geometric mean
// (0.829-1.008), four k-grouped expert calls at 256 and 512 mean tokens 0.917 (0.886-0.962). The forty-third session's
// stage counts made 128x128 the H200's fastest tile at K = 768 (the plan's 64x128 1.03-1.12x its time at four of the
// five weights), so since the forty-seventh session the term fades out at 7 K blocks rather than 8: 0.8 % from the
// fastest tile over the twenty calls (1.7 % with 8). Random calls that moved (bench/probes/wgrad_plan_moves.py; N
// 256..24576, M to 32768), timed on an H100 against their previous tile: 20 at K = 432..896 (fade_7_c) 0.974 on
// geometric mean (0.816-1.238), 20 more at K = 641..896 (fade_7_bulk_c), where nine in ten of the moves are, 0.964
// (0.788-1.154). At the five weights an H100 wants 64x128 at K = 768 and 1024 (kReduceShortKH100 in the unit tests),
// but a term fading out at 13 K blocks, which those calls ask for, moved 24 random ones to 1.068 of their previous
// time there (fade_13_c): the term is the same on both cards.
constexpr double kReduceShortKSlowdown = 0.8;
constexpr int64_t kReduceShortKBlocks = 7;
// Without C (Fp8GemmForm::kFp32Store) the epilogue writes 4 bytes an element where a reduce-add reads and writes 8, and
// below kStoredShortKBlocks (K = 1024) the plan counts 4: at the probe's twenty calls its three misses of 11-13 %
// became 0.879-0.951 of the previous tile's time (kStoreShortK), and 30 of the moves it makes there, drawn at random
// over N 256..24576 and K 128..896, were 0.965 on geometric mean (0.883-1.055; same session). Counted at every K it
// also moved tiles at K >= 1024, where the model of this form was fitted with 8 (kAccumulateSweep): 22 such moves timed
// 1.015 on geometric mean, up to 26 % slower at N <= 576, so from kStoredShortKBlocks on both plans count 8.
constexpr double kStoredShortKBytes = 4.0;
constexpr int64_t kStoredShortKBlocks = 8;
// 128x176 where it does not divide N (offered_at) takes this much longer per K block than the linear model
// says: at 48 such shapes with K >= 4096 (twenty-ninth session, kRagged176Check in the unit tests) it timed 2 %
// above the model relative to 128x128, 128x160, 128x192 and the pairs alike. Likely its three TMA boxes of B per
// stage (128 + 32 + 16 rows, fp8_gemm_b_boxes; the twenty-eighth session measured 0.7-1.9 % for the third box)
// with a ragged last tile's boxes on top. Where 176 divides N (2112) the model was fitted on it and is left alone.
constexpr double kRagged176Penalty = 1.02;
// The one-wave tiles wider than 160 columns (176, 192: four stages where 128 and 160 have five) take this much
// longer per tile when a tile has at most kShortKBlocks K blocks: the fifteenth session's sweep (H200,
// 2026-11-30, kWideSweep in the unit tests) measured them 16-26 % above the first fit's model relative to
// 128x128 at 32768 x 512 at every M from 768 to 12288, and level with it at longer K; the refit leaves 4 %.
constexpr double kShortKWidePenalty = 1.043;
constexpr int64_t kShortKBlocks = 4;
// 128x144 where 144 divides N (576, 1152, 2304, ...): whole tiles where 128x160 leaves a ragged last one.
// Timed on the H200 against 128x160 (thirty-third session, kWhole144 in the unit tests) it is 2-6 % faster from
// K = 4096 at the same rounds, level at K = 2048 and up to 23 % slower at K = 512; the model without this term
// put it 7 % ahead of 160 where it measured 3-5 %.
constexpr double kWhole144Penalty = 1.03;
constexpr int64_t kWhole144MinKBlocks = 32;
// The 256-row pairs where M has at most two of their m blocks (M <= 512) and K at most kThinPairsMaxKBlocks K blocks:
// each tile takes this much longer than the per-tile model says. There the plan took pairs from 385..512 rows at most N
// from 16384 and some from 6656 (and at 129..256 at the widest N), where 128-row tiles are faster: on an H100
// (forty-seventh session, fp8_gemm_test --shapes, each call in both orders) 37 such calls (30 drawn at random, 7 of
// DeepSeek-V3's and other chosen N and K) ran pairs 1.063x the best 128-row tile's time on geometric mean, 1.10-1.25x
// at K <= 1024 and 1.02-1.12x up to K = 4096, and on the H200 448 x 32768 x 512 1.117x (kRaggedM). From K = 7168 the
// pairs hold their own (0.89-1.02x; 0.977 at 448 x 7168 x 16384 on the H200). Why is not established: the pairs' 64 KB
// stores and three-stage pipeline around a short K loop, with only two rows of pairs to interleave, are the likely
// suspects. 24 random calls the term moves (M 48..1608: at M > 512 the pruning's knock-on swaps) took 0.964 of their
// previous tile's time on an H100 (0.883-1.018; kThinPairsMovesH100 in the unit tests). The H200's check of those moves
// is owed.
constexpr double kThinPairsPenalty = 1.10;
constexpr int64_t kThinPairsMaxKBlocks = 32;
// The 256-row tiles' first rounds at short K: a call of pairs with at most kTwoWaveFillMaxKBlocks K blocks per
// tile takes this much longer than the per-tile model says, over the square of its rounds (tiles per CTA), so in
// effect only with one or two rounds. Their tiles' three stages of 48 KB each fill and drain around a short K
// loop, and with one round nothing else overlaps them; at long K, or after a few rounds, the fitted per-block
// rate covers it. Fitted on 2026-11-30 (H200, fp8_gemm_test --shapes, kFirstRoundsCheck in the unit tests) to
// the moves it makes: at one round of pairs and K <= 2048 the 128-row tiles it moves to were 6.6 % faster on
// geometric average (78 of 85 runs faster by over 1 %), at K > 2048 level (1.01), and after three rounds slower.
constexpr double kTwoWaveFillUs = 3.5;
constexpr double kTwoWaveFillPower = 2.0;
constexpr int64_t kTwoWaveFillMaxKBlocks = 24;

// The inference form's long M (kFp8GemmSampledMaxM < M <= kFp8GemmLongMaxM: long prefills, training steps) is
// assigned per 64-row interval among the kernels the pruning kept: the model's cheapest where it is ahead of the
// tail kernel by more than this, else the tail. One tail kernel chosen over 8193..16384 left whole rounds on the
// table at other M (at N = 256 the 256x128 pairs, one cluster per 256 rows, against 128x128's finer rounds) and,
// further up, 128x128 where wider tiles or the pairs are cheaper per output. Timed on the H200 (2026-12-01,
// thirty-fourth session, kLongMMoves in the unit tests) at one M drawn at random from each of 36 moved intervals
// up to 32768 and 30 from 32769 to 65536 (N 256..2304 x K 512..16384): 0.943 (0.835-1.019; 32 faster by over 1 %,
// one slower) and 0.928 (0.889-0.983; all 30 faster by over 1 %) of the tail's time on geometric mean. Within the
// margin the model ranks kernels no better than the device does (30784 x 2112 x 7168: 128x176 2.5 % ahead in the
// model, 0.6 % behind measured; 23168 x 2048 x 2048: 2.4 % ahead, 1.9 % behind).
constexpr double kLongMMargin = 0.03;
// Above kFp8GemmLongMaxM the inference form takes the kept kernel the model puts cheapest at this M, where a
// tile's rounds are whole within 1 % (at N = 256 and 128x128, 124 of them): its cost per output. In the model, over
// N 256..32768 x nine K from 512 to 16384 and M from 65536 to 2^20, it moved 86 of 693 (N, K) off the tail rule's
// kernel (the mean over 8193..16384), to 0.962 of its time on geometric mean, no (N, K) over 0.3 % slower; timed at
// ten of them (M 70000..200000, kBeyondLongM) 0.937, all faster. The mean over 32769..65536 instead would have
// moved N = 256 from the pairs to 128x128, 4-7 % slower further up.
constexpr int64_t kAsymptoticM = int64_t{1} << 20;

// The fill tiles (kFillTiles: 64x96, 64x144, 128x80, 128x96) fill the SMs where the pruning's tiles leave some
// idle at little N and mid M: 2048 x 576 x 7168 makes 80 tiles of 128x128 and 128 of 64x144 (25.6 against 20.9
// us), 1024 x 1536 x 7168 96 tiles of 128x96 where 128x128 makes 96 with 2 more columns each (26.0 against 24.0).
// Offered to the pruning as candidates they moved runs everywhere (the greedy drop is not an optimum: with more
// candidates it ended worse in the model at 12013 intervals). So they enter a pruned plan only by swaps: up to
// kFillMaxSwaps rounds, each the swap of a kept kernel (never the tail) for a fill tile, or the tile added while
// fewer than kFp8GemmMaxKernels are kept, that lowers the pruning's weighted mean by over kFillMinGain and costs no
// interval over kFillMaxLoss against the pruned plan. A fill tile serves an interval only where the model puts
// it over kFillMargin ahead of the kept kernels (within it, the model ranked 128x96 for 128x160 the wrong way
// round at K = 512: 3-8 % slower); a 128-row one never at M <= 128 (128x96 at 128 x 24576 x 1536 and 2048, 80 x
// 24576 x 2048: 1.9-2.4 % slower than 64x128, the model 3.6 % faster), and none above N = kFillMaxN (at 9216..12288
// 64x96 for the one-m-block 64x128 at M <= 64 was 0-2.6 % slower, the model 3 % faster) nor past the sampled range
// (128x80 at 27407 x 320 x 512 15 % slower than the tail's 128x160). Timed on the H200 (2026-12-01, thirty-fifth
// session, kFillMoves in the unit tests): 149 moved shapes, 0.933 of the previous plan's time on geometric mean,
// 148 faster by over 1 %, the other 0.5 % slower. Within the eight kernels the warm-up's (N, K) have no room:
// at 576 x 7168 every swap costs the decode kernels more of the log-weighted mean than 64x144 gains at M =
// 1793..2112 (20 %).
constexpr double kFillMinGain = 0.002;
constexpr double kFillMaxLoss = 0.02;
constexpr double kFillMargin = 0.03;
constexpr int64_t kFillMaxN = 6144;
constexpr int kFillMaxSwaps = 2;

// Above kFillMaxN one more fill tile, 128x112 (kFill112), where it divides N (7168 = 64 x 112) and K has at least
// kFill112MinKBlocks blocks. Where 128x128 leaves SMs idle in a round (7168 columns: 56 tiles an m block, so 112 CTAs
// at M = 129..256), 112 columns make 64 tiles an m block (128 CTAs). Timed (2026-12-06, forty-sixth session,
// fp8_gemm_test --shapes, the idle harness, the two tiles in alternating order; kFill112Moves in the unit tests) at 49
// shapes of the runs it moves, N 6272..14336, K 1536..18432, M 129..512, among them every table shape it moved: 0.949
// of 128x128's time on geometric mean on the H200 (0.913-0.988), every one faster; on an H100 0.946 (0.893-0.988) at 44
// of them, every one faster. At K = 512 it gained nothing on the H100 (14336 x 512: 0.98-1.01) and lost 8-9 % to the
// pairs at M = 641..768, hence the K bound. At N <= kFillMaxN it is not offered: beside the other fill tiles it changed
// their swaps (2688 x 1024 at M = 385..512 from 128x96, 5 % slower in the model).
constexpr int64_t kFill112MinKBlocks = 12;

// Candidates are dropped while the remaining ones keep the mean relative cost over the M intervals within
// this of the best of all candidates, and every single interval within kDropMaxLoss. The mean weighs each
// interval by the logarithm of its M range (ln((hi + 1) / lo)), so that every doubling of M counts alike: a
// serving workload spreads over orders of magnitude of M, and uniform weights let the 64-wide intervals of
// large M outvote the decode kernels (with 128x176 offered at 2112 x 7168 they dropped 64x32, 3.7 % slower at
// M = 65..128, to keep a 256x128 kernel whose ranges 128x128, 128x160 and 128x176 serve within 2 %).
constexpr double kDropMeanLoss = 1.01;
constexpr double kDropMaxLoss = 1.02;
// Past those bounds, while more candidates remain than kernels are allowed, the drop must keep every interval
// within this of its best where some candidate can (then the smallest mean loss among those, else the smallest
// overall). Without it, at N = 768 and 1024 with K >= 4096 (five decode tiles and four large-M ones for eight
// kernels) the cheapest mean dropped the one large-M tile that alone serves some intervals: the pairs at N = 768
// (5-9 % ahead of 128x128 at M = 4225..5632 and 9985..11264) and 128x160 at N = 1024 (7-13 % ahead of 128x192 at
// 2049..2304 and 4225..4736). With the bound the drop falls on 64x16 split-K (64x32 split-K level at M = 1, 1-3 %
// behind at 64) or, at 1024 x 4096, on the pairs (up to 6 % at large M). Every run it moves was timed on the H200
// (kForcedDropCheck): 0.975 of the previous plan on geometric mean; on no other N from 256 to 8192 does it move.
constexpr double kForcedDropMaxLoss = 1.10;
// Width of the M intervals the choice is made on: tile counts of 64- and 128-row tiles change only at
// multiples of 64. The first is split: decode sizes M = 1..kDecodeM are costed at M = 1, whose loads are
// mostly B's (A's box is 8 rows there); the rest of the first interval is costed at 64.
constexpr int64_t kIntervalM = 64;
constexpr int64_t kDecodeM = 16;
// Rows of A's box beyond M are zero-filled by TMA. Before A's box was cut to align(M, 8) rows for M < BLOCK_M
// (fp8_gemm_last_box_rows), the sweep measured that fill weighing on the device like loaded bytes about five
// times over (64x32 at M = 1: 24.0 against 16.4 us at M = 64, 4096 x 7168); with the short box at most 7 rows
// are filled, and the M = 1 sweep of the short-box kernel (now in the unit tests) is picked right with the
// same weight.
constexpr double kZeroFillWeight = 5.0;
// Split-K in CTA pairs, for the narrow tiles (64x32, 64x16, 128x32): worth it where the problem has few tiles, so
// a tile's K chain, not the device's bandwidth, sets the time (little N at decode sizes: 576 and 2112 columns).
// The model costs a pair's CTAs each with half of the tile's K blocks (the grid counts both), plus this per tile
// for the hand-over: the partial sums through the pair's shared memory, the wait for the later half, the cluster
// launch. Fitted on 2026-11-30 (H200, fp8_gemm_test, after the tile end became one branch) to 80 shapes: the
// decode sweep at M = 1, 64, 128, 192 and three checks of the ranges the structural form moved (kSplitKRefit in
// the unit tests); 1.2 to 1.5 rank them alike. It replaced a ratio to the same tile unsplit (0.89 with one round
// of pairs, 1.26 with two), which could not see that a short K has little chain to halve: it split 1 x 512 x 512
// (6.8 us where 64x32 takes 5.4) and kept 128x32 pairs out where they gain 5-29 % (128 x 2112 x 7168: 12.8
// against 13.5 us; 200 x 768 x 16384: 18.1 against 23.3).
constexpr double kSplitKHandOverUs = 1.5;
// The tile order's group height (the kernel's kGroupM, kernels::kFp8GemmDefaultGroupM = 8 m units): the tiles
// of a group are walked m fastest, so B is read from DRAM about once per group. Where B is larger than
// kTallGroupMinBBytes it does not stay in L2 from one group to the next, and groups of kTallGroupM halve its
// reads, as long as sixteen units' panels of A (16 x unit rows x K) stay within kTallGroupMaxABytes beside it.
// Measured on the H200 (2026-11-30, fp8_gemm_test --shape, 15 shapes, kTallGroups in the unit tests): 128x192
// 1.4-3.6 % faster at 24576 x 1536 from M = 1408, 1.5-2.6 % at 24576 x 2048, 1.6 % at 3968 x 32768 x 1024;
// 256x128 pairs 0.2-1.8 %; level (within 0.4 %) at 16384 x 2048 and 3072 and at 1920 x 32768 x 1024; slower
// nowhere. Left at 8 where A's panels are long (7168 x 16384: 128x192 0.5-2 % slower with 16, twentieth
// session). The cost model does not see the order; the rule is applied to every candidate of the (N, K) (with
// at most eight m units, as at decode sizes, the two heights walk the same order).
constexpr int64_t kTallGroupMinBBytes = int64_t{32} << 20;
constexpr int64_t kTallGroupMaxABytes = int64_t{8} << 20;
constexpr int kTallGroupM = 16;
// The kernel walks groups by a shift (Fp8Gemm::unit_coords): heights are powers of two.
static_assert((kTallGroupM & (kTallGroupM - 1)) == 0 &&
                  (kernels::kFp8GemmDefaultGroupM & (kernels::kFp8GemmDefaultGroupM - 1)) == 0,
              "group heights must be powers of two");

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void invalid(const char* who, const std::string& what) { throw Error(ErrorKind::kValueError, std::string(who) + ": " + what); }

bool block_n_supported(int bn) { return bn >= 16 && bn <= 192 && bn % 16 == 0; }

int tile_order_group_m(int64_t n, int64_t k, const Fp8GemmConfig& c) {
  const int64_t unit_rows = int64_t{c.block_m} * c.cluster_m;  // an m unit: cluster_m vertically adjacent tiles
  const bool tall = n * k >= kTallGroupMinBBytes && kTallGroupM * unit_rows * k <= kTallGroupMaxABytes;
  return tall ? kTallGroupM : static_cast<int>(kernels::kFp8GemmDefaultGroupM);
}

// A candidate tile: rows and columns.
struct Tile {
  int block_m, block_n;
};

constexpr std::array<Tile, 4> kFillTiles = {{{64, 96}, {64, 144}, {128, 80}, {128, 96}}};
constexpr Tile kFill112 = {128, 112};

Fp8GemmConfig make_config(const Tile& t, const TargetInfo& target, const Fp8GemmOverrides& o, Fp8GemmForm form) {
  const int bm = t.block_m, bn = t.block_n;
  const bool accumulate = weight_gradient(form);
  Fp8GemmConfig c;
  c.block_m = bm;
  c.block_n = bn;
  // 256 rows: two math warpgroups of two waves each (fp8_gemm.cuh), whose registers hold one partial beside
  // the two waves' accumulators: serial promotion.
  c.math_warpgroups = std::min(2, bm / 64);
  // The accumulating form adds into fp32 D with plain read-add-write stores, without a cluster.
  c.tma_store = !accumulate;
  c.accumulate = accumulate;
  c.cluster_m = o.cluster_m > 0 && !accumulate ? o.cluster_m : 1;
  // 256-row tiles run in CTA pairs sharing A unless overridden (or B multicast is asked for: pairs go one
  // way only).
  c.cluster_n = accumulate || c.cluster_m > 1 ? 1 : o.cluster_n > 0 ? o.cluster_n : bm == 256 ? 2 : 1;
  // Split-K pairs only when asked for here (fp8_gemm_plan costs its own split candidate); they use the cluster
  // pair, so never beside a multicast one (check_fp8_gemm_overrides and the candidates see to that).
  c.split_k = !accumulate && o.split_k == 2 ? 2 : 1;
  c.overlap_promotion = bm <= 128 && kernels::fp8_gemm_can_overlap_promotion(static_cast<uint32_t>(bn));
  const uint32_t smem = static_cast<uint32_t>(std::clamp<int64_t>(target.shared_memory_per_block, 0, INT32_MAX));
  const auto ubm = static_cast<uint32_t>(bm), ubn = static_cast<uint32_t>(bn);
  const auto usplit = static_cast<uint32_t>(c.split_k);
  const int max_stages =
      static_cast<int>(kernels::fp8_gemm_max_stages(ubm, ubn, c.tma_store, smem, accumulate, usplit));
  const int default_stages =
      accumulate ? static_cast<int>(kernels::fp8_gemm_accumulate_stages(ubm, ubn, smem, usplit)) : max_stages;
  c.stages = o.stages > 0 ? o.stages : default_stages;
  if (c.stages > max_stages) c.stages = 0;  // does not fit: the caller reports or skips it
  return c;
}

// The stages of a kernel that serves a single m block (fp8_gemm_plan): 12 for 64x16 and 64x32, 10 for 64x64 and 6
// for 64x128 (with or without split-K), where as many as fit are 16, 16, 13 and 8. Measured on the H200
// (2026-12-01, thirtieth session, fp8_gemm_test --shapes, four passes in alternating orders averaged): at M = 1 and
// 64, after the benchmark's flush, 64x32 and 64x64 with these ran 0.990 of the stages that fit on geometric mean
// over 28 shapes (0.959-1.006; 1 x 7168 x 16384 37.48 -> 36.88 us, 1 x 24576 x 1536 16.52 -> 16.20), 64x128 0.987
// over 6 (0.969-1.006) and 64x16 split-K 0.976 over 2 (1 x 576 x 7168 10.40 -> 9.88); fewer still was faster at
// some shapes and slower at others. A plain stream of B after that flush likewise runs faster with 64 KB in flight
// per SM than with 128 (bench/probes/tma_piece_probe.cu). At two m blocks (M = 128) the stages that fit were best
// (64x64 at 128 x 4096 x 7168: 15.65 us with 13, 15.90 with 10), so the rule stops at one.
int one_block_stages(const Fp8GemmConfig& c) {
  if (c.block_m != 64) return c.stages;
  const int stages = c.block_n == 16 || c.block_n == 32 ? 12 : c.block_n == 64 ? 10 : c.block_n == 128 ? 6 : c.stages;
  return std::min(c.stages, stages);
}

// 128x176 is offered where it divides N, and elsewhere from kRagged176MinKBlocks K blocks and kRagged176MinN
// columns on. Where it divides N it wastes no column of a ragged last tile, and the H200 sweeps of 2026-11-30 found
// it 3-17 % faster than the plan's earlier choice at 12 of 23 M from 1280 to 15488 at N = 2112 (= 12 x 176). At a
// ragged N it was up to 20 % slower than the model at K = 512 (32768 x 512) and 4 % at 1536 (4096 x 24576,
// twenty-ninth session), a cost the model lacks. From K = 4096 on, with B's last box cut to its rows (47e42cd) and
// the column map (7f21482), the model with kRagged176Penalty ranks it as the device does: of 30 runs it moved
// there, drawn at random, 22 are faster by over 1 %, 3 slower by at most 2.4 %, 0.981 on geometric mean
// (kRagged176Check). Below 2048 columns a ragged tile is a larger share of the row, and at N = 768..1536 the
// pruning to eight kernels then dropped tiles the bounded forced drop had been timed to keep (kForcedDropCheck).
// The weight-gradient form has no N bound: its model was fitted with 128x176 at N = 512 and 1536
// (kAccumulateSweep), where it is the fastest tile at 32768 x 512 (three column tiles, the last of 160: 2.4 %
// ahead of 128x128 at K = 4096, 4.4 % at 8192) and ranked behind 128x192 at 24576 x 1536, as measured. Nor does it
// keep the K bound where that form was timed at shorter K (H200, 2026-12-02, forty-second session,
// bench/probes/wgrad_plan_moves.py; kRagged176WithC and kRagged176WithoutC in the unit tests: each call's previous
// tile against 128x176, 30 random moves a kind over N 512..24576 and K 256..3968, and six more at K = 2048): without
// C (kFp32Store, whose epilogue only stores) 128x176 offered at every K took 0.944 of the previous tile's time on
// geometric mean (0.875-1.018); with C 0.972 from K = 2048 on (26 calls, 0.915-1.033) but 1.022 below it (10 calls,
// 0.929-1.144: up to 14 % slower at 1088 x 2304 x 1664, 9 % at 18240 x 24576 x 1024), where the reduce-adds
// dominate the call, so with C it is offered from kRagged176ReduceMinKBlocks.
constexpr int64_t kRagged176MinKBlocks = 32;
constexpr int64_t kRagged176MinN = 2048;
constexpr int64_t kRagged176ReduceMinKBlocks = 16;
bool offered_at(const Tile& t, int64_t n, int64_t k, Fp8GemmForm form) {
  if (t.block_n != 176 || n % t.block_n == 0) return true;
  switch (form) {
    case Fp8GemmForm::kInference:
      return cdiv(k, 128) >= kRagged176MinKBlocks && n >= kRagged176MinN;
    case Fp8GemmForm::kAccumulate:
      return cdiv(k, 128) >= kRagged176ReduceMinKBlocks;
    case Fp8GemmForm::kFp32Store:
      return true;
  }
  return false;
}

// The candidates, best-first for ties (bigger tiles first: fewer tiles, fewer epilogues). 256x128 is
// DeepGEMM's large-M tile and ours since the sweep of 2026-11-29 (3-7 % faster than 128x128 at M = 4096 on four
// of the seven dense shapes); its CTA pairs share A, two thirds of each stage (the bf16 form only: the
// accumulating form has no 256-row kernel).
// `one_block`: only tiles that take one m block per CTA (the m-grouped form: no 256-row tiles).
std::vector<Fp8GemmConfig> candidates(const TargetInfo& target, int64_t n, int64_t k, const Fp8GemmOverrides& o,
                                      Fp8GemmForm form, bool one_block) {
  static constexpr std::array<Tile, 9> kTiles = {
      {{256, 128}, {128, 128}, {128, 64}, {128, 160}, {128, 176}, {128, 192}, {64, 128}, {64, 64}, {64, 32}}};
  // block_m = 256 alone: the 256-row tiles' narrower widths too.
  static constexpr std::array<Tile, 3> kWaveTiles = {{{256, 128}, {256, 112}, {256, 96}}};
  const bool accumulate = weight_gradient(form);
  std::vector<Tile> tiles;
  if (o.block_m > 0 && o.block_n > 0) {
    tiles.push_back({o.block_m, o.block_n});
  } else if (o.block_m == 256) {
    for (const Tile& t : kWaveTiles) tiles.push_back(t);
  } else {
    // 256-row tiles have no split-K kernel (their two waves fill the registers).
    for (const Tile& t : kTiles)
      if ((o.block_m == 0 || t.block_m == o.block_m) && (o.block_n == 0 || t.block_n == o.block_n) &&
          !((accumulate || o.split_k == 2 || one_block) && t.block_m == 256) && offered_at(t, n, k, form))
        tiles.push_back(t);
    if (tiles.empty())  // a block_n outside the measured set (block_m is free here): both row counts with it
      for (int bm : {128, 64}) tiles.push_back({bm, o.block_n});
  }
  std::vector<Fp8GemmConfig> out;
  std::optional<Fp8GemmConfig> short_of_sms;  // the first tile that fits but whose cluster the target lacks
  for (const Tile& t : tiles) {
    const Fp8GemmConfig c = make_config(t, target, o, form);
    if (c.stages == 0) continue;
    if (c.cluster_size() <= target.sm_count)
      out.push_back(c);
    else if (!short_of_sms)
      short_of_sms = c;
  }
  // The narrow tiles split in K by CTA pairs, their stages re-counted for the layout's reduction buffer: 64x32,
  // 64x16 (at 576 columns its 36 tiles make 72 CTAs where 64x32 makes 36: 1 x 576 x 7168 9.9 against 10.6 us)
  // and 128x32 (one pair per 128 rows: 128 x 2112 x 7168 12.8 against 64x32's 13.5 unsplit, 15.6 split). Only
  // for the bf16 form, with split_k and multicast left to the heuristic (pairs go one way only) and the tile
  // within the block sizes asked for. Twelve candidates then: fp8_gemm_plan drops to eight.
  const bool pairs_free = !accumulate && o.split_k == 0 && o.cluster_m <= 1 && o.cluster_n <= 1;
  if (pairs_free) {
    Fp8GemmOverrides split_pairs = o;
    split_pairs.split_k = 2;
    for (const Tile& t : {Tile{64, 32}, Tile{64, 16}, Tile{128, 32}}) {
      if ((o.block_m != 0 && o.block_m != t.block_m) || (o.block_n != 0 && o.block_n != t.block_n)) continue;
      const Fp8GemmConfig split = make_config(t, target, split_pairs, form);
      if (split.stages > 0 && split.cluster_size() <= target.sm_count) out.push_back(split);
    }
  }
  if (out.empty() && short_of_sms)
    invalid("fp8_gemm_nt", "tile " + std::to_string(short_of_sms->block_m) + "x" + std::to_string(short_of_sms->block_n) +
                               " runs in clusters of " + std::to_string(short_of_sms->cluster_size()) + " CTAs; " +
                               std::to_string(target.sm_count) +
                               " SM(s) are usable (set_num_sms or the target's SM count)");
  if (out.empty()) {
    const Tile& t = tiles.front();
    const Fp8GemmConfig c = make_config(t, target, Fp8GemmOverrides{}, form);
    invalid("fp8_gemm_nt", "no kernel configuration fits in " + std::to_string(target.shared_memory_per_block) +
                               " bytes of shared memory per block (tile " + std::to_string(t.block_m) + "x" +
                               std::to_string(t.block_n) + ": at most " + std::to_string(c.stages) + " stages fit" +
                               (o.stages > 0 ? ", " + std::to_string(o.stages) + " were asked for" : "") + ")");
  }
  return out;
}

// The fill tiles (see kFillMinGain): for the inference form up to N = kFillMaxN, and 128x112 above it where 112
// divides N (kFill112), with the tile, split and clusters left to the heuristic.
std::vector<Fp8GemmConfig> fill_tiles(const TargetInfo& target, int64_t n, int64_t k, const Fp8GemmOverrides& o,
                                      Fp8GemmForm form) {
  std::vector<Fp8GemmConfig> out;
  if (form != Fp8GemmForm::kInference || o.block_m != 0 || o.block_n != 0 || o.split_k > 1 || o.cluster_m > 1 ||
      o.cluster_n > 1)
    return out;
  std::vector<Tile> tiles;
  if (n <= kFillMaxN)
    tiles.assign(kFillTiles.begin(), kFillTiles.end());
  else if (n % kFill112.block_n == 0 && cdiv(k, 128) >= kFill112MinKBlocks)
    tiles.push_back(kFill112);
  for (const Tile& t : tiles) {
    const Fp8GemmConfig c = make_config(t, target, o, form);
    if (c.stages > 0) out.push_back(c);
  }
  return out;
}

}  // namespace

std::string Fp8GemmConfig::describe() const {
  char s[192];
  std::snprintf(s, sizeof s, "%dx%d, %d stages, %d math warpgroup%s, %s%s%s%s", block_m, block_n, stages,
                math_warpgroups, math_warpgroups == 1 ? "" : "s",
                k_grouped    ? "fp32 accumulate into D, K groups in one launch"
                : accumulate ? "fp32 accumulate into D"
                : tma_store  ? "TMA store"
                             : "direct store",
                overlap_promotion ? ", overlapped promotion" : "",
                cluster_m > 1 ? (", B multicast x" + std::to_string(cluster_m)).c_str()
                : cluster_n > 1 ? (", A multicast x" + std::to_string(cluster_n)).c_str()
                : split_k > 1   ? (", split-K x" + std::to_string(split_k)).c_str()
                                : "",
                group_m != static_cast<int>(kernels::kFp8GemmDefaultGroupM)
                    ? (", groups of " + std::to_string(group_m)).c_str()
                    : "");
  return masked ? std::string(s) + ", m-grouped masked" : m_grouped ? std::string(s) + ", m-grouped" : std::string(s);
}

int64_t Fp8GemmConfig::units(int64_t m, int64_t n) const {
  return cdiv(cdiv(m, block_m), cluster_m) * cdiv(cdiv(n, block_n), cluster_n);
}

const Fp8GemmBucket& Fp8GemmPlan::bucket_of(int64_t m) const { return ops::bucket_of(buckets, m); }

std::vector<Fp8GemmBucket> Fp8GemmPlan::covering(int64_t lo, int64_t hi) const {
  return ops::covering(buckets, lo, hi);
}

void check_fp8_gemm_overrides(const Fp8GemmOverrides& o, const char* who) {
  if (o.block_m != 0 && o.block_m != 64 && o.block_m != 128 && o.block_m != 256)
    invalid(who, "block_m must be 0 (heuristic), 64, 128 or 256, got " + std::to_string(o.block_m));
  if (o.block_m == 256 && o.block_n > 128)
    invalid(who, "block_n must be 0 (heuristic) or at most 128 with block_m 256 (its two waves' accumulators and a "
                 "partial fill the registers), got " + std::to_string(o.block_n));
  if (o.block_n != 0 && !block_n_supported(o.block_n))
    invalid(who, "block_n must be 0 (heuristic) or a multiple of 16 in 16..192, got " + std::to_string(o.block_n));
  if (o.stages < 0 || o.stages > static_cast<int>(kernels::kFp8GemmMaxStages))
    invalid(who, "stages must be 0 (heuristic) or 1.." + std::to_string(kernels::kFp8GemmMaxStages) +
                     ", got " + std::to_string(o.stages));
  if (o.cluster_m != 0 && o.cluster_m != 1 && o.cluster_m != 2)
    invalid(who, "cluster_m must be 0 (heuristic), 1 or 2, got " + std::to_string(o.cluster_m));
  if (o.cluster_n != 0 && o.cluster_n != 1 && o.cluster_n != 2)
    invalid(who, "cluster_n must be 0 (heuristic), 1 or 2, got " + std::to_string(o.cluster_n));
  if (o.cluster_m == 2 && o.cluster_n == 2)
    invalid(who, "cluster_n must be 0 or 1 when cluster_m is 2 (CTAs multicast in pairs, along M or along N), got 2");
  if (o.split_k != 0 && o.split_k != 1 && o.split_k != 2)
    invalid(who, "split_k must be 0 (heuristic), 1 (never split) or 2 (CTA pairs split K in halves), got " +
                     std::to_string(o.split_k));
  if (o.split_k == 2 && (o.cluster_m == 2 || o.cluster_n == 2))
    invalid(who, std::string("split_k must be 0 or 1 when ") + (o.cluster_m == 2 ? "cluster_m" : "cluster_n") +
                     " is 2 (split-K and multicast both use the CTA pair), got 2");
  if (o.split_k == 2 && o.block_m == 256)
    invalid(who, "split_k must be 0 or 1 with block_m 256 (its two waves' accumulators fill the registers; no "
                 "split-K kernel), got 2");
}

uint32_t fp8_gemm_threads(const Fp8GemmConfig& c) {
  return kernels::fp8_gemm_num_threads(static_cast<uint32_t>(c.math_warpgroups));
}

uint32_t fp8_gemm_shared_bytes(const Fp8GemmConfig& c) {
  return kernels::fp8_gemm_layout(static_cast<uint32_t>(c.block_m), static_cast<uint32_t>(c.block_n),
                                  static_cast<uint32_t>(c.stages), c.tma_store, c.accumulate,
                                  static_cast<uint32_t>(c.split_k))
      .total_bytes;
}

uint32_t fp8_gemm_grid(const Fp8GemmConfig& c, int64_t m, int64_t n, int sm_count) {
  const int cluster = c.cluster_size();
  const int64_t units = c.units(m, n);
  const int64_t clusters = std::max<int64_t>(1, sm_count / cluster);
  return static_cast<uint32_t>(std::min(units, clusters) * cluster);
}

double fp8_gemm_estimate_us(const TargetInfo& target, int64_t m, int64_t n, int64_t k, const Fp8GemmConfig& c,
                            bool stores_d) {
  const double bm = c.block_m, bn = c.block_n;
  const int64_t k_blocks = cdiv(k, 128);
  const int multicast = c.cluster_m * c.cluster_n;
  const int64_t units = c.units(m, n);
  const int64_t grid_units = std::max<int64_t>(1, std::min<int64_t>(units, target.sm_count / c.cluster_size()));
  // Split-K pairs: each CTA of a pair runs half of a tile's K blocks, then the pair hands its partial sums over.
  const int64_t cta_k_blocks = cdiv(k_blocks, c.split_k);
  const double hand_over = c.split_k > 1 ? kSplitKHandOverUs : 0.0;
  const int64_t rounds = cdiv(units, grid_units);  // of one unit per cluster
  const double tiles_per_cta = static_cast<double>(rounds);
  const double tiles = static_cast<double>(units * multicast);

  // Per K block and tile: WGMMA issue and promotion per warpgroup (see the constants), the load of the
  // stage, and the latency floor, whichever is longest.
  const double per_wg = c.math_warpgroups == 1 ? kCyclesPerColumnOneWarpgroup * bn + kFixedCyclesOneWarpgroup
                                               : kCyclesPerColumnTwoWarpgroups * bn + kFixedCyclesTwoWarpgroups;
  // Two waves (256 rows) do each warpgroup's work twice per K block, for less than twice the time.
  const bool two_waves = c.block_m > 64 * c.math_warpgroups;
  double cycles = (two_waves ? kTwoWaveCycleFactor : 1.0) * c.math_warpgroups * per_wg;
  if (c.accumulate)
    cycles *= c.math_warpgroups == 1 ? kAccumulateCycleFactorOneWarpgroup : kAccumulateCycleFactorTwoWarpgroups;
  if (128 % c.block_n != 0) {
    // 192's term was fitted with B read in plain order, its only one; 160 and 176 pay that order's cost on top.
    const bool plain_160_or_176 =
        c.block_n != 192 &&
        !kernels::fp8_gemm_interleaved_b(true, static_cast<uint32_t>(n), static_cast<uint32_t>(c.block_n));
    cycles *= !c.accumulate ? kStraddlePenalty
                            : kAccumulateWidePenalty * (plain_160_or_176 ? kAccumulatePlainWidePenalty : 1.0);
  }
  if (c.block_n == 176 && n % 176 != 0 && !c.accumulate) cycles *= kRagged176Penalty;
  if (c.block_n == 144) cycles *= kWhole144Penalty;
  const double a_rows = std::min<double>(bm, static_cast<double>(m));  // rows of A read from memory
  // The box of a tile's A: BLOCK_M rows, or align(M, 8) for a single partial m block (whole tiles for pairs
  // sharing A); TMA zero-fills its rows beyond M. (A last partial m block among several is boxed to its rows
  // as well; the model costs every tile as a whole one.)
  const double a_box_rows = kernels::fp8_gemm_last_box_rows(static_cast<uint32_t>(c.block_m),
                                                            static_cast<uint32_t>(std::min<int64_t>(m, c.block_m)),
                                                            static_cast<uint32_t>(c.cluster_n));
  const double load_bytes = (a_rows + bn) * 128.0 + bm * 4.0;
  // What a CTA reads from L2 per K block: a multicast pair reads the shared operand once between them.
  const double l2_load_bytes = (a_rows / c.cluster_n + bn / c.cluster_m) * 128.0 + bm * 4.0;
  const double per_k_block = std::max({kFloorUsPerKBlock, cycles / kCyclesPerUs, load_bytes / kSmLoadBytesPerUs});
  // The weight-gradient form's epilogue bytes an element: 8 (a reduce-add reads and writes fp32 D), at short K more
  // for 128-row tiles with C and 4 (D stored) without C.
  double accumulate_bytes = 8.0;
  if (stores_d && k_blocks < kStoredShortKBlocks)
    accumulate_bytes = kStoredShortKBytes;
  else if (!stores_d && k_blocks < kReduceShortKBlocks && c.math_warpgroups == 2)
    accumulate_bytes *= 1.0 + kReduceShortKSlowdown * (1.0 - static_cast<double>(k_blocks) / kReduceShortKBlocks);
  const double epilogue = kEpilogueFixedUs + (c.accumulate ? bm * bn * accumulate_bytes / kAccumulateEpilogueBytesPerUs
                                                           : bm * bn * 2.0 / kEpilogueBytesPerUs);
  const bool short_k_wide = !two_waves && c.block_n > 160 && k_blocks <= kShortKBlocks;
  const bool thin_pairs = two_waves && m <= 2 * c.block_m && k_blocks <= kThinPairsMaxKBlocks;
  const double tile_us = (static_cast<double>(cta_k_blocks) * per_k_block + epilogue + hand_over) *
                         (short_k_wide ? kShortKWidePenalty : 1.0) * (thin_pairs ? kThinPairsPenalty : 1.0);

  const double md = static_cast<double>(m), nd = static_cast<double>(n), kd = static_cast<double>(k);
  const double dram_bytes = md * kd + nd * kd + 2.0 * md * nd + 4.0 * static_cast<double>(k_blocks) * (md + nd / 128.0);
  const double zero_filled_bytes = (a_box_rows - a_rows) * 128.0;
  const double l2_bytes = tiles * static_cast<double>(k_blocks) * (l2_load_bytes + kZeroFillWeight * zero_filled_bytes);
  const bool narrow_streaming_b =
      c.block_m == 128 && c.block_n == 64 && n >= kNarrowMinNOverM * m && k_blocks >= kNarrowMinKBlocks;
  const bool m_grouped_128 = c.m_grouped && c.block_m == 128 && c.block_n == 128;
  const double l2_weight = (narrow_streaming_b ? kNarrowL2Weight : 1.0) * (m_grouped_128 ? kMGroupedL2Weight : 1.0);
  // DRAM by rounds (gemm_rounds.hpp).
  const double dram_us = dram_bytes / kDramBytesPerUs;
  const double rounds_us = dram_bound_rounds_us(dram_us, tile_us, units, grid_units, rounds);
  const double first_rounds_us = two_waves && k_blocks <= kTwoWaveFillMaxKBlocks
                                     ? kTwoWaveFillUs / std::pow(tiles_per_cta, kTwoWaveFillPower)
                                     : 0.0;
  return kFixedUs + first_rounds_us + std::max(rounds_us, l2_weight * l2_bytes / kL2BytesPerUs);
}

namespace {

// fp8_gemm_plan, or with `one_block` the m-grouped form's (fp8_gemm_m_grouped_plan): its candidates without the 256-row
// tiles, the rest alike.
Fp8GemmPlan make_plan(const TargetInfo& target, int64_t n, int64_t k, const Fp8GemmOverrides& overrides,
                      Fp8GemmForm form, bool one_block) {
  if (n <= 0 || n % 8 != 0) invalid("fp8_gemm_nt", "n must be a positive multiple of 8, got " + std::to_string(n));
  if (k <= 0 || k % 16 != 0) invalid("fp8_gemm_nt", "k must be a positive multiple of 16, got " + std::to_string(k));
  if (target.sm_count <= 0)
    invalid("fp8_gemm_nt", "the target's SM count must be positive, got " + std::to_string(target.sm_count));
  check_fp8_gemm_overrides(overrides, "fp8_gemm_nt");
  if (weight_gradient(form) && overrides.block_m == 256)
    invalid("fp8_gemm_nt", "block_m must be 0 (heuristic), 64 or 128 for the accumulating form (256-row tiles are "
                           "the bf16 form's), got 256");
  if (weight_gradient(form) && overrides.cluster_m > 1)
    invalid("fp8_gemm_nt", "cluster_m must be 0 (heuristic) or 1 for the accumulating form (its kernel adds into fp32 D "
                           "without a cluster), got " + std::to_string(overrides.cluster_m));
  if (weight_gradient(form) && overrides.split_k > 1)
    invalid("fp8_gemm_nt", "split_k must be 0 (heuristic) or 1 for the accumulating form (its kernel adds into fp32 D "
                           "without a cluster), got " + std::to_string(overrides.split_k));
  if (weight_gradient(form) && overrides.cluster_n > 1)
    invalid("fp8_gemm_nt",
            "cluster_n must be 0 (heuristic) or 1 for the accumulating form (its kernel adds into fp32 D without a "
            "cluster), got " + std::to_string(overrides.cluster_n));
  std::vector<Fp8GemmConfig> cands = candidates(target, n, k, overrides, form, one_block);
  // The pruning's candidates first, then the fill tiles, which enter the plan only by the swaps below.
  const size_t pruned = cands.size();
  for (const Fp8GemmConfig& c : fill_tiles(target, n, k, overrides, form)) cands.push_back(c);
  for (Fp8GemmConfig& c : cands) {
    c.group_m = tile_order_group_m(n, k, c);
    c.m_grouped = one_block;  // costed as the m-grouped kernels (kMGroupedL2Weight)
  }
  const size_t nc = cands.size();

  // The intervals: [1, kDecodeM] costed at M = 1, (kDecodeM, 64] at 64, then (64 i, 64 (i + 1)] each at its
  // upper end (its largest M).
  struct Interval {
    int64_t lo, hi, costed_at;
    double weight = 0;  // in the pruning's mean
  };
  std::vector<Interval> iv = {{1, kDecodeM, 1}, {kDecodeM + 1, kIntervalM, kIntervalM}};
  const int64_t sampled_max_m =
      weight_gradient(form) ? kFp8GemmAccumulateSampledMaxM : kFp8GemmSampledMaxM;
  for (int64_t hi = 2 * kIntervalM; hi <= sampled_max_m; hi += kIntervalM) iv.push_back({hi - kIntervalM + 1, hi, hi});
  const size_t intervals = iv.size();
  double total_weight = 0;  // the pruning's weights (kDropMeanLoss): ln of each interval's M range
  for (Interval& v : iv) {
    v.weight = std::log(static_cast<double>(v.hi + 1) / static_cast<double>(v.lo));
    total_weight += v.weight;
  }
  std::vector<double> rel(intervals * nc);  // cost relative to the interval's best candidate
  for (size_t i = 0; i < intervals; ++i) {
    const int64_t m = iv[i].costed_at;
    double best = 0;
    for (size_t c = 0; c < nc; ++c) {
      rel[i * nc + c] = fp8_gemm_estimate_us(target, m, n, k, cands[c], form == Fp8GemmForm::kFp32Store);
      if (c < pruned && (c == 0 || rel[i * nc + c] < best)) best = rel[i * nc + c];
    }
    for (size_t c = 0; c < nc; ++c) rel[i * nc + c] /= best;
  }
  // The cheapest kept candidate for interval i (the first in candidate order on a tie). Only the pruning's
  // candidates are kept at first.
  std::vector<bool> kept(nc, false);
  std::fill_n(kept.begin(), pruned, true);
  // A fill tile is the cheapest only where it is ahead by over kFillMargin, and one of 128 rows never at M <= 128.
  const auto picked_at = [&](size_t i, size_t c) {
    if (c < pruned) return rel[i * nc + c];
    if (cands[c].block_m == 128 && iv[i].hi <= 128) return std::numeric_limits<double>::infinity();
    return rel[i * nc + c] * (1.0 + kFillMargin);
  };
  auto pick = [&](size_t i) {
    size_t best = nc;
    for (size_t c = 0; c < nc; ++c)
      if (kept[c] && (best == nc || picked_at(i, c) < picked_at(i, best) * (1.0 - 1e-9))) best = c;
    return best;
  };

  // The kept candidates' cost over the intervals, each interval's relative cost weighed as the pruning weighs it;
  // each(i, cost) sees every interval's.
  const auto kept_mean = [&](auto&& each) {
    double sum = 0;
    for (size_t i = 0; i < intervals; ++i) {
      const double v = rel[i * nc + pick(i)];
      sum += v * iv[i].weight;
      each(i, v);
    }
    return sum / total_weight;
  };

  // Drop candidates, the one whose loss is smallest first, while the losses stay within bounds, and past them
  // while more candidates remain than kernels are allowed.
  for (size_t remaining = pruned; remaining > 1; --remaining) {
    // The cheapest drop (the smallest mean loss, the first in candidate order on a tie) among the candidates
    // within the bounds, among those within kForcedDropMaxLoss of every interval's best, and among all.
    struct Cheapest {
      size_t candidate;
      double mean;
    };
    Cheapest within{nc, 0.0}, bounded{nc, 0.0}, any{nc, 0.0};
    const auto offer = [nc](Cheapest& best, size_t candidate, double mean) {
      if (best.candidate == nc || mean < best.mean * (1.0 - 1e-9)) best = {candidate, mean};
    };
    for (size_t c = 0; c < nc; ++c) {
      if (!kept[c]) continue;
      kept[c] = false;
      double worst = 0;
      const double mean = kept_mean([&worst](size_t, double v) { worst = std::max(worst, v); });
      kept[c] = true;
      offer(any, c, mean);
      if (worst <= kForcedDropMaxLoss) offer(bounded, c, mean);
      if (mean <= kDropMeanLoss && worst <= kDropMaxLoss) offer(within, c, mean);
    }
    size_t drop = within.candidate;
    if (drop == nc) {
      if (remaining <= static_cast<size_t>(kFp8GemmMaxKernels)) break;
      drop = bounded.candidate != nc ? bounded.candidate : any.candidate;
    }
    kept[drop] = false;
  }

  // M above the sampled range takes the pruned candidate cheapest on average over the range's upper half (the
  // tail), but the inference form's long M is assigned per interval first (kLongMMargin, then kAsymptoticM).
  size_t tail = nc;
  double tail_cost = 0;
  for (size_t c = 0; c < pruned; ++c) {
    if (!kept[c]) continue;
    double sum = 0;
    for (size_t i = 0; i < intervals; ++i)
      if (iv[i].lo > sampled_max_m / 2) sum += rel[i * nc + c];
    if (tail == nc || sum < tail_cost * (1.0 - 1e-9)) {
      tail = c;
      tail_cost = sum;
    }
  }

  // The fill tiles by swaps (kFillMinGain): each round takes the swap of a kept kernel other than the tail for a
  // fill tile (or the fill tile beside them, while fewer than kFp8GemmMaxKernels are kept) that lowers the
  // pruning's mean the most, where it lowers it by over kFillMinGain and costs no interval over kFillMaxLoss
  // against the pruned plan.
  std::vector<double> pruned_cost(intervals);
  double mean = kept_mean([&pruned_cost](size_t i, double v) { pruned_cost[i] = v; });
  // The mean with `in` kept instead of `out` (out == nc: nothing out), infinite past the loss bound.
  const auto swapped_mean = [&](size_t out, size_t in) {
    if (out < nc) kept[out] = false;
    kept[in] = true;
    bool bounded = true;
    const double m = kept_mean([&](size_t i, double v) {
      bounded = bounded && v <= pruned_cost[i] * (1.0 + kFillMaxLoss);
    });
    kept[in] = false;
    if (out < nc) kept[out] = true;
    return bounded ? m : std::numeric_limits<double>::infinity();
  };
  for (int round = 0; round < kFillMaxSwaps; ++round) {
    const size_t kept_count = static_cast<size_t>(std::count(kept.begin(), kept.end(), true));
    size_t best_out = nc, best_in = nc;
    double best_mean = mean * (1.0 - kFillMinGain);
    for (size_t in = pruned; in < nc; ++in) {
      if (kept[in]) continue;
      for (size_t out = 0; out <= nc; ++out) {
        if (out < nc ? !kept[out] || out == tail : kept_count >= static_cast<size_t>(kFp8GemmMaxKernels)) continue;
        const double m = swapped_mean(out, in);
        if (m < best_mean * (1.0 - 1e-9)) {
          best_mean = m;
          best_out = out;
          best_in = in;
        }
      }
    }
    if (best_in == nc) break;
    if (best_out < nc) kept[best_out] = false;
    kept[best_in] = true;
    mean = best_mean;
  }

  // 128x144 for 128x160 where 144 divides N and K is long (see kWhole144Penalty): the same buckets, each
  // kernel swapped whole where the model puts 144 ahead at every interval it serves, so that nothing else in
  // the plan moves. Offered as a candidate instead, 144 changed the pruning elsewhere (3.6 % slower on a timed
  // sample of those moves); swapped where it was ahead only on the intervals' weighted sum, it lost 2-5 % at
  // 1088 and 3200 x 18432 (a whole number of rounds for 160 there).
  const bool tile_free = overrides.block_n == 0 && (overrides.block_m == 0 || overrides.block_m == 128);
  if (form == Fp8GemmForm::kInference && tile_free && n % 144 == 0 && cdiv(k, 128) >= kWhole144MinKBlocks) {
    Fp8GemmConfig narrower = make_config({128, 144}, target, overrides, form);
    narrower.group_m = tile_order_group_m(n, k, narrower);
    narrower.m_grouped = one_block;  // as every candidate above
    for (size_t c = 0; c < nc && narrower.stages > 0; ++c) {
      if (!kept[c] || cands[c].block_m != 128 || cands[c].block_n != 160 || cands[c].split_k != 1) continue;
      bool ahead_everywhere = true;
      for (size_t i = 0; i < intervals && ahead_everywhere; ++i)
        if (pick(i) == c)
          ahead_everywhere = fp8_gemm_estimate_us(target, iv[i].costed_at, n, k, narrower) <
                             fp8_gemm_estimate_us(target, iv[i].costed_at, n, k, cands[c]);
      if (ahead_everywhere) cands[c] = narrower;
    }
  }

  // Buckets from the intervals' picks, then the tail. M in [lo, hi] taken by candidate c extends the last bucket
  // where that is c's, else starts one.
  std::vector<size_t> bucket_cand;  // candidate index per bucket
  Fp8GemmPlan plan;
  const auto append = [&](size_t c, int64_t lo, int64_t hi) {
    if (!bucket_cand.empty() && bucket_cand.back() == c) {
      plan.buckets.back().m_hi = hi;
    } else {
      bucket_cand.push_back(c);
      plan.buckets.push_back({lo, hi, 0});
    }
  };
  for (size_t i = 0; i < intervals; ++i) append(pick(i), iv[i].lo, iv[i].hi);
  int64_t assigned = sampled_max_m;
  size_t beyond = tail;  // the kernel past the last assigned interval
  if (form == Fp8GemmForm::kInference) {
    // The kept candidate of the pruning's the model puts cheapest at M = m (the tail on a tie).
    std::vector<double> us(nc, 0.0);
    const auto cheapest_at = [&](int64_t m) {
      for (size_t d = 0; d < pruned; ++d)
        if (kept[d]) us[d] = fp8_gemm_estimate_us(target, m, n, k, cands[d]);
      size_t cheapest = tail;
      for (size_t d = 0; d < pruned; ++d)
        if (kept[d] && us[d] < us[cheapest] * (1.0 - 1e-9)) cheapest = d;
      return cheapest;
    };
    for (int64_t hi = sampled_max_m + kIntervalM; hi <= kFp8GemmLongMaxM; hi += kIntervalM) {
      const size_t cheapest = cheapest_at(hi);
      append(us[cheapest] < us[tail] * (1.0 - kLongMMargin) ? cheapest : tail, hi - kIntervalM + 1, hi);
      assigned = hi;
    }
    // Past kFp8GemmLongMaxM, the kept candidate cheapest where every tile's rounds are nearly whole
    // (kAsymptoticM): the cheapest per output.
    beyond = cheapest_at(kAsymptoticM);
  }
  append(beyond, assigned + 1, kFp8GemmUnboundedM);

  // Number the kernels in order of first use.
  std::vector<int> index(nc, -1);
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const size_t c = bucket_cand[b];
    if (index[c] < 0) {
      index[c] = static_cast<int>(plan.kernels.size());
      plan.kernels.push_back(cands[c]);
    }
    plan.buckets[b].kernel = index[c];
  }
  // A kernel that serves one m block only (a 64-row tile up to M = 64) streams B once, at one CTA per tile: it
  // runs with fewer stages than fit (fewer bytes in flight per SM), as measured best (one_block_stages).
  if (form == Fp8GemmForm::kInference && overrides.stages == 0)
    for (size_t i = 0; i < plan.kernels.size(); ++i) {
      int64_t top = 0;
      for (const Fp8GemmBucket& b : plan.buckets)
        if (b.kernel == static_cast<int>(i)) top = std::max(top, b.m_hi);
      Fp8GemmConfig& c = plan.kernels[i];
      if (top <= c.block_m) c.stages = one_block_stages(c);
    }
  return plan;
}

}  // namespace

Fp8GemmPlan fp8_gemm_plan(const TargetInfo& target, int64_t n, int64_t k, const Fp8GemmOverrides& overrides,
                          Fp8GemmForm form) {
  return make_plan(target, n, k, overrides, form, false);
}

Fp8GemmPlan fp8_gemm_m_grouped_plan(const TargetInfo& target, int64_t n, int64_t k, const Fp8GemmOverrides& overrides,
                                    bool masked) {
  const char* kWho = masked ? "m_grouped_fp8_gemm_nt_masked" : "m_grouped_fp8_gemm_nt_contiguous";
  if (overrides.block_m == 256)
    invalid(kWho, std::string("block_m must be 0 (heuristic), 64 or 128 for the m-grouped form (each m block must lie "
                              "in one group") +
                      (masked ? "), got 256" : ", whose rows are aligned to 128), got 256"));
  if (overrides.cluster_m > 1)
    invalid(kWho, "cluster_m must be 0 (heuristic) or 1 for the m-grouped form (a pair sharing B takes two m blocks, "
                  "which may be two groups'), got " + std::to_string(overrides.cluster_m));
  Fp8GemmPlan plan = make_plan(target, n, k, overrides, Fp8GemmForm::kInference, true);  // its kernels m_grouped
  for (Fp8GemmConfig& c : plan.kernels) c.masked = masked;
  return plan;
}

// At short K a tile has few K blocks, and the producer, a pipeline's depth ahead of the math, runs several tiles
// ahead: with C its prefetch of each tile's D into L2 (issued a slot before the tile's last K block) then lands
// tiles before the reduce-adds that need it, and can be evicted first. ncu at 4096 x 7168 x 256 with C found
// 128x128's reduce-adds missing L2 on 10 % of their sectors and its DRAM reads 20 % above 64x128's (H200,
// 2026-12-02, forty-second session). Kernels compiled with fewer stages (bench/probes/wgrad_short_k_stages.py, three
// weights at K = 256, 512 and 1024) ran with C at K = 256 11-14 % faster with four of 64x128's eight and 12-18 %
// with four of 128x128's six, and slower again at K = 512. A kernel serves every K of its weight, so rather than
// compile more of them the launch runs fewer of its stages (Fp8GemmParams::ring_stages): timed against the same
// kernel running all of its stages (bench/probes/wgrad_plan_moves.py, 20 random calls with C at K = 128 and 256, N
// 512..18432, kShortRing in the unit tests) 0.863 on geometric mean (0.805-1.001); 64x64's four of thirteen
// 0.947-0.990. Without C (no prefetch) 128x128 compiled with four stages was 3-10 % faster than with six at K <= 1024,
// but running four of six was level (20 random calls, 0.989-1.015): that gain is not the pipeline's depth, and calls
// without C run all of their stages.
//
// How far ahead the producer may run depends on the card. On an H100 (50 MiB of L2 and five HBM3 stacks, where the
// H200 has 60 MiB and six) every ring length from 2 to all of the stages was timed with C at K = 256..1024 (forty-fifth
// session, 2026-12-06, bench/probes/wgrad_ring_lengths.py: four weights of 2048..7168 x 2048..7168; 64x128, 128x128,
// 128x160 and 64x64; kLeadRing in the unit tests). For the tiles of at least 128 columns the fastest length was about
// one tile and one K block ahead, K blocks + 1: at K = 384 64x128 running 4 of its 8 stages took 0.888-0.895 of the
// time of all 8, and 128x128 and 128x160 running 4 of their 5 0.933-0.970; at K = 512 64x128 running 5 0.916-0.931;
// at K = 640 6 0.962-0.992; at K = 768 7 within 1 % of all 8. At K = 256 the four of kShortRingStages are within
// 2-4 % of the best. 20 random calls whose ring this shortens (wgrad_plan_moves.py, lead_ring_c) took 0.957 of the
// time on geometric mean (0.852-1.000). Not taken: the 128-row tiles ran 4 of their 5 stages 5-8 % faster at K = 768
// too, but 1 % slower at 512 and 1-8 % slower at 1024, which no lead explains; 64x64 (13 stages of half the bytes)
// ran K blocks + 1 1.03-1.14x slower at K = 384 and keeps the rule above. The same sweep on the H200 (forty-sixth
// session, kLeadRingH200 in the unit tests) found the shorter lead faster at K = 384 only: K blocks + 1 (4 stages) took
// 0.872-1.015 of all 8's time at 64x128 (0.936 on geometric mean over four weights) and 0.934-0.961 of all 5's at
// 128x128 and 128x160, while from K = 512 all the stages were within 1-3 % of the fastest length (the H100 gains 7-8 %
// there with 5). So a device whose L2 is known runs K blocks + 1 at three K blocks (K = 257..384), and below 56 MiB
// from there on; a device whose L2 size is not known (0) keeps the rule above. The ring length is a launch parameter:
// plans and kernels are the same on both cards.
constexpr int64_t kShortRingMaxKBlocks = 2;
constexpr int kShortRingStages = 4;
constexpr int64_t kLeadLimitedL2Bytes = int64_t{56} << 20;  // below: an H100's 50 MiB, not an H200's 60
constexpr int64_t kLeadAnyL2MaxKBlocks = 3;                 // K = 384: the lead on every card whose L2 is known
constexpr int kLeadMinBlockN = 128;
int fp8_gemm_ring_stages(const Fp8GemmConfig& c, int64_t k, Fp8GemmForm form, bool stages_forced, int64_t l2_bytes) {
  if (form != Fp8GemmForm::kAccumulate || stages_forced) return c.stages;
  const int64_t k_blocks = cdiv(k, 128);
  if (k_blocks <= kShortRingMaxKBlocks) return std::min(c.stages, kShortRingStages);
  const bool lead = l2_bytes > 0 && c.block_n >= kLeadMinBlockN &&
                    (l2_bytes < kLeadLimitedL2Bytes || k_blocks <= kLeadAnyL2MaxKBlocks);
  return lead ? static_cast<int>(std::min<int64_t>(c.stages, k_blocks + 1)) : c.stages;
}

}  // namespace kiln::ops
