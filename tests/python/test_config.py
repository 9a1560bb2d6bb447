"""Configuration, process-wide settings and the small helpers."""

from __future__ import annotations

import os
import re

import pytest

import kiln

SETTINGS = ["cache_dir", "backend", "cpp_standard", "debug"]


def test_config_lists_each_setting_with_value_variable_and_origin():
    config = kiln.config()
    for name in SETTINGS:
        assert name in config, f"{name} missing from {list(config)}"
    for name, setting in config.items():
        assert set(setting) == {"value", "variable", "origin", "doc", "detail"}, name
        assert setting["origin"] in ("default", "environment"), name  # what the docstring says: no other is made
        assert setting["doc"], f"{name} has no documentation"
    assert '"default"`` or ``"environment"``' in kiln.config.__doc__ and '"api"' not in kiln.config.__doc__
    assert config["cache_dir"]["variable"] == "DG_JIT_CACHE_DIR"
    assert config["cache_dir"]["origin"] == "environment"
    assert config["cache_dir"]["value"] == os.environ["DG_JIT_CACHE_DIR"]
    assert config["backend"] == {**config["backend"], "value": "nvcc", "origin": "default"}


def test_environment_values_and_their_origin(python, cache_dir):
    out = python("""
        import kiln
        c = kiln.config()
        print(c["backend"]["value"], c["backend"]["origin"], c["cpp_standard"]["value"], c["cpp_standard"]["origin"])
    """, env={"DG_JIT_CACHE_DIR": cache_dir, "DG_JIT_USE_NVRTC": "1", "DG_JIT_CPP_STANDARD": "17"})
    assert out.split() == ["nvrtc", "environment", "17", "environment"]


@pytest.mark.parametrize("variable,value", [("DG_JIT_USE_NVRTC", "yes please"), ("DG_JIT_CPP_STANDARD", "banana")])
def test_a_bad_environment_value_is_a_config_error_naming_it(python, cache_dir, variable, value):
    # Importing never reads the environment; the first use does, and fails with the library's message.
    out = python(f"""
        import kiln
        try:
            kiln.config()
        except kiln.ConfigError as e:
            assert isinstance(e, ValueError)
            print(e)
        else:
            raise SystemExit("no error")
    """, env={"DG_JIT_CACHE_DIR": cache_dir, variable: value})
    assert variable in out and value in out


def test_cache_dir_that_is_a_file_is_a_config_error(python, tmp_path):
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    out = python("""
        import kiln
        try:
            kiln.precompile("per_token_cast_to_fp8", m=1, k=128, arch="sm_90a")
        except ValueError as e:
            print(type(e).__name__, e)
        else:
            raise SystemExit("no error")
    """, env={"DG_JIT_CACHE_DIR": str(f)})
    assert out.startswith("ConfigError") and str(f) in out


def test_num_sms_and_pdl_are_process_wide_settings():
    try:
        kiln.set_num_sms(10)
        assert kiln.get_num_sms() == 10
        kiln.set_num_sms(0)
        # Unset: DeepGEMM reports the device's SM count; without a GPU there is none.
        expected = kiln.devices()[0]["sm_count"] if kiln.devices() else 0
        assert kiln.get_num_sms() == expected
        kiln.set_pdl(True)
        assert kiln.get_pdl() is True
        kiln.set_pdl(False)
        assert kiln.get_pdl() is False
    finally:
        kiln.set_num_sms(0)
        kiln.set_pdl(False)


def test_pdl_takes_a_bool_not_its_truthiness():
    np = pytest.importorskip("numpy")
    try:
        for on, off in ((True, False), (1, 0), (np.bool_(True), np.bool_(False)), (np.int64(1), np.int32(0))):
            kiln.set_pdl(on)
            assert kiln.get_pdl() is True, on
            kiln.set_pdl(off)
            assert kiln.get_pdl() is False, off
        # bool("no") and bool("false") are True: a string used to turn PDL on.
        for bad in ("no", "false", "True", None, [0], 0.0, 1.0):
            with pytest.raises(kiln.KilnTypeError, match=r"^set_pdl: enabled must be a bool \(True or False, or the "
                                                          r"ints 1 and 0\), got "):
                kiln.set_pdl(bad)
            assert kiln.get_pdl() is False, bad
        for bad in (2, -1, 2 ** 64):
            with pytest.raises(kiln.KilnValueError, match=rf"^set_pdl: enabled must be True or False \(or the ints 1 "
                                                           rf"and 0\), got {bad}$"):
                kiln.set_pdl(bad)
            assert kiln.get_pdl() is False, bad
    finally:
        kiln.set_pdl(False)


def test_int_settings_refuse_bools_and_ints_c_cannot_hold():
    try:
        kiln.set_num_sms(7)
        for bad, error, message in [
            (True, kiln.KilnTypeError, "num_sms must be an int, got bool True"),
            (1.5, kiln.KilnTypeError, "num_sms must be an int, got float 1.5"),
            ("4", kiln.KilnTypeError, "num_sms must be an int, got str '4'"),
            (None, kiln.KilnTypeError, "num_sms must be an int, got NoneType None"),
            (2 ** 31, kiln.KilnValueError, "num_sms must be at most 2147483647, got 2147483648"),
            (2 ** 64, kiln.KilnValueError, "num_sms must be at most 2147483647, got 18446744073709551616"),
            (-(2 ** 31) - 1, kiln.KilnValueError, "num_sms must be >= 0, got -2147483649"),
        ]:
            with pytest.raises(error, match="^set_num_sms: " + re.escape(message)):
                kiln.set_num_sms(bad)
            assert kiln.get_num_sms() == 7, bad  # unchanged
        kiln.set_num_sms(2 ** 31 - 1)  # the largest limit a C int holds: all of any device's SMs
        assert kiln.get_num_sms() == 2 ** 31 - 1
    finally:
        kiln.set_num_sms(0)
    try:
        kiln.set_fp8_gemm_overrides(block_n=64)
        kiln.set_bf16_gemm_overrides(block_n=64)
        for setter in (kiln.set_fp8_gemm_overrides, kiln.set_bf16_gemm_overrides):
            name = setter.__name__
            with pytest.raises(kiln.KilnTypeError, match=rf"^{name}: block_m must be an int \(0: the default\), "
                                                          r"got bool True"):
                setter(block_m=True)
            with pytest.raises(kiln.KilnTypeError, match=rf"^{name}: stages must be an int .*got float 4.0"):
                setter(stages=4.0)
            with pytest.raises(kiln.KilnValueError, match=rf"^{name}: block_m must be at most 2147483647, got "
                                                           r"2147483648"):
                setter(block_m=2 ** 31)
            with pytest.raises(kiln.KilnValueError, match=rf"^{name}: block_n must be >= 0, got -1099511627776"):
                setter(block_n=-(2 ** 40))
        assert kiln.get_fp8_gemm_overrides()["block_n"] == 64
        assert kiln.get_bf16_gemm_overrides()["block_n"] == 64
    finally:
        kiln.set_fp8_gemm_overrides()
        kiln.set_bf16_gemm_overrides()


def test_fp8_gemm_overrides_round_trip_and_reset():
    none = {"block_m": 0, "block_n": 0, "stages": 0, "cluster_m": 0, "cluster_n": 0, "split_k": 0}
    assert kiln.get_fp8_gemm_overrides() == none
    try:
        kiln.set_fp8_gemm_overrides(block_m=64, block_n=32, split_k=2)
        assert kiln.get_fp8_gemm_overrides() == dict(none, block_m=64, block_n=32, split_k=2)
        kiln.set_fp8_gemm_overrides(block_m=256, cluster_n=2, stages=3)
        assert kiln.get_fp8_gemm_overrides() == dict(none, block_m=256, cluster_n=2, stages=3)
    finally:
        kiln.set_fp8_gemm_overrides()
    assert kiln.get_fp8_gemm_overrides() == none


def test_bad_fp8_gemm_overrides_name_the_field_and_change_nothing():
    try:
        kiln.set_fp8_gemm_overrides(block_n=64)
        for kwargs, message in [
            ({"split_k": 3}, r"set_fp8_gemm_overrides: split_k must be 0 \(heuristic\), 1 \(never split\) or 2"),
            ({"split_k": 2, "cluster_m": 2}, "split_k must be 0 or 1 when cluster_m is 2"),
            ({"split_k": 2, "block_m": 256}, "split_k must be 0 or 1 with block_m 256"),
            ({"block_m": 96}, "block_m must be 0 \\(heuristic\\), 64, 128 or 256, got 96"),
            ({"block_n": 200}, "block_n must be 0 \\(heuristic\\) or a multiple of 16"),
            ({"stages": 17}, "stages must be 0"),
            ({"cluster_m": 2, "cluster_n": 2}, "cluster_n must be 0 or 1 when cluster_m is 2"),
        ]:
            with pytest.raises(ValueError, match=message):
                kiln.set_fp8_gemm_overrides(**kwargs)
            assert kiln.get_fp8_gemm_overrides()["block_n"] == 64, kwargs
        with pytest.raises(TypeError):
            kiln.set_fp8_gemm_overrides(block_m=64.0)
        with pytest.raises(TypeError):
            kiln.set_fp8_gemm_overrides(64)  # keywords only
    finally:
        kiln.set_fp8_gemm_overrides()


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="num_sms must be >= 0"):
        kiln.set_num_sms(-1)
    with pytest.raises(TypeError):
        kiln.set_num_sms(1.5)
    assert kiln.get_num_sms() >= 0


def test_ceil_div_align_and_tma_aligned_size():
    assert kiln.ceil_div(7168, 128) == 56
    assert kiln.ceil_div(1, 128) == 1
    assert kiln.ceil_div(0, 128) == 0
    assert kiln.align(1, 4) == 4
    assert kiln.align(4096, 128) == 4096
    assert kiln.get_tma_aligned_size(1, 4) == 4
    assert kiln.get_tma_aligned_size(4097, 4) == 4100
    assert kiln.get_tma_aligned_size(3, 2) == 8
    assert kiln.get_tma_aligned_size(17, 1) == 32
    assert kiln.get_tma_aligned_size(0, 4) == 0
    with pytest.raises(ValueError, match="element_size"):
        kiln.get_tma_aligned_size(5, 3)
    with pytest.raises(ValueError, match="element_size"):
        kiln.get_tma_aligned_size(5, 0)
    with pytest.raises(ValueError, match="x must be >= 0"):
        kiln.get_tma_aligned_size(-1, 4)


def test_tma_aligned_size_never_overflows():
    # The largest x is the largest multiple of 16 in 64 bits; 2**63 - 1 used to come out negative.
    largest = 2 ** 63 - 16
    for size in (1, 2, 4, 8, 16):
        assert kiln.get_tma_aligned_size(largest, size) == largest
        assert kiln.get_tma_aligned_size(largest - 1, size) == (largest if size < 16 else largest - 1)
    too_big = r"^get_tma_aligned_size: x must be at most 9223372036854775792 \(its aligned size must fit in 64 bits\)"
    for x in (largest + 1, 2 ** 63 - 1):
        with pytest.raises(kiln.KilnValueError, match=too_big + f", got {x}$"):
            kiln.get_tma_aligned_size(x, 4)
    # Past 64 bits (nanobind's "incompatible function arguments" before): the same error, or x >= 0.
    with pytest.raises(kiln.KilnValueError, match=r"^get_tma_aligned_size: x must be at most 9223372036854775792, "
                                                  r"got 9223372036854775808$"):
        kiln.get_tma_aligned_size(2 ** 63, 4)
    with pytest.raises(kiln.KilnValueError, match=r"^get_tma_aligned_size: x must be >= 0, got -9223372036854775809$"):
        kiln.get_tma_aligned_size(-(2 ** 63) - 1, 4)
    with pytest.raises(kiln.KilnValueError, match=r"^get_tma_aligned_size: element_size must be 1, 2, 4, 8 or 16 "
                                                  r"bytes, got 4294967300$"):
        kiln.get_tma_aligned_size(5, 2 ** 32 + 4)  # not 4 once narrowed to a C int
    for args, given in (((True, 4), "x must be an int, got bool True"), ((5, 4.0), "element_size must be an int, "
                                                                                  "got float 4.0"),
                        ((None, 4), "x must be an int, got NoneType None")):
        with pytest.raises(kiln.KilnTypeError, match=r"^get_tma_aligned_size: " + re.escape(given)):
            kiln.get_tma_aligned_size(*args)


def test_devices_is_a_list_and_doctor_reports_checks():
    devices = kiln.devices()
    assert isinstance(devices, list)
    for d in devices:
        assert set(d) == {"ordinal", "name", "arch", "sm_count", "memory_bytes"}
    checks = kiln.doctor()
    assert checks, "doctor reported nothing"
    for c in checks:
        assert set(c) == {"what", "status", "detail", "advice"}
        assert c["status"] in ("ok", "warning", "error")
    assert any("nvcc" in c["what"].lower() or "nvrtc" in c["what"].lower() for c in checks)


def test_describe_shows_dtype_shape_strides_in_elements_and_device():
    np = pytest.importorskip("numpy")
    a = np.zeros((4, 8), np.float32)[:, ::2]
    assert kiln.describe(a) == "float32[4, 4] strides (8, 2) on cpu"


def test_describe_takes_what_the_operations_take_and_raises_what_they_raise():
    np = pytest.importorskip("numpy")
    # Buffer-protocol objects are uint8 host arrays to every operation, and so to describe (as its docstring says).
    for buffer in (b"abcd", bytearray(4), memoryview(b"abcd")):
        assert kiln.describe(buffer) == "uint8[4] strides (1,) on cpu"
    assert "buffer-protocol objects" in kiln.describe.__doc__
    # Not a tensor, or a dtype kiln does not handle: TypeError. A tensor kiln cannot view: ValueError (both named).
    for bad in (None, 1, "abc", [1.0]):
        with pytest.raises(kiln.KilnTypeError, match="^describe: tensor must be a tensor"):
            kiln.describe(bad)
    with pytest.raises(kiln.KilnTypeError, match="^describe: tensor has dtype float64"):
        kiln.describe(np.zeros(3))
    with pytest.raises(kiln.KilnValueError, match="^describe: tensor must have at most 4 dimensions, got 5"):
        kiln.describe(np.zeros((1,) * 5, np.float32))
    for words in ("TypeError for an object that is not a tensor", "ValueError for a tensor kiln cannot view",
                  "more than 4 dimensions", "``meta``"):
        assert words in kiln.describe.__doc__, words
