"""CPU reference (C++) against the NumPy recurrence in conftest.reference."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import reference

import culina

try:
    import ml_dtypes
except ImportError:  # the release jobs' wheel test runs where ml_dtypes may have no wheel yet (3.14t)
    ml_dtypes = None
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16 if ml_dtypes else None}
NEEDS_ML_DTYPES = pytest.mark.skipif(ml_dtypes is None, reason="NumPy bfloat16 arrays need ml_dtypes")
DTYPE_NAMES = [pytest.param(name, marks=NEEDS_ML_DTYPES if name == "bfloat16" else ()) for name in DTYPES]
# ||out - ref|| / ||ref||: the output is rounded to its dtype; accumulation is fp32.
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    assert np.isfinite(out).all()
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


def make(rng, shape, dtype):
    return (rng.standard_normal(shape) * 0.5).astype(DTYPES[dtype])


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("use_decay", [False, True], ids=["no-decay", "decay"])
@pytest.mark.parametrize("shape", [(2, 3, 37, 16, 24), (1, 2, 1, 8, 8), (1, 1, 130, 64, 64),
                                   (2, 2, 65, 32, 16)], ids=lambda s: "x".join(map(str, s)))
def test_matches_recurrence(rng, dtype, use_decay, shape):
    b, h, t, dk, dv = shape
    q, k = make(rng, (b, h, t, dk), dtype), make(rng, (b, h, t, dk), dtype)
    v = make(rng, (b, h, t, dv), dtype)
    decay = rng.uniform(0.6, 1.0, size=h) if use_decay else None
    out, state = culina.linear_attention(q, k, v, decay, output_final_state=True, layout="BHTD")
    ref_out, ref_state = reference(q, k, v, decay)
    assert out.dtype == v.dtype and out.shape == (b, h, t, dv)
    assert state.dtype == np.float32 and state.shape == (b, h, dk, dv)
    assert rel_err(out, ref_out) < TOLERANCE[dtype]
    assert rel_err(state, ref_state) < 1e-5


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_initial_state_and_scale(rng, dtype):
    b, h, t, dk, dv = 2, 2, 19, 16, 32
    q, k, v = make(rng, (b, h, t, dk), dtype), make(rng, (b, h, t, dk), dtype), make(rng, (b, h, t, dv), dtype)
    s0 = rng.standard_normal((b, h, dk, dv)).astype(np.float32)
    decay = [0.8, 0.95]
    out, state = culina.linear_attention(q, k, v, decay, scale=0.3, initial_state=s0, output_final_state=True)
    ref_out, ref_state = reference(q, k, v, decay, scale=0.3, initial_state=s0)
    assert rel_err(out, ref_out) < TOLERANCE[dtype]
    assert rel_err(state, ref_state) < 1e-5


def test_chained_calls_equal_one_call(rng):
    """Final state of the first half, fed as the initial state of the second half."""
    q, k, v = (rng.standard_normal((1, 2, 40, 8)).astype(np.float32) for _ in range(3))
    decay = [0.9, 0.7]
    whole = culina.linear_attention(q, k, v, decay)
    first, state = culina.linear_attention(q[:, :, :25].copy(), k[:, :, :25].copy(), v[:, :, :25].copy(),
                                           decay, output_final_state=True)
    second = culina.linear_attention(q[:, :, 25:].copy(), k[:, :, 25:].copy(), v[:, :, 25:].copy(),
                                     decay, initial_state=state)
    np.testing.assert_allclose(np.concatenate([first, second], axis=2), whole, rtol=1e-5, atol=1e-5)


def test_returns_only_output_by_default(rng):
    q = rng.standard_normal((1, 1, 4, 8)).astype(np.float32)
    out = culina.linear_attention(q, q, q)
    assert isinstance(out, np.ndarray) and out.shape == (1, 1, 4, 8)


def test_packed_sequences_match_recurrence(rng):
    """cu_seqlens: each sequence from its own initial state, as separate calls of the recurrence."""
    offsets = np.array([0, 7, 7, 30, 41], dtype=np.int64)
    q, k = make(rng, (1, 2, 41, 8), "float32"), make(rng, (1, 2, 41, 8), "float32")
    v = make(rng, (1, 2, 41, 12), "float32")
    s0 = rng.standard_normal((4, 2, 8, 12)).astype(np.float32)
    out, state = culina.linear_attention(q, k, v, [0.9, 0.7], initial_state=s0, output_final_state=True,
                                         cu_seqlens=offsets)
    assert out.shape == (1, 2, 41, 12) and state.shape == (4, 2, 8, 12)
    for i, (start, end) in enumerate(zip(offsets[:-1], offsets[1:])):
        ref_out, ref_state = reference(q[:, :, start:end], k[:, :, start:end], v[:, :, start:end], [0.9, 0.7],
                                       initial_state=s0[i:i + 1])
        if end > start:
            assert rel_err(out[:, :, start:end], ref_out) < 1e-5
        assert rel_err(state[i:i + 1], ref_state) < 1e-5


def test_numpy_calls_never_import_torch():
    """culina keeps working without PyTorch: NumPy calls (forward, cu_seqlens) leave torch unimported."""
    code = ("import sys, numpy as np, culina\n"
            "x = np.ones((1, 2, 6, 4), np.float32)\n"
            "culina.linear_attention(x, x, x, [0.5, 0.5], cu_seqlens=np.array([0, 2, 6], np.int32))\n"
            "print('torch' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(culina.__file__).resolve().parent.parent))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def gates(rng, shape):
    """Per-token natural-log forget gates, mostly near 0 (long memory)."""
    return -np.log1p(np.exp(-rng.standard_normal(shape) - 3)).astype(np.float32)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("layout", ["BHTD", "BTHD"])
def test_gates_match_recurrence(rng, dtype, layout):
    b, h, t, dk, dv = 2, 3, 29, 16, 24
    q, k, v = make(rng, (b, h, t, dk), dtype), make(rng, (b, h, t, dk), dtype), make(rng, (b, h, t, dv), dtype)
    g = gates(rng, (b, h, t))
    s0 = rng.standard_normal((b, h, dk, dv)).astype(np.float32)
    decay = [0.9, 0.95, 1.0]
    swap = (lambda x: x) if layout == "BHTD" else (lambda x: np.ascontiguousarray(np.swapaxes(x, 1, 2)))
    out, state = culina.linear_attention(swap(q), swap(k), swap(v), decay, g=swap(g), scale=0.4, initial_state=s0,
                                         output_final_state=True, layout=layout)
    ref_out, ref_state = reference(q, k, v, decay, scale=0.4, initial_state=s0, g=g)
    assert out.shape == swap(ref_out).shape and out.flags.c_contiguous
    assert rel_err(np.swapaxes(out, 1, 2) if layout == "BTHD" else out, ref_out) < TOLERANCE[dtype]
    assert rel_err(state, ref_state) < 1e-5


def test_strided_views_are_read_in_place(rng):
    """Slices of a fused [B, T, 3, H, D] projection (BTHD views), their transposes (BHTD) and a
    reversed view (a negative token stride) give the results of contiguous copies."""
    qkv = rng.standard_normal((2, 23, 3, 2, 8)).astype(np.float32)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    g = gates(rng, (2, 2, 23)).swapaxes(1, 2)  # [B, T, H], strided
    assert not q.flags.c_contiguous and not g.flags.c_contiguous
    copies = [np.ascontiguousarray(x) for x in (q, k, v, g)]
    expected = culina.linear_attention(*copies[:3], g=copies[3], layout="BTHD")
    np.testing.assert_array_equal(culina.linear_attention(q, k, v, g=g, layout="BTHD"), expected)
    transposed = [x.swapaxes(1, 2) for x in (q, k, v, g)]
    np.testing.assert_array_equal(culina.linear_attention(*transposed[:3], g=transposed[3], layout="BHTD"),
                                  expected.swapaxes(1, 2))
    reversed_tokens = [x[:, ::-1] for x in (q, k, v, g)]
    np.testing.assert_array_equal(
        culina.linear_attention(*reversed_tokens[:3], g=reversed_tokens[3], layout="BTHD"),
        culina.linear_attention(*(np.ascontiguousarray(x) for x in reversed_tokens[:3]),
                                g=np.ascontiguousarray(reversed_tokens[3]), layout="BTHD"))


def test_packed_sequences_with_gates_match_recurrence(rng):
    offsets = np.array([0, 7, 7, 30, 41], dtype=np.int32)
    q, k, v = (make(rng, (1, 41, 2, 8), "float32") for _ in range(3))  # [1, total_T, H, D]
    g = gates(rng, (1, 41, 2))
    s0 = rng.standard_normal((4, 2, 8, 8)).astype(np.float32)
    out, state = culina.linear_attention(q, k, v, [0.9, 0.7], g=g, initial_state=s0, output_final_state=True,
                                         cu_seqlens=offsets)  # the offsets' total T tells the layout
    assert out.shape == (1, 41, 2, 8)
    bhtd = lambda x: np.swapaxes(x, 1, 2)  # noqa: E731
    for i, (start, end) in enumerate(zip(offsets[:-1], offsets[1:])):
        ref_out, ref_state = reference(*(bhtd(x[:, start:end]) for x in (q, k, v)), [0.9, 0.7],
                                       initial_state=s0[i:i + 1], g=bhtd(g[:, start:end]))
        if end > start:
            assert rel_err(bhtd(out[:, start:end]), ref_out) < 1e-5
        assert rel_err(state[i:i + 1], ref_state) < 1e-5


def test_numpy_gate_and_layout_errors(rng):
    q = rng.standard_normal((1, 12, 3, 8)).astype(np.float32)
    with pytest.raises(ValueError, match=r'^q: shape \(1, 12, 3, 8\) is ambiguous: .* pass layout="BHTD" or '
                                         r'layout="BTHD"'):
        culina.linear_attention(q, q, q)
    with pytest.raises(TypeError, match=r"^g: dtype float64 is not supported; the gates are float32"):
        culina.linear_attention(q, q, q, g=np.zeros((1, 12, 3)), layout="BTHD")
    with pytest.raises(ValueError, match=r"^decay: expected shape \[H\] = \(3,\), got \(1, 12, 3\); per-token "
                                         r"forget gates go in g="):
        culina.linear_attention(q, q, q, np.full((1, 12, 3), 0.9), layout="BTHD")
