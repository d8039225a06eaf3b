"""The GPU backward and packed-sequence forward against the CPU reference, through the raw
`_C` bindings on torch tensors (the CPU reference's own correctness is tests/kernels' job).

Runs only where PyTorch sees a CUDA GPU and culina was built with CUDA.
"""
import pytest

import culina
from culina import _api, _C

torch = pytest.importorskip("torch", reason="the GPU kernel checks use PyTorch tensors, which is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)
if not culina.build_record().get("cpu_only") is False:
    pytest.skip("culina was built without CUDA (CPU-only build)", allow_module_level=True)

DTYPES = {"float32": (torch.float32, 0), "float16": (torch.float16, 1), "bfloat16": (torch.bfloat16, 2)}
DTYPE_NAMES = {code: name for name, (_, code) in DTYPES.items()}
# ||gpu - cpu|| / ||cpu||: 16-bit types run on tensor cores, which round the decayed
# attention matrix, the scaled operands and the chunk states to 16 bits.
TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}
# (H, Dk, Dv): Dk and Dv multiples of 8 from 16 to 256 take the tensor-core path for 16-bit
# types in all three backward passes (padded inside the kernels where not 64, 128 or 256); the
# last one the generic path.
HEADS = [(2, 64, 64), (1, 128, 256), (1, 256, 128), (2, 32, 48), (2, 96, 96), (1, 80, 112), (1, 16, 192),
         (1, 192, 160), (1, 7, 130)]


def address(x):
    return x.data_ptr() if x is not None else 0


def rel_err(got, want):
    got, want = got.double().cpu(), want.double().cpu()
    assert torch.isfinite(got).all(), "non-finite values"
    return ((got - want).norm() / want.norm()).item()


def described(dims, dtype: str, num_seqs=0, seqlen_bits=64, token_gated=False, layout="BHTD"):
    """_api.describe of a problem whose q, k, v and g are C-contiguous in `layout`, as the
    tensors here are."""
    shaped = _api.Problem(tuple(dims), dtype, num_seqs, seqlen_bits if num_seqs else 0, layout, (), token_gated, dtype)
    gates = _api.rows_strides(_api.compact_strides(shaped.shape(1)[:3]), layout)
    key_rows, value_rows = shaped.output_strides(dims[3]), shaped.output_strides(dims[4])
    return _api.describe(shaped._replace(strides=(key_rows, key_rows, value_rows, gates if token_gated else (0, 0, 0))))


def workspace_bytes(dims, code, num_seqs=0, token_gated=False, backward=False):
    query = _C.backward_workspace_bytes if backward else _C.forward_workspace_bytes
    return query(described(dims, DTYPE_NAMES[code], num_seqs=num_seqs, token_gated=token_gated), 0)


def rows_strides(x, layout):
    """(batch, head, token) element strides of a tensor in `layout` (gates: no feature axis)."""
    batch, first, second = x.stride()[:3]
    return (batch, first, second) if layout == "BHTD" else (batch, second, first)


class Problem:
    """Inputs of one problem on the CPU, in either layout; `run` runs forward and backward on a
    device. gates: per-token gates g and a per-head log decay gamma, besides any decay; gamma:
    the per-head log decay alone (the kernels' constant gate, read from device memory)."""

    def __init__(self, dims, dtype, seed, decay, states, lengths=None, gates=False, layout="BHTD", gamma=False):
        b, h, t, dk, dv = dims
        torch_dtype, self.code = DTYPES[dtype]
        gen = torch.Generator().manual_seed(seed)
        self.layout = layout
        in_layout = (lambda x: x) if layout == "BHTD" else (lambda x: x.transpose(1, 2).contiguous())
        make = lambda *s: in_layout((0.5 * torch.randn(*s, generator=gen)).to(torch_dtype))  # noqa: E731
        self.dims = list(dims)
        self.q, self.k, self.v, self.do = make(b, h, t, dk), make(b, h, t, dk), make(b, h, t, dv), make(b, h, t, dv)
        self.sequences = len(lengths) if lengths is not None else b
        state_shape = (self.sequences, h, dk, dv)
        self.s0 = torch.randn(*state_shape, generator=gen) if states else None
        self.d_final = torch.randn(*state_shape, generator=gen) if states else None
        self.decay = [0.97 - 0.05 * (i % 3) for i in range(h)] if decay else None
        self.g = self.gamma = None
        if gates:
            self.g = in_layout(torch.nn.functional.logsigmoid(torch.randn(b, h, t, generator=gen) + 3))
        if gates or gamma:
            self.gamma = -0.05 * torch.rand(h, generator=gen)
        self.scale = dk ** -0.5
        self.cu_seqlens = None
        if lengths is not None:
            self.cu_seqlens = torch.tensor([0] + lengths).cumsum(0)

    def run(self, device, seqlen_bits=64):
        on = lambda x: x.to(device) if x is not None else None  # noqa: E731
        q, k, v, do, s0, d_final, g, gamma = map(on, (self.q, self.k, self.v, self.do, self.s0, self.d_final, self.g,
                                                      self.gamma))
        cu = None
        if self.cu_seqlens is not None:
            cu = self.cu_seqlens.to(device, torch.int64 if seqlen_bits == 64 else torch.int32)
        out = torch.empty_like(v)
        final = torch.empty(self.sequences, *self.dims[1:2], *self.dims[3:], device=device)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        d_init = torch.full_like(final, float("nan"))
        description = described(self.dims, DTYPE_NAMES[self.code], self.sequences if cu is not None else 0,
                                seqlen_bits, g is not None, self.layout)
        inputs = {"q": address(q), "k": address(k), "v": address(v), "initial_state": address(s0),
                  "gamma": address(gamma), "g": address(g), "cu_seqlens": address(cu), "scale": self.scale,
                  "decay": self.decay}
        forward = {**inputs, "out": address(out), "final_state": address(final)}
        backward = {**inputs, "do": address(do), "do_strides": rows_strides(do, self.layout),
                    "d_final_state": address(d_final), "dq": address(dq), "dk": address(dk), "dv": address(dv),
                    "d_initial_state": address(d_init)}
        if device == "cpu":
            _C.forward(description, forward)
            _C.backward(description, backward)
        else:
            stream = torch.cuda.current_stream().cuda_stream
            for entry, call, query in ((_C.forward, forward, _C.forward_workspace_bytes),
                                       (_C.backward, backward, _C.backward_workspace_bytes)):
                size = query(description, 0)
                workspace = torch.empty(size, dtype=torch.uint8, device=device)
                entry(description, {**call, "device": 0, "stream": stream, "workspace": workspace.data_ptr(),
                                    "workspace_bytes": size})
            torch.cuda.synchronize()
        return {"out": out, "final state": final, "dq": dq, "dk": dk, "dv": dv, "d initial state": d_init}


def assert_matches_cpu(problem, dtype, **run_args):
    got, want = problem.run("cuda", **run_args), problem.run("cpu", **run_args)
    errors = {name: rel_err(got[name], want[name]) for name in want}
    # The states are fp32 sums of many 16-bit products; tolerances as for the outputs.
    assert all(err < TOLERANCE[dtype] for err in errors.values()), errors


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("heads", HEADS, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("t", [1, 63, 200])
@pytest.mark.parametrize("mode", ["plain", "decay+states", "gates+states", "gates+states BTHD"])
def test_backward_matches_cpu(dtype, heads, t, mode):
    h, dk, dv = heads
    problem = Problem((2, h, t, dk, dv), dtype, seed=t * 31 + dk, decay=mode == "decay+states",
                      states=mode != "plain", gates="gates" in mode, layout="BTHD" if "BTHD" in mode else "BHTD")
    assert_matches_cpu(problem, dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("heads", [HEADS[0], HEADS[1], HEADS[3], HEADS[4]], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("seqlen_bits", [32, 64])
@pytest.mark.parametrize("gates", [False, True], ids=["decay", "gates BTHD"])
def test_packed_sequences_match_cpu(dtype, heads, seqlen_bits, gates):
    """Sequences of every kind of length (empty, one row, across chunk edges, starting
    mid-chunk), each from its own initial state."""
    h, dk, dv = heads
    lengths = [70, 0, 1, 64, 130, 5, 200]
    problem = Problem((1, h, sum(lengths), dk, dv), dtype, seed=dk + seqlen_bits, decay=not gates, states=True,
                      lengths=lengths, gates=gates, layout="BTHD" if gates else "BHTD")
    assert_matches_cpu(problem, dtype, seqlen_bits=seqlen_bits)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("heads", HEADS[:5], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("gates", [False, True], ids=["decay", "gates BTHD"])
def test_packed_sequences_walk_in_segments(dtype, heads, gates):
    """A long packed sequence among short and empty ones. On Hopper's walks its segments (one
    length for every sequence: 8 chunks here, so 6 for the first and 2 for the last) walk side by
    side from the end states pass 1 leaves for those before them, in slots after the sequence's
    start (common/mma_plan.cpp: packed_segments), forward and backward, with gates and states;
    the portable kernels take two passes."""
    h, dk, dv = heads
    lengths = [3000, 0, 70, 1, 700]
    problem = Problem((1, h, sum(lengths), dk, dv), dtype, seed=dk + 7, decay=not gates, states=True,
                      lengths=lengths, gates=gates, layout="BTHD" if gates else "BHTD")
    assert_matches_cpu(problem, dtype)


@pytest.mark.parametrize("count", [45, 130])
@pytest.mark.parametrize("heads", [(2, 64, 64), (1, 128, 128)], ids=lambda s: "x".join(map(str, s)))
def test_many_packed_sequences_match_cpu(count, heads):
    """Pass 2 alongside pass 1 takes chunks in the order pass 1 writes them, ranked over the
    sequences by one warp with several sequences per lane (45), or, past what a warp ranks
    (130), after pass 1 in slot order: every sequence in the right place either way."""
    h, dk, dv = heads
    lengths = torch.randint(0, 200, (count,), generator=torch.Generator().manual_seed(count)).tolist()
    lengths[3] = 0
    problem = Problem((1, h, sum(lengths), dk, dv), "bfloat16", seed=count, decay=True, states=True,
                      lengths=lengths, gates=True, layout="BTHD")
    assert_matches_cpu(problem, "bfloat16")


def test_packed_sequences_equal_separate_calls():
    """Packing changes nothing: each packed sequence gives what it gives alone, up to 16-bit
    rounding: on the portable kernels packed runs take the two passes and a sequence alone the
    walk, which round the decayed operands at other places (on Hopper both walk)."""
    lengths = [100, 37, 64]
    packed = Problem((1, 2, sum(lengths), 64, 64), "bfloat16", seed=5, decay=True, states=True,
                     lengths=lengths).run("cuda")
    whole = Problem((1, 2, sum(lengths), 64, 64), "bfloat16", seed=5, decay=True, states=True, lengths=lengths)
    start = 0
    for n, length in enumerate(lengths):
        alone = Problem((1, 2, length, 64, 64), "bfloat16", seed=0, decay=True, states=True)
        rows = slice(start, start + length)
        alone.q, alone.k, alone.v, alone.do = (x[:, :, rows].contiguous()
                                               for x in (whole.q, whole.k, whole.v, whole.do))
        alone.s0, alone.d_final = whole.s0[n:n + 1].clone(), whole.d_final[n:n + 1].clone()
        got = alone.run("cuda")
        for name in ("out", "dq", "dk", "dv"):
            assert rel_err(packed[name][:, :, rows], got[name]) < 1e-2, name
        for name in ("final state", "d initial state"):
            assert rel_err(packed[name][n:n + 1], got[name]) < 1e-2, name
        start += length


def tensor_core_family() -> str:
    """The tensor-core family device 0 runs: Hopper's where this build holds sm_90a code for it
    and CULINA_KERNELS leaves it on, else the portable one."""
    hopper = _C.device(0)["arch_specific_version"] == 90 and _api.apply_kernel_choice() == "auto"
    return "hopper, fused (sm_90a)" if hopper else "tensor-core, fused (sm_80+)"


def test_kernel_path_names_the_path_taken():
    """16-bit types: every head size 16..256 that is a multiple of 8 on the tensor cores, others
    and float32 on the generic kernel."""
    family = tensor_core_family()
    for size in range(16, 257, 8):
        assert _C.kernel_path(0, 2, size, size, 2).startswith(family.split(",")[0]), size
    assert _C.kernel_path(0, 2, 128, 128, 2) == family
    assert _C.kernel_path(0, 1, 96, 64, 1) == family
    assert _C.kernel_path(0, 0, 128, 128, 0) == "generic"
    # float32 rows computed in bfloat16 (the "medium" precision) take the tensor cores.
    assert _C.kernel_path(0, 0, 128, 128, 2) == family
    assert _C.kernel_path(0, 1, 7, 64, 1) == "generic"


def test_workspace_follows_the_plan():
    # Fused, few (sequence, head) pairs: segment states only (fp32). The backward's dv pass hands
    # the dk pass its segment states, transposed, in a region of their size after its own, where
    # the two walk in the same segments (launch.cu: handed_ends): always where Dk = Dv. The
    # Hopper family's twin walk takes such dk passes up to 128 (one walk for both, no hand-off).
    hopper = tensor_core_family().startswith("hopper")
    for dims in ([2, 4, 1000, 128, 64], [1, 1, 40000, 64, 128], [1, 2, 40000, 128, 128], [2, 4, 1000, 64, 64]):
        forward = workspace_bytes(dims, 2)
        assert forward > 0 and forward % (dims[0] * dims[1] * dims[3] * dims[4] * 4) == 0
        wanted = (forward, 2 * forward) if dims[3] != dims[4] else (forward,) if hopper else (2 * forward,)
        assert workspace_bytes(dims, 2, backward=True) in wanted
    # A forward that trains keeps its end states (transposed) for the dq pass after its own
    # workspace where the two walk in the same segments; with one segment there is nothing to keep.
    assert _C.kept_workspace_bytes(described([1, 2, 40000, 128, 128], DTYPE_NAMES[2]), 0) == 2 * workspace_bytes(
        [1, 2, 40000, 128, 128], 2)
    assert _C.kept_workspace_bytes(described([64, 16, 512, 128, 128], DTYPE_NAMES[2]), 0) == 0
    # Fused, enough pairs to fill the GPU: one segment, no workspace at all.
    assert workspace_bytes([64, 16, 512, 128, 128], 2) == 0
    assert workspace_bytes([2, 4, 1000, 128, 64], 0, backward=True) == 0
    # Gated, each chunk slot's cumulative gates besides (total_T / 64 + num_seqs slots per head).
    assert (workspace_bytes([1, 4, 1000, 64, 64], 1, num_seqs=3, token_gated=True)
            > workspace_bytes([1, 4, 1000, 64, 64], 1, num_seqs=3))
    # Packed sequences on the portable kernels, and where pass 1's grid would not hold the
    # segment slots of Hopper's walk (2000 sequences, H64: over 2000 slots a head), take the two
    # passes, with a 16-bit state per chunk slot: total_T / 64 + num_seqs slots per head; then,
    # with few state blocks, a count of written states per (sequence, head, 64 x 64 state block),
    # for pass 2 alongside pass 1.
    assert workspace_bytes([1, 64, 128000, 64, 64], 1, num_seqs=2000) == 64 * (2000 + 2000) * 64 * 64 * 2
    if not hopper:
        assert workspace_bytes([1, 4, 1000, 64, 64], 1, num_seqs=3) == 4 * (15 + 3) * 64 * 64 * 2 + 3 * 4 * 4
        assert workspace_bytes([1, 64, 64000, 64, 64], 1, num_seqs=100) == 64 * (1000 + 100) * 64 * 64 * 2
        # None at Dk 256 (an output block does not fit beside a state block; devices with less
        # shared memory take the generic kernel there, with no workspace).
        if _C.kernel_path(0, 1, 256, 256, 1) != "generic":
            assert workspace_bytes([1, 4, 1000, 256, 256], 1, num_seqs=3) == 4 * (15 + 3) * 256 * 256 * 2
        return
    # Hopper's walks take packed sequences in segments of one length L for all, L >= 8 chunks and
    # >= total_T / 64 / 32 (common/mma_plan.cpp: packed_segments; both bounds hold L here), each
    # sequence from slot start / (64 L) + n: an fp32 end state per slot, total_T / (64 L) +
    # num_seqs slots per head, whatever the lengths.
    assert workspace_bytes([1, 4, 1000, 64, 64], 1, num_seqs=3) == 4 * (1000 // 512 + 3) * 64 * 64 * 4
    assert workspace_bytes([1, 1, 64000, 64, 64], 1, num_seqs=100) == (64000 // 2048 + 100) * 64 * 64 * 4


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("heads", [(1, 64, 64), (1, 128, 128), (2, 64, 256)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", ["plain", "decay", "gamma", "gates BTHD"])
def test_long_sequences_split_the_state_pass(dtype, heads, mode):
    """Few (sequence, head) pairs and many chunks: the sequence runs in segments side by side,
    and the single pass's look-back between them must join their seams as one walk would. The
    backward's dk pass reads the dv pass's segment states transposed where their plans agree
    (Dk = Dv), with the gates and both passes' initial states (dS_T and its transpose)."""
    h, dk, dv = heads
    dims = (1, h, 64 * 40 + 17, dk, dv)
    assert workspace_bytes(dims, DTYPES[dtype][1], token_gated=mode.startswith("gates")) > 0, "no segment states"
    problem = Problem(dims, dtype, seed=11 + dk, decay=mode == "decay", states=True, gates=mode.startswith("gates"),
                      layout="BTHD" if "BTHD" in mode else "BHTD", gamma=mode == "gamma")
    assert_matches_cpu(problem, dtype)


@pytest.mark.parametrize("mode", ["plain", "decay", "gamma", "gates BTHD"])
def test_segments_cut_into_runs_join_as_one_walk(mode):
    """Where pass 1's blocks would leave most multiprocessors idle, it cuts each segment into runs
    (common/mma_plan.cpp: state_pieces) and the walks join the runs' end states: 40 chunks of two
    (sequence, head) pairs walk in five segments of 8 chunks, and pass 1 computes ten runs of 4
    (its workspace: an fp32 64 x 64 end state per run and pair). Forward and backward; the dk pass
    takes the dv pass's runs where the two walk apart (the portable kernels; Hopper's twin walk
    carries both)."""
    dims = (1, 2, 64 * 40, 64, 64)
    gated = mode.startswith("gates")
    runs = workspace_bytes(dims, 2) // (2 * 64 * 64 * 4)
    assert runs == 10, f"pass 1 runs {runs} per pair, not two per segment"
    problem = Problem(dims, "bfloat16", seed=5, decay=mode == "decay", states=True, gates=gated,
                      layout="BTHD" if "BTHD" in mode else "BHTD", gamma=mode == "gamma")
    assert_matches_cpu(problem, "bfloat16")
