"""GPU kernels against the CPU reference, through PyTorch (and CuPy / JAX where present).

Runs only where PyTorch sees a CUDA GPU and culina was built with CUDA; elsewhere each test
is skipped with the reason.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import culina
from seeds import stable_seed

torch = pytest.importorskip("torch", reason="GPU tests drive culina through PyTorch, which is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="the CPU reference needs ml_dtypes for bfloat16")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)
if not culina.build_record().get("cpu_only") is False:
    pytest.skip("culina was built without CUDA (CPU-only build)", allow_module_level=True)

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# ||gpu - cpu|| / ||cpu||. float32 runs in fp32 on CUDA cores; the 16-bit types run on tensor
# cores, which round the decayed attention matrix, decayed q and k and the state to 16 bits.
TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}
# Shape classes: (B, H, T, Dk, Dv). For 16-bit types every one but the last takes the
# tensor-core path (head sizes multiples of 8 from 16 to 256, padded to the kernels' 64, 128,
# 192 or 256 features); the last the generic one. 1100 tokens of 192 features run the walk's
# 96-column blocks in several segments.
SHAPES = [(2, 3, 300, 64, 64), (1, 2, 129, 128, 128), (1, 1, 70, 256, 128), (2, 2, 1, 64, 128),
          (1, 2, 63, 32, 48), (1, 1, 100, 96, 40), (1, 1, 33, 256, 256), (1, 2, 1100, 192, 160),
          (1, 2, 65, 7, 5)]


def to_numpy(x, dtype):
    return x.detach().float().cpu().numpy().astype(NUMPY_DTYPES[dtype])


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert np.isfinite(out).all(), "non-finite output"
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


def random_inputs(shape, dtype, seed):
    b, h, t, dk, dv = shape
    gen = torch.Generator(device="cuda").manual_seed(seed)
    make = lambda *s: (torch.randn(*s, device="cuda", generator=gen) * 0.5).to(TORCH_DTYPES[dtype])
    return make(b, h, t, dk), make(b, h, t, dk), make(b, h, t, dv)


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", ["plain", "decay", "decay+state"])
def test_gpu_matches_cpu_reference(dtype, shape, mode):
    b, h, t, dk, dv = shape
    q, k, v = random_inputs(shape, dtype, seed=stable_seed(dtype, shape, mode))
    rng = np.random.default_rng(stable_seed(dtype, shape, mode, "rng"))
    decay = rng.uniform(0.8, 1.0, size=h).tolist() if mode != "plain" else None
    s0 = rng.standard_normal((b, h, dk, dv)).astype(np.float32) if mode == "decay+state" else None
    out, state = culina.linear_attention(q, k, v, decay, initial_state=None if s0 is None else torch.from_numpy(s0).cuda(),
                                         output_final_state=True, layout="BHTD")
    assert isinstance(out, torch.Tensor) and out.device == q.device and out.dtype == q.dtype
    assert out.shape == (b, h, t, dv) and state.shape == (b, h, dk, dv) and state.dtype == torch.float32
    ref_out, ref_state = culina.linear_attention(to_numpy(q, dtype), to_numpy(k, dtype), to_numpy(v, dtype), decay,
                                                 initial_state=s0, output_final_state=True, layout="BHTD")
    assert rel_err(out.float().cpu().numpy(), ref_out.astype(np.float32)) < TOLERANCE[dtype]
    assert rel_err(state.cpu().numpy(), ref_state) < TOLERANCE[dtype]


def test_non_default_stream_is_respected():
    """Inputs made on a side stream behind a long sleep: reading them from another stream
    would see unfinished data."""
    q, k, v = random_inputs((2, 4, 1024, 128, 128), "bfloat16", seed=7)
    expected = culina.linear_attention(q, k, v, [0.95] * 4)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        q2, k2, v2 = q * 1, k * 1, v * 1
        out = culina.linear_attention(q2, k2, v2, [0.95] * 4)
    side.synchronize()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_runs_on_a_second_device_when_present():
    if torch.cuda.device_count() < 2:
        pytest.skip("only one GPU")
    q, k, v = random_inputs((1, 2, 64, 64, 64), "float16", seed=3)
    out = culina.linear_attention(q.to("cuda:1"), k.to("cuda:1"), v.to("cuda:1"))
    assert out.device == torch.device("cuda:1")
    torch.testing.assert_close(out.cpu(), culina.linear_attention(q, k, v).cpu())


def run_python(code):
    """Runs code in a fresh interpreter, where CUDA starts untouched, and returns its output."""
    env = dict(os.environ, PYTHONPATH=str(Path(culina.__file__).resolve().parent.parent))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_a_child_forked_after_import_uses_cuda():
    """`import culina` creates no CUDA context, so a fork after it (DataLoader workers,
    multiprocessing) leaves the child free to use CUDA."""
    out = run_python("import os\n"
                     "import culina, torch\n"
                     "pid = os.fork()\n"
                     "if pid == 0:\n"
                     "    os._exit(0 if torch.ones(4, device='cuda').sum().item() == 4 else 1)\n"
                     "print('child exit', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    assert out.strip() == "child exit 0"


def test_a_call_creates_a_context_on_its_own_gpu_only():
    """The import creates no context; a call on the last GPU adds one there and nowhere else
    (torch's own allocation there makes one too, on that GPU alone)."""
    out = run_python("import ctypes, json, culina, torch\n"
                     "cuda = ctypes.CDLL('libcuda.so.1')\n"
                     "assert cuda.cuInit(0) == 0\n"
                     "def active():\n"
                     "    states = []\n"
                     "    for ordinal in range(torch.cuda.device_count()):\n"
                     "        device, flags, state = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()\n"
                     "        assert cuda.cuDeviceGet(ctypes.byref(device), ordinal) == 0\n"
                     "        assert cuda.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(state)) == 0\n"
                     "        states.append(state.value)\n"
                     "    return states\n"
                     "print(json.dumps(active()))\n"
                     "last = torch.cuda.device_count() - 1\n"
                     "x = torch.ones(1, 1, 64, 64, device=f'cuda:{last}', dtype=torch.float16)\n"
                     "print(json.dumps(active()))\n"
                     "culina.linear_attention(x, x, x)\n"
                     "torch.cuda.synchronize(last)\n"
                     "print(json.dumps(active()))\n")
    after_import, after_torch, after_call = (json.loads(line) for line in out.splitlines())
    assert after_import == [0] * len(after_import)
    assert after_call == after_torch and after_call[-1] == 1


def test_strided_feature_axis_is_refused():
    q, k, v = random_inputs((1, 2, 16, 128, 64), "float16", seed=1)
    with pytest.raises(ValueError, match=r"^q: the feature axis \(the last\) has stride 2; culina reads any view"):
        culina.linear_attention(q[..., ::2], k[..., ::2].contiguous(), v)


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("dim", [64, 96, 128])
def test_views_of_a_fused_projection_are_read_in_place(dtype, dim):
    """Slices of one [B, T, 3, H, D] projection (BTHD views, token stride 3 H D) and their BHTD
    transposes give the results of contiguous copies, on every path."""
    gen = torch.Generator(device="cuda").manual_seed(dim)
    qkv = torch.randn(2, 300, 3, 4, dim, device="cuda", generator=gen).to(TORCH_DTYPES[dtype])
    q, k, v = qkv.unbind(2)
    g = torch.nn.functional.logsigmoid(torch.randn(2, 4, 300, device="cuda", generator=gen) + 3).transpose(1, 2)
    expected = culina.linear_attention(q.contiguous(), k.contiguous(), v.contiguous(), g=g.contiguous(),
                                       layout="BTHD")
    torch.testing.assert_close(culina.linear_attention(q, k, v, g=g, layout="BTHD"), expected, rtol=0, atol=0)
    transposed = [x.transpose(1, 2) for x in (q, k, v, g)]
    torch.testing.assert_close(culina.linear_attention(*transposed[:3], g=transposed[3], layout="BHTD"),
                               expected.transpose(1, 2), rtol=0, atol=0)


def test_cuda_and_numpy_mixed_is_refused():
    q, k, v = random_inputs((1, 2, 16, 64, 64), "float32", seed=1)
    with pytest.raises(ValueError, match=r"^arrays on different devices: k is on cpu"):
        culina.linear_attention(q, k.cpu().numpy(), v)


def test_cupy_in_cupy_out():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    q, k, v = random_inputs((1, 2, 100, 64, 64), "float16", seed=5)
    out = culina.linear_attention(cupy.from_dlpack(q), cupy.from_dlpack(k), cupy.from_dlpack(v))
    assert isinstance(out, cupy.ndarray) and out.dtype == cupy.float16
    torch.testing.assert_close(torch.from_dlpack(out), culina.linear_attention(q, k, v), rtol=0, atol=0)


def test_jax_in_jax_out():
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    q, k, v = random_inputs((1, 2, 100, 64, 64), "float32", seed=6)
    torch.cuda.synchronize()
    out = culina.linear_attention(*(jax.dlpack.from_dlpack(x) for x in (q, k, v)))
    assert isinstance(out, jax.Array)
    np.testing.assert_allclose(np.asarray(out), culina.linear_attention(q, k, v).cpu().numpy(), rtol=1e-5, atol=1e-5)


def packed_inputs(dtype, seed):
    """q, k, v [1, 2, 150, 64, 64] in three packed sequences (one of a single row), int32
    cu_seqlens, per-head decays and an initial state per sequence, all torch on the GPU."""
    q, k, v = random_inputs((1, 2, 150, 64, 64), dtype, seed=seed)
    cu_seqlens = torch.tensor([0, 40, 41, 150], dtype=torch.int32, device="cuda")
    s0 = torch.randn(3, 2, 64, 64, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed))
    return q, k, v, cu_seqlens, [0.9, 0.97], s0


def test_cupy_packed_sequences_match_torch():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    q, k, v, cu_seqlens, decay, s0 = packed_inputs("float16", seed=8)
    expected, expected_state = culina.linear_attention(q, k, v, decay, initial_state=s0, output_final_state=True,
                                                       cu_seqlens=cu_seqlens)
    out, state = culina.linear_attention(*(cupy.from_dlpack(x) for x in (q, k, v)), decay,
                                         initial_state=cupy.from_dlpack(s0), output_final_state=True,
                                         cu_seqlens=cupy.from_dlpack(cu_seqlens))
    assert isinstance(out, cupy.ndarray) and isinstance(state, cupy.ndarray)
    torch.testing.assert_close(torch.from_dlpack(out), expected, rtol=0, atol=0)
    torch.testing.assert_close(torch.from_dlpack(state), expected_state, rtol=0, atol=0)


def test_jax_packed_sequences_match_torch():
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    q, k, v, cu_seqlens, decay, s0 = packed_inputs("float16", seed=9)
    expected, expected_state = culina.linear_attention(q, k, v, decay, initial_state=s0, output_final_state=True,
                                                       cu_seqlens=cu_seqlens)
    torch.cuda.synchronize()
    out, state = culina.linear_attention(*(jax.dlpack.from_dlpack(x) for x in (q, k, v)), decay,
                                         initial_state=jax.dlpack.from_dlpack(s0), output_final_state=True,
                                         cu_seqlens=jax.dlpack.from_dlpack(cu_seqlens))
    assert isinstance(out, jax.Array) and isinstance(state, jax.Array)
    np.testing.assert_array_equal(np.asarray(out), expected.cpu().numpy())
    np.testing.assert_array_equal(np.asarray(state), expected_state.cpu().numpy())


@pytest.mark.skipif(not os.environ.get("CULINA_FOREIGN_BUILD"),
                    reason="set CULINA_FOREIGN_BUILD to a package dir built for an architecture this GPU lacks")
def test_unsupported_device_error_names_gpu_and_fix():
    code = ("import torch, culina\n"
            "x = torch.zeros(1, 1, 4, 64, device='cuda')\n"
            "try:\n    culina.linear_attention(x, x, x)\n"
            "except culina.UnsupportedDeviceError as e:\n    print('RAISED', e)\n")
    env = dict(os.environ, PYTHONPATH=os.environ["CULINA_FOREIGN_BUILD"])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    text = proc.stdout + proc.stderr
    name = torch.cuda.get_device_name(0)
    major, minor = torch.cuda.get_device_capability(0)
    assert "RAISED" in text, text
    for needle in (name, f"{major}.{minor}", "this binary holds SASS for", "CULINA_CUDA_ARCHS="):
        assert needle in text, (needle, text)
    assert "no kernel image is available" not in text.split("CUDA says")[0]
