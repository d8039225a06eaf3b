"""Runs one build's compile jobs, C++ and CUDA alike, in a single pool.

The bindings (a C++ file) are the longest single job of a one-architecture build, so they run
beside nvcc rather than after it. The pool is bounded by <prefix>MAX_JOBS or MAX_JOBS, else by
the cores and the free memory (an nvcc job can take over a GiB); ccache fronts the compilers
when it is installed (<prefix>CCACHE=0 turns it off); each finished file prints one line. The
settings are parsed in adapter_settings.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import shutil
import sys
import time
from typing import Callable

from . import adapter_settings
from . import project_config

JOB_MEMORY_BYTES = 3 << 29  # 1.5 GiB: the largest nvcc job here peaks near 1 GiB


@dataclasses.dataclass(frozen=True)
class CompileJob:
    source: str
    run: Callable[[], None]  # raises with the command and the compiler's output on failure


def say(message: str) -> None:
    print(f"[{project_config.current().name} build] {message}", file=sys.stderr, flush=True)


def available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def max_jobs() -> tuple[int, str]:
    """(parallel jobs, why that many)."""
    limit = adapter_settings.current().max_jobs
    if limit is not None:
        return limit
    cores = max(1, os.cpu_count() or 1)
    memory = available_memory()
    if memory is not None and memory // JOB_MEMORY_BYTES < cores:
        jobs = max(1, memory // JOB_MEMORY_BYTES)
        return jobs, f"{memory / 2**30:.1f} GiB free memory, 1.5 GiB per job"
    return cores, f"{cores} cores"


def ccache_prefix() -> list[str]:
    """["ccache"] when ccache is installed and not turned off, else []."""
    found = shutil.which("ccache")
    return [found] if found and adapter_settings.current().ccache else []


def run_all(jobs: list[CompileJob]) -> None:
    """Runs every job, longest expected first as given; stops at the first failure."""
    if not jobs:
        return
    workers, why = max_jobs()
    workers = min(workers, len(jobs))
    say(f"compiling {len(jobs)} source(s), {workers} at a time ({why})")

    def timed(job: CompileJob) -> float:
        start = time.monotonic()
        job.run()
        return time.monotonic() - start

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(timed, job): job for job in jobs}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            job = futures[future]
            try:
                seconds = future.result()
            except BaseException:
                for pending in futures:
                    pending.cancel()
                raise
            say(f"[{done}/{len(jobs)}] {job.source} ({seconds:.1f} s; {time.monotonic() - started:.0f} s elapsed)")
