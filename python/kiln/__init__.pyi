# Type stub of the public `kiln` package (see __init__.py for the documentation of each function).
# tests/python/test_package.py checks that every public function and class is declared here with the
# module's parameter names.
from typing import Any, Dict, List, Optional, Sequence, Tuple, TypedDict, Union

__version__: str

class _RangePieces(TypedDict, total=False):
    # For a problem given a range: the span of it each kernel serves, and its exact pieces (both ends included).
    m_range: Tuple[int, int]
    m_ranges: List[Tuple[int, int]]
    k_range: Tuple[int, int]
    k_ranges: List[Tuple[int, int]]

class _KernelPlan(_RangePieces):
    op: str
    spec: str
    key: str
    arch: str
    backend: str
    kernel_name: str

class _KernelReport(_KernelPlan):
    hit: bool
    compile_ms: float
    cubin_bytes: int

class _Setting(TypedDict):
    value: str
    variable: str
    origin: str  # "default" or "environment"
    doc: str
    detail: str

class _CacheStats(TypedDict):
    directory: str
    writable: bool
    entries: int
    bytes: int
    hits: int
    misses: int
    compiles: int
    corrupt: int
    compile_seconds: float
    memory_hits: int
    mode: str
    max_bytes: int
    publishes: int
    evicted_entries: int
    evicted_bytes: int
    layer_hits: int
    remote_hits: int
    compiles_after_warmup: int
    warmup_done: bool
    process_compiles_after_warmup: int
    tiers: List[Dict[str, Any]]

class _CacheEntry(TypedDict):
    key: str
    op: str
    spec: str
    arch: str
    backend: str
    compiler: str
    kernel_name: str
    bytes: int
    compile_ms: float
    created_unix: int
    last_use_unix: int

class _CacheVerifyReport(TypedDict):
    checked: int
    corrupt: int
    removed: int
    problems: List[str]

class _Device(TypedDict):
    ordinal: int
    name: str
    arch: str
    sm_count: int
    memory_bytes: int

class _DoctorCheck(TypedDict):
    what: str
    status: str  # "ok", "warning" or "error"
    detail: str
    advice: str

class _OpInfo(TypedDict):
    name: str
    summary: str
    targets: str
    params: Dict[str, str]

# (Names starting with _ exist only in this stub.)
# A tensor: a torch.Tensor, any DLPack producer, or an object with __cuda_array_interface__.
_Tensor = Any
# None (the caller's current stream), an int CUstream, or a torch/CuPy stream or __cuda_stream__ object.
_StreamLike = Any

# ---- Errors
class KilnError(Exception):
    kind: str
class KilnTypeError(KilnError, TypeError): ...
class KilnValueError(KilnError, ValueError): ...
class ConfigError(KilnError, ValueError): ...
class NotFoundError(KilnError, ValueError, LookupError): ...
class CompileError(KilnError, RuntimeError):
    command: str
    log: str
class CudaError(KilnError, RuntimeError): ...
class CacheError(KilnError, RuntimeError): ...
class CaptureError(KilnError, RuntimeError): ...
class InternalError(KilnError, RuntimeError): ...
class KilnNotImplementedError(KilnError, NotImplementedError): ...

# ---- DeepGEMM's names
def fp8_gemm_nt(a: Sequence[_Tensor], b: Sequence[_Tensor], d: _Tensor, c: Optional[_Tensor] = None,
                recipe: Optional[Sequence[int]] = None, compiled_dims: str = "nk", disable_ue8m0_cast: bool = False,
                *, stream: _StreamLike = None) -> None: ...
def k_grouped_fp8_gemm_nt_contiguous(a: Sequence[_Tensor], b: Sequence[_Tensor], d: _Tensor, ks: Sequence[int],
                                     ks_tensor: Optional[_Tensor] = None, c: Optional[_Tensor] = None,
                                     recipe: Sequence[int] = (1, 1, 128), compiled_dims: str = "mn", *,
                                     stream: _StreamLike = None) -> None: ...
def m_grouped_fp8_gemm_nt_contiguous(a: Sequence[_Tensor], b: Sequence[_Tensor], d: _Tensor, m_indices: _Tensor,
                                     recipe: Optional[Sequence[int]] = None, compiled_dims: str = "nk",
                                     disable_ue8m0_cast: bool = False, *, stream: _StreamLike = None) -> None: ...
def m_grouped_fp8_gemm_nt_masked(a: Sequence[_Tensor], b: Sequence[_Tensor], d: _Tensor, masked_m: _Tensor,
                                 expected_m: int, recipe: Optional[Sequence[int]] = None, compiled_dims: str = "nk",
                                 disable_ue8m0_cast: bool = False, *, stream: _StreamLike = None) -> None: ...
def bf16_gemm_nt(a: _Tensor, b: _Tensor, d: _Tensor, c: Optional[_Tensor] = None, compiled_dims: str = "nk", *,
                 stream: _StreamLike = None) -> None: ...
def bf16_gemm_nn(a: _Tensor, b: _Tensor, d: _Tensor, c: Optional[_Tensor] = None, compiled_dims: str = "nk", *,
                 stream: _StreamLike = None) -> None: ...
def bf16_gemm_tn(a: _Tensor, b: _Tensor, d: _Tensor, c: Optional[_Tensor] = None, compiled_dims: str = "mn", *,
                 stream: _StreamLike = None) -> None: ...
def bf16_gemm_tt(a: _Tensor, b: _Tensor, d: _Tensor, c: Optional[_Tensor] = None, compiled_dims: str = "mn", *,
                 stream: _StreamLike = None) -> None: ...
def m_grouped_bf16_gemm_nt_contiguous(a: _Tensor, b: _Tensor, d: _Tensor, m_indices: _Tensor,
                                      compiled_dims: str = "nk", *, stream: _StreamLike = None) -> None: ...
def m_grouped_bf16_gemm_nn_contiguous(a: _Tensor, b: _Tensor, d: _Tensor, m_indices: _Tensor,
                                      compiled_dims: str = "nk", *, stream: _StreamLike = None) -> None: ...
def m_grouped_bf16_gemm_nt_masked(a: _Tensor, b: _Tensor, d: _Tensor, masked_m: _Tensor, expected_m: int,
                                  compiled_dims: str = "nk", *, stream: _StreamLike = None) -> None: ...
def k_grouped_bf16_gemm_tn_contiguous(a: _Tensor, b: _Tensor, d: _Tensor, ks: Sequence[int],
                                      ks_tensor: Optional[_Tensor] = None, c: Optional[_Tensor] = None,
                                      compiled_dims: str = "mn", *, stream: _StreamLike = None) -> None: ...
def get_mk_alignment_for_contiguous_layout() -> int: ...
def per_token_cast_to_fp8(x: _Tensor, use_ue8m0: bool = False, gran_k: int = 128, use_packed_ue8m0: bool = False,
                          *, out: Optional[Sequence[_Tensor]] = None,
                          stream: _StreamLike = None) -> Tuple[_Tensor, _Tensor]: ...
def per_block_cast_to_fp8(x: _Tensor, use_ue8m0: bool = False, gran_k: int = 128, *,
                          out: Optional[Sequence[_Tensor]] = None,
                          stream: _StreamLike = None) -> Tuple[_Tensor, _Tensor]: ...
def get_mn_major_tma_aligned_tensor(sf: _Tensor) -> _Tensor: ...
def to_mn_major_scales(sf: _Tensor, out: _Tensor, *, stream: _StreamLike = None) -> None: ...
def transform_sf_into_required_layout(sf: _Tensor, mn: int, k: int, recipe: Sequence[int],
                                      num_groups: Optional[int] = None, is_sfa: Optional[bool] = None,
                                      disable_ue8m0_cast: bool = False) -> _Tensor: ...
def get_tma_aligned_size(x: int, element_size: int) -> int: ...
# DeepGEMM's legacy and first-release names: the functions above.
fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked
bf16_m_grouped_gemm_nt_masked = m_grouped_bf16_gemm_nt_masked
gemm_fp8_fp8_bf16_nt = fp8_gemm_nt
m_grouped_gemm_fp8_fp8_bf16_nt_contiguous = m_grouped_fp8_gemm_nt_contiguous
m_grouped_gemm_fp8_fp8_bf16_nt_masked = m_grouped_fp8_gemm_nt_masked
get_col_major_tma_aligned_tensor = get_mn_major_tma_aligned_tensor
get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout

def set_num_sms(num_sms: int) -> None: ...
def get_num_sms() -> int: ...
def set_pdl(enabled: bool) -> None: ...
def get_pdl() -> bool: ...
def set_fp8_gemm_overrides(*, block_m: int = ..., block_n: int = ..., stages: int = ..., cluster_m: int = ...,
                           cluster_n: int = ..., split_k: int = ...) -> None: ...
def get_fp8_gemm_overrides() -> Dict[str, int]: ...
def set_bf16_gemm_overrides(*, block_m: int = ..., block_n: int = ..., stages: int = ...,
                            cluster_m: int = ...) -> None: ...
def get_bf16_gemm_overrides() -> Dict[str, int]: ...
def ceil_div(x: int, y: int) -> int: ...
def align(x: int, y: int) -> int: ...

# ---- kiln's own
# A problem parameter: an int, or where the op accepts a range, (lo, hi) with both ends included or a range of step 1.
_ProblemValue = Union[int, Tuple[int, int], range]
def precompile(op: str, *, arch: Optional[str] = None, backend: Optional[str] = None, jobs: int = 0,
               **problem: _ProblemValue) -> List[_KernelReport]: ...
def compile(op: str, *, arch: Optional[str] = None, backend: Optional[str] = None, jobs: int = 0,
            **problem: _ProblemValue) -> List[_KernelReport]: ...
def plan(op: str, *, arch: Optional[str] = None, backend: Optional[str] = None,
         **problem: _ProblemValue) -> List[_KernelPlan]: ...
def list_ops() -> List[_OpInfo]: ...
def cache_stats() -> _CacheStats: ...
def declare_warmup_done() -> None: ...
def cache_list() -> List[_CacheEntry]: ...
def cache_verify() -> _CacheVerifyReport: ...
def cache_clear() -> int: ...
def config() -> Dict[str, _Setting]: ...
def devices() -> List[_Device]: ...
def doctor() -> List[_DoctorCheck]: ...
def describe(tensor: _Tensor) -> str: ...
def version() -> str: ...
