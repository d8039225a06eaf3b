"""pyproject.toml's release architecture lists, one per CUDA major, through project_config (their one
reader): what each release wheel carries and what CULINA_CUDA_ARCHS=all means for a toolkit."""
from __future__ import annotations

import subprocess
import types

import pytest

from release_build import ROOT

from culina_resolver import cuda_build_ext  # noqa: E402 - found through the path release_build sets
from culina_resolver.adapter_settings import arch_list  # noqa: E402
from culina_resolver.project_config import ProjectConfig  # noqa: E402


def test_cuda13_adds_thor_and_both_keep_ptx_for_the_newest():
    config = ProjectConfig.load(ROOT)
    assert config.release_archs_for("12.9") == "7.5;8.0;9.0;10.0;12.0+PTX"
    assert config.release_archs_for("13.0") == config.release_archs_for("13.5") == "7.5;8.0;9.0;10.0;11.0;12.0+PTX"
    assert config.newest_release_archs == config.release_archs_for("13.0")


def test_a_cuda_major_without_a_list_is_named_with_the_fix():
    with pytest.raises(ValueError, match=r'no list for CUDA 14 \(toolkit 14.0; listed: 12, 13\): add a "14" entry'):
        ProjectConfig.load(ROOT).release_archs_for("14.0")


def test_the_old_single_string_form_is_refused_with_the_table_form(tmp_path):
    pyproject = (ROOT / "pyproject.toml").read_text()
    start = pyproject.index("[tool.culina.release_archs]")
    (tmp_path / "pyproject.toml").write_text(pyproject[:start].replace(
        "[tool.culina]\n", '[tool.culina]\nrelease_archs = "7.5;12.0+PTX"\n'))
    with pytest.raises(ValueError, match=r"release_archs = '7.5;12.0\+PTX' must be a table of CUDA major to list"):
        ProjectConfig.load(tmp_path)


def test_every_kernel_source_compiles_for_the_oldest_release_architecture(toolkit, tmp_path):
    """The release wheel compiles every CUDA source for each listed architecture, and CI builds for
    one: device code that needs a newer one (sm_80's warp reductions, say) must sit behind the
    kernels' __CUDA_ARCH__ guards, or the release build breaks only there. The oldest entry is
    where that shows; its kernels' bodies compile away, so this takes seconds. The sources and the
    flags are the build's (setup.py's glob, cuda_build_ext.cuda_flags)."""
    oldest = min(arch_list(ProjectConfig.load(ROOT).release_archs_for(toolkit.version)),
                 key=lambda target: int(target.arch.digits)).arch
    extension = types.SimpleNamespace(include_dirs=[str(ROOT / "csrc")], define_macros=[])
    flags = cuda_build_ext.cuda_flags(extension, [oldest], [])
    sources = sorted((ROOT / "csrc").rglob("*.cu"))
    assert sources
    for source in sources:
        done = subprocess.run([str(toolkit.nvcc), *flags, "-c", str(source), "-o", str(tmp_path / "kernel.o")],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{source.name} for sm_{oldest.digits}{oldest.suffix}:\n{done.stderr[-3000:]}"
