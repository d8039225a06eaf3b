"""Wall time of `culina-resolver probe --json`, median over repeated runs.

Scenarios run side by side in one invocation, so their ratio is meaningful on a noisy host:
  host      the real machine as it is (no driver here; the real driver on a GPU machine)
  override  CULINA_OVERRIDE_CUDA/SM set, so libcuda is never opened
  fake      the test fake libcuda.so.1 with two GPUs (only when --fake-libcuda-dir is given)

Usage: python benchmarks/probe_bench.py --resolver build/tests/resolver/culina-resolver [--runs 30]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import time


def time_probe(resolver, env, runs):
    samples = []
    report = None
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([resolver, "probe", "--json"], env=env, capture_output=True, text=True, check=True)
        samples.append((time.perf_counter() - start) * 1000)
        report = json.loads(done.stdout)
    return samples, report


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resolver", required=True)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--fake-libcuda-dir")
    args = parser.parse_args()

    base = {k: v for k, v in os.environ.items() if not k.startswith("CULINA_OVERRIDE_")}
    scenarios = {"host": base, "override": {**base, "CULINA_OVERRIDE_CUDA": "13.0", "CULINA_OVERRIDE_SM": "9.0"}}
    if args.fake_libcuda_dir:
        scenarios["fake"] = {
            **base,
            "LD_LIBRARY_PATH": args.fake_libcuda_dir,
            "FAKE_CUDA_GPUS": "NVIDIA H200=9.0;NVIDIA A100=8.0",
        }

    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; runs per scenario: {args.runs}")
    results = {}
    for name, env in scenarios.items():
        time_probe(args.resolver, env, 2)  # warm the page cache
        samples, report = time_probe(args.resolver, env, args.runs)
        results[name] = statistics.median(samples)
        gpus = ", ".join(f"{g['name']} sm {g['sm']}" for g in report["gpus"]) or "none"
        print(
            f"{name:9s} median {results[name]:7.1f} ms  p90 {sorted(samples)[int(0.9 * len(samples))]:7.1f} ms"
            f"  driver {report['driver']['version']} CUDA {report['driver']['cuda']}  gpus: {gpus}"
        )
    print(f"ratio host/override: {results['host'] / results['override']:.2f}")


if __name__ == "__main__":
    main()
