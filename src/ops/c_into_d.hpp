// The float32 D that a GEMM adds into, and the C it starts from: the forms that compute D = C + A . B^T
// (fp8_gemm_nt_wgrad, k_grouped_fp8_gemm_nt_contiguous, bf16_gemm_nt_accumulate) take C as D itself (the kernel
// adds into D), as another tensor (copied into D on the caller's stream first), or as none (the kernel stores D).
// What each op checks of C's dtype and shape stays with the op; here are the rules they share about C and D, and the
// copy.
#pragma once

#include <cstdint>

#include "cuda/driver.hpp"
#include "kiln/tensor.hpp"

namespace kiln::ops {

// What a form with a C does with D.
enum class CMode {
  kAccumulate,  // C is D: D += A . B^T
  kCopy,        // C is another tensor: D = C, then D += A . B^T
  kZero,        // no C: D = A . B^T, stored by the kernel; zeroed only where no kernel writes (the k-grouped call's
                // groups without tokens)
};

// C against D, for an m x n D of row stride ldd whose C (when given, checked by the op to be float32 [m, n]) has row
// stride ldc: no C is kZero; C at D's address is D itself (kAccumulate; refused with other strides, naming c); C
// elsewhere must not overlap D (a partial overlap would make the copy read what it has already overwritten) and is
// kCopy. m or n of 0 is kAccumulate: nothing is read or written. Errors name `function`'s argument c.
CMode check_c_against_d(const char* function, const TensorView* c, const TensorView& d, int64_t m, int64_t n,
                        int64_t ldc, int64_t ldd);

// Prepares D before a kernel adds into it, on `stream` (of `device`), nothing allocated: for kCopy, C copied into D
// (cuMemcpy2DAsync of m rows of n float32, pitches ldc and ldd); for kZero, D zeroed (cuMemsetD2D32Async); nothing
// for kAccumulate. CUDA errors name `function` and d (and c).
void prepare_d(const char* function, CMode mode, const TensorView& d, const TensorView* c, int64_t m, int64_t n,
               int64_t ldc, int64_t ldd, int device, CUstream stream);

}  // namespace kiln::ops
