"""Hopper's own kernels (the "hopper" family: the tensor-core passes with pass 1 on wgmma, sm_90a
code) against the portable family on the same inputs, on a device that runs them; and the switch
that turns them off (CULINA_KERNELS=portable). The rest of the GPU tests run whichever family
the device takes, so running them once as they are and once with CULINA_KERNELS=portable covers
both families against the float64 reference."""
import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest

import culina
from culina import _api, _C

torch = pytest.importorskip("torch", reason="the GPU kernel checks use PyTorch tensors, which is not installed")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or _C.device_count() == 0
                                or _C.device(0)["arch_specific_version"] != 90,
                                reason="needs a compute capability 9.0 GPU and a build with sm_90a code")

# (B, T, H, Dk, Dv, gates, packed sequences, dtype): fused runs (one segment, several), Dk padded
# (96, 200), both column-split walk blocks of Dk 64 and 128 (64 and 128 value columns), the
# walks of Dk 256: the transposed walk where Dv pads to a multiple of 128 (256, 200, 128) with
# 16-bit rows and no gate dots, the row split for the rest (Dv 64, float32 rows, the dq and dk
# passes' gate dots; the backward's dq and dk passes run the column-split walk where Dv is 128 or
# less), the transposed walk on packed sequences, 192 (the portable walk after the wgmma state
# pass), packed sequences (the walk in segment slots on Hopper, two passes on the portable
# kernels), float32 rows rounded on load. Pass 1 before a padded walk takes 128 x 128 blocks
# where Dk and Dv pad to multiples of 128 (96 and 128 zero-filled past the head size; 256 with
# 256 and 128; in several runs a segment at B1 T4096 H2 D256). The backward's twin walk (dv and
# dk in one) runs where Dk and Dv pad alike to 64 or 128 (96 and 128: dk's columns and dv's
# differ) and no dk pass needs gate dots from float32 rows (those run on the generic kernel).
# Walks of Dk 64 and 64 value columns whose grid two blocks per multiprocessor cannot hold in one
# wave run three to a multiprocessor (B8 T1024 H24: 384 blocks), the dq pass's on its build for
# three, which spills. At B1 T4096 H96 D128 the forward walks in one segment and hands the dq
# pass the states entering its four (launch.cu: kept_for_dq), which walks beside the twin walk.
# At B2 T1536 H132 D64 the walks' 264 blocks fit one wave two to a multiprocessor: every pass
# walks in one segment, the gated walks (the forward's, the dq pass's) on their builds for two.
CASES = [
    (2, 4096, 4, 128, 128, "g", 0, "bfloat16"),
    (2, 4096, 4, 128, 128, "gamma", 0, "bfloat16"),
    (2, 3000, 4, 128, 128, "", 0, "float16"),
    (3, 2500, 5, 64, 64, "g+gamma", 0, "bfloat16"),
    (8, 1024, 24, 64, 64, "g", 0, "bfloat16"),
    (2, 1500, 3, 64, 128, "g", 0, "bfloat16"),
    (2, 1500, 3, 128, 64, "gamma", 0, "bfloat16"),
    (2, 1500, 3, 128, 256, "gamma", 0, "bfloat16"),
    (1, 4096, 2, 256, 256, "gamma", 0, "bfloat16"),
    (2, 2049, 3, 256, 256, "g", 0, "bfloat16"),
    (2, 1500, 3, 256, 128, "g+gamma", 0, "bfloat16"),
    (1, 3000, 2, 256, 64, "", 0, "float16"),
    (2, 1500, 3, 256, 200, "gamma", 0, "float16"),
    (1, 8192, 3, 256, 256, "g", 5, "bfloat16"),
    (2, 1000, 2, 200, 136, "g", 0, "bfloat16"),
    (2, 1024, 2, 256, 256, "g", 0, "float32"),
    (1, 2048, 2, 192, 192, "g", 0, "bfloat16"),
    (2, 2049, 3, 96, 96, "g", 0, "bfloat16"),
    (2, 1500, 2, 96, 128, "g", 0, "bfloat16"),
    (2, 1500, 2, 128, 96, "g", 0, "bfloat16"),
    (1, 8192, 4, 128, 128, "g", 5, "bfloat16"),
    (1, 8192, 4, 64, 64, "", 7, "float16"),
    (2, 2048, 2, 128, 128, "g", 0, "float32"),
    (2, 2048, 2, 128, 128, "gamma", 0, "float32"),
    (1, 4096, 96, 128, 128, "g", 0, "bfloat16"),
    (1, 4096, 96, 128, 128, "gamma", 0, "float16"),
    (2, 1536, 132, 64, 64, "g", 0, "bfloat16"),
]


def inputs(b, t, h, dk, dv, gates, packed, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k = (torch.randn(b, t, h, dk, device="cuda", generator=gen, dtype=getattr(torch, dtype)) * 0.5 for _ in range(2))
    v = torch.randn(b, t, h, dv, device="cuda", generator=gen, dtype=getattr(torch, dtype)) * 0.5
    g = (torch.nn.functional.logsigmoid(torch.randn(b, t, h, device="cuda", generator=gen)) / 16
         if "g" in gates.split("+") else None)
    g_gamma = -torch.rand(h, device="cuda", generator=gen) * 0.1 - 0.01 if "gamma" in gates else None
    cu_seqlens = None
    if packed:
        cuts = np.sort(np.random.default_rng(seed).choice(np.arange(1, t), packed - 1, replace=False))
        cu_seqlens = torch.tensor([0, *cuts, t], device="cuda", dtype=torch.int64)
    s0 = torch.randn(packed or b, h, dk, dv, device="cuda", generator=gen) * 0.1
    return q, k, v, g, g_gamma, cu_seqlens, s0


@contextlib.contextmanager
def hopper_kernels(enabled):
    """The Hopper family on or off inside the block (the switch CULINA_KERNELS sets), and as
    CULINA_KERNELS has it after."""
    _C.set_arch_specific_kernels(enabled)
    try:
        yield
    finally:
        _C.set_arch_specific_kernels(_api.apply_kernel_choice() == "auto")


def launched_kernels(call):
    """The names of the kernels `call` launches."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return [event.key for event in prof.key_averages()]


def run(arch_specific, q, k, v, g, g_gamma, cu_seqlens, s0, dtype):
    """Forward, final state and every gradient with the Hopper kernels on or off."""
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium" if dtype == "float32" else precision)
    try:
        with hopper_kernels(arch_specific):
            leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
            g_leaf = g.detach().clone().requires_grad_() if g is not None else None
            o, state = culina.chunk_simple_gla(*leaves, g=g_leaf, g_gamma=g_gamma, initial_state=s0,
                                               output_final_state=True, cu_seqlens=cu_seqlens)
            do, ds = torch.randn_like(o), torch.randn_like(state)
            torch.autograd.backward([o, state], [do, ds])
            torch.cuda.synchronize()
            return {"o": o, "final state": state, "dq": leaves[0].grad, "dk": leaves[1].grad, "dv": leaves[2].grad,
                    **({"dg": g_leaf.grad} if g_leaf is not None else {})}
    finally:
        torch.set_float32_matmul_precision(precision)


def assert_families_agree(hopper, portable, dtype):
    """run()'s results of the two families, each output against the other's."""
    for name, want in portable.items():
        got = hopper[name]
        assert torch.isfinite(got).all(), name
        err = ((got.float() - want.float()).norm() / want.float().norm()).item()
        # The two round at different places (the state update's weights go onto v's columns
        # here, onto k's fragments there; P comes from the accumulators here, through shared
        # memory there): equal to 16-bit rounding, not bit for bit (H200: bf16 1e-3 to 3e-3).
        # dg, a sum over later tokens of differences of dots, magnifies those roundings (1.4e-2
        # to 3e-2); the gate tests bound each family's dg against the float64 recurrence.
        bound = 6e-2 if name == "dg" else 1e-3 if dtype == "float16" else 1e-2
        assert err < bound, (name, err)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}-T{}-H{}-Dk{}-Dv{}-{}-packed{}-{}".format(*c))
def test_hopper_family_equals_the_portable_one(case):
    args = inputs(*case, seed=sum(case[:4]))  # the seeds the H200 run had for the square cases
    torch.manual_seed(0)
    hopper = run(True, *args, case[-1])
    torch.manual_seed(0)
    portable = run(False, *args, case[-1])
    assert_families_agree(hopper, portable, case[-1])


def test_packed_sequences_past_the_grid_take_the_two_passes():
    """1020 packed sequences of 64 heads: the segment slots of Hopper's walk (1032 a head) would
    not fit pass 1's grid (65535 blocks), so the two passes run, their output pass on wgmma
    (common/mma_plan.cpp: packed_segments); the portable family takes two passes as well."""
    case = (1, 32768, 64, 64, 64, "g", 1020, "bfloat16")
    args = inputs(*case, seed=3)
    hopper = {}
    torch.manual_seed(0)  # run() draws the outputs' gradients
    launched = launched_kernels(lambda: hopper.update(run(True, *args, case[-1])))
    assert any("chunk_output_wgmma" in name for name in launched)
    torch.manual_seed(0)
    assert_families_agree(hopper, run(False, *args, case[-1]), case[-1])


def test_the_hopper_family_takes_the_tensor_core_passes_and_the_switch_turns_it_off():
    assert _C.kernel_path(0, 2, 128, 128, 2) == "hopper, fused (sm_90a)" or _api.apply_kernel_choice() == "portable"
    code = "from culina import _api, _C; _api.apply_kernel_choice(); print(_C.kernel_path(0, 2, 128, 128, 2))"
    env = {**os.environ, "CULINA_KERNELS": "portable", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "tensor-core, fused (sm_80+)"


def backward_kernels(b, t, h, dk, dv, gates):
    """The names of the kernels a forward+backward through autograd launches."""
    q, k, v, g, g_gamma, _, _ = inputs(b, t, h, dk, dv, gates, 0, "bfloat16", seed=1)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    g_leaf = g.detach().clone().requires_grad_() if g is not None else None
    return launched_kernels(lambda: culina.chunk_simple_gla(*leaves, g=g_leaf, g_gamma=g_gamma)[0].sum().backward())


@pytest.mark.skipif(_api.apply_kernel_choice() == "portable", reason="CULINA_KERNELS=portable turns the Hopper family off")
@pytest.mark.parametrize("dk, dv, twin", [(128, 128, True), (64, 64, True), (96, 96, True), (96, 128, True),
                                          (64, 128, False), (256, 256, False)])
@pytest.mark.parametrize("gates", ["g", "gamma"])
def test_the_dk_pass_rides_on_the_dv_walk_where_the_twin_walk_takes_it(dk, dv, twin, gates):
    # One walk for dv and dk where both head sizes pad alike to 64 or to 128 (96 pads to 128);
    # elsewhere each pass walks alone.
    names = backward_kernels(2, 1024, 2, dk, dv, gates)
    assert any("chunk_walk_twin_kernel" in name for name in names) == twin, names


@pytest.mark.skipif(_api.apply_kernel_choice() == "portable", reason="CULINA_KERNELS=portable turns the Hopper family off")
@pytest.mark.parametrize("dv, dtype, transposed", [(256, "bfloat16", True), (200, "float16", True),
                                                   (64, "bfloat16", False), (256, "float32", False)])
def test_a_dk256_forward_walks_on_the_transposed_walk_where_it_takes_the_pass(dv, dtype, transposed):
    """Dk 256: the transposed walk takes a pass of 16-bit rows whose Dv pads to a multiple of 128;
    the row split takes Dv 64 and float32 rows."""
    q, k, v, _, g_gamma, _, _ = inputs(2, 1024, 2, 256, dv, "gamma", 0, dtype, seed=4)
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium" if dtype == "float32" else precision)
    try:
        with torch.no_grad():
            names = launched_kernels(lambda: culina.chunk_simple_gla(q, k, v, g_gamma=g_gamma))
    finally:
        torch.set_float32_matmul_precision(precision)
    assert any("chunk_walk_transposed_kernel" in name for name in names) == transposed, names
    assert any("chunk_walk_row_split_kernel" in name for name in names) != transposed, names


@pytest.mark.skipif(_api.apply_kernel_choice() == "portable", reason="CULINA_KERNELS=portable turns the Hopper family off")
def test_the_dk256_passes_with_gate_dots_walk_on_the_row_split_in_the_same_segments():
    """With per-token gates the dq and dk passes add the gates' gradient terms, which the
    transposed walk does not: they take the row split, the forward and the dv pass the transposed
    walk. At B1 T16384 H7 the transposed walk's plan has fewer segments than the row split's own
    would: the row split walks in the transposed walk's, so that the backward's workspace, sized
    before the gradients are known, holds its plan (sized for the row split's own, the dq and dk
    passes fell to the generic kernel, 60x slower)."""
    for b, t, h in ((2, 1024, 2), (1, 16384, 7)):
        names = backward_kernels(b, t, h, 256, 256, "g")
        assert any("chunk_walk_transposed_kernel" in name for name in names), names
        assert any("chunk_walk_row_split_kernel" in name for name in names), names
        assert not any("generic" in name for name in names), names


def skip_unless_132_multiprocessors():
    """The plans these tests name count the waves of an H100 SXM's or H200's 132 multiprocessors."""
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the waves counted are those of an H100 SXM's or H200's 132 multiprocessors")


def column_split_arguments(names):
    """The template arguments of each column-split walk among kernel `names`: T, S, DK, SLICE,
    GATED, DOTS, RESIDENT, PACKED, HAND, STORE_GROUP."""
    walks = []
    for name in names:
        if "chunk_walk_column_split_kernel<" in name:
            template = name.split("chunk_walk_column_split_kernel<", 1)[1].split(">", 1)[0]
            args = [a.strip() for a in template.split(",")]
            assert len(args) == 10, name
            walks.append(args)
    return walks


def column_split_walks(names):
    """(gate dots, blocks to a multiprocessor) of each column-split walk among kernel `names`."""
    return [(args[5] == "true", int(args[6])) for args in column_split_arguments(names)]


def column_split_store_groups(names):
    """(gate dots, whether a third warpgroup stores the output) of each column-split walk among
    kernel `names`."""
    return [(args[5] == "true", args[9] == "true") for args in column_split_arguments(names)]


@pytest.mark.skipif(_api.apply_kernel_choice() == "portable", reason="CULINA_KERNELS=portable turns the Hopper family off")
def test_the_d128_walks_of_16_bit_rows_without_gate_dots_store_from_a_third_warpgroup():
    """At dk 128 the column split's walks of 16-bit rows without gate dots stage their output for
    a third warpgroup to store (column_split_store_group): with per-token gates, the forward's
    walk. The dq pass's walk, with gate dots, and a walk of float32 rows store their own."""
    assert sorted(column_split_store_groups(backward_kernels(1, 1024, 4, 128, 128, "g"))) == [(False, True),
                                                                                             (True, False)]
    q, k, v, _, g_gamma, _, _ = inputs(1, 1024, 4, 128, 128, "gamma", 0, "float32", seed=3)
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")  # float32 rows on the tensor cores, rounded on load
    try:
        with torch.no_grad():
            names = launched_kernels(lambda: culina.chunk_simple_gla(q, k, v, g_gamma=g_gamma))
    finally:
        torch.set_float32_matmul_precision(precision)
    assert column_split_store_groups(names) == [(False, False)], names


@pytest.mark.skipif(_api.apply_kernel_choice() == "portable", reason="CULINA_KERNELS=portable turns the Hopper family off")
@pytest.mark.parametrize("b, t, h, resident", [(2, 8192, 132, 2), (4, 4096, 24, 3)])
def test_the_walks_with_gates_run_two_to_a_multiprocessor_where_the_plan_counts_on_two(b, t, h, resident):
    """At D64 the column split runs three blocks to a multiprocessor, and its gated walks spill at
    three (the dq pass's, with gate dots, most). At B2 T8192 H132 the 264 (sequence, head)s walk
    in one segment, two to a multiprocessor, with no state pass: the forward's and the dq pass's
    walks run their builds for two. At B4 T4096 H24 (384 blocks in four segments after the state
    pass, one wave of three) both run three."""
    skip_unless_132_multiprocessors()
    names = backward_kernels(b, t, h, 64, 64, "g")
    walks = column_split_walks(names)
    # The forward's and the dq pass's walks; dk and dv on the twin walk (with one walk each, the
    # dv walk's name would be the forward's and the dk walk's the dq walk's).
    assert sorted(walks) == [(False, resident), (True, resident)], walks
    assert any("chunk_walk_twin_kernel" in name for name in names), names
    assert any("chunk_states_wgmma_kernel" in name for name in names) == (resident == 3), names


@pytest.mark.skipif(_api.apply_kernel_choice() == "portable", reason="CULINA_KERNELS=portable turns the Hopper family off")
@pytest.mark.parametrize("b, t, h, state_pass", [(2, 1536, 132, False), (1, 1536, 132, True)])
def test_a_d64_walk_whose_blocks_fit_one_wave_two_to_a_multiprocessor_walks_in_one_segment(b, t, h, state_pass):
    """At D64 the column split's step is faster where two blocks share a multiprocessor than
    where three do (MmaKernels::walk_step_times): B2 T1536 H132 (264 blocks) walks its 24 chunks
    in one segment, two blocks to a multiprocessor (the gated walk on its build for two), with no
    state pass, where three segments and their state pass took longer. B1 (132 blocks) walks three
    segments, one wave of three, after the state pass."""
    skip_unless_132_multiprocessors()
    q, k, v, g, _, _, _ = inputs(b, t, h, 64, 64, "g", 0, "bfloat16", seed=4)
    with torch.no_grad():
        names = launched_kernels(lambda: culina.chunk_simple_gla(q, k, v, g=g))
    assert column_split_walks(names) == [(False, 3 if state_pass else 2)], names
    assert any("chunk_states_wgmma_kernel" in name for name in names) == state_pass, names


@pytest.mark.skipif(_api.apply_kernel_choice() == "portable", reason="CULINA_KERNELS=portable turns the Hopper family off")
def test_each_family_gets_a_workspace_for_its_own_plan():
    """At D64 the Hopper walk runs three blocks to a multiprocessor and plans fewer segments than
    the portable walk (B4 T4096 H24: four against eight), so the portable plan needs the larger
    workspace. Asked once per problem and family: cached per problem alone, the Hopper family's
    size sent the portable family's passes to the generic kernel (25x slower) once
    _C.set_arch_specific_kernels had turned the Hopper family off."""
    q, k, v, g, _, _, _ = inputs(4, 4096, 24, 64, 64, "g", 0, "bfloat16", seed=2)

    def forward_kernels(arch_specific):
        with hopper_kernels(arch_specific), torch.no_grad():
            return launched_kernels(lambda: culina.chunk_simple_gla(q, k, v, g=g))

    hopper, portable = forward_kernels(True), forward_kernels(False)
    assert any("chunk_walk_column_split_kernel" in name for name in hopper), hopper
    assert any("chunk_walk_kernel" in name for name in portable), portable
    assert not any("generic" in name for name in hopper + portable), (hopper, portable)
