"""Tensor stand-ins for tests on a machine without a GPU or PyTorch.

FakeDLPack is a DLPack producer (a real ``dltensor`` capsule built with ctypes) that can claim any dtype code
(bfloat16 = 4, float8_e4m3fn = 10), device (kDLCUDA = 2) and pointer, so kiln's conversion and every
precondition check of the C++ API can be exercised without device memory: the checks all run before any
launch, and nothing dereferences the pointer on the host.

FakeCAI offers ``__cuda_array_interface__`` (version 3) the same way.
"""

from __future__ import annotations

import ctypes
from typing import Optional, Sequence

KDL_CPU, KDL_CUDA = 1, 2
DTYPES = {  # name: (DLPack code, bits, element bytes)
    "float32": (2, 32, 4),
    "float16": (2, 16, 2),
    "bfloat16": (4, 16, 2),
    "float8_e4m3fn": (10, 8, 1),
    "float8_e5m2": (12, 8, 1),
    "int32": (0, 32, 4),
    "int64": (0, 64, 8),
    "uint8": (1, 8, 1),
    "int8": (0, 8, 1),
    "float64": (2, 64, 8),
}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CAPSULE_NAME = b"dltensor"  # kept alive for the capsules' lifetime


def contiguous_strides(shape: Sequence[int]) -> tuple:
    strides, s = [], 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return tuple(reversed(strides))


class FakeDLPack:
    """A DLPack producer describing memory it does not own (the pointer is never dereferenced)."""

    def __init__(self, shape: Sequence[int], dtype: str = "bfloat16", strides: Optional[Sequence[int]] = None,
                 device: str = "cuda:0", ptr: int = 0x7F0000000000):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.strides = tuple(strides) if strides is not None else contiguous_strides(shape)
        kind, _, index = device.partition(":")
        self.device_type = KDL_CUDA if kind == "cuda" else KDL_CPU
        self.device_id = int(index or 0)
        self.ptr = ptr
        self._keep = []  # every struct handed out stays alive as long as this object

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        code, bits, _ = DTYPES[self.dtype]
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(ndim, 1))(*self.strides)
        mt = _DLManagedTensor()
        mt.dl_tensor.data = self.ptr
        mt.dl_tensor.device = _DLDevice(self.device_type, self.device_id)
        mt.dl_tensor.ndim = ndim
        mt.dl_tensor.dtype = _DLDataType(code, bits, 1)
        mt.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        mt.dl_tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        mt.dl_tensor.byte_offset = 0
        mt.deleter = None  # nothing to free: the memory is this object's
        self._keep.append((mt, shape, strides))
        return _capsule_new(ctypes.addressof(mt), _CAPSULE_NAME, None)


class FakeCAI:
    """An object with __cuda_array_interface__ (strides in bytes, as the interface has them)."""

    def __init__(self, shape, typestr="<f4", strides_bytes=None, ptr=0x7F0000000000, device_id=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, False),
            "strides": None if strides_bytes is None else tuple(strides_bytes),
            "version": 3,
        }
        if device_id is not None:
            self.device = type("Device", (), {"id": device_id})()


def per_token_fakes(m: int, k: int, ptr: int = 0x7F0000000000):
    """x, out and out_scales as per_token_cast_to_fp8 wants them, at distinct 256-byte-aligned addresses."""
    aligned_m = (m + 3) // 4 * 4
    x = FakeDLPack((m, k), "bfloat16", ptr=ptr)
    out = FakeDLPack((m, k), "float8_e4m3fn", ptr=ptr + 0x10000000)
    scales = FakeDLPack((m, k // 128), "float32", strides=(1, aligned_m), ptr=ptr + 0x20000000)
    return x, out, scales


def per_block_fakes(n: int, k: int, ptr: int = 0x7F0000000000):
    x = FakeDLPack((n, k), "bfloat16", ptr=ptr)
    out = FakeDLPack((n, k), "float8_e4m3fn", ptr=ptr + 0x10000000)
    scales = FakeDLPack(((n + 127) // 128, k // 128), "float32", ptr=ptr + 0x20000000)
    return x, out, scales
