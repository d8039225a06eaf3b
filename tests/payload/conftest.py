"""Makes the in-place build (`make extension`) importable and shares the NumPy reference.
CULINA_TEST_INSTALLED=1 tests the culina installed in this interpreter instead (the release jobs'
wheel test, tools/release/wheel_smoke.py)."""
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from seeds import stable_seed

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "package"
if os.environ.get("CULINA_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(PACKAGE_DIR))


def reference(q, k, v, decay=None, scale=None, initial_state=None, g=None):
    """The recurrence itself, in float64, one step at a time: o [B,H,T,Dv], S_T [B,H,Dk,Dv], with
    the gate decay_h * exp(g[b, h, t]) (g: [B, H, T] natural logarithms)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    batch, heads, seq_len, dk = q.shape
    dv = v.shape[-1]
    scale = dk ** -0.5 if scale is None else scale
    gate = np.ones((batch, heads, seq_len)) if decay is None else np.broadcast_to(
        np.asarray(decay, dtype=np.float64)[:, None], (batch, heads, seq_len))
    if g is not None:
        gate = gate * np.exp(np.asarray(g, dtype=np.float64))
    state = (np.zeros((batch, heads, dk, dv)) if initial_state is None
             else np.array(initial_state, dtype=np.float64))
    out = np.empty((batch, heads, seq_len, dv))
    for t in range(seq_len):
        state = gate[:, :, t, None, None] * state + k[:, :, t, :, None] * v[:, :, t, None, :]
        out[:, :, t] = scale * np.einsum("bhd,bhde->bhe", q[:, :, t], state)
    return out, state


@pytest.fixture
def rng(request):
    # A fresh seed per test: every test draws new inputs, but a failure is reproducible.
    return np.random.default_rng(stable_seed(request.node.path.name, request.node.name))
