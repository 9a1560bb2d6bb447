"""The installed package: import, version, layout of the files, docstrings and the .pyi stub."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import subprocess
from pathlib import Path

import kiln
from kiln import _native

PACKAGE = Path(kiln.__file__).parent
REPO = Path(__file__).resolve().parents[2]


def test_import_gives_the_library_version():
    cmake = (REPO / "CMakeLists.txt").read_text()
    version = re.search(r"project\(kiln VERSION ([0-9.]+)", cmake).group(1)
    assert kiln.__version__ == version == kiln.version()


def test_package_holds_the_module_the_library_and_the_command():
    assert list(PACKAGE.glob("_native*.so")), "the native module is missing"
    assert (PACKAGE / "lib" / "libkiln.so.0").is_file()
    assert (PACKAGE / "bin" / "kiln").is_file()
    assert (PACKAGE / "py.typed").is_file()
    assert (PACKAGE / "__init__.pyi").is_file()
    assert (PACKAGE / "_native.pyi").is_file()


def test_binaries_find_libkiln_relative_to_themselves():
    readelf = shutil.which("readelf")
    if not readelf:
        return  # nothing to inspect with; the import above already proved the module loads
    module = next(PACKAGE.glob("_native*.so"))
    for binary, expected in ((module, "$ORIGIN/lib"), (PACKAGE / "bin" / "kiln", "$ORIGIN/../lib")):
        dynamic = subprocess.run([readelf, "-d", str(binary)], capture_output=True, text=True).stdout
        assert "libkiln.so.0" in dynamic
        assert expected in dynamic, f"{binary.name}: no {expected} RPATH/RUNPATH:\n{dynamic}"


def _public_functions():
    names = [n for n in kiln.__all__ if inspect.isfunction(getattr(kiln, n))] + ["compile"]
    return {n: getattr(kiln, n) for n in names}


def test_every_public_function_and_class_has_a_docstring():
    for name, fn in _public_functions().items():
        assert fn.__doc__ and len(fn.__doc__.strip()) > 20, f"kiln.{name} has no docstring"
    for name in kiln.__all__:
        obj = getattr(kiln, name)
        if inspect.isclass(obj):
            assert obj.__doc__, f"kiln.{name} has no docstring"
    for name in dir(_native):
        obj = getattr(_native, name)
        if callable(obj) and not name.startswith("__"):
            assert obj.__doc__ or name.startswith("_"), f"kiln._native.{name} has no docstring"


def _stub_functions(path: Path):
    tree = ast.parse(path.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            out[node.name] = [p.arg for p in a.posonlyargs + a.args] + [p.arg for p in a.kwonlyargs] + \
                ([a.kwarg.arg] if a.kwarg else [])
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in out:
            for target in node.targets:  # an alias (DeepGEMM's other names): the function it names
                out[target.id] = out[node.value.id]
    return out


def test_stub_declares_every_public_function_with_its_parameters():
    stub = _stub_functions(PACKAGE / "__init__.pyi")
    for name, fn in _public_functions().items():
        assert name in stub, f"kiln.{name} is missing from __init__.pyi"
        params = list(inspect.signature(fn).parameters)
        assert stub[name] == params, f"kiln.{name}: stub has {stub[name]}, module has {params}"
    stub_tree = ast.parse((PACKAGE / "__init__.pyi").read_text())
    classes = {n.name for n in stub_tree.body if isinstance(n, ast.ClassDef)}
    for name in kiln.__all__:
        if inspect.isclass(getattr(kiln, name)):
            assert name in classes, f"kiln.{name} is missing from __init__.pyi"


def test_native_stub_declares_every_native_function():
    stub = _stub_functions(PACKAGE / "_native.pyi")
    for name in dir(_native):
        if callable(getattr(_native, name)) and not name.startswith("__"):
            assert name in stub, f"kiln._native.{name} is missing from _native.pyi"


def test_errors_derive_from_the_builtins_the_issue_names():
    assert issubclass(kiln.KilnTypeError, TypeError)
    assert issubclass(kiln.KilnValueError, ValueError)
    assert issubclass(kiln.ConfigError, ValueError)
    assert issubclass(kiln.NotFoundError, ValueError) and issubclass(kiln.NotFoundError, LookupError)
    for cls in (kiln.CompileError, kiln.CudaError, kiln.CacheError, kiln.CaptureError, kiln.InternalError):
        assert issubclass(cls, RuntimeError)
    for name in kiln.__all__:
        obj = getattr(kiln, name)
        if inspect.isclass(obj):
            assert issubclass(obj, kiln.KilnError)


def test_dir_lists_the_public_api_and_all_of_it_is_in_all():
    # Every public function and class kiln defines is exported (kiln.compile aside: it would shadow the builtin).
    defined = {name for name, obj in vars(kiln).items() if not name.startswith("_") and
               (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__.startswith("kiln")}
    assert defined - set(kiln.__all__) == {"compile"}
    assert set(kiln.__all__) <= defined | {"__version__"}, set(kiln.__all__) - defined
    # dir(kiln) is that API and the module's dunders: not the names kiln imports for its own use.
    public = [name for name in dir(kiln) if not (name.startswith("__") and name.endswith("__"))]
    assert sorted(public) == sorted({*kiln.__all__, "compile"})
    for name in ("Any", "Dict", "List", "Optional", "Sequence", "Tuple", "operator", "annotations", "_native"):
        assert name not in dir(kiln), name
    assert "__version__" in dir(kiln) and "__all__" in dir(kiln)


def test_star_import_does_not_shadow_the_builtin_compile():
    namespace: dict = {}
    exec("from kiln import *", namespace)
    assert "compile" not in namespace
    assert kiln.compile.__doc__


# DeepGEMM's legacy aliases (still exported by it) and its first release's names: the same functions, exported.
DEEPGEMM_OTHER_NAMES = {
    "fp8_m_grouped_gemm_nt_masked": "m_grouped_fp8_gemm_nt_masked",
    "bf16_m_grouped_gemm_nt_masked": "m_grouped_bf16_gemm_nt_masked",
    "gemm_fp8_fp8_bf16_nt": "fp8_gemm_nt",
    "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous": "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_gemm_fp8_fp8_bf16_nt_masked": "m_grouped_fp8_gemm_nt_masked",
    "get_col_major_tma_aligned_tensor": "get_mn_major_tma_aligned_tensor",
    "get_m_alignment_for_contiguous_layout": "get_mk_alignment_for_contiguous_layout",
}


def test_deepgemms_other_names_are_the_functions_themselves():
    for alias, name in DEEPGEMM_OTHER_NAMES.items():
        assert getattr(kiln, alias) is getattr(kiln, name), alias
        assert alias in kiln.__all__ and name in kiln.__all__, alias
    assert kiln.get_m_alignment_for_contiguous_layout() == 128
