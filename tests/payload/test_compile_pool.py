"""The build's job pool: its size, ccache, and a real mixed C++/CUDA build through CudaBuildExt."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ADAPTER = Path(__file__).resolve().parents[2] / "resolver"
sys.path.insert(0, str(ADAPTER))
from culina_resolver import compile_pool  # noqa: E402
from culina_resolver import cuda_build_ext  # noqa: E402


def test_max_jobs_validated(monkeypatch):
    monkeypatch.setenv("CULINA_MAX_JOBS", "zero")
    with pytest.raises(ValueError, match="CULINA_MAX_JOBS='zero'"):
        compile_pool.max_jobs()
    monkeypatch.setenv("CULINA_MAX_JOBS", "3")
    assert compile_pool.max_jobs() == (3, "CULINA_MAX_JOBS=3")


def test_max_jobs_bounded_by_free_memory(monkeypatch):
    monkeypatch.delenv("CULINA_MAX_JOBS", raising=False)
    monkeypatch.delenv("MAX_JOBS", raising=False)
    monkeypatch.setattr(compile_pool.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(compile_pool, "available_memory", lambda: 6 * 2**30)
    assert compile_pool.max_jobs() == (4, "6.0 GiB free memory, 1.5 GiB per job")
    monkeypatch.setattr(compile_pool, "available_memory", lambda: 2**29)
    assert compile_pool.max_jobs()[0] == 1
    monkeypatch.setattr(compile_pool, "available_memory", lambda: None)
    assert compile_pool.max_jobs() == (64, "64 cores")


def test_ccache_setting(monkeypatch, tmp_path):
    fake = tmp_path / "ccache"
    fake.write_text("#!/bin/sh\nexec \"$@\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CULINA_CCACHE", raising=False)
    assert compile_pool.ccache_prefix() == [str(fake)]
    monkeypatch.setenv("CULINA_CCACHE", "0")
    assert compile_pool.ccache_prefix() == []
    monkeypatch.setenv("CULINA_CCACHE", "sometimes")
    with pytest.raises(ValueError, match="CULINA_CCACHE='sometimes'"):
        compile_pool.ccache_prefix()



PROJECT_SETUP = """
import sys
sys.path.insert(0, {adapter!r})
from setuptools import setup
from culina_resolver.cuda_build_ext import CudaBuildExt, CudaExtension
setup(name="tiny", version="0", ext_modules=[CudaExtension(
    "tiny._C", sources={sources!r}, include_dirs=["src"], language="c++",
    extra_compile_args=["-O2"], source_flags={{"src/glue.cpp": ["-DGLUE_FLAG"]}})],
    cmdclass={{"build_ext": CudaBuildExt}})
"""


@pytest.mark.skipif(cuda_build_ext.find_toolkit() is None, reason="no CUDA toolkit (nvcc) on this machine")
def test_mixed_build_goes_through_one_pool_and_ccache(tmp_path):
    """Both languages through ccache, -g dropped, per-source flags applied, objects reused."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "glue.cpp").write_text(
        "#ifndef GLUE_FLAG\n#error source_flags not applied\n#endif\nint glue() { return 1; }\n")
    (tmp_path / "src" / "kernel.cu").write_text("__global__ void k(int* x) { *x = 1; }\nint launch() { return 2; }\n")
    shutil.copy2(ADAPTER.parent / "pyproject.toml", tmp_path)  # the project is the working folder: culina's names
    (tmp_path / "setup.py").write_text(PROJECT_SETUP.format(adapter=str(ADAPTER),
                                                            sources=["src/glue.cpp", "src/kernel.cu"]))
    bin_dir, log = tmp_path / "bin", tmp_path / "ccache.log"
    bin_dir.mkdir()
    (bin_dir / "ccache").write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec \"$@\"\n")
    (bin_dir / "ccache").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "CULINA_CUDA_ARCHS": "9.0",
           "CULINA_MAX_JOBS": "2"}
    env.pop("CULINA_CCACHE", None)
    command = [sys.executable, "setup.py", "build_ext", "--build-lib", "lib", "--build-temp", "tmp"]
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "compiling 2 source(s), 2 at a time (CULINA_MAX_JOBS=2)" in first.stderr
    assert "[2/2]" in first.stderr
    lines = log.read_text().splitlines()
    glue = next(line for line in lines if "glue.cpp" in line)
    assert " -g " not in f" {glue} " and "-DGLUE_FLAG" in glue
    assert any("nvcc" in line and "kernel.cu" in line for line in lines)
    assert list((tmp_path / "lib" / "tiny").glob("_C*.so"))
    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "up to date: src/glue.cpp" in second.stderr and "up to date: src/kernel.cu" in second.stderr
    assert len(log.read_text().splitlines()) == len(lines)
