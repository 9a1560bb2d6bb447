"""The exceptions kiln raises.

Each C++ ``kiln::ErrorKind`` has a class here that derives from :class:`KilnError` *and* from the builtin a
Python user expects, so ``except TypeError`` / ``except ValueError`` / ``except RuntimeError`` work as usual
and ``except kiln.KilnError`` catches everything kiln raises. The message is the library's full message: it
names the function, the argument, what was expected and what was given.

=====================  ===================  ===========================================================
C++ ErrorKind          Python class         also an instance of
=====================  ===================  ===========================================================
kTypeError             KilnTypeError        TypeError (a wrong dtype or argument type)
kValueError            KilnValueError       ValueError (shape, stride, alignment, range, device, layout)
kConfigError           ConfigError          ValueError (a bad ``DG_JIT_*`` value or setting)
kNotFound              NotFoundError        ValueError, LookupError (an unknown op, a missing tool)
kCompileError          CompileError         RuntimeError (``.command`` and ``.log`` hold the parts)
kCudaError             CudaError            RuntimeError (a CUDA call failed, or no driver/GPU)
kCacheError            CacheError           RuntimeError
kCaptureError          CaptureError         RuntimeError (a compile needed during graph capture)
kInternal              InternalError        RuntimeError (a bug in kiln: please report it)
=====================  ===================  ===========================================================

One class has no C++ kind: :class:`KilnNotImplementedError` (also a ``NotImplementedError``) is what the Python
package raises for a form of a DeepGEMM function that kiln does not implement, rather than computing something
else. No current function raises it (``fp8_gemm_nt``'s accumulating ``c=``, the form it was first made for, is
implemented now); it stays so that code catching it keeps working.
"""

from __future__ import annotations

__all__ = [
    "KilnError",
    "KilnTypeError",
    "KilnValueError",
    "ConfigError",
    "NotFoundError",
    "CompileError",
    "CudaError",
    "CacheError",
    "CaptureError",
    "InternalError",
    "KilnNotImplementedError",
]


class KilnError(Exception):
    """Base class of every exception kiln raises; ``kind`` names the C++ ``kiln::ErrorKind``."""

    kind: str = "internal"


class KilnTypeError(KilnError, TypeError):
    """A wrong dtype, or an argument of the wrong type."""

    kind = "type_error"


class KilnValueError(KilnError, ValueError):
    """A wrong shape, stride, alignment, range, layout or device of an argument."""

    kind = "value_error"


class ConfigError(KilnError, ValueError):
    """A bad ``DG_JIT_*`` environment value (read once, on first use) or another invalid setting."""

    kind = "config_error"


class NotFoundError(KilnError, ValueError, LookupError):
    """An unknown operation, or a tool or kernel that could not be found."""

    kind = "not_found"


class CompileError(KilnError, RuntimeError):
    """The device compiler failed. The message holds a summary, the command and the full log;
    ``command`` and ``log`` hold them apart."""

    kind = "compile_error"
    command: str = ""
    log: str = ""


class CudaError(KilnError, RuntimeError):
    """A CUDA driver or runtime call failed, or a needed library (libcuda, NVRTC) or GPU is missing."""

    kind = "cuda_error"


class CacheError(KilnError, RuntimeError):
    """The on-disk kernel cache cannot be used in the way asked."""

    kind = "cache_error"


class CaptureError(KilnError, RuntimeError):
    """A kernel had to be compiled while the stream was being captured into a CUDA graph. Warm up (or
    ``kiln.precompile``) before capturing; the capture itself is left intact."""

    kind = "capture_error"


class InternalError(KilnError, RuntimeError):
    """A broken invariant inside kiln: a bug to report."""

    kind = "internal"


class KilnNotImplementedError(KilnError, NotImplementedError):
    """A form of a DeepGEMM function that kiln does not implement (raised by the Python package, never by the
    C++ library): the message names the unsupported form and the supported one, rather than computing
    something else."""

    kind = "not_implemented"


# The table kiln/__init__.py hands to the native module's exception translator.
BY_KIND = {
    "type_error": KilnTypeError,
    "value_error": KilnValueError,
    "config_error": ConfigError,
    "not_found": NotFoundError,
    "compile_error": CompileError,
    "cuda_error": CudaError,
    "cache_error": CacheError,
    "capture_error": CaptureError,
    "internal": InternalError,
}
