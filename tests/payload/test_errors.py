"""Every bad input is a CulinaError that names the argument and the value, with the fix in its
hint, and still the built-in exception (ValueError, TypeError) culina raised before."""
import pickle

import numpy as np
import pytest
from culina_errors import assert_culina_error

import culina
from culina import _api, _build, errors


def arrays(b=1, h=2, t=5, dk=8, dv=8, dtype=np.float32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((b, h, t, dk)).astype(dtype), rng.standard_normal((b, h, t, dk)).astype(dtype),
            rng.standard_normal((b, h, t, dv)).astype(dtype))


def raises(exc, match, *args, **kwargs):
    kwargs.setdefault("layout", "BHTD")  # some shapes here (H >= T) would be refused as ambiguous first
    with pytest.raises(exc, match=match) as caught:
        culina.linear_attention(*args, **kwargs)
    assert_culina_error(caught.value)


def test_wrong_rank():
    q, k, v = arrays()
    raises(ValueError, r"^q: expected 4 dimensions", q[0], k, v)


def test_k_shape_mismatch():
    q, k, v = arrays()
    raises(ValueError, r"^k: shape \(1, 2, 4, 8\) must equal q", q, k[:, :, :4].copy(), v)


def test_v_shape_mismatch():
    q, k, v = arrays()
    raises(ValueError, r"^v: shape .* must be \[B, H, T, Dv\]", q, k, np.zeros((1, 3, 5, 8), np.float32))


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_unsupported_dtype(dtype):
    q, k, v = arrays(dtype=dtype)
    raises(TypeError, r"^q: dtype .* is not supported; use float32, float16 or bfloat16", q, k, v)


def test_mixed_dtypes():
    q, k, v = arrays()
    raises(TypeError, r"^v: dtype float16 differs from q's float32", q, k, v.astype(np.float16))


@pytest.mark.parametrize("dk,dv,name", [(257, 8, "q"), (8, 300, "v")])
def test_head_size_too_large(dk, dv, name):
    q, k, v = arrays(t=2, dk=dk, dv=dv)
    raises(ValueError, rf"^{name}: head size D. ?=?{max(dk, dv)} is not supported", q, k, v)


def test_too_many_sequence_head_pairs():
    """B*H, or N*H with cu_seqlens, rides on a 65535-wide grid dimension: refused before any launch."""
    q, k, v = arrays(b=32768, h=2, t=1, dk=1, dv=1)
    raises(ValueError, r"^q: B\*H=32768\*2=65536 is more than culina's limit of 65535", q, k, v)
    q, k, v = arrays(b=1, h=2, t=1, dk=1, dv=1)
    offsets = np.zeros(32769, np.int32)
    offsets[-1] = 1
    raises(ValueError, r"^cu_seqlens: N\*H=32768\*2=65536 is more than culina's limit of 65535", q, k, v,
           cu_seqlens=offsets)


def test_empty_sequence():
    q, k, v = arrays(t=0)
    raises(ValueError, r"^q: B, H and T must be at least 1", q, k, v)


@pytest.mark.parametrize("bad", [[0.5, 0.0], [1.5, 0.5], [0.5, float("nan")], [-0.1, 0.2]])
def test_decay_out_of_range(bad):
    q, k, v = arrays()
    raises(ValueError, r"^decay: every value must be in \(0, 1\], head 1|^decay: every value must be in \(0, 1\], head 0",
           q, k, v, bad)


def test_decay_wrong_length():
    q, k, v = arrays()
    raises(ValueError, r"^decay: expected shape \[H\] = \(2,\), got \(3,\)", q, k, v, [0.5, 0.5, 0.5])


def test_decay_not_numbers():
    q, k, v = arrays()
    raises((TypeError, ValueError), r"^decay:", q, k, v, ["a", "b"])


@pytest.mark.parametrize("scale", [float("inf"), "0.5", True])
def test_bad_scale(scale):
    q, k, v = arrays()
    raises(ValueError, r"^scale: expected a finite real number", q, k, v, scale=scale)


def test_initial_state_shape():
    q, k, v = arrays()
    raises(ValueError, r"^initial_state: shape \(1, 2, 8, 4\) must be \[B, H, Dk, Dv\]", q, k, v,
           initial_state=np.zeros((1, 2, 8, 4), np.float32))


def test_initial_state_dtype():
    q, k, v = arrays()
    raises(TypeError, r"^initial_state: dtype float64 is not supported", q, k, v,
           initial_state=np.zeros((1, 2, 8, 8)))


def test_non_contiguous():
    q, k, v = arrays(dk=16)
    raises(ValueError, r"^q: the feature axis \(the last\) has stride 2; culina reads any view whose last axis has "
           r"stride 1 without a copy", q[..., ::2], k[..., ::2], v)


def test_not_an_array():
    q, k, v = arrays()
    raises(TypeError, r"^k: expected a NumPy array or a CUDA array", q, k.tolist(), v)


class FakeCudaArray:
    """Looks like a CUDA DLPack producer; used to check the device comparison only."""

    def __dlpack__(self, stream=None):
        raise AssertionError("must not be consumed: the device check comes first")

    def __dlpack_device__(self):
        return (2, 0)


def test_arrays_on_different_devices():
    q, k, v = arrays()
    raises(ValueError, r"^arrays on different devices: v is on cuda:0 but q is on cpu", q, k, FakeCudaArray())


def test_an_unknown_layout_is_refused():
    q, k, v = arrays()
    raises(ValueError, r"^layout: expected \"BHTD\"", q, k, v, layout="bhtd")


@pytest.mark.parametrize("kind,builtin", [(errors.ArgumentError, ValueError), (errors.ArgumentTypeError, TypeError),
                                          (errors.RemovedArgumentError, DeprecationWarning),
                                          (errors.UnsupportedDeviceError, RuntimeError)])
def test_each_kind_is_also_the_builtin_error_callers_catch(kind, builtin):
    error = kind("q: dtype float64 is not supported", "use float32, float16 or bfloat16")
    assert isinstance(error, errors.CulinaError) and isinstance(error, builtin)
    assert str(error) == "q: dtype float64 is not supported; use float32, float16 or bfloat16"
    copy = pickle.loads(pickle.dumps(error))  # another process (a DataLoader worker, a rank) gets it whole
    assert type(copy) is kind and (copy.message, copy.hint) == (error.message, error.hint)


def test_an_error_without_a_fix_is_its_message():
    assert str(errors.CulinaError("the thing failed")) == "the thing failed"


def test_a_gpu_culina_cannot_see_names_the_device_and_the_fix():
    with pytest.raises(RuntimeError) as caught:
        _api.ready_device(4096)  # no host has so many
    assert isinstance(caught.value, errors.UnsupportedDeviceError)
    assert_culina_error(caught.value)
    if _api._C.built_with_cuda():
        assert caught.value.message.startswith("CUDA device 4096 is not visible to culina")
        assert caught.value.hint == "check CUDA_VISIBLE_DEVICES"
    else:
        assert caught.value.message == "this culina was built without CUDA (no nvcc at build time)"


def test_a_driver_too_old_is_refused_with_the_driver_to_install(monkeypatch):
    if not _api._C.built_with_cuda():
        pytest.skip("a CPU-only build asks no driver")
    monkeypatch.setattr(_build, "build_record", lambda: {"kind": "local", "variant": "cu130", "cuda_version": "13.0"})
    monkeypatch.setattr(_api._C, "driver_version", lambda: 12080)
    with pytest.raises(culina.UnsupportedDeviceError) as caught:
        _api.ready_device(4096)
    assert_culina_error(caught.value)
    assert "supports CUDA 12.8 only" in caught.value.message and caught.value.hint.startswith("update the driver")
