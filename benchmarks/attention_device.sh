#!/usr/bin/env bash
# One full pass on a GPU machine (the H200 device tool): build culina for this GPU's
# architecture, build a second copy for an architecture it lacks (for the
# UnsupportedDeviceError test), run the payload tests (autograd and torch.compile among them) and the
# benchmarks (forward and forward+backward over a spread of shapes, and the host overhead of one
# tiny call, against fla when its wheels travel in .whl/). Logs go to $OUT.
# Usage: OUT=/some/dir benchmarks/attention_device.sh [ARCH]   (ARCH defaults to 9.0)
# CULINA_TESTS: the pytest targets (default tests/payload; the comparisons with fla run apart,
# where fla is installed); CULINA_REP_MS: timed
# milliseconds per benchmark measurement (default 500); CULINA_BENCH_S: the benchmark's time
# limit in seconds (default 300); CULINA_FIRST: the first shape of the spread (default 0);
# CULINA_BENCH_ARGS: more arguments for it (--only culina: no fla).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/culina-device}
arch=${1:-9.0}
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
source benchmarks/triton_autotune.sh  # fla's autotuning results from an earlier call, if carried
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/env.txt"

foreign=/tmp/culina-foreign
rm -rf "$foreign" && mkdir -p "$foreign" && cp -r setup.py pyproject.toml csrc package resolver "$foreign"/
(cd "$foreign" && CULINA_CUDA_ARCHS=8.0 python3 setup.py -q build_ext --inplace >>"$out/build.log" 2>&1) &
foreign_pid=$!
start=$(date +%s)
CULINA_CUDA_ARCHS=$arch python3 setup.py -q build_ext --inplace 2>&1 | grep -v Warning | tee -a "$out/build.log" | grep "culina build"
echo "build: $(( $(date +%s) - start )) s"
wait $foreign_pid || echo "foreign build failed: see build.log"

(cd package && python3 -m culina info) | tee -a "$out/env.txt"
# The comparisons with fla, each case in a process of its own beside the other tests: fla
# autotunes each new shape for minutes, compiling on the CPU, so that one after another they
# outran a device call (2026-11-27: 157-248 s a case, all seven in 250 s side by side).
fla_pids=() fla_logs=$(mktemp -d)
if python3 -c "import fla" 2>/dev/null; then
  mapfile -t fla_cases < <(python3 -m pytest tests/payload/test_gpu_gates.py --collect-only -q -k equals_fla \
                            -p no:cacheprovider | grep '::')
  for case in "${fla_cases[@]}"; do
    timeout 400 python3 -m pytest "$case" -q -rs -p no:cacheprovider >"$fla_logs/${#fla_pids[@]}.log" 2>&1 &
    fla_pids+=($!)
  done
fi
CULINA_FOREIGN_BUILD=$foreign/package timeout 400 python3 -m pytest ${CULINA_TESTS:-tests/payload} -q -rs \
  -p no:cacheprovider -k "not equals_fla" 2>&1 | tee "$out/pytest.log" | tail -25
if (( ${#fla_pids[@]} )); then
  wait "${fla_pids[@]}"  # before the benchmarks: fla's autotuning would share their GPU
  for log in "$fla_logs"/*.log; do grep -E "^(SKIPPED|FAILED)|passed|failed|skipped|error" "$log"; done | tee "$out/fla.log"
fi
timeout "${CULINA_BENCH_S:-300}" python3 benchmarks/attention_bench.py --spread --rep-ms "${CULINA_REP_MS:-500}" --first "${CULINA_FIRST:-0}" ${CULINA_BENCH_ARGS:-} --json "$out/bench.json" \
  2>&1 | tee "$out/bench.log"
timeout 120 python3 benchmarks/host_overhead_bench.py --json "$out/host_overhead.json" 2>&1 | tee "$out/host_overhead.log"

# Where the time goes inside culina's kernels (Nsight Compute, clocks left alone).
if [[ -n ${CULINA_NCU:-} ]] && command -v ncu >/dev/null; then
  timeout 240 ncu --clock-control none --kernel-name regex:${CULINA_NCU_KERNELS:-chunk_} --launch-skip 2 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --metrics smsp__average_warp_latency_issue_stalled_barrier,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_lg_throttle,smsp__average_warp_latency_issue_stalled_mio_throttle,smsp__average_warp_latency_issue_stalled_short_scoreboard,smsp__average_warp_latency_issue_stalled_math_pipe_throttle,smsp__average_warp_latency_issue_stalled_wait,smsp__average_warp_latency_issue_stalled_drain,smsp__average_warp_latency_issue_stalled_membar,smsp__average_warp_latency_issue_stalled_not_selected,smsp__average_warp_latency_issue_stalled_selected,smsp__average_warp_latency_issue_stalled_dispatch_stall,smsp__average_warp_latency_issue_stalled_tex_throttle \
    python3 benchmarks/attention_profile.py >"$out/ncu.txt" 2>&1
  grep -E "chunk_|Duration|Throughput|Achieved Occupancy|stalled|L2 Hit|DRAM" "$out/ncu.txt" | head -70
fi

# Tuning variants (compile-time knobs), culina alone over the spread: KNOB=VALUE pairs in
# CULINA_VARIANTS; CULINA_VARIANT_TESTS: pytest targets run against each variant's build too
# (CULINA_CHUNK_WALK=0 puts every padded problem on the two-pass path).
for variant in ${CULINA_VARIANTS:-}; do
  dir=/tmp/culina-$variant
  rm -rf "$dir" && mkdir -p "$dir" && cp -r setup.py pyproject.toml csrc package resolver benchmarks tests "$dir"/
  (cd "$dir" && NVCC_APPEND_FLAGS="-D$variant" CULINA_CUDA_ARCHS=$arch python3 setup.py -q build_ext --inplace \
     >>"$out/build.log" 2>&1 || exit
   if [[ -n ${CULINA_VARIANT_TESTS:-} ]]; then
     timeout 300 python3 -m pytest $CULINA_VARIANT_TESTS -q -p no:cacheprovider 2>&1 | tail -3 | sed "s/^/[$variant] /"
   fi
   timeout 120 python3 benchmarks/attention_bench.py --spread --only culina --rep-ms 100 2>&1 | grep "^|" \
     | sed "s/^/[$variant] /")
done

triton_autotune_save "$out"
