"""Fetch benchmark: culina-resolver vs Python's urllib.request on one loopback release server.

1. Speed: a wheel of --size-mib (256 by default) downloaded --runs times by each client,
   interleaved (and alternating which goes first), each run a fresh process and a fresh
   destination. culina-resolver also verifies what it downloads (size, sha256, zip METADATA);
   the baseline is ``urllib.request.urlretrieve`` as FlashAttention's setup.py calls it, which
   verifies nothing. Target: median ratio (culina / urllib) <= 1.
2. Resume: the server resets the connection at 50% of the body once; the resolver resumes with
   Range. Reported: body bytes the server sent in total / file size. Target: <= 1.1.

Usage: python benchmarks/fetch_bench.py [--resolver PATH] [--size-mib 256] [--runs 5] [--tls]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import release_server  # noqa: E402 - needs the path above

URLLIB_DOWNLOAD = "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])"


def find_resolver(explicit: str | None) -> Path:
    candidates = [Path(explicit)] if explicit else []
    build = os.environ.get("CULINA_BUILD_DIR")
    for base in ([Path(build)] if build else []) + [ROOT / "build"]:
        candidates += [base / "tests" / "resolver" / "culina-resolver", base / "resolver" / "culina-resolver"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    sys.exit("culina-resolver not found: build it (make build) or pass --resolver PATH")


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"benchmark command failed ({done.returncode}): {' '.join(command)}\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resolver", help="culina-resolver binary (default: found under $CULINA_BUILD_DIR or build/)")
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tls", action="store_true", help="serve over HTTPS with a test CA (both clients trust it)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    resolver = find_resolver(args.resolver)

    with tempfile.TemporaryDirectory(prefix="culina-fetch-bench-") as scratch_name:
        scratch = Path(scratch_name)
        file = release_server.wheel_file_name()
        print(f"building a {args.size_mib} MiB wheel ...", file=sys.stderr)
        data = release_server.build_wheel(payload_size=args.size_mib << 20, compress=False)
        manifest = scratch / "release-manifest.json"
        manifest.write_text(json.dumps(release_server.manifest_for({file: data})))

        env = {k: v for k, v in os.environ.items() if not k.startswith("CULINA_") and "proxy" not in k.lower()}
        tls = {}
        if args.tls:
            pki = release_server.make_test_pki(scratch / "pki")
            tls = {"cert": pki.cert, "key": pki.key}
            env.update(CULINA_CA_BUNDLE=str(pki.ca), SSL_CERT_FILE=str(pki.ca))

        with release_server.ReleaseServer({file: data}, **tls) as server:
            url = f"{server.base_url}/{file}"

            def culina(run: int) -> float:
                return timed([str(resolver), "fetch", "--manifest", str(manifest), "--file", file,
                              "--base-url", server.base_url, "--cache-dir", str(scratch / f"cache-{run}")], env)

            def urllib(run: int) -> float:
                return timed([sys.executable, "-c", URLLIB_DOWNLOAD, url, str(scratch / f"urllib-{run}.whl")], env)

            timings: dict[str, list[float]] = {"culina": [], "urllib": []}
            ratios = []
            for run in range(args.runs):
                order = [("culina", culina), ("urllib", urllib)]
                if run % 2:
                    order.reverse()
                for name, client in order:
                    timings[name].append(client(run))
                ratios.append(timings["culina"][-1] / timings["urllib"][-1])
                shutil.rmtree(scratch / f"cache-{run}")
                (scratch / f"urllib-{run}.whl").unlink()
                print(f"run {run + 1}: culina {timings['culina'][-1]:.3f} s, urllib {timings['urllib'][-1]:.3f} s",
                      file=sys.stderr)

            server.faults[file] = release_server.Fault("reset", at=0.5)
            before = server.body_bytes_sent(file)
            culina(args.runs)
            resent = server.body_bytes_sent(file) - before
            ranges = [r.range for r in server.object_gets(file)[-2:]]

    size_mib = len(data) / (1 << 20)
    median_culina = statistics.median(timings["culina"])
    median_urllib = statistics.median(timings["urllib"])
    figures = {
        "size_bytes": len(data), "runs": args.runs, "tls": args.tls,
        "culina_s": timings["culina"], "urllib_s": timings["urllib"],
        "median_culina_s": median_culina, "median_urllib_s": median_urllib,
        "median_ratio": statistics.median(ratios),
        "reset_total_body_bytes": resent, "reset_ratio": resent / len(data), "reset_ranges": ranges,
    }
    print(f"## fetch benchmark ({'https' if args.tls else 'http'}, loopback, {size_mib:.1f} MiB, {args.runs} runs,"
          f" {platform.machine()}, {os.cpu_count()} cores)")
    print()
    print("| client | median s | MiB/s | runs (s) |")
    print("| --- | --- | --- | --- |")
    for name, median in (("culina-resolver fetch (verifies)", median_culina), ("urllib.request.urlretrieve", median_urllib)):
        key = "culina" if name.startswith("culina") else "urllib"
        runs = ", ".join(f"{t:.3f}" for t in timings[key])
        print(f"| {name} | {median:.3f} | {size_mib / median:.0f} | {runs} |")
    print()
    print(f"median of per-run ratios culina/urllib: {figures['median_ratio']:.2f} (target <= 1)")
    print(f"reset at 50%: {resent} body bytes sent for a {len(data)}-byte file = {figures['reset_ratio']:.3f}x "
          f"(target <= 1.1); requests' Range: {ranges}")
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
