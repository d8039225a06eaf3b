"""The extension's one call shape (csrc/bindings.cpp): a Description made once per checked
problem (_api.describe), and each call's values by name in one dict, which the bindings read as
it is and refuse where it is wrong. On the CPU reference, with NumPy arrays."""
import ast
from pathlib import Path

import numpy as np
import pytest

import culina
from culina import _api, _C

ROWS = (16, 16, 16)  # (batch, head, token) of a C-contiguous [1, 1, 1, 16] array


def one_token(num_seqs=0, batch=1):
    problem = _api.Problem((batch, 1, 1, 16, 16), "float32", num_seqs, 32 if num_seqs else 0, "BHTD",
                           (ROWS, ROWS, ROWS, (0, 0, 0)), False, "float32")
    return problem, _api.describe(problem)


def forward_call(**changes):
    x = np.ones((1, 1, 1, 16), np.float32)
    out = np.zeros_like(x)
    call = {"q": x.ctypes.data, "k": x.ctypes.data, "v": x.ctypes.data, "out": out.ctypes.data, "scale": 0.5}
    call.update(changes)
    return call, (x, out)  # the arrays, kept alive with the call


def test_a_call_runs_the_cpu_reference_without_a_device():
    _, description = one_token()
    call, (_, out) = forward_call()
    _C.forward(description, call)
    np.testing.assert_allclose(out, np.full((1, 1, 1, 16), 0.5 * 16, np.float32))


def test_a_misspelt_value_is_refused_by_name():
    _, description = one_token()
    call, arrays = forward_call(gates=0)
    with pytest.raises(ValueError, match=r"^call: 'gates' is not a value this entry point takes; remove it$"):
        _C.forward(description, call)


def test_a_missing_scale_is_named():
    _, description = one_token()
    call, arrays = forward_call()
    del call["scale"]
    with pytest.raises(ValueError, match=r"^call: 'scale' is missing; pass it$"):
        _C.forward(description, call)


def test_offsets_come_exactly_with_packed_sequences():
    _, packed = one_token(num_seqs=1)
    call, arrays = forward_call()
    with pytest.raises(ValueError, match=r"^cu_seqlens: the description has num_seqs 1 but the call lacks offsets"):
        _C.forward(packed, call)
    offsets = np.array([0, 1], np.int32)
    _, padded = one_token()
    call["cu_seqlens"] = offsets.ctypes.data
    with pytest.raises(ValueError, match=r"^cu_seqlens: the description has num_seqs 0 but the call passes offsets"):
        _C.forward(padded, call)


def test_the_description_guards_packing():
    with pytest.raises(ValueError, match=r"^packed sequences need dims \(1, H, total_T, Dk, Dv\), but B is 2$"):
        one_token(num_seqs=1, batch=2)


def test_a_problem_is_described_once():
    problem, description = one_token()
    assert _api.describe(problem._replace()) is description


def test_the_shared_core_imports_no_route():
    """_api is what _torch, _linear_attention and _simple_gla build on: it imports none of them
    (the import cycle _api <-> _torch is gone)."""
    tree = ast.parse(Path(_api.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert not imported & {"_torch", "_linear_attention", "_simple_gla"}, imported
    assert culina.linear_attention.__module__ == "culina._linear_attention"
