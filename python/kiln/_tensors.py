"""PyTorch glue: output allocation for the ops, and torch-only layout helpers.

kiln never imports torch by itself on the hot path: torch is looked up in ``sys.modules`` (a program that
passes torch tensors has imported it), so ``import kiln`` stays fast and works without PyTorch. The C++
library allocates nothing; when the caller does not pass ``out=``, the outputs are allocated here with
torch on the input's device, in exactly the layouts the C++ API checks.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Tuple

from . import _native
from ._errors import KilnTypeError, KilnValueError

GROUP = 128  # elements along k (and, per block, along n) sharing one scale


class _NoTorch:
    """Stands in for torch.Tensor until torch is imported: nothing is an instance of it."""


torch: Any = None
Tensor: Any = _NoTorch
_float8: Any = None
_float32: Any = None
_empty_like: Any = None
_empty_strided: Any = None


def bind() -> bool:
    """Look torch up once it has been imported by the program; True when it is available."""
    global torch, Tensor, _float8, _float32, _empty_like, _empty_strided
    if torch is not None:
        return True
    module = sys.modules.get("torch")
    if module is None or not hasattr(module, "Tensor"):
        return False
    _float8 = module.float8_e4m3fn
    _float32 = module.float32
    _empty_like = module.empty_like
    _empty_strided = module.empty_strided
    Tensor = module.Tensor
    torch = module
    return True


def _import_torch() -> bool:
    try:
        import torch as _  # noqa: F401  (first import; bind() then finds it)
    except ImportError:
        return False
    return bind()


def as_torch(x: Any, function: str) -> Any:
    """x as a torch tensor for allocating outputs next to it: x itself when it is one; a zero-copy
    torch.from_dlpack view of a CUDA DLPack producer; otherwise a precise error."""
    if isinstance(x, Tensor) or (bind() and isinstance(x, Tensor)):
        return x
    info = _native._view(x, function, "x")  # TypeError for a non-tensor or an unsupported dtype
    if not info["device"].startswith("cuda"):
        raise KilnValueError(
            f"{function}: x must be on a CUDA device, got host memory (x is {info['describe']}); "
            "kiln's kernels run on the GPU")
    if not _import_torch():
        raise KilnTypeError(
            f"{function}: kiln allocates outputs with PyTorch, which is not installed; pass "
            f"out=(...) with preallocated arrays (x is a {type(x).__module__}.{type(x).__qualname__}: "
            f"{info['describe']})")
    return torch.from_dlpack(x)


def per_token_outputs(x: Any) -> Tuple[Any, Any, Any]:
    """(x as torch, out, out_scales) for per_token_cast_to_fp8: out float8_e4m3fn [m, k] contiguous, scales
    float32 [m, k/128] with strides (1, get_tma_aligned_size(m, 4)) (MN-major, TMA-aligned)."""
    t = x if isinstance(x, Tensor) else as_torch(x, "per_token_cast_to_fp8")
    if t.dim() == 2:
        m, k = t.shape
        # empty_like is torch's cheapest allocation (no shape or device to parse). It is contiguous for every
        # x the kernel accepts (dense rows: row-major, or rows padded apart).
        return (t, _empty_like(t, dtype=_float8),
                _empty_strided((m, k // GROUP), (1, (m + 3) & ~3), dtype=_float32, device=t.device))
    return (t, *_placeholders(t))


def per_block_outputs(x: Any) -> Tuple[Any, Any, Any]:
    """(x as torch, out, out_scales) for per_block_cast_to_fp8: out float8_e4m3fn [n, k] contiguous, scales
    float32 [ceil(n/128), k/128] contiguous."""
    t = x if isinstance(x, Tensor) else as_torch(x, "per_block_cast_to_fp8")
    if t.dim() == 2:
        n, k = t.shape
        device = t.device
        return (t, torch.empty((n, k), dtype=_float8, device=device),
                torch.empty(((n + GROUP - 1) // GROUP, k // GROUP), dtype=_float32, device=device))
    return (t, *_placeholders(t))


def _placeholders(t: Any) -> Tuple[Any, Any]:
    # x is not 2-D: no output shape follows from it. Empty outputs of the right dtypes let the C++ API
    # report what is wrong with x, in its own words, before anything is launched.
    return (torch.empty((0, 0), dtype=_float8, device=t.device),
            torch.empty((0, 0), dtype=_float32, device=t.device))


def _strides_match(t: Any, expected: Tuple[int, ...]) -> bool:
    # As the C++ API checks strides: a dimension of size 1 has no meaningful stride.
    return all(size == 1 or stride == want for size, stride, want in zip(t.shape, t.stride(), expected))


def _describe_torch(t: Any) -> str:
    # As TensorView::describe() words it, for any dtype and device.
    dims = ", ".join(str(n) for n in t.shape)
    strides = ", ".join(str(n) for n in t.stride())
    return f"{str(t.dtype).replace('torch.', '')}[{dims}] strides ({strides}) on {t.device}"


def get_mn_major_tma_aligned_tensor(sf: Any) -> Any:
    """See kiln.get_mn_major_tma_aligned_tensor."""
    function = "get_mn_major_tma_aligned_tensor"
    if not isinstance(sf, Tensor) and not (bind() and isinstance(sf, Tensor)):
        raise KilnTypeError(
            f"{function}: sf must be a torch.Tensor, got {type(sf).__module__}.{type(sf).__qualname__}")
    if sf.dtype != _float32:
        raise KilnTypeError(f"{function}: sf must be float32, got {sf.dtype} (sf is {_describe_torch(sf)})")
    if sf.dim() not in (2, 3):
        raise KilnValueError(f"{function}: sf must be 2-D [mn, k/128] or 3-D [groups, mn, k/128], got "
                             f"{sf.dim()}-D (sf is {_describe_torch(sf)})")
    batched = sf if sf.dim() == 3 else sf.unsqueeze(0)
    groups, mn, sf_k = batched.shape
    aligned = _native.get_tma_aligned_size(mn, 4)
    expected = (aligned * sf_k, 1, aligned)
    if _strides_match(batched, expected):
        return sf
    out = torch.empty_strided((groups, mn, sf_k), expected, dtype=_float32, device=sf.device)
    out.copy_(batched)
    return out if sf.dim() == 3 else out.squeeze(0)


def _integer(value: Any) -> Any:
    """``value`` as an int when it is one (a Python int, or anything with ``__index__``: numpy's and torch's integer
    scalars), else None; bools are not integers here."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _int_at_least(function: str, name: str, value: Any, minimum: int, expected: str) -> int:
    """``value`` as an int (``_integer``) when it is one and at least ``minimum``; else a KilnValueError saying
    ``name`` must be ``expected``."""
    number = _integer(value)
    if number is None or number < minimum:
        raise KilnValueError(f"{function}: {name} must be {expected}, got {value!r}")
    return number


def transform_sf_into_required_layout(sf: Any, mn: Any, k: Any, recipe: Any, num_groups: Any = None,
                                      is_sfa: Any = None) -> Any:
    """See kiln.transform_sf_into_required_layout."""
    function = "transform_sf_into_required_layout"
    grans = tuple(_integer(g) for g in recipe) if isinstance(recipe, (tuple, list)) else ()
    if len(grans) not in (2, 3) or None in grans:
        raise KilnValueError(f"{function}: recipe must be a tuple of 3 ints (gran_m, gran_n, gran_k) or of 2 "
                             f"(gran_mn, gran_k), got {recipe!r}")
    recipe = grans
    if len(recipe) == 3:
        if not isinstance(is_sfa, bool):
            raise KilnValueError(f"{function}: is_sfa must be True or False with a recipe of 3 (which of its "
                                 f"granularities applies), got {is_sfa!r}")
        gran_mn, gran_k = (recipe[0] if is_sfa else recipe[1]), recipe[2]
    else:
        if is_sfa is not None:
            raise KilnValueError(f"{function}: is_sfa must be None with a recipe of 2 (gran_mn, gran_k), "
                                 f"got {is_sfa!r}")
        gran_mn, gran_k = recipe
    mn = _int_at_least(function, "mn", mn, 0, "an int >= 0")
    k = _int_at_least(function, "k", k, 0, "an int >= 0")
    if num_groups is not None:
        num_groups = _int_at_least(function, "num_groups", num_groups, 1, "None or an int >= 1")
    if not isinstance(sf, Tensor) and not (bind() and isinstance(sf, Tensor)):
        raise KilnTypeError(
            f"{function}: sf must be a torch.Tensor, got {type(sf).__module__}.{type(sf).__qualname__}")
    if sf.dtype != _float32:
        raise KilnTypeError(f"{function}: sf must be float32 (kiln runs on sm_90, whose FP8 GEMMs read float32 "
                            f"scales; packed UE8M0 is sm_100's), got {sf.dtype} (sf is {_describe_torch(sf)})")
    if (gran_mn, gran_k) not in ((1, GROUP), (GROUP, GROUP)):
        raise KilnValueError(f"{function}: the granularity (gran_mn, gran_k) must be (1, 128) (per-row scales: "
                             f"activations, or both operands of the weight-gradient form) or (128, 128) (a weight's "
                             f"block scales) on sm_90, got ({gran_mn}, {gran_k}) from recipe {recipe!r}")
    expected = ((num_groups,) if num_groups is not None else ()) + (-(-mn // gran_mn), -(-k // gran_k))
    if tuple(sf.shape) != expected:
        raise KilnValueError(f"{function}: sf must be [{'num_groups, ' if num_groups is not None else ''}"
                             f"ceil(mn / {gran_mn}), ceil(k / {gran_k})] = {list(expected)} for mn={mn}, k={k}"
                             f"{f', num_groups={num_groups}' if num_groups is not None else ''}, got "
                             f"{list(sf.shape)} (sf is {_describe_torch(sf)})")
    if gran_mn == 1:
        return get_mn_major_tma_aligned_tensor(sf)
    # Block scales are read as they are: contiguous, K-major (what per_block_cast_to_fp8 writes).
    if not sf.is_contiguous():
        raise KilnValueError(f"{function}: 128x128 block scales must be contiguous (row-major "
                             f"[{'num_groups, ' if num_groups is not None else ''}n/128, k/128]), got strides "
                             f"{tuple(sf.stride())} (sf is {_describe_torch(sf)})")
    return sf


def gemm_sfa_layout_ok(sfa: Any) -> bool:
    """Whether the C++ fp8_gemm_nt accepts the layout of a float32 2-D torch tensor ``sfa`` [m, kb] as A's
    scales (or, in the weight-gradient form, ``sfb`` [n, kb] as B's): MN-major (strides (1, s)) with s >= m and s a multiple of 4 (TMA rows of 16 bytes), 16-byte
    aligned. As the C++ check words it, a stride of a dimension that is never stepped along does not matter
    (m <= 1: the first; kb == 1: the second), and an empty tensor is fine."""
    m, kb = sfa.shape
    if m == 0 or kb == 0:
        return True
    s0, s1 = sfa.stride()
    if m > 1 and s0 != 1:
        return False
    if kb > 1 and (s1 < m or s1 % 4 != 0):
        return False
    return sfa.data_ptr() % 16 == 0


def gemm_sfa(sfa: Any) -> Any:
    """A's scales for fp8_gemm_nt: ``sfa`` itself when the C++ op accepts its layout (the MN-major,
    TMA-aligned layout per_token_cast_to_fp8 writes: no cost), else, for a float32 2-D CUDA torch tensor
    (row-major scales, as DeepGEMM's own per_token_cast_to_fp8 returns them), an MN-major TMA-aligned copy
    (get_mn_major_tma_aligned_tensor: one allocation and one transposing copy of ceil(k/128) * align(m, 4)
    floats per call). Anything else is passed through for the C++ op to judge, so its error describes the
    caller's tensor (a host tensor, another dtype, a DLPack producer: kiln allocates only with torch)."""
    if not isinstance(sfa, Tensor) and not (bind() and isinstance(sfa, Tensor)):
        return sfa
    if sfa.dtype != _float32 or sfa.dim() != 2 or not sfa.is_cuda or gemm_sfa_layout_ok(sfa):
        return sfa
    return get_mn_major_tma_aligned_tensor(sfa)


def grouped_gemm_sfa(sfa: Any) -> Any:
    """A's scales for m_grouped_fp8_gemm_nt_masked: ``sfa`` itself when the C++ op accepts its layout (each
    group's [m, kb] as gemm_sfa accepts them, the groups one after the other: strides (kb * s, 1, s)), else, for a
    float32 3-D CUDA torch tensor, the MN-major TMA-aligned copy get_mn_major_tma_aligned_tensor makes (one
    allocation and one transposing copy). Anything else is passed through for the C++ op to judge."""
    if not isinstance(sfa, Tensor) and not (bind() and isinstance(sfa, Tensor)):
        return sfa
    if sfa.dtype != _float32 or sfa.dim() != 3 or not sfa.is_cuda:
        return sfa
    groups, m, kb = sfa.shape
    if groups == 0 or m == 0 or kb == 0:
        return sfa
    # With one K block the groups are the map's columns: any 16-byte multiple apart, at least m floats.
    s0 = sfa.stride(0)
    follow = s0 >= m and s0 % 4 == 0 if kb == 1 else s0 == kb * sfa.stride(2)
    if gemm_sfa_layout_ok(sfa[0]) and (groups == 1 or follow):
        return sfa
    return get_mn_major_tma_aligned_tensor(sfa)


def gemm_sfb(sfb: Any, d: Any) -> Any:
    """B's scales for fp8_gemm_nt: converted like A's (gemm_sfa) when ``d`` is a float32 torch tensor, i.e. in
    the weight-gradient form, where B is scaled per row and the kernel reads those scales MN-major and
    TMA-aligned too; otherwise (the bfloat16 form's contiguous 128x128-block scales, or tensors that are not
    torch's) ``sfb`` itself."""
    if not isinstance(d, Tensor) and not (bind() and isinstance(d, Tensor)):
        return sfb
    if d.dtype is not _float32:
        return sfb
    return gemm_sfa(sfb)


def current_device_sm_count() -> int:
    """The SM count of the current device (torch's current device when torch has CUDA, else device 0);
    0 without a GPU."""
    if bind():
        try:
            if torch.cuda.is_available():
                props = torch.cuda.get_device_properties(torch.cuda.current_device())
                return int(props.multi_processor_count)
        except Exception:  # a broken CUDA install: fall back to kiln's own view
            pass
    devices = _native.devices()
    return int(devices[0]["sm_count"]) if devices else 0
