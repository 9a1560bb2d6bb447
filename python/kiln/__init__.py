"""kiln: JIT-compiled tensor-core kernels for NVIDIA Hopper (sm_90a), with DeepGEMM's names.

Tensors come in as PyTorch tensors (the fast path), any DLPack producer, or objects with
``__cuda_array_interface__``; work is enqueued on the caller's current CUDA stream (for torch tensors,
``torch.cuda.current_stream(x.device)``), and the GIL is released while kiln compiles or launches.
A kernel is compiled on first use and cached on disk (``DG_JIT_CACHE_DIR``, default ``~/.deep_gemm``);
``kiln.precompile`` builds kernels ahead of time, without a GPU.

Errors are :class:`KilnError` subclasses that are also ``TypeError`` (dtypes), ``ValueError`` (shapes,
layouts, devices, settings) or ``RuntimeError`` (CUDA, compiles, graph capture), carrying the library's
full message. See docs/PYTHON.md.
"""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _errors
from . import _native
from . import _tensors
from ._errors import (
    BY_KIND as _BY_KIND,
    CacheError,
    CaptureError,
    CompileError,
    ConfigError,
    CudaError,
    InternalError,
    KilnError,
    KilnNotImplementedError,
    KilnTypeError,
    KilnValueError,
    NotFoundError,
)

_native._set_error_types(_BY_KIND)

__version__: str = _native.version()

__all__ = [
    # DeepGEMM's names
    "fp8_gemm_nt",
    "k_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
    "bf16_gemm_nt",
    "bf16_gemm_nn",
    "bf16_gemm_tn",
    "bf16_gemm_tt",
    "m_grouped_bf16_gemm_nt_contiguous",
    "m_grouped_bf16_gemm_nn_contiguous",
    "m_grouped_bf16_gemm_nt_masked",
    "k_grouped_bf16_gemm_tn_contiguous",
    "get_mk_alignment_for_contiguous_layout",
    "per_token_cast_to_fp8",
    "per_block_cast_to_fp8",
    "get_mn_major_tma_aligned_tensor",
    "to_mn_major_scales",
    "transform_sf_into_required_layout",
    "get_tma_aligned_size",
    "set_num_sms",
    "get_num_sms",
    "set_pdl",
    "get_pdl",
    "set_fp8_gemm_overrides",
    "get_fp8_gemm_overrides",
    "set_bf16_gemm_overrides",
    "get_bf16_gemm_overrides",
    "ceil_div",
    "align",
    # DeepGEMM's legacy and first-release names for the functions above
    "fp8_m_grouped_gemm_nt_masked",
    "bf16_m_grouped_gemm_nt_masked",
    "gemm_fp8_fp8_bf16_nt",
    "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous",
    "m_grouped_gemm_fp8_fp8_bf16_nt_masked",
    "get_col_major_tma_aligned_tensor",
    "get_m_alignment_for_contiguous_layout",
    # kiln's own
    "precompile",
    "plan",
    "list_ops",
    "cache_stats",
    "declare_warmup_done",
    "cache_list",
    "cache_verify",
    "cache_clear",
    "config",
    "devices",
    "doctor",
    "describe",
    "version",
    # errors: the ones _errors exports
    *_errors.__all__,
]
# `compile` is kiln.compile too (the name of the `kiln compile` command), but is kept out of __all__ so that
# `from kiln import *` does not shadow the builtin.


def __dir__() -> List[str]:
    """``dir(kiln)``: the public API (``__all__``, ``compile``) and the module's dunders, not the names it imports for
    its own use (typing's, ``operator``, ``annotations``) or its private modules and helpers."""
    return sorted({*__all__, "compile"} | {name for name in globals() if name.startswith("__") and name.endswith("__")})

# Hot-path names, bound once.
_per_token_native = _native.per_token_cast_to_fp8
_per_block_native = _native.per_block_cast_to_fp8
_per_token_outputs = _tensors.per_token_outputs
_per_block_outputs = _tensors.per_block_outputs
_gemm_native = _native.fp8_gemm_nt
_gemm_sfa = _tensors.gemm_sfa
_grouped_gemm_sfa = _tensors.grouped_gemm_sfa
_gemm_sfb = _tensors.gemm_sfb


# ---- Small helpers -----------------------------------------------------------------------------------------

_INT64 = (-(1 << 63), (1 << 63) - 1)  # what the native layer takes as int64_t
_C_INT = (-(1 << 31), (1 << 31) - 1)  # ... and as int
_LARGEST_TMA_SIZE = (1 << 63) - 16  # get_tma_aligned_size's largest x: its aligned size must fit in 64 bits


def _int_argument(function: str, what: str, value: Any, expected: str, limits: Tuple[int, int] = _INT64,
                  at_most: int = 2147483647) -> int:
    """`value` as an int (anything with __index__ but a bool: True is not 1 here), or KilnTypeError "<function>: <what>
    must be <expected>, got ..."; and within `limits`, the native argument's type, else KilnValueError "<function>:
    <what> must be >= 0" or "... must be at most <at_most>" (the bounds the library checks within those limits, so
    a value past them reads as any other out of range: the ops' sizes and counts are 32-bit and >= 0)."""
    if isinstance(value, bool):
        raise KilnTypeError(f"{function}: {what} must be {expected}, got bool {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise KilnTypeError(f"{function}: {what} must be {expected}, got {type(value).__name__} {value!r}") from None
    if not limits[0] <= number <= limits[1]:
        bound = "must be >= 0" if number < 0 else f"must be at most {at_most}"
        raise KilnValueError(f"{function}: {what} {bound}, got {number}")
    return number


def _flag(function: str, what: str, value: Any) -> bool:
    """A bool argument: True or False, numpy's bool scalars, or the ints 1 and 0 (DeepGEMM's binding takes ints too).
    KilnTypeError for anything else (``bool("no")`` is True: a string, None or a list is a mistake, not a switch),
    KilnValueError for another int."""
    if isinstance(value, bool):
        return value
    kind = type(value)
    if kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"):
        return bool(value)
    try:
        number = operator.index(value)
    except TypeError:
        raise KilnTypeError(f"{function}: {what} must be a bool (True or False, or the ints 1 and 0), got "
                            f"{kind.__name__} {value!r}") from None
    if number not in (0, 1):
        raise KilnValueError(f"{function}: {what} must be True or False (or the ints 1 and 0), got {number}")
    return number == 1


def ceil_div(x: int, y: int) -> int:
    """``ceil(x / y)`` for integers: ``(x + y - 1) // y`` (DeepGEMM's ``ceil_div``)."""
    return (x + y - 1) // y


def align(x: int, y: int) -> int:
    """``x`` rounded up to a multiple of ``y`` (DeepGEMM's ``align``)."""
    return (x + y - 1) // y * y


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """The number of elements a dimension of ``x`` elements of ``element_size`` bytes is padded to so
    that it spans a multiple of 16 bytes, as TMA needs (DeepGEMM's ``get_tma_aligned_size``). For the
    float32 scales of ``per_token_cast_to_fp8``, ``get_tma_aligned_size(m, 4)`` is the scales' column stride.

    Raises TypeError for an argument that is not an int (a bool included), ValueError for ``x`` outside
    ``0..2**63 - 16`` (the aligned size must fit in 64 bits) or an ``element_size`` other than 1, 2, 4, 8 or 16.
    """
    function = "get_tma_aligned_size"
    return _native.get_tma_aligned_size(_int_argument(function, "x", x, "an int", at_most=_LARGEST_TMA_SIZE),
                                        _int_argument(function, "element_size", element_size, "an int", at_most=16))


def version() -> str:
    """The kiln library's version (the same as ``kiln.__version__`` and ``kiln --version``)."""
    return _native.version()


def describe(tensor: Any) -> str:
    """How kiln sees a tensor, e.g. ``'bfloat16[4096, 7168] strides (7168, 1) on cuda:0'`` (strides in
    elements), through the conversion every operation uses: torch tensors, DLPack producers (numpy arrays too), objects
    with ``__cuda_array_interface__``, and buffer-protocol objects (``bytes``, ``bytearray``, ``memoryview``: uint8
    on the host), on a CUDA device or the host.

    Raises the error an operation would raise for that argument: TypeError for an object that is not a tensor or a
    dtype kiln does not handle; ValueError for a tensor kiln cannot view (more than 4 dimensions, a device that is
    neither CUDA nor the host such as torch's ``meta``, strides that are not whole elements, a sparse tensor, a
    negative or conjugate view)."""
    return _native.describe(tensor)


def _unsupported(function: str, what: str) -> None:
    raise KilnValueError(f"{function}: {what} is not supported by kiln (scales are float32 amax / 448 over "
                         f"groups of 128, the DeepSeek-V3 recipe for sm_90)")


def _check_recipe(function: str, use_ue8m0: Any, gran_k: Any, use_packed_ue8m0: Any) -> None:
    """DeepGEMM's recipe arguments of the casts, when they are not the defaults: each checked as what it is (bools, an
    int: a string such as 'False' is a KilnTypeError naming it, not a request for UE8M0), then refused unless it asks
    for what kiln does (float32 scales over groups of 128)."""
    if _flag(function, "use_ue8m0", use_ue8m0):
        _unsupported(function, "use_ue8m0=True (power-of-two UE8M0 scales)")
    if _flag(function, "use_packed_ue8m0", use_packed_ue8m0):
        _unsupported(function, "use_packed_ue8m0=True")
    if _int_argument(function, "gran_k", gran_k, "an int (128)") != 128:
        _unsupported(function, f"gran_k={gran_k!r}")


def _out_pair(out: Any, function: str) -> Tuple[Any, Any]:
    try:
        first, second = out
    except (TypeError, ValueError):
        raise KilnTypeError(f"{function}: out must be a pair (x_fp8, scales) of tensors, got "
                            f"{type(out).__module__}.{type(out).__qualname__}") from None
    return first, second


# ---- FP8 quantisation --------------------------------------------------------------------------------------

def per_token_cast_to_fp8(x: Any, use_ue8m0: bool = False, gran_k: int = 128, use_packed_ue8m0: bool = False,
                          *, out: Optional[Sequence[Any]] = None, stream: Any = None) -> Tuple[Any, Any]:
    """Quantise a bfloat16 ``[m, k]`` tensor to FP8 e4m3 per token and 128 channels (DeepSeek-V3).

    Each group of 128 consecutive elements of a row gets one float32 scale ``max(amax, 1e-4) / 448``; the
    values are ``x / scale`` rounded to e4m3. ``k`` must be a multiple of 128; ``x`` must be row-major
    (its row stride may exceed ``k``), 16-byte aligned, on a CUDA device.

    Returns ``(x_fp8, scales)``: ``x_fp8`` float8_e4m3fn ``[m, k]`` contiguous, and ``scales`` float32
    ``[m, k // 128]`` already in the MN-major, TMA-aligned layout the FP8 GEMM reads (strides
    ``(1, get_tma_aligned_size(m, 4))``), so ``get_mn_major_tma_aligned_tensor(scales)`` returns it as is.
    The values are the same as DeepGEMM's ``per_token_cast_to_fp8(x, use_ue8m0=False)``; only the scales'
    strides differ.

    Args:
        x: bfloat16 ``[m, k]``: a torch tensor, or any CUDA DLPack producer (outputs are then torch
            tensors; needs PyTorch unless ``out`` is given).
        use_ue8m0, gran_k, use_packed_ue8m0: DeepGEMM's recipe arguments (bools, an int); only the defaults
            (float32 scales over groups of 128) are supported: another value raises ValueError, another type (a
            string such as ``'False'``) TypeError.
        out: optional preallocated ``(x_fp8, scales)`` with the dtypes, shapes and strides above (any
            tensor kind kiln accepts), not overlapping ``x`` or each other; nothing is allocated then.
        stream: where to enqueue: None for the caller's current stream (torch's current stream on x's
            device; CuPy's for a CuPy array; otherwise the legacy default stream), an int ``CUstream``, or
            a ``torch.cuda.Stream``/``cupy.cuda.Stream``/``__cuda_stream__`` object.

    Raises:
        TypeError: wrong dtype or a non-tensor argument. ValueError: bad shape, strides, alignment, device or
        overlap. RuntimeError: CUDA errors, a failed compile, or a compile needed during graph capture.
    """
    if use_ue8m0 is not False or gran_k != 128 or use_packed_ue8m0 is not False:
        _check_recipe("per_token_cast_to_fp8", use_ue8m0, gran_k, use_packed_ue8m0)
    if out is None:
        x, x_fp8, scales = _per_token_outputs(x)
    else:
        x_fp8, scales = _out_pair(out, "per_token_cast_to_fp8")
    _per_token_native(x, x_fp8, scales, stream)
    return x_fp8, scales


def per_block_cast_to_fp8(x: Any, use_ue8m0: bool = False, gran_k: int = 128, *,
                          out: Optional[Sequence[Any]] = None, stream: Any = None) -> Tuple[Any, Any]:
    """Quantise a bfloat16 ``[n, k]`` tensor (weights) to FP8 e4m3 per 128x128 block (DeepSeek-V3).

    Each 128x128 block gets one float32 scale ``max(amax, 1e-4) / 448``; rows past ``n`` count as zeros.
    ``k`` must be a multiple of 128, ``n`` may be anything; ``x`` must be row-major (row stride may exceed
    ``k``), 16-byte aligned, on a CUDA device.

    Returns ``(x_fp8, scales)``: float8_e4m3fn ``[n, k]`` contiguous and float32
    ``[ceil(n / 128), k // 128]`` contiguous, as DeepGEMM's ``per_block_cast_to_fp8(x, use_ue8m0=False)``.

    Args:
        x: bfloat16 ``[n, k]``: a torch tensor or any CUDA DLPack producer (see per_token_cast_to_fp8).
        use_ue8m0, gran_k: DeepGEMM's recipe arguments; only the defaults are supported (ValueError; TypeError
            for a value that is not a bool or an int).
        out: optional preallocated ``(x_fp8, scales)``, not overlapping ``x`` or each other; nothing is allocated
            then.
        stream: as for per_token_cast_to_fp8.

    Raises:
        TypeError, ValueError, RuntimeError: as for per_token_cast_to_fp8.
    """
    if use_ue8m0 is not False or gran_k != 128:
        _check_recipe("per_block_cast_to_fp8", use_ue8m0, gran_k, False)
    if out is None:
        x, x_fp8, scales = _per_block_outputs(x)
    else:
        x_fp8, scales = _out_pair(out, "per_block_cast_to_fp8")
    _per_block_native(x, x_fp8, scales, stream)
    return x_fp8, scales


def get_mn_major_tma_aligned_tensor(sf: Any) -> Any:
    """A float32 scale tensor ``[mn, k/128]`` (or batched ``[groups, mn, k/128]``) in the MN-major,
    TMA-aligned layout the FP8 GEMM reads: strides ``(1, a)`` (batched: ``(a * k/128, 1, a)``) with
    ``a = get_tma_aligned_size(mn, 4)``. Returns ``sf`` itself when it already has that layout (as
    ``per_token_cast_to_fp8``'s scales do), else a copy (DeepGEMM's ``get_mn_major_tma_aligned_tensor``).

    Needs a torch tensor (TypeError otherwise); TypeError for a dtype other than float32, ValueError for
    a tensor that is not 2-D or 3-D.
    """
    return _tensors.get_mn_major_tma_aligned_tensor(sf)


def transform_sf_into_required_layout(sf: Any, mn: int, k: int, recipe: Sequence[int], num_groups: Optional[int] = None,
                                      is_sfa: Optional[bool] = None, disable_ue8m0_cast: bool = False) -> Any:
    """Float32 scales in the layout kiln's FP8 GEMMs read (DeepGEMM's ``transform_sf_into_required_layout``,
    same arguments, with its sm_90 behaviour). ``recipe`` is ``(gran_m, gran_n, gran_k)`` with ``is_sfa`` saying
    which of the first two applies (A's or B's), or ``(gran_mn, gran_k)`` with ``is_sfa=None``. ``sf`` is
    ``[ceil(mn/gran_mn), ceil(k/gran_k)]``, or ``[num_groups, ...]`` of those when ``num_groups`` is given.

    * Per-row scales ``(1, 128)`` (activations; both operands of the weight-gradient form) come back MN-major
      and TMA-aligned: ``get_mn_major_tma_aligned_tensor(sf)``, ``sf`` itself when already so.
    * Block scales ``(128, 128)`` (weights) are read as they are: ``sf`` itself, checked contiguous.

    ``disable_ue8m0_cast`` is accepted and has no effect: sm_90 reads float32 scales, never UE8M0.

    Raises:
        TypeError: ``sf`` not a float32 torch tensor (packed UE8M0 ints are sm_100's). ValueError: a recipe
        that is not 2 or 3 ints, ``is_sfa`` not matching it, a granularity other than (1, 128) or
        (128, 128), ``sf``'s shape, or non-contiguous block scales.
    """
    del disable_ue8m0_cast  # no UE8M0 on sm_90
    return _tensors.transform_sf_into_required_layout(sf, mn, k, recipe, num_groups, is_sfa)


def to_mn_major_scales(sf: Any, out: Any, *, stream: Any = None) -> None:
    """Copy float32 scales ``sf`` ``[mn, g]`` with dense rows (row-major, any row stride) into ``out``
    ``[mn, g]`` in the MN-major, TMA-aligned layout the FP8 GEMM reads: strides ``(1, t)`` with ``t >= mn``
    and ``t`` a multiple of 4 (``get_tma_aligned_size(mn, 4)`` at least), 16-byte aligned, not overlapping
    ``sf``. One transposing kernel on the GPU, nothing allocated; rows ``mn..t-1`` of ``out`` (the TMA padding)
    are left as they are. For any tensor kind kiln accepts; with torch tensors,
    ``get_mn_major_tma_aligned_tensor`` allocates the output for you.

    Raises:
        TypeError: a dtype other than float32, or a non-tensor. ValueError: shapes, strides, alignment,
        device or overlap. RuntimeError: CUDA errors or a failed compile.
    """
    _native.to_mn_major_scales(sf, out, stream)


# ---- FP8 GEMM ----------------------------------------------------------------------------------------------

# DeepGEMM's recipes on sm_90 with float32 scales, as (1, gran_n, gran_k): A per 1x128 and B per 128x128 block
# (bfloat16 D), or both per 1x128 (the weight-gradient form, float32 D). The native call takes gran_n (0: none
# given, the form follows d's dtype).
_RECIPES = {(1, 128, 128): 128, (1, 1, 128): 1}


def _pair(value: Any, name: str, function: str = "fp8_gemm_nt") -> Tuple[Any, Any]:
    # A tuple or a list only: unpacking a tensor of two rows would "work" and hide the mistake.
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return value[0], value[1]
    given = f"a {type(value).__name__} of {len(value)}" if isinstance(value, (tuple, list)) else \
        f"{type(value).__module__}.{type(value).__qualname__}"
    raise KilnTypeError(f"{function}: {name} must be a pair ({name}_fp8, sf{name}) of tensors, got {given}")


def _token_counts(function: str, ks: Any) -> List[int]:
    """DeepGEMM's ``ks`` (the k-grouped GEMMs' token counts, on the host) as the native call takes them: a list of
    ints. KilnTypeError for anything but a sequence of ints (a bool is not a count); a count outside 64 bits, which the
    native call cannot take, gets the library's own error for any count outside 0..2147483647."""
    counts = []
    try:
        for k in ks:
            if isinstance(k, bool):
                raise TypeError
            counts.append(operator.index(k))
    except TypeError:
        raise KilnTypeError(f"{function}: ks must be a sequence of ints, got {ks!r}") from None
    for g, k in enumerate(counts):
        if not -(1 << 63) <= k < (1 << 63):
            raise KilnValueError(f"{function}: ks[{g}] must be a token count in 0..2147483647, got {k}")
    return counts


def _check_compiled_dims(compiled_dims: Any, function: str, default: str = "nk") -> None:
    """DeepGEMM's ``compiled_dims``: a string of the letters m, n and k (accepted for the signature; kiln's kernels are
    specialised the same whatever it says). Errors name ``function`` and DeepGEMM's ``default`` for it."""
    if not isinstance(compiled_dims, str) or not set(compiled_dims) <= set("mnk"):
        raise KilnValueError(f"{function}: compiled_dims must be a string of the letters m, n and k (DeepGEMM's "
                             f"default is {default!r}), got {compiled_dims!r}")


def _gemm_recipe(recipe: Any, compiled_dims: Any, function: str = "fp8_gemm_nt") -> int:
    """The native call's recipe argument for DeepGEMM's ``recipe``; checks ``compiled_dims`` too. Errors name
    ``function``."""
    _check_compiled_dims(compiled_dims, function)
    if recipe is None:
        return 0
    try:
        given = tuple(operator.index(v) for v in recipe)
    except TypeError:
        given = None
    if given not in _RECIPES:
        raise KilnValueError(
            f"{function}: recipe={recipe!r} is not supported by kiln: only recipe=None, (1, 128, 128) (A scaled per "
            f"1x128, B per 128x128, bfloat16 d) or (1, 1, 128) (both per 1x128, the weight-gradient form with a "
            f"float32 d), with float32 scales")
    return _RECIPES[given]


def _check_block_recipe(recipe: Any, compiled_dims: Any, function: str) -> None:
    """DeepGEMM's ``recipe`` and ``compiled_dims`` for the functions that have the bfloat16 form only (the m-grouped
    GEMMs): None or (1, 128, 128), A scaled per 1x128 and B per 128x128 block. Errors name ``function``."""
    if recipe is None and compiled_dims == "nk":
        return
    if _gemm_recipe(recipe, compiled_dims, function) not in (0, _RECIPES[(1, 128, 128)]):  # 0: recipe None
        raise KilnValueError(f"{function}: recipe must be None or (1, 128, 128) (A scaled per 1x128, B per 128x128, "
                             f"bfloat16 d), got {recipe!r}")


def fp8_gemm_nt(a: Sequence[Any], b: Sequence[Any], d: Any, c: Any = None, recipe: Optional[Sequence[int]] = None,
                compiled_dims: str = "nk", disable_ue8m0_cast: bool = False, *, stream: Any = None) -> None:
    """FP8 GEMM with DeepSeek-V3 fine-grained scaling, in place (DeepGEMM's ``fp8_gemm_nt``, same arguments). Two
    forms, chosen by ``d``'s dtype:

    * ``d`` bfloat16: ``D = (A * sfa) . (B * sfb)^T``, A scaled per 1x128 and B per 128x128 block, summed in
      float32 one 128-wide K block at a time, rounded to bfloat16 (DeepGEMM's default recipe ``(1, 128, 128)``).
    * ``d`` float32, the weight-gradient form: ``D = C + (A * sfa) . (B * sfb)^T``, **both** operands scaled per
      1x128 (DeepGEMM's recipe ``(1, 1, 128)``), accumulated in float32. ``c=None``: ``D = A . B^T`` (D is only
      written); ``c=d`` (the same tensor, or one with d's data pointer, shape and strides): ``D += A . B^T``;
      ``c`` another float32 ``[m, n]`` tensor: C is copied into D on the stream, then accumulated into (no
      allocation; C must not overlap D).

    Shapes and layouts (checked before anything is launched; K-major means row-major here):

    * ``a = (a_fp8, sfa)``: float8_e4m3fn ``[m, k]`` K-major (row stride a multiple of 16 elements, 16-byte
      aligned), and float32 ``[m, ceil(k/128)]`` scales, one per row per 128 K (``per_token_cast_to_fp8``).
    * ``b = (b_fp8, sfb)``: float8_e4m3fn ``[n, k]`` K-major (``n`` a multiple of 8, ``k`` of 16). Its scales:
      bfloat16 form, float32 ``[ceil(n/128), ceil(k/128)]``, one per 128x128 block, contiguous
      (``per_block_cast_to_fp8``); weight-gradient form, float32 ``[n, ceil(k/128)]``, one per row per 128 K,
      laid out like A's (``per_token_cast_to_fp8`` applied to B).
    * ``d``: ``[m, n]``, row stride >= n and 16-byte rows (a multiple of 8 bfloat16 or 4 float32), 16-byte aligned,
      not overlapping ``a``, ``b`` or their scales (the kernel reads them while it stores D).
    * ``c``: None, ``d``, or float32 ``[m, n]`` with dense rows (any row stride >= n) on d's device.

    ``m`` may be anything (0 launches nothing); ``n`` and ``k`` are compiled into the bfloat16 form's kernels, so the
    first call for an ``(n, k)`` compiles (``precompile("fp8_gemm_nt", n=..., k=..., m=...)`` does it ahead of
    time; add ``accumulate=1`` for the weight-gradient form, whose kernels take ``k``, a token count, at run time
    and are shared by every ``k`` that picks the same tile).

    **Per-row scales** (A's, and B's in the weight-gradient form). The kernel reads them MN-major and
    TMA-aligned: strides ``(1, s)`` with ``s >= m`` (or n) a multiple of 4, which is what
    ``kiln.per_token_cast_to_fp8`` returns (no cost). Row-major scales (DeepGEMM's own ``per_token_cast_to_fp8``
    returns those) are accepted as torch CUDA tensors and converted on every call with
    ``get_mn_major_tma_aligned_tensor``: one allocation and one transposing copy of ``ceil(k/128) * align(m, 4)``
    floats (224 KB at m = 4096, k = 7168; a few microseconds). Convert them once yourself to avoid that cost.
    Scales from other DLPack producers must already be MN-major (ValueError otherwise;
    ``to_mn_major_scales`` converts them into a tensor you provide).

    **Differences from DeepGEMM** (which selects the form by ``recipe`` and asserts on the rest): kiln selects
    it by ``d``'s dtype, so a float32 ``d`` needs no ``recipe`` (``(1, 1, 128)`` may still be given, and is
    checked against ``d``); ``c=None`` with a float32 ``d`` computes ``D = A . B^T`` (DeepGEMM requires ``c``
    there); ``k == 0`` is a ValueError, not ``D = C``.

    Args:
        a: ``(a_fp8, sfa)``, as above. b: ``(b_fp8, sfb)``, as above. d: the output (bfloat16 or float32).
        c: the weight-gradient form's C: None, ``d``, or another float32 tensor (see above). Needs a float32
            ``d`` (TypeError otherwise).
        recipe: DeepGEMM's scaling recipe: None (the form follows ``d``'s dtype), ``(1, 128, 128)`` (bfloat16
            ``d``) or ``(1, 1, 128)`` (float32 ``d``); anything else, or a recipe that does not match ``d``,
            raises ValueError.
        compiled_dims: DeepGEMM's choice of compile-time dimensions, a string of ``m``/``n``/``k``. A hint only:
            kiln compiles ``n`` into the kernel, ``k`` in the bfloat16 form, never ``m`` (the result is the same).
        disable_ue8m0_cast: DeepGEMM's switch for converting float32 scales to UE8M0 on sm_100; on sm_90 with
            float32 scales there is no such cast, so it has no effect (as in DeepGEMM).
        stream: where to enqueue: None for the caller's current stream (torch's current stream on a's device),
            an int ``CUstream``, or a ``torch.cuda.Stream``/``cupy.cuda.Stream``/``__cuda_stream__`` object. The
            weight-gradient form's zeroing of D or copy of C goes there too, before the kernel.

    Any tensor kind kiln accepts works (torch tensors, DLPack producers, ``__cuda_array_interface__``); all on
    one H100/H200 (compute capability 9.0). The GIL is released while kiln compiles or launches. In a CUDA
    graph capture, call once before capturing (the kernel is compiled and loaded outside the capture). Errors
    name ``fp8_gemm_nt`` in both forms.

    Raises:
        TypeError: wrong dtype (including ``c`` with a bfloat16 ``d``), or an argument that is not a tensor or a
        pair of them. ValueError: bad shape, strides, alignment, device, overlap (``d`` with ``a``, ``b`` or their
        scales; ``c`` with ``d``), recipe or compiled_dims. RuntimeError: CUDA errors, a failed compile, or a
        compile needed during graph capture.
    """
    if recipe is None and compiled_dims == "nk":
        a_fp8, sfa = _pair(a, "a")
        b_fp8, sfb = _pair(b, "b")
        _gemm_native(a_fp8, _gemm_sfa(sfa), b_fp8, _gemm_sfb(sfb, d), d, c, stream)
    else:
        form = _gemm_recipe(recipe, compiled_dims)  # before any tensor is looked at
        a_fp8, sfa = _pair(a, "a")
        b_fp8, sfb = _pair(b, "b")
        _gemm_native(a_fp8, _gemm_sfa(sfa), b_fp8, _gemm_sfb(sfb, d), d, c, stream, form)


def k_grouped_fp8_gemm_nt_contiguous(a: Sequence[Any], b: Sequence[Any], d: Any, ks: Sequence[int],
                                     ks_tensor: Any = None, c: Any = None, recipe: Sequence[int] = (1, 1, 128),
                                     compiled_dims: str = "mn", *, stream: Any = None) -> None:
    """The weight gradients of many groups (MoE experts) at once, in place (DeepGEMM's
    ``k_grouped_fp8_gemm_nt_contiguous``, same arguments): for each group ``g`` of ``ks[g]`` tokens,
    ``D[g] = C[g] + (A_g * sfa_g) . (B_g * sfb_g)^T`` in float32, both operands scaled per 1x128 (recipe
    ``(1, 1, 128)``).

    * ``a = (a_fp8, sfa)``: float8_e4m3fn ``[m * sum(ks)]``, flat: group ``g``'s A is ``[m, ks[g]]`` row-major,
      the groups one after the other; float32 scales ``[m, sum(ks) / 128]`` (group ``g``'s are its columns from
      ``(ks[0] + ... + ks[g-1]) / 128``), MN-major and TMA-aligned as ``fp8_gemm_nt`` takes them (row-major scales
      are converted, as there).
    * ``b = (b_fp8, sfb)``: the same with ``n`` rows.
    * ``d``: float32 ``[G, m, n]``, each group's rows 16-byte aligned, not overlapping ``a``, ``b`` or their scales.
      ``c``: None (``D[g] = A_g . B_g^T``), ``d`` (``D += ...``), or float32 ``[G, m, n]`` not overlapping ``d``.
    * ``ks``: the token counts (``len(ks) == G``), ints each a multiple of 128 (0: no product, ``D[g] = C[g]``) in
      ``0..2147483647``, at most 2147483647 in all (ValueError naming ``ks[g]`` otherwise).
      ``ks_tensor`` (DeepGEMM's copy of ``ks`` on the device) is accepted and not read: kiln plans on the host.

    Every check comes before anything is enqueued; then one launch of the weight-gradient form's k-grouped kernel
    serves up to 32 groups, each tile with its group's K. Errors name ``k_grouped_fp8_gemm_nt_contiguous`` (and the
    group, for one group's problem).
    """
    try:
        given = tuple(operator.index(v) for v in recipe)
    except TypeError:
        given = None
    if given != (1, 1, 128):
        raise KilnValueError(f"k_grouped_fp8_gemm_nt_contiguous: recipe must be (1, 1, 128) (both operands scaled per "
                             f"1x128), got {recipe!r}")
    _check_compiled_dims(compiled_dims, "k_grouped_fp8_gemm_nt_contiguous", default="mn")
    counts = _token_counts("k_grouped_fp8_gemm_nt_contiguous", ks)
    del ks_tensor  # DeepGEMM's device copy of ks: the launches are planned from ks on the host
    a_fp8, sfa = _pair(a, "a", "k_grouped_fp8_gemm_nt_contiguous")
    b_fp8, sfb = _pair(b, "b", "k_grouped_fp8_gemm_nt_contiguous")
    _native.k_grouped_fp8_gemm_nt_contiguous(a_fp8, _gemm_sfa(sfa), b_fp8, _gemm_sfa(sfb), d, counts, c, stream)


def get_mk_alignment_for_contiguous_layout() -> int:
    """The row alignment of each expert's rows in the A of ``m_grouped_fp8_gemm_nt_contiguous`` and
    ``m_grouped_bf16_gemm_nt_contiguous`` (DeepGEMM's function of the same name): 128. Each expert's rows start at a
    multiple of it and are padded to one with rows whose ``m_indices`` entry is -1."""
    return 128


def m_grouped_fp8_gemm_nt_contiguous(a: Sequence[Any], b: Sequence[Any], d: Any, m_indices: Any,
                                     recipe: Optional[Sequence[int]] = None, compiled_dims: str = "nk",
                                     disable_ue8m0_cast: bool = False, *, stream: Any = None) -> None:
    """The forward GEMMs of many MoE experts in one launch, in place (DeepGEMM's ``m_grouped_fp8_gemm_nt_contiguous``,
    same arguments): each row ``r`` of A belongs to expert ``g = m_indices[r]``, and
    ``D[r] = (A[r] * sfa[r]) . (B[g] * sfb[g])^T`` in bfloat16, A scaled per 1x128 and B per 128x128 block.

    * ``a = (a_fp8, sfa)``: float8_e4m3fn ``[m, k]`` and its float32 ``[m, ceil(k/128)]`` scales, as ``fp8_gemm_nt``
      takes them (``m``: every expert's rows together; row-major scales are converted, as there).
    * ``b = (b_fp8, sfb)``: float8_e4m3fn ``[G, n, k]``, each expert's ``[n, k]`` K-major, the experts one after
      the other (strides ``(n * s, s, 1)``), and float32 ``[G, ceil(n/128), ceil(k/128)]`` block scales, contiguous.
    * ``d``: bfloat16 ``[m, n]`` as for ``fp8_gemm_nt``, not overlapping ``a``, ``b`` (any expert's), their scales or
      ``m_indices``.
    * ``m_indices``: int32 ``[m]``, contiguous, on a's device: each row's expert, -1 for a padding row.

    The contiguous layout: each expert's rows start at a multiple of ``get_mk_alignment_for_contiguous_layout()``
    (128) and are padded to one with rows marked -1. The kernel reads one index per block of rows (the block's
    first), so that alignment is what gives every row its own expert; it is the caller's to keep (checking it
    would read device memory). A block that starts with -1 is padding only: skipped, its rows of ``d`` not written
    (padding rows inside an expert's last block come out unspecified); a block whose first index is not -1 or an
    expert comes out NaN, never a read outside ``b``.

    ``recipe`` (None or ``(1, 128, 128)``), ``compiled_dims`` and ``disable_ue8m0_cast`` are DeepGEMM's and mean
    here what they mean for ``fp8_gemm_nt``; ``stream`` as there. Every other precondition is checked before
    anything is launched (m = 0 or n = 0 launches nothing). The kernels are the bfloat16 form's with 64- and
    128-row tiles, planned per ``(n, k)`` over ``m``: ``precompile("fp8_gemm_nt", n=..., k=..., m=...,
    m_grouped=1)`` builds them ahead of time. Errors name ``m_grouped_fp8_gemm_nt_contiguous``.

    Raises:
        TypeError: wrong dtype or a non-tensor argument. ValueError: bad shape, strides, alignment, device,
        overlap, recipe or compiled_dims. RuntimeError: CUDA errors, a failed compile, or a compile needed during
        graph capture.
    """
    del disable_ue8m0_cast  # float32 scales on sm_90: nothing to cast (as for fp8_gemm_nt)
    _check_block_recipe(recipe, compiled_dims, "m_grouped_fp8_gemm_nt_contiguous")
    a_fp8, sfa = _pair(a, "a", "m_grouped_fp8_gemm_nt_contiguous")
    b_fp8, sfb = _pair(b, "b", "m_grouped_fp8_gemm_nt_contiguous")
    _native.m_grouped_fp8_gemm_nt_contiguous(a_fp8, _gemm_sfa(sfa), b_fp8, sfb, d, m_indices, stream)


def m_grouped_fp8_gemm_nt_masked(a: Sequence[Any], b: Sequence[Any], d: Any, masked_m: Any, expected_m: int,
                                 recipe: Optional[Sequence[int]] = None, compiled_dims: str = "nk",
                                 disable_ue8m0_cast: bool = False, *, stream: Any = None) -> None:
    """The decode-time GEMMs of many MoE experts in one launch, in place (DeepGEMM's
    ``m_grouped_fp8_gemm_nt_masked``, same arguments): expert ``g``'s tokens are the first ``masked_m[g]`` rows of its
    block of A, and ``D[g, r] = (A[g, r] * sfa[g, r]) . (B[g] * sfb[g])^T`` in bfloat16 for ``r < masked_m[g]``.

    * ``a = (a_fp8, sfa)``: float8_e4m3fn ``[G, m, k]``, each expert's ``[m, k]`` K-major, the experts one after the
      other, and float32 ``[G, m, ceil(k/128)]`` scales; scales in any other layout than the MN-major, TMA-aligned
      one ``get_mn_major_tma_aligned_tensor`` writes are converted (one copy per call).
    * ``b = (b_fp8, sfb)``: as for ``m_grouped_fp8_gemm_nt_contiguous``.
    * ``d``: bfloat16 ``[G, m, n]``, each expert's ``[m, n]`` as ``fp8_gemm_nt`` takes it, the experts apart, not
      overlapping ``a``, ``b``, their scales or ``masked_m``.
    * ``masked_m``: int32 ``[G]``, contiguous, on a's device: each expert's rows. It stays on the device, so a CUDA
      graph captured once replays any routing. A count below 0 counts as 0 and above ``m`` as ``m``.
    * ``expected_m``: the rows an expert is expected to hold (an int >= 0, not a bool); it picks the kernel (the one
      planned for ``G * expected_m`` rows), so pass a typical count, the same from call to call.

    Rows of ``D[g]`` from ``masked_m[g]`` on are left unspecified up to the end of their 64- or 128-row block (as
    DeepGEMM leaves them); later rows are not written. ``recipe`` (None or ``(1, 128, 128)``), ``compiled_dims`` and
    ``disable_ue8m0_cast`` mean what they mean for ``fp8_gemm_nt``; ``stream`` as there. Every other precondition is
    checked before anything is launched (m = 0 or n = 0 launches nothing). ``precompile("fp8_gemm_nt", n=..., k=...,
    m=..., m_grouped=1, masked=1)`` builds the kernels ahead of time. Errors name ``m_grouped_fp8_gemm_nt_masked``.

    Raises:
        TypeError: wrong dtype or a non-tensor argument. ValueError: bad shape, strides, alignment, device,
        overlap, expected_m, recipe or compiled_dims. RuntimeError: CUDA errors, a failed compile, or a compile
        needed during graph capture.
    """
    del disable_ue8m0_cast  # float32 scales on sm_90: nothing to cast (as for fp8_gemm_nt)
    function = "m_grouped_fp8_gemm_nt_masked"
    _check_block_recipe(recipe, compiled_dims, function)
    expected = _int_argument(function, "expected_m", expected_m, "an int", at_most=_INT64[1])
    a_fp8, sfa = _pair(a, "a", function)
    b_fp8, sfb = _pair(b, "b", function)
    _native.m_grouped_fp8_gemm_nt_masked(a_fp8, _grouped_gemm_sfa(sfa), b_fp8, sfb, d, masked_m, expected, stream)


def bf16_gemm_nt(a: Any, b: Any, d: Any, c: Any = None, compiled_dims: str = "nk", *, stream: Any = None) -> None:
    """BF16 GEMM, in place (DeepGEMM's ``bf16_gemm_nt``, same arguments): ``D = C + A . B^T``, the products summed
    in float32 by the tensor cores.

    * ``a``: bfloat16 ``[m, k]``, K-major (row stride a multiple of 8 elements, 16-byte aligned) or M-major (a
      transposed ``[k, m]`` tensor, its rows likewise; what ``bf16_gemm_tn`` and ``bf16_gemm_tt`` pass); ``k`` a
      multiple of 8.
    * ``b``: bfloat16 ``[n, k]``, K-major or N-major, as ``a``; ``n`` a multiple of 8.
    * ``d``: bfloat16 (the sums rounded to it) or float32 ``[m, n]``, row stride >= n and 16-byte rows (a multiple
      of 8 bfloat16 or 4 float32), 16-byte aligned, not overlapping ``a`` or ``b``.
    * ``c``: None (``D = A . B^T``: D is only written); ``d`` itself (or a tensor with d's data pointer, shape and
      strides): ``D += A . B^T``, added into D by the kernel; or another float32 ``[m, n]`` tensor with dense rows
      that does not overlap ``d``: C is copied into D on the stream, then added into (nothing is allocated). ``c``
      needs a float32 ``d`` (TypeError otherwise), as in DeepGEMM.

    ``m`` may be anything (0 launches nothing); ``n`` and ``k`` are compiled into the kernels, so the first call for
    an ``(n, k)`` and dtype of ``d`` compiles (``precompile("bf16_gemm_nt", n=..., k=..., m=...)`` does it ahead of
    time; add ``fp32=1`` for a float32 ``d``, ``accumulate=1`` for one with ``c``). Every precondition is checked
    before anything is launched (TypeError or ValueError naming the argument); ``k == 0`` is a ValueError, not
    ``D = C`` (as ``fp8_gemm_nt``). ``compiled_dims`` is accepted for DeepGEMM's signature (kiln always compiles n
    and k in). An MN-major operand is loaded as it is, in 64-element boxes, with no copy (add ``m_major_a=1`` or
    ``n_major_b=1`` to ``precompile``); an N-major ``b`` takes tiles whose widths are multiples of 64."""
    _check_compiled_dims(compiled_dims, "bf16_gemm_nt")
    _native.bf16_gemm_nt(a, b, d, c, stream)


def bf16_gemm_nn(a: Any, b: Any, d: Any, c: Any = None, compiled_dims: str = "nk", *, stream: Any = None) -> None:
    """DeepGEMM's ``bf16_gemm_nn``: ``D = C + A . B`` with ``a`` ``[m, k]`` and ``b`` ``[k, n]`` (row-major: N-major
    as ``bf16_gemm_nt`` sees ``b.T``), no copy. Otherwise as ``bf16_gemm_nt``, whose checks apply to ``b.T`` (shapes
    in the messages are ``b.T``'s); errors name ``bf16_gemm_nn``."""
    _check_compiled_dims(compiled_dims, "bf16_gemm_nn")
    _native.bf16_gemm_nt(a, b, d, c, stream, False, True)


def bf16_gemm_tn(a: Any, b: Any, d: Any, c: Any = None, compiled_dims: str = "mn", *, stream: Any = None) -> None:
    """DeepGEMM's ``bf16_gemm_tn``: ``D = C + A^T . B`` with ``a`` ``[k, m]`` and ``b`` ``[k, n]``, both row-major (a
    weight gradient: ``dW = dY^T . X`` with token-major ``dY`` and ``X``), no copy: ``bf16_gemm_nt`` on ``a.T``
    (M-major) and ``b.T`` (N-major), whose checks apply to those views; errors name ``bf16_gemm_tn``."""
    _check_compiled_dims(compiled_dims, "bf16_gemm_tn", default="mn")
    _native.bf16_gemm_nt(a, b, d, c, stream, True, True)


def bf16_gemm_tt(a: Any, b: Any, d: Any, c: Any = None, compiled_dims: str = "mn", *, stream: Any = None) -> None:
    """DeepGEMM's ``bf16_gemm_tt``: ``D = C + A^T . B^T`` with ``a`` ``[k, m]`` and ``b`` ``[n, k]``, no copy:
    ``bf16_gemm_nt`` on ``a.T`` (M-major) and ``b``; errors name ``bf16_gemm_tt``."""
    _check_compiled_dims(compiled_dims, "bf16_gemm_tt", default="mn")
    _native.bf16_gemm_nt(a, b, d, c, stream, True, False)


def m_grouped_bf16_gemm_nt_contiguous(a: Any, b: Any, d: Any, m_indices: Any, compiled_dims: str = "nk", *,
                                      stream: Any = None) -> None:
    """The forward GEMMs of many MoE experts in one launch, in bfloat16, in place (DeepGEMM's
    ``m_grouped_bf16_gemm_nt_contiguous``, same arguments): each row ``r`` of A belongs to expert ``g = m_indices[r]``,
    and ``D[r] = A[r] . B[g]^T``, summed in float32 and rounded to bfloat16.

    * ``a``: bfloat16 ``[m, k]``, K-major as ``bf16_gemm_nt`` takes it (row stride a multiple of 8 elements, 16-byte
      aligned; ``m``: every expert's rows together); ``k`` a multiple of 8.
    * ``b``: bfloat16 ``[G, n, k]``, each expert's ``[n, k]`` K-major, the experts one after the other (strides
      ``(n * s, s, 1)``, ``s >= k`` a multiple of 8); ``n`` a multiple of 8.
    * ``d``: bfloat16 ``[m, n]`` as for ``bf16_gemm_nt``, not overlapping ``a``, ``b`` or ``m_indices``.
    * ``m_indices``: int32 ``[m]``, contiguous, on a's device: each row's expert, -1 for a padding row.

    The contiguous layout (as ``m_grouped_fp8_gemm_nt_contiguous``'s): each expert's rows start at a multiple of
    ``get_mk_alignment_for_contiguous_layout()`` (128) and are padded to one with rows marked -1. The kernel reads
    one index per block of rows (the block's first), so that alignment is what gives every row its own expert; it
    is the caller's to keep (checking it would read device memory). A block that starts with -1 is padding only:
    skipped, its rows of ``d`` not written (padding rows inside an expert's last block come out unspecified); a
    block whose first index is outside ``[-1, G)`` comes out NaN, never a read outside ``b``. The indices stay on
    the device, so a CUDA graph captured once replays any routing.

    ``compiled_dims`` is accepted for DeepGEMM's signature (kiln always compiles ``n`` and ``k`` in); ``stream`` as
    for ``bf16_gemm_nt``. Every other precondition is checked before anything is launched (m = 0 or n = 0 launches
    nothing). The kernels have 64- and 128-row tiles, planned per ``(n, k)`` over ``m``: ``precompile("bf16_gemm_nt",
    n=..., k=..., m=..., m_grouped=1)`` builds them ahead of time. Errors name ``m_grouped_bf16_gemm_nt_contiguous``.

    Raises:
        TypeError: wrong dtype or a non-tensor argument. ValueError: bad shape, strides, alignment, device, overlap
        or compiled_dims. RuntimeError: CUDA errors, a failed compile, or a compile needed during graph capture.
    """
    _check_compiled_dims(compiled_dims, "m_grouped_bf16_gemm_nt_contiguous")
    _native.m_grouped_bf16_gemm_nt_contiguous(a, b, d, m_indices, stream)


def m_grouped_bf16_gemm_nn_contiguous(a: Any, b: Any, d: Any, m_indices: Any, compiled_dims: str = "nk", *,
                                      stream: Any = None) -> None:
    """``m_grouped_bf16_gemm_nt_contiguous`` with each expert's weights stored ``[k, n]`` (DeepGEMM's
    ``m_grouped_bf16_gemm_nn_contiguous``, same arguments): ``D[r] = A[r] . B[g]`` for ``g = m_indices[r]``, summed
    in float32 and rounded to bfloat16.

    * ``b``: bfloat16 ``[G, k, n]``, each expert's ``[k, n]`` with rows of ``n`` elements, the experts one after the
      other (strides ``(k * s, s, 1)``, ``s >= n`` a multiple of 8); ``n`` a multiple of 8.
    * ``a``, ``d``, ``m_indices``, the contiguous layout, what is read and written, ``compiled_dims`` and ``stream``:
      as for ``m_grouped_bf16_gemm_nt_contiguous``.

    Each expert's ``[k, n]`` is read through its own plane of a 3-D tensor map, so a ``k`` that is not a multiple of
    64 reads zeros past it, never the next expert's rows. The kernels: ``precompile("bf16_gemm_nt", n=..., k=...,
    m=..., m_grouped=1, n_major_b=1)``. Errors name ``m_grouped_bf16_gemm_nn_contiguous``.

    Raises:
        TypeError: wrong dtype or a non-tensor argument. ValueError: bad shape, strides, alignment, device, overlap
        or compiled_dims. RuntimeError: CUDA errors, a failed compile, or a compile needed during graph capture.
    """
    _check_compiled_dims(compiled_dims, "m_grouped_bf16_gemm_nn_contiguous")
    _native.m_grouped_bf16_gemm_nn_contiguous(a, b, d, m_indices, stream)


def m_grouped_bf16_gemm_nt_masked(a: Any, b: Any, d: Any, masked_m: Any, expected_m: int, compiled_dims: str = "nk",
                                  *, stream: Any = None) -> None:
    """The decode-time GEMMs of many MoE experts in one launch, in bfloat16, in place (DeepGEMM's
    ``m_grouped_bf16_gemm_nt_masked``, same arguments): expert ``g``'s tokens are the first ``masked_m[g]`` rows of its
    block of A, and ``D[g, r] = A[g, r] . B[g]^T``, summed in float32 and rounded to bfloat16, for ``r < masked_m[g]``.

    * ``a``: bfloat16 ``[G, m, k]``, each expert's ``[m, k]`` K-major as ``bf16_gemm_nt`` takes it, the experts one
      after the other (``stride(0) == m * stride(1)``); ``k`` a multiple of 8.
    * ``b``: bfloat16 ``[G, n, k]``, as for ``m_grouped_bf16_gemm_nt_contiguous``.
    * ``d``: bfloat16 ``[G, m, n]``, each expert's ``[m, n]`` as ``bf16_gemm_nt`` takes it, the experts a multiple of
      8 elements apart and not overlapping (each other, ``a``, ``b`` or ``masked_m``).
    * ``masked_m``: int32 ``[G]``, contiguous, on a's device: each expert's rows. It stays on the device, so a CUDA
      graph captured once replays any routing. A count below 0 counts as 0 and above ``m`` as ``m`` (never a read or
      a store outside the expert's block).
    * ``expected_m``: the rows an expert is expected to hold (an int >= 0, not a bool); it picks the kernel (the one
      planned for ``G * expected_m`` rows, ``expected_m`` clamped into ``[1, m]``), so pass a typical count, the same
      from call to call.

    Rows of ``D[g]`` from ``masked_m[g]`` on are left unspecified up to the end of their 64- or 128-row block (as
    DeepGEMM leaves them); later rows are not written. ``compiled_dims`` is accepted for DeepGEMM's signature;
    ``stream`` as for ``bf16_gemm_nt``. Every other precondition is checked before anything is launched (m = 0 or
    n = 0 launches nothing). ``precompile("bf16_gemm_nt", n=..., k=..., m=<G * expected_m>, m_grouped=1, masked=1)``
    builds the kernel ahead of time. Errors name ``m_grouped_bf16_gemm_nt_masked``.

    Raises:
        TypeError: wrong dtype, a non-tensor argument or a non-int expected_m. ValueError: bad shape, strides,
        alignment, device, overlap, expected_m or compiled_dims. RuntimeError: CUDA errors, a failed compile, or a
        compile needed during graph capture.
    """
    function = "m_grouped_bf16_gemm_nt_masked"
    _check_compiled_dims(compiled_dims, function)
    expected = _int_argument(function, "expected_m", expected_m, "an int", at_most=_INT64[1])
    _native.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected, stream)


def k_grouped_bf16_gemm_tn_contiguous(a: Any, b: Any, d: Any, ks: Sequence[int], ks_tensor: Any = None, c: Any = None,
                                      compiled_dims: str = "mn", *, stream: Any = None) -> None:
    """The weight gradients of many groups (MoE experts) at once, in bfloat16, in place (DeepGEMM's
    ``k_grouped_bf16_gemm_tn_contiguous``, same arguments): for each group ``g`` of ``ks[g]`` tokens,
    ``D[g] = C[g] + A_g^T . B_g`` summed in float32, where ``A_g`` and ``B_g`` are the group's rows of ``a`` and ``b``
    (from ``ks[0] + ... + ks[g-1]`` on): ``bf16_gemm_tn`` per group, in one call.

    * ``a``: bfloat16 ``[sum(ks), m]``, each group's tokens one after the other (e.g. the experts' output gradients),
      rows dense (``stride(1) == 1``) and 16-byte aligned apart (row stride a multiple of 8 elements).
    * ``b``: bfloat16 ``[sum(ks), n]`` likewise (e.g. the experts' inputs); ``n`` a multiple of 8.
    * ``d``: float32 ``[G, m, n]``, each group's rows dense and 16-byte aligned apart, the groups apart (strides
      ``(s0, s1, 1)``, ``s0`` a multiple of 4 and ``>= (m - 1) * s1 + n``). ``c``: None (``D[g] = A_g^T . B_g``; a
      group without tokens is zeroed), ``d`` (``D += ...``), or float32 ``[G, m, n]`` with dense rows not overlapping
      ``d`` (copied into D on the stream first; nothing is allocated).
    * ``ks``: the token counts (``len(ks) == G``), any count >= 0: a group's K tail reads zeros, never the next
      group's tokens (0: no product, ``D[g] = C[g]``). ``ks_tensor`` (DeepGEMM's copy of ``ks`` on the device) is
      accepted and not read: kiln plans on the host.

    Every check and each group's kernel (chosen at its tokens rounded up to 64 times a power of two:
    ``precompile("bf16_gemm_nt", n=..., m=..., k=<tokens>, k_grouped=1)`` builds it ahead of time, with
    ``accumulate=1`` for a call with ``c``) come before anything is enqueued; then each group's copy of C (or, with no
    C, the zeroing of each group without tokens), and one launch per 32 groups with tokens that share a kernel. m = 0,
    n = 0 or G = 0 enqueue nothing. ``compiled_dims`` is accepted for DeepGEMM's signature; ``stream`` as for
    ``bf16_gemm_nt``. Errors name ``k_grouped_bf16_gemm_tn_contiguous``.

    Raises:
        TypeError: wrong dtype, a non-tensor argument or ks not a sequence of ints. ValueError: bad shape, strides,
        alignment, device, overlap, token count or compiled_dims. RuntimeError: CUDA errors, a failed compile, or a
        compile needed during graph capture.
    """
    function = "k_grouped_bf16_gemm_tn_contiguous"
    _check_compiled_dims(compiled_dims, function, default="mn")
    counts = _token_counts(function, ks)
    del ks_tensor  # DeepGEMM's device copy of ks: the launches are planned from ks on the host
    _native.k_grouped_bf16_gemm_tn_contiguous(a, b, d, counts, c, stream)


# DeepGEMM's other names for the same functions, so that code written against its legacy aliases (which it still
# exports) or its first release's names runs unchanged; each is the function itself, whose errors name it.
fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked
bf16_m_grouped_gemm_nt_masked = m_grouped_bf16_gemm_nt_masked
gemm_fp8_fp8_bf16_nt = fp8_gemm_nt
m_grouped_gemm_fp8_fp8_bf16_nt_contiguous = m_grouped_fp8_gemm_nt_contiguous
m_grouped_gemm_fp8_fp8_bf16_nt_masked = m_grouped_fp8_gemm_nt_masked
get_col_major_tma_aligned_tensor = get_mn_major_tma_aligned_tensor
get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout


# ---- Settings ----------------------------------------------------------------------------------------------

def set_num_sms(num_sms: int) -> None:
    """Limit the number of SMs kiln's kernels use, for leaving SMs to communication kernels (DeepGEMM's
    ``set_num_sms``). ``0`` removes the limit; a limit above a device's SM count means all of them.
    Process-wide; raises TypeError for anything but an int (a bool included) and ValueError for a number
    outside 0..2147483647."""
    _native.set_num_sms(_int_argument("set_num_sms", "num_sms", num_sms, "an int", _C_INT))


def get_num_sms() -> int:
    """The number of SMs kiln's kernels may use: the limit set with ``set_num_sms``, or, when none is set,
    the current device's SM count as DeepGEMM reports it (torch's current device, else device 0; 0 on a
    machine without a GPU)."""
    limit = _native.get_num_sms()
    return limit if limit else _tensors.current_device_sm_count()


def set_pdl(enabled: bool) -> None:
    """Turn programmatic dependent launch on or off for kiln's kernels (DeepGEMM's ``set_pdl``; default
    off). Process-wide. ``enabled`` is a bool: True or False (numpy's bool scalars too), or the ints 1 and 0;
    anything else is a TypeError (``set_pdl("no")`` would otherwise turn PDL on), another int a ValueError."""
    _native.set_pdl(_flag("set_pdl", "enabled", enabled))


def get_pdl() -> bool:
    """Whether programmatic dependent launch is on for kiln's kernels (DeepGEMM's ``get_pdl``)."""
    return _native.get_pdl()


def _override_fields(function: str, fields: Dict[str, Any]) -> List[int]:
    """The overrides' fields as the native call takes them (C ints), each checked as an int first (KilnTypeError for
    anything else, a bool included), in the order given."""
    return [_int_argument(function, name, value, "an int (0: the default)", _C_INT) for name, value in fields.items()]


def set_fp8_gemm_overrides(*, block_m: int = 0, block_n: int = 0, stages: int = 0, cluster_m: int = 0,
                           cluster_n: int = 0, split_k: int = 0) -> None:
    """Override the FP8 GEMM heuristic for every later ``fp8_gemm_nt`` call (process-wide; 0 leaves a choice to
    the heuristic, and calling with no arguments removes every override). ``block_m`` 64, 128 or 256 (256: the
    bf16 form only, ``block_n`` at most 128); ``block_n`` a multiple of 16 in 16..192; ``stages`` 1..16
    (0: as many as fit, or a stage fewer where that widens the weight-gradient form's reduce-add staging; a count
    that does not fit is an error at the call); ``cluster_m`` 2: CTA pairs
    multicasting B; ``cluster_n`` 2: CTA pairs multicasting A; ``split_k`` 2: CTA pairs splitting K in halves,
    1: never split; at most one of the three at 2. The weight-gradient form ignores the last three. Raises
    ValueError naming the field (TypeError for a field that is not an int), before anything changes."""
    _native.set_fp8_gemm_overrides(*_override_fields("set_fp8_gemm_overrides", {
        "block_m": block_m, "block_n": block_n, "stages": stages, "cluster_m": cluster_m, "cluster_n": cluster_n,
        "split_k": split_k}))


def get_fp8_gemm_overrides() -> dict:
    """The FP8 GEMM heuristic's overrides as set with ``set_fp8_gemm_overrides``: a dict of block_m, block_n,
    stages, cluster_m, cluster_n and split_k (0: the heuristic decides)."""
    return _native.get_fp8_gemm_overrides()


def set_bf16_gemm_overrides(*, block_m: int = 0, block_n: int = 0, stages: int = 0, cluster_m: int = 0) -> None:
    """Override the BF16 GEMM's plan for every later ``bf16_gemm_nt`` call (process-wide; 0 leaves a choice to the
    plan, and calling with no arguments removes every override). ``block_m`` 64, 128 or 256; ``block_n`` a multiple of
    16 in 16..256 (at most 128 with ``block_m`` 256); ``stages`` 1..32 (0: as many as fit; a count that does not fit
    is an error at the call); ``cluster_m`` 2: CTA pairs multicasting B, 1: never. Raises ValueError naming the field
    (TypeError for a field that is not an int), before anything changes."""
    _native.set_bf16_gemm_overrides(*_override_fields("set_bf16_gemm_overrides", {
        "block_m": block_m, "block_n": block_n, "stages": stages, "cluster_m": cluster_m}))


def get_bf16_gemm_overrides() -> dict:
    """The BF16 GEMM plan's overrides as set with ``set_bf16_gemm_overrides``: a dict of block_m, block_n, stages and
    cluster_m (0: the plan decides)."""
    return _native.get_bf16_gemm_overrides()


# ---- Ahead of time -----------------------------------------------------------------------------------------

def _int_parameter(function: str, name: str, value: Any) -> int:
    return _int_argument(function, f"problem parameter {name}", value, "an int or a range (lo, hi)")


def _check_request(function: str, op: Any, arch: Any, backend: Any) -> None:
    """The names a request is made of, as str (the binding takes nothing else): KilnTypeError naming the argument."""
    if not isinstance(op, str):
        raise KilnTypeError(f"{function}: op must be an operation's name, a str (list_ops() lists them), got "
                            f"{type(op).__name__} {op!r}")
    for name, value, example in (("arch", arch, "such as 'sm_90a'"), ("backend", backend, "'nvcc' or 'nvrtc'")):
        if value is not None and not isinstance(value, str):
            raise KilnTypeError(f"{function}: {name} must be None or a str ({example}), got {type(value).__name__} "
                                f"{value!r}")


def _problem(function: str, problem: Dict[str, Any]) -> Tuple[Dict[str, int], Dict[str, Tuple[int, int]]]:
    """The problem's single values, and its ranges: a parameter given as (lo, hi) (both included, as the command's
    lo..hi) or as a Python range of step 1."""
    values, ranges = {}, {}
    for name, value in problem.items():
        if isinstance(value, range):
            if value.step != 1 or len(value) == 0:
                raise KilnValueError(f"{function}: problem parameter {name} must be a non-empty range of step 1, got "
                                     f"{value!r}")
            ranges[name] = (_int_parameter(function, name, value.start), _int_parameter(function, name, value[-1]))
        elif isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise KilnValueError(f"{function}: problem parameter {name} must be an int or a range (lo, hi), got "
                                     f"{value!r}")
            ranges[name] = (_int_parameter(function, name, value[0]), _int_parameter(function, name, value[1]))
        else:
            values[name] = _int_parameter(function, name, value)
    return values, ranges


def precompile(op: str, *, arch: Optional[str] = None, backend: Optional[str] = None, jobs: int = 0,
               **problem: Any) -> List[Dict[str, Any]]:
    """Compile (or find in the cache) every kernel an operation needs for a problem, ahead of time: no
    GPU is needed. The problem is given as the operation's parameters, mapped to kernels exactly as at run
    time, e.g. ``precompile("per_token_cast_to_fp8", m=4096, k=7168, arch="sm_90a")``; a parameter that accepts a
    range (the GEMMs' ``m``, ``list_ops()`` says which) may be one, ``(lo, hi)`` with both ends included or a
    ``range``, for every kernel the range needs: ``precompile("fp8_gemm_nt", n=7168, k=2048, m=(1, 16384))``, as
    ``kiln precompile fp8_gemm_nt n=7168 k=2048 m=1..16384``.

    Args:
        op: the operation's name (``list_ops()`` lists them).
        arch: the target, e.g. ``"sm_90a"``; default ``DG_JIT_ARCH``, else the current GPU, else sm_90a.
        backend: ``"nvcc"`` or ``"nvrtc"``; default the configured one (``DG_JIT_USE_NVRTC``).
        jobs: compiles at once; 0 (the default): one per hardware thread.
        **problem: the operation's problem parameters (ints, or ranges where accepted).

    Returns:
        One dict per distinct kernel, with the fields of ``kiln compile --json``: ``op``, ``spec``, ``key``,
        ``arch``, ``backend``, ``kernel_name``, ``hit`` (found in the cache: nothing compiled),
        ``compile_ms`` and ``cubin_bytes``; for a range also ``<param>_range`` (the span the kernel serves) and
        ``<param>_ranges`` (its exact pieces), as ``kiln plan --json``.

    Raises:
        ValueError (NotFoundError) for an unknown op; ValueError for a bad problem, arch, backend or jobs;
        TypeError for a non-int parameter, or an op, arch or backend that is not a str; RuntimeError
        (CompileError) when a compile fails (every kernel is tried first, the others cached). KeyboardInterrupt
        (Ctrl-C) stops it once the kernels being built are done; they stay cached, no other is started.
    """
    _check_request("precompile", op, arch, backend)
    values, ranges = _problem("precompile", problem)
    # Checked here as well as by the library: the binding takes a C int.
    jobs = _int_argument("precompile", "jobs", jobs, "an int")
    if not 0 <= jobs <= 2147483647:
        bound = "must be >= 0" if jobs < 0 else "must be at most 2147483647"
        raise KilnValueError(f"precompile: jobs {bound} (0: one per hardware thread), got {jobs}")
    return _native.precompile(op, values, ranges, arch, backend, jobs)


def compile(op: str, *, arch: Optional[str] = None, backend: Optional[str] = None,  # noqa: A001
            jobs: int = 0, **problem: Any) -> List[Dict[str, Any]]:
    """The same as :func:`precompile` (named after the ``kiln compile`` command)."""
    return precompile(op, arch=arch, backend=backend, jobs=jobs, **problem)


def plan(op: str, *, arch: Optional[str] = None, backend: Optional[str] = None,
         **problem: Any) -> List[Dict[str, Any]]:
    """The kernels an operation needs for a problem and their cache keys, without compiling, loading or
    reading anything from the cache: what ``precompile`` with the same arguments would build.

    Returns one dict per distinct kernel: ``op``, ``spec`` (the values it is specialised on, e.g.
    ``"k=7168 threads=256 vecs_per_thread=4"``), ``key`` (its cache key), ``arch``, ``backend`` and
    ``kernel_name``; for a range (``m=(1, 16384)``, as for ``precompile``) also ``<param>_range`` and
    ``<param>_ranges``. A problem that needs no kernel (``m=0``) gives an empty list. Raises as ``precompile``.
    The first call may run the compiler once to learn its version (part of every key; memoised).
    """
    _check_request("plan", op, arch, backend)
    values, ranges = _problem("plan", problem)
    return _native.plan(op, values, arch, backend, ranges)


def list_ops() -> List[Dict[str, Any]]:
    """The operations kiln can compile: dicts with ``name``, ``summary``, ``targets`` (the archs their kernels are
    written for, e.g. "sm_90a only (they use WGMMA, setmaxnreg and TMA)") and ``params`` (parameter name ->
    description), sorted by name."""
    return _native.list_ops()


# ---- Cache, configuration, devices, diagnostics -------------------------------------------------------------

def cache_stats() -> Dict[str, Any]:
    """Statistics of the kernel cache: ``directory``, ``writable``, ``entries``, ``bytes``, and ``hits``,
    ``misses``, ``compiles``, ``corrupt``, ``compile_seconds`` counted across processes since the cache was
    created or cleared, plus ``memory_hits`` (this process's lookups served from memory). Also the policies
    and tiers (docs/CACHE.md): ``mode`` ("normal" or "strict"), ``max_bytes``, ``publishes``,
    ``evicted_entries``, ``evicted_bytes``, ``layer_hits``, ``remote_hits``, ``compiles_after_warmup``
    (all processes), ``warmup_done`` and ``process_compiles_after_warmup`` (this process), and ``tiers``: one
    dict per tier in search order (``name``, ``kind``, ``location``, ``state``, ``writable``, ``available``,
    ``entries`` and ``bytes`` where counted, ``hits``, ``misses``, ``corrupt``, ``errors``, ``publishes``)."""
    return _native.cache_stats()


def declare_warmup_done() -> None:
    """Declare this process's warm-up done. Every kernel compiled afterwards is counted in
    ``cache_stats()["compiles_after_warmup"]`` (shared by all processes using the cache, also shown by
    ``kiln cache stats``), so a deployment sees the kernels its warm-up or precompile step missed. With
    ``DG_JIT_MODE=strict`` such a compile is refused instead. Idempotent."""
    _native.declare_warmup_done()


def cache_list() -> List[Dict[str, Any]]:
    """The cache's entries: dicts with ``key``, ``op``, ``spec``, ``arch``, ``backend``, ``compiler``,
    ``kernel_name``, ``bytes``, ``compile_ms``, ``created_unix`` and ``last_use_unix``."""
    return _native.cache_list()


def cache_verify() -> Dict[str, Any]:
    """Check every cache entry (checksum and metadata) and remove the bad ones: ``{"checked", "corrupt",
    "removed", "problems"}``, ``problems`` one line per bad entry (``"<file>: <why it was rejected>"``)."""
    return _native.cache_verify()


def cache_clear() -> int:
    """Remove every entry from the kernel cache; returns how many were removed."""
    return _native.cache_clear()


def config() -> Dict[str, Dict[str, str]]:
    """Every effective setting, by name, in a stable order: ``{"value", "variable", "origin", "doc",
    "detail"}``, where ``origin`` is ``"default"`` or ``"environment"`` (a ``DG_JIT_*`` variable set it). The
    ``DG_JIT_*`` environment is read once per process, on first use; a bad value raises ConfigError (a ValueError)
    naming the variable, the value and what is accepted."""
    return _native.config()


def devices() -> List[Dict[str, Any]]:
    """The CUDA devices present: dicts with ``ordinal``, ``name``, ``arch`` (the target kiln builds for,
    ``"sm_90a"`` on an H100/H200), ``sm_count`` and ``memory_bytes``. Empty, never an error, without a GPU
    or driver."""
    return _native.devices()


def doctor() -> List[Dict[str, str]]:
    """What ``kiln doctor`` checks (toolkit, NVRTC and NVCC, driver, GPUs, cache directory): dicts with
    ``what``, ``status`` (``"ok"``, ``"warning"`` or ``"error"``), ``detail`` and ``advice``."""
    return _native.doctor()
