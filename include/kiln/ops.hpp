// The operations, with DeepGEMM's names and argument conventions. Outputs are passed in (kiln does not
// allocate device memory); helpers give their required shapes. `stream` is a CUstream / cudaStream_t
// (nullptr: the legacy default stream). Every precondition is checked before any launch.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/tensor.hpp"

namespace kiln {

using Stream = void*;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t align(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// TMA needs 16-byte-aligned strides: the number of elements of `element_size` bytes a dimension of x is
// padded to (DeepGEMM's get_tma_aligned_size).
constexpr int64_t get_tma_aligned_size(int64_t x, int element_size) { return align(x, 16 / element_size); }

// ---- FP8 quantisation with DeepSeek-V3 fine-grained scaling ------------------------------------------------
// e4m3 values x / scale with scale = amax / 448 over each group (amax clamped below at 1e-4).

// Per token, per 128 channels. x: bfloat16 [m, k], row-major (row stride may exceed k), k % 128 == 0.
// out: float8_e4m3 [m, k] row-major contiguous. out_scales: float32 [m, k/128] in the MN-major,
// TMA-aligned layout the FP8 GEMM reads: strides (1, get_tma_aligned_size(m, 4)), i.e. storage of
// [k/128][aligned m] floats (per_token_scales_storage() elements). x, out and out_scales must not overlap.
void per_token_cast_to_fp8(const TensorView& x, const TensorView& out, const TensorView& out_scales,
                           Stream stream = nullptr);
int64_t per_token_scales_storage(int64_t m, int64_t k);  // floats needed behind out_scales

// Per 128x128 block. x: bfloat16 [n, k] row-major (row stride may exceed k), k % 128 == 0, any n.
// out: float8_e4m3 [n, k] row-major contiguous. out_scales: float32 [ceil(n/128), k/128] row-major contiguous.
// x, out and out_scales must not overlap.
void per_block_cast_to_fp8(const TensorView& x, const TensorView& out, const TensorView& out_scales,
                           Stream stream = nullptr);

// Per-row scales from row-major to the MN-major, TMA-aligned layout the FP8 GEMM reads (DeepGEMM's
// get_mn_major_tma_aligned_tensor, with the output passed in): for scales made elsewhere, e.g. DeepGEMM's own
// per_token_cast_to_fp8, which returns them row-major. sf: float32 [mn, g] with rows dense (strides (s, 1),
// s >= g), 4-byte aligned. out: float32 [mn, g] MN-major and TMA-aligned: strides (1, t) with t >= mn and t a
// multiple of 4, 16-byte aligned, e.g. storage of per_token_scales_storage(mn, 128 * g) floats; it must not
// overlap sf. Rows mn..t-1 of out (the TMA padding) are left as they are. One transposing kernel, one kernel
// for every shape.
void to_mn_major_scales(const TensorView& sf, const TensorView& out, Stream stream = nullptr);

// ---- FP8 GEMM with DeepSeek-V3 fine-grained scaling (DeepGEMM's fp8_gemm_nt contract) -------------------------
//
//   D[m, n] (bfloat16) = (A * sfa) . (B * sfb)^T        summed in FP32, one 128-wide K block at a time
//
// a:   float8_e4m3 [m, k], K-major: strides (lda, 1) with lda >= k and lda a multiple of 16; 16-byte aligned.
// sfa: float32 [m, ceil(k/128)], one scale per row per 128 K, MN-major and TMA-aligned: strides (1, s) with
//      s >= m and s a multiple of 4 (get_tma_aligned_size(m, 4) is what per_token_cast_to_fp8 writes);
//      16-byte aligned. Row-major scales are refused with an error naming to_mn_major_scales, which converts them.
// b:   float8_e4m3 [n, k], K-major, as a (the weights; n a multiple of 8, k a multiple of 16).
// sfb: float32 [ceil(n/128), ceil(k/128)], one scale per 128x128 block, row-major contiguous.
// d:   bfloat16 [m, n], strides (ldd, 1) with ldd >= n and ldd a multiple of 8; 16-byte aligned; not overlapping
//      a, sfa, b or sfb (the kernel reads them while it stores D).
// All on one CUDA device with compute capability 9.0 (H100/H200). m may be anything >= 0 (0: nothing is
// launched); every precondition is checked before any launch. The kernel is chosen per (device, n, k, m
// bucket) by the heuristic in docs/FP8_GEMM.md ("Host side"); DG_PRINT_CONFIGS=1 prints each choice once.
void fp8_gemm_nt(const TensorView& a, const TensorView& sfa, const TensorView& b, const TensorView& sfb,
                 const TensorView& d, Stream stream = nullptr);

// ---- The weight-gradient form (DeepGEMM's fp8_gemm_nt with recipe (1, 1, 128), an fp32 D and c) -------------
//
//   D[m, n] (float32) += (A * sfa) . (B * sfb)^T        both operands scaled per 1x128, summed in FP32
//
// a, sfa, b: as for fp8_gemm_nt (a K-major e4m3 with per-row scales, MN-major and TMA-aligned; b K-major e4m3,
//      n a multiple of 8, k a positive multiple of 16).
// sfb: float32 [n, ceil(k/128)], one scale per ROW of B per 128 K (1x128, not 128x128 blocks), laid out like
//      sfa: MN-major and TMA-aligned, strides (1, s) with s >= n and s a multiple of 4 (what
//      per_token_cast_to_fp8 writes when B is quantised per row); 16-byte aligned. 128x128-block scales are
//      refused with an error that says per-row scales are needed.
// d:   float32 [m, n], strides (ldd, 1) with ldd >= n and ldd a multiple of 4; 16-byte aligned; not overlapping
//      a, sfa, b or sfb. Read, added to and written back: D must hold the value to accumulate onto (columns
//      ldd > n are never touched).
// All on one CUDA device of compute capability 9.0; every precondition is checked before anything is
// enqueued; m = 0 or n = 0 enqueues nothing (k must still be a positive multiple of 16 when m, n > 0: k = 0
// is an error, not "D unchanged"). The kernels are planned per (device, n, k, m bucket) like fp8_gemm_nt's,
// as a table of their own (`kiln plan fp8_gemm_nt ... accumulate=1` lists them), but take k (the token count)
// at run time: a new k makes a plan (about 0.4 ms of host time, once) and compiles nothing unless it picks a
// tile no earlier call used (at most eight kernels per n over k = 16..65536 and every m). A, B and their scales
// may be column views of longer token axes (per-expert slices at multiples of 128 tokens). Errors name
// fp8_gemm_nt_accumulate.
void fp8_gemm_nt_accumulate(const TensorView& a, const TensorView& sfa, const TensorView& b, const TensorView& sfb,
                            const TensorView& d, Stream stream = nullptr);

// DeepGEMM's general form with an optional C: D (float32) = C + (A * sfa) . (B * sfb)^T, arguments as for
// fp8_gemm_nt_accumulate, plus
// c:   nullptr: D = A . B^T (the kernel stores D, which is not read); d's own view (or any view with
//      d's data pointer, shape and strides): D += A . B^T, exactly fp8_gemm_nt_accumulate; another float32
//      [m, n] tensor with dense rows (strides (ldc, 1), ldc >= n; 4-byte aligned) on the same device that does
//      not overlap D: C is copied into D on `stream` first (cuMemcpy2DAsync), then accumulated into. Nothing is
//      allocated. A c sharing d's address with other strides, or overlapping d, is refused.
// The copy and the kernel are enqueued in that order on `stream` after every check (and after the
// kernel is compiled or loaded), so an error never leaves D half-prepared. Errors name fp8_gemm_nt_wgrad.
void fp8_gemm_nt_wgrad(const TensorView& a, const TensorView& sfa, const TensorView& b, const TensorView& sfb,
                       const TensorView& d, const TensorView* c, Stream stream = nullptr);

// DeepGEMM's k_grouped_fp8_gemm_nt_contiguous (recipe (1, 1, 128)): the weight gradients of G groups (MoE experts)
// at once, D[g] (float32 [m, n]) = C[g] + (A_g * sfa_g) . (B_g * sfb_g)^T, where group g has ks[g] tokens (a
// multiple of 128; 0: no product, D[g] = C[g]):
// a:   float8_e4m3 [m * sum(ks)], contiguous: A_g is [m, ks[g]] row-major from element m * (ks[0] + ... +
//      ks[g-1]) on (each group's A K-major, the groups one after the other);
// sfa: float32 [m, sum(ks) / 128], MN-major and TMA-aligned as fp8_gemm_nt's: A_g's scales are its columns
//      (ks[0] + ... + ks[g-1]) / 128 onwards;
// b, sfb: the same with n rows;
// d:   float32 [G, m, n]: each group's rows dense and 16-byte aligned (strides (s0, s1, 1), s1 >= n and s0 multiples
//      of 4, groups apart: s0 >= (m - 1) * s1 + n), not overlapping a, sfa, b or sfb;
// c:   nullptr (D[g] = A_g . B_g^T: stored, or zeroed for groups without tokens), d itself (D += ...), or float32
//      [G, m, n] with dense rows not overlapping d (copied into D first); ks: the token counts, on the host
//      (ks.size() == G), each in 0..2147483647 and at most 2147483647 in all (m and n at most 2147483647 too).
// Every check (of the grouped tensors, then each group's views as fp8_gemm_nt_wgrad checks its arguments, an error
// naming the group) and the kernel come before anything is enqueued. Then, on `stream`, each group's copy of C
// (or, with no C, a memset of each group without tokens), and one launch of the weight-gradient form's k-grouped
// kernel for every 32 groups with tokens that share a kernel (each group with its own maps of A and B and its own
// K, its tile chosen at its K rounded up to a power of two: k_grouped_plan_k; at short K the plan takes other tiles
// than at long K). m = 0, n = 0 or G = 0 enqueue nothing.
// Errors name k_grouped_fp8_gemm_nt_contiguous.
void k_grouped_fp8_gemm_nt_contiguous(const TensorView& a, const TensorView& sfa, const TensorView& b,
                                      const TensorView& sfb, const TensorView& d, const std::vector<int64_t>& ks,
                                      const TensorView* c, Stream stream = nullptr);

// DeepGEMM's m_grouped_fp8_gemm_nt_contiguous: the forward GEMMs of G MoE experts in one launch, each expert's
// tokens a contiguous run of A's rows,
//   D[r, :] (bfloat16) = (A[r, :] * sfa[r]) . (B[g] * sfb[g])^T      for every row r, g = m_indices[r]
// a, sfa, d: as for fp8_gemm_nt (m the rows of all experts together);
// b:   float8_e4m3 [G, n, k], each expert's [n, k] K-major as fp8_gemm_nt's b, the experts one after the other
//      (strides (n * s, s, 1), s >= k, s a multiple of 16); n a multiple of 8;
// sfb: float32 [G, ceil(n/128), ceil(k/128)], each expert's 128x128-block scales, contiguous;
// m_indices: int32 [m], contiguous, on a's device: each row's expert, or -1 for a padding row;
// d must not overlap a, sfa, b, sfb (any expert's) or m_indices.
// Layout (DeepGEMM's contiguous layout): each expert's rows start at a multiple of 128 and runs of rows are padded
// to a multiple of 128 with rows marked -1 (get_mk_alignment_for_contiguous_layout() = 128). The kernel reads one
// index per m block (its first row's), so this alignment is what makes every row use its own expert; it is the
// caller's to keep, since checking it would read device memory. A block that starts with -1 is padding only: skipped,
// its rows of d not written (padding rows inside an expert's last block come out unspecified); a block whose first
// index is outside [-1, G) comes out NaN (never a read outside b). Every other precondition is checked before
// anything is launched; m = 0 or n = 0 launches nothing. The kernels are the inference form's, planned per (device,
// n, k, m bucket) with 64- and 128-row tiles only (`kiln plan fp8_gemm_nt ... m_grouped=1` lists them). Errors name
// m_grouped_fp8_gemm_nt_contiguous.
void m_grouped_fp8_gemm_nt_contiguous(const TensorView& a, const TensorView& sfa, const TensorView& b,
                                      const TensorView& sfb, const TensorView& d, const TensorView& m_indices,
                                      Stream stream = nullptr);

// DeepGEMM's m_grouped_fp8_gemm_nt_masked: the decode-time GEMMs of G MoE experts in one launch, each expert's tokens
// in its own block of rows of which only the first masked_m[g] hold tokens (the count stays on the device, so a CUDA
// graph replays any routing):
//   D[g, r, :] (bfloat16) = (A[g, r, :] * sfa[g, r]) . (B[g] * sfb[g])^T      for r < masked_m[g]
// a:   float8_e4m3 [G, m, k], each group's [m, k] K-major as fp8_gemm_nt's a, the groups one after the other
//      (stride(0) == m * stride(1));
// sfa: float32 [G, m, ceil(k/128)], each group's per-token scales MN-major and TMA-aligned as fp8_gemm_nt takes
//      them, the groups one after the other: strides (ceil(k/128) * s, 1, s), as get_mn_major_tma_aligned_tensor
//      writes them;
// b, sfb: as for m_grouped_fp8_gemm_nt_contiguous;
// d:   bfloat16 [G, m, n], each group's [m, n] as fp8_gemm_nt's d, the groups a multiple of 8 elements apart and
//      not overlapping (each other, a, sfa, b, sfb or masked_m);
// masked_m: int32 [G], contiguous, on a's device: each group's rows. The kernel reads it (a value below 0 counts as
//      0, above m as m: never a read or store outside the group). Rows of a group from masked_m[g] on come out
//      unspecified up to its last 64- or 128-row block's end (as DeepGEMM leaves them); the rows past that are not
//      written.
// expected_m: the rows a group is expected to hold (>= 0; clamped into [1, m]): the call runs the kernel its plan
//      picks at M = G * expected_m, so a serving engine passes a typical count, not the batch's.
// Every other precondition is checked before anything is launched; m = 0 or n = 0 launches nothing. The kernels are
// the m-grouped form's (`kiln plan fp8_gemm_nt ... m_grouped=1 masked=1` lists them). Errors name
// m_grouped_fp8_gemm_nt_masked.
void m_grouped_fp8_gemm_nt_masked(const TensorView& a, const TensorView& sfa, const TensorView& b,
                                  const TensorView& sfb, const TensorView& d, const TensorView& masked_m,
                                  int64_t expected_m, Stream stream = nullptr);

// ---- BF16 GEMM (DeepGEMM's bf16_gemm_nt) ---------------------------------------------------------------------------
//
//   D[m, n] (bfloat16 or float32) = A . B^T        summed in FP32 by the tensor cores
//
// a:   bfloat16 [m, k], 16-byte aligned, K-major: strides (lda, 1) with lda >= k and lda a multiple of 8 (16-byte
//      rows), or M-major: strides (1, lda) with lda >= m and a multiple of 8 (a transposed [k, m] tensor: DeepGEMM's
//      tn and tt layouts); k a positive multiple of 8 (when m, n > 0). stride(1) == 1 reads as K-major.
// b:   bfloat16 [n, k], K-major or N-major, as a (the weights; n a multiple of 8). An N-major b takes tiles whose
//      widths are multiples of 64, without CTA pairs.
// d:   bfloat16 or float32 [m, n] (the sums rounded to bfloat16, or stored as they are), strides (ldd, 1) with
//      ldd >= n and 16-byte rows (ldd a multiple of 8 bfloat16 or 4 float32); 16-byte aligned; not overlapping a or
//      b (the kernel would read what it has written).
// All on one CUDA device with compute capability 9.0 (H100/H200). m may be anything >= 0 (0: nothing is launched);
// every precondition is checked before any launch. The kernel is chosen per (device, n, k, m bucket, d's dtype) by
// the plan in docs/BF16_GEMM.md (`kiln plan bf16_gemm_nt n=... k=... m=1..16384 [fp32=1] [m_major_a=1]
// [n_major_b=1]` lists it);
// DG_PRINT_CONFIGS=1 prints each choice once. Errors name bf16_gemm_nt.
void bf16_gemm_nt(const TensorView& a, const TensorView& b, const TensorView& d, Stream stream = nullptr);

// DeepGEMM's bf16_gemm_nt with a C:   D[m, n] (float32) = C + A . B^T
// a, b: as for bf16_gemm_nt; d: float32, as there.
// c:   d's own view (or any view with d's data pointer, shape and strides): D += A . B^T, added into D by the kernel
//      (TMA reduce-adds: no read of D by the SMs); or another float32 [m, n] tensor with dense rows (strides (ldc, 1),
//      ldc >= n; 4-byte aligned) on the same device that does not overlap d: C is copied into D on `stream` first
//      (cuMemcpy2DAsync), then added into. Nothing is allocated. A c sharing d's address with other strides, or
//      overlapping d, is refused.
// The copy and the kernel are enqueued in that order on `stream` after every check and after the kernel is compiled
// or loaded, so an error never leaves D half-prepared. m = 0 or n = 0 enqueues nothing (k must still be a positive
// multiple of 8 when m, n > 0: k = 0 is an error, not "D = C"). The kernels are the plan's with
// `kiln plan bf16_gemm_nt ... accumulate=1`. Errors name bf16_gemm_nt_accumulate.
void bf16_gemm_nt_accumulate(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView& c,
                             Stream stream = nullptr);

// DeepGEMM's m_grouped_bf16_gemm_nt_contiguous: the forward GEMMs of G MoE experts in one launch, each expert's
// tokens a contiguous run of A's rows,
//   D[r, :] (bfloat16) = A[r, :] . B[g]^T      for every row r, g = m_indices[r]
// a:   bfloat16 [m, k], K-major, as bf16_gemm_nt's (m the rows of all experts together);
// b:   bfloat16 [G, n, k], each expert's [n, k] K-major as bf16_gemm_nt's b, the experts one after the other
//      (strides (n * s, s, 1), s >= k, s a multiple of 8); n a multiple of 8;
// d:   bfloat16 [m, n] as bf16_gemm_nt's, not overlapping a, b or m_indices;
// m_indices: int32 [m], contiguous, on a's device: each row's expert, or -1 for a padding row.
// Layout: as m_grouped_fp8_gemm_nt_contiguous's (each expert's rows start at a multiple of 128 and are padded to one
// with rows marked -1). The kernel reads one index per m block (its first row's); a block that starts with -1 is
// padding only: skipped, its rows of d not written (padding rows inside an expert's last block come out unspecified);
// a block whose first index is outside [-1, G) comes out NaN (never a read outside b).
// Every other precondition is checked before anything is launched; m = 0 or n = 0 launches nothing. The kernels have
// 64- and 128-row tiles (`kiln plan bf16_gemm_nt ... m_grouped=1` lists them). Errors name
// m_grouped_bf16_gemm_nt_contiguous.
void m_grouped_bf16_gemm_nt_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const TensorView& m_indices, Stream stream = nullptr);

// DeepGEMM's m_grouped_bf16_gemm_nn_contiguous: as m_grouped_bf16_gemm_nt_contiguous with each expert's weights stored
// [k, n] (N-major, as a model keeps its [in, out] weights),
//   D[r, :] (bfloat16) = A[r, :] . B[g]      for every row r, g = m_indices[r]
// b:   bfloat16 [G, k, n], each expert's [k, n] with rows of n elements, the experts one after the other (strides
//      (k * s, s, 1), s >= n, s a multiple of 8); n a multiple of 8;
// a, d and m_indices, the layout and what the kernel reads and writes: as for m_grouped_bf16_gemm_nt_contiguous. B's
// tiles load in boxes of 64 columns (block_n a multiple of 64), each expert's through its own plane of a 3-D map, so a
// K tail reads zeros, never the next expert's rows. The kernels: `kiln plan bf16_gemm_nt ... m_grouped=1
// n_major_b=1`. Errors name m_grouped_bf16_gemm_nn_contiguous.
void m_grouped_bf16_gemm_nn_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const TensorView& m_indices, Stream stream = nullptr);

// DeepGEMM's m_grouped_bf16_gemm_nt_masked: the decode-time GEMMs of G MoE experts in one launch, each expert's tokens
// in its own block of rows of which only the first masked_m[g] hold tokens (the count stays on the device, so a CUDA
// graph replays any routing):
//   D[g, r, :] (bfloat16) = A[g, r, :] . B[g]^T      for r < masked_m[g]
// a:   bfloat16 [G, m, k], each group's [m, k] K-major as bf16_gemm_nt's a, the groups one after the other
//      (stride(0) == m * stride(1));
// b:   as for m_grouped_bf16_gemm_nt_contiguous;
// d:   bfloat16 [G, m, n], each group's [m, n] as bf16_gemm_nt's d, the groups a multiple of 8 elements apart and not
//      overlapping (each other, a, b or masked_m);
// masked_m: int32 [G], contiguous, on a's device: each group's rows (below 0 counts as 0, above m as m: never a read
//      or store outside the group). Rows of a group from masked_m[g] on come out unspecified up to its last 64- or
//      128-row block's end (as DeepGEMM leaves them); the rows past that are not written.
// expected_m: the rows a group is expected to hold (>= 0; clamped into [1, m]): the call runs the kernel its plan
//      picks at M = G * expected_m.
// Every other precondition is checked before anything is launched; m = 0 or n = 0 launches nothing (`kiln plan
// bf16_gemm_nt ... m_grouped=1 masked=1` lists the kernels). Errors name m_grouped_bf16_gemm_nt_masked.
void m_grouped_bf16_gemm_nt_masked(const TensorView& a, const TensorView& b, const TensorView& d,
                                   const TensorView& masked_m, int64_t expected_m, Stream stream = nullptr);

// DeepGEMM's k_grouped_bf16_gemm_tn_contiguous: the weight gradients of G groups (MoE experts) in one call,
//   D[g] (float32 [m, n]) = C[g] + A_g^T . B_g,      A_g = a[t_g : t_g + ks[g]], B_g = b[t_g : t_g + ks[g]],
// where t_g = ks[0] + ... + ks[g-1] (group g's first token), summed in FP32:
// a:  bfloat16 [sum(ks), m] (each group's tokens one after the other, e.g. the experts' output gradients), rows dense
//     (stride(1) == 1) and 16-byte aligned apart;
// b:  bfloat16 [sum(ks), n] likewise (e.g. the experts' inputs); n a multiple of 8;
// d:  float32 [G, m, n]: each group's rows dense and 16-byte aligned apart, the groups apart (strides (s0, s1, 1),
//     s0 a multiple of 4, s0 >= (m - 1) * s1 + n);
// c:  nullptr (D[g] = A_g^T . B_g: stored, or zeroed for groups without tokens), d itself (D += ...), or float32
//     [G, m, n] with dense rows not overlapping d (copied into D first);
// ks: each group's tokens, on the host: any count >= 0 (a group's K tail is zero-filled by TMA, not read from the
//     next group's tokens; 0: no product).
// Every check and the kernels (each group's chosen at its tokens rounded up to 64 times a power of two; `kiln plan
// bf16_gemm_nt ... k_grouped=1` lists them) come before anything is enqueued. Then, on `stream`, each group's copy of
// C (or, with no C, a memset of each group without tokens), and one launch per 32 groups with tokens that share a
// kernel. m = 0, n = 0 or G = 0 enqueue nothing. Errors name k_grouped_bf16_gemm_tn_contiguous.
void k_grouped_bf16_gemm_tn_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const std::vector<int64_t>& ks, const TensorView* c, Stream stream = nullptr);

// Overrides of the BF16 GEMM's plan, process-wide (0: the plan decides), for later bf16_gemm_nt launches. Validated
// when set: block_m 64, 128 or 256; block_n a multiple of 16 in 16..256 (at most 128 with block_m 256, whose two
// waves' accumulators fill the registers); stages 1..32 (checked to fit in shared memory per kernel); cluster_m 1 or 2
// (2: CTA pairs on vertically adjacent tiles multicast B). Throws Error(kValueError) naming the field otherwise. The
// m-grouped forms take them too, but ignore cluster_m (their tiles are never paired) and refuse block_m 256.
struct Bf16GemmOverrides {
  int block_m = 0;
  int block_n = 0;
  int stages = 0;
  int cluster_m = 0;
};
void set_bf16_gemm_overrides(const Bf16GemmOverrides& overrides);
Bf16GemmOverrides get_bf16_gemm_overrides();

// Overrides of the FP8 GEMM heuristic, process-wide (0: the heuristic decides). Applied to every later
// fp8_gemm_nt launch (both forms) and to plan/precompile of fp8_gemm_nt (where the problem parameters block_m,
// block_n, stages, cluster_m, cluster_n and split_k do the same for one request). The weight-gradient form has
// no cluster variant: it ignores cluster_m, cluster_n and split_k set here, and a plan request with
// accumulate=1 and any of them at 2 is refused; the m-grouped forms (m_grouped_fp8_gemm_nt_contiguous and _masked)
// ignore cluster_m (and a plan request with m_grouped=1 and cluster_m=2 is refused), and refuse block_m 256.
// Validated when set: block_m 64, 128 or 256 (256: block_n at most 128, the bf16 form only); block_n a multiple of
// 16 in 16..192 that makes a tile straddle at most two of B's 128-column scale blocks (not 176); stages 1..16 and
// fitting in shared memory (checked per kernel); cluster_m 1 or 2 (2: CTA pairs on vertically adjacent tiles
// multicast B; needs block_n / 2 a multiple of 8); cluster_n 1 or 2 (2: CTA pairs on horizontally adjacent tiles
// multicast A); split_k 1 (never split) or 2 (CTA pairs split K in halves; not with 256-row tiles); at most one of
// cluster_m, cluster_n and split_k at 2 (each uses the CTA pair). Throws Error(kValueError) naming the field
// otherwise.
struct Fp8GemmOverrides {
  int block_m = 0;
  int block_n = 0;
  int stages = 0;
  int cluster_m = 0;
  int cluster_n = 0;
  int split_k = 0;
};
void set_fp8_gemm_overrides(const Fp8GemmOverrides& overrides);
Fp8GemmOverrides get_fp8_gemm_overrides();

// The number of SMs kernels may use (0: all of the device's), for leaving SMs to communication kernels.
void set_num_sms(int num_sms);
int get_num_sms();
// Programmatic dependent launch for kiln's kernels (default off).
void set_pdl(bool enabled);
bool get_pdl();

}  // namespace kiln
