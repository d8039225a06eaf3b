"""setuptools `build_ext` that compiles an extension's `.cu` sources with nvcc.

One job: turn the extension's CUDA sources into objects for the requested architectures,
link the CUDA runtime statically (so the module loads with no driver installed), and write
the build record `_build_info.json` next to the built module. With no nvcc it builds the
C++ sources alone, defines <prefix>CPU_ONLY (CULINA_CPU_ONLY for culina), and says so loudly.

What to build comes as a BuildPlan from resolving_bdist_wheel (the resolver's decision); without
one (`setup.py build_ext`, editable installs, release builds) <prefix>CUDA_ARCHS, parsed in
adapter_settings (`native`, `all`, or a list such as `8.0;9.0;10.0+PTX`, `80;90`, `9.0a`), or
`all`. The toolkit is the decision's (decided_toolkit): the installed one its probe ran, or
NVIDIA's PyPI packages that pip installed for this build; nothing is searched for then. Only a
build with no decision takes the first nvcc in TOOLKIT_SEARCH. The job pool's settings are in
compile_pool.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension
from setuptools.command.build_ext import build_ext

from . import adapter_settings
from . import compile_pool
from . import cuda_facts
from . import helper_build
from . import install_resolution
from . import project_config
from . import pypi_toolkit
from .adapter_error import AdapterError, exits_with_message
from .adapter_settings import ACCEPTED_ARCHS, ARCHS, CCACHE, Arch, ArchSyntaxError
from .compile_pool import say
from .helper_client import Decision, HelperAnswerError, InstalledToolkit, PypiToolkit
from .project_config import BUILD_RECORD, ProjectConfig

NVCC_TIME_LIMIT_S = 60  # `nvcc --version` and `--list-gpu-arch` answer in well under a second


class BuildError(AdapterError):
    """A build setting or tool that cannot be used; the message says which, the hint what to do."""

    context = "cannot build"


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """What resolving_bdist_wheel hands this build from the resolver's decision."""

    cpu_only: bool
    archs: str                  # <prefix>CUDA_ARCHS syntax; unused when cpu_only
    decision: Decision | None   # its toolkit compiles, its document goes into the build record; None: no resolution
    archs_variable: str | None = None  # the variable archs came from, for messages; None: the decision or default


@dataclasses.dataclass(frozen=True)
class Toolkit:
    root: Path
    nvcc: Path
    version: str  # release, "13.0"
    full_version: str  # "13.0.88"
    source: str  # where it was found: "CUDA_HOME", "PATH", "PyPI packages", ...

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def cudart_static(self) -> Path:
        for lib in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            candidate = self.root / lib / "libcudart_static.a"
            if candidate.exists():
                return candidate
        raise BuildError(f"libcudart_static.a not found under {self.root}: the CUDA toolkit there "
                         "is incomplete; install the toolkit's cudart development files")


# For a build with no decision (find_toolkit); the helper's probe looks in the same order
# (probe/toolkit_probe.cpp), so such a build takes what a decision would have named.
TOOLKIT_SEARCH = "CUDA_HOME, CUDA_PATH, PATH, the PyPI toolkit in this Python's site-packages, /usr/local/cuda"


def _nvcc_output(nvcc: Path, argument: str, source: str) -> str:
    """What `nvcc argument` prints; an nvcc that cannot run, fails or hangs is a BuildError naming
    it and where it came from, never a traceback."""
    command = f"`{nvcc} {argument}` (the nvcc from {source})"
    fix = ("Fix: repair or remove that toolkit, or set CUDA_HOME to a working one (the folder holding bin/nvcc), "
           "and install again")
    try:
        done = subprocess.run([str(nvcc), argument], capture_output=True, text=True, timeout=NVCC_TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{command} did not answer within {NVCC_TIME_LIMIT_S} s", fix) from None
    except OSError as error:
        raise BuildError(f"{command} cannot be run ({error.strerror})", fix) from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["nothing"]
        raise BuildError(f"{command} failed with exit status {done.returncode}, saying: {said[0][:300]}", fix)
    return done.stdout


def toolkit_at(nvcc: Path, source: str) -> Toolkit:
    nvcc = nvcc.resolve()
    out = _nvcc_output(nvcc, "--version", source)
    match = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", out)
    if not match:
        raise BuildError(f"cannot read the version from `{nvcc} --version`:\n{out}")
    root = nvcc.parent.parent
    if source != "PyPI packages" and pypi_toolkit.is_pypi_root(root):
        source = f"PyPI packages, through {source}"
    return Toolkit(root, nvcc, match.group(1), match.group(2), source)


def decided_toolkit(decision: Decision) -> Toolkit:
    """The toolkit the resolver's decision names, and no other: the installed one its probe ran, or
    the PyPI packages pip installed into this build's environment for it (get_requires_for_build_wheel
    asked for them). Raises BuildError when that toolkit is not here or does not run."""
    decided = decision.toolkit
    if isinstance(decided, InstalledToolkit):
        if not decided.nvcc.is_file():
            raise BuildError(f"the resolver decided a build with {decided.nvcc} (found in {decided.found_in}), which "
                             "is no longer there", "Fix: run the install again")
        return toolkit_at(decided.nvcc, f"the resolver's probe, in {decided.found_in}")
    if isinstance(decided, PypiToolkit):
        wanted = " ".join(pypi_toolkit.requirements_up_to(decided.cuda_at_most))
        root = pypi_toolkit.installed_root()
        if root is None:
            raise BuildError(f"the resolver decided a build with the CUDA toolkit from NVIDIA's PyPI packages (up to "
                             f"{decided.cuda_at_most}), which this build environment does not have",
                             f"Fix: with --no-build-isolation install it first: pip install {wanted}")
        toolkit = toolkit_at(root / "bin" / "nvcc", "PyPI packages")
        if toolkit.major != decided.major or _version_tuple(toolkit.version) > _version_tuple(decided.cuda_at_most):
            raise BuildError(f"the PyPI toolkit in this build environment ({root}) is CUDA {toolkit.version}; the "
                             f"resolver decided CUDA {decided.major} up to {decided.cuda_at_most}, what the driver runs",
                             f"Fix: pip install {wanted}")
        return toolkit
    raise BuildError(f"the resolver's {decision.action} decision names no CUDA toolkit to build with",
                     "Fix: run the install again")


def find_toolkit() -> Toolkit | None:
    """The first nvcc in TOOLKIT_SEARCH's order; None when there is none."""
    candidates = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            nvcc = Path(os.environ[var]) / "bin" / "nvcc"
            if not nvcc.exists():
                raise BuildError(f"{var}={os.environ[var]} has no bin/nvcc: point {var} at a CUDA "
                                 f"toolkit root (the folder holding bin/nvcc), or unset it")
            candidates.append((nvcc, var))
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append((Path(on_path), "PATH"))
    pypi = pypi_toolkit.installed_root()
    if pypi:
        candidates.append((pypi / "bin" / "nvcc", "PyPI packages"))
    candidates.append((Path("/usr/local/cuda/bin/nvcc"), "/usr/local/cuda"))
    for nvcc, source in candidates:
        if nvcc.exists():
            return toolkit_at(nvcc, source)
    return None


def native_archs(variable: str, gpus: list[str] | None) -> str:
    """The compute capabilities of the GPUs the helper's probe found, as a list for parse_archs."""
    caps = sorted(set(gpus or []))
    if not caps:
        raise BuildError(f"{variable}=native but the probe found no GPU here: name the architectures "
                         f"instead, e.g. {variable}='8.0;9.0', or use {variable}=all")
    return ";".join(caps)


def plan_gpus(plan: BuildPlan, settings: adapter_settings.AdapterSettings) -> list[str] | None:
    """The GPUs `native` means: the decision's (what the probe saw when it decided), else the probe's
    now; None when the plan does not ask for `native`."""
    if plan.cpu_only or plan.archs.strip() != "native":
        return None
    if plan.decision is not None:
        return list(plan.decision.gpus)
    try:
        return install_resolution.probed_gpus(settings)
    except (install_resolution.ResolutionError, HelperAnswerError) as error:
        raise BuildError(f"{settings.var(ARCHS)}=native: {error}") from None


def supported_digits(toolkit: Toolkit) -> list[str]:
    out = _nvcc_output(toolkit.nvcc, "--list-gpu-arch", toolkit.source)
    return sorted({m for m in re.findall(r"compute_(\d+)", out)}, key=int)


def parse_archs(value: str, toolkit: Toolkit, project: ProjectConfig | None = None,
                gpus: list[str] | None = None, variable: str | None = None) -> tuple[list[Arch], list[Arch]]:
    """(SASS targets, PTX targets) from a <prefix>CUDA_ARCHS value (`variable`'s, which messages
    name; default <prefix>CUDA_ARCHS); `all` is the project's release list (the project this
    adapter builds unless another is given), `native` the probe's `gpus`."""
    project = project or project_config.current()
    variable = variable or project.env_prefix + ARCHS
    spec = value.strip()
    if spec == "all":
        try:
            spec = project.release_archs_for(toolkit.version)
        except ValueError as error:
            raise BuildError(f"{variable}=all: {error}") from None
    elif spec == "native":
        spec = native_archs(variable, gpus)
    known = supported_digits(toolkit)

    ours = project.env_prefix + ARCHS
    overridden_by = "" if variable == ours else f"; or set {ours}, which is read before {variable}"

    def fail(why: str) -> BuildError:
        return BuildError(f"{variable}={value!r}: {why}. Accepted: {ACCEPTED_ARCHS}; nvcc "
                          f"{toolkit.version} targets {', '.join(d[:-1] + '.' + d[-1] for d in known)}{overridden_by}")

    try:
        targets = adapter_settings.arch_list(spec)
    except ArchSyntaxError as error:
        raise fail(str(error)) from None
    sass: list[Arch] = []
    ptx: list[Arch] = []
    oldest = cuda_facts.facts()["toolkit_oldest_arch"].get(str(toolkit.major))  # "7.5" for CUDA 13
    for target in targets:
        digits = target.arch.digits
        if digits not in known and oldest and int(digits) < int(oldest.replace(".", "")):
            raise fail(f"{target.entry!r}: CUDA {toolkit.major} targets {oldest} and newer only; build older "
                       f"GPUs with a CUDA {toolkit.major - 1} toolkit")
        if digits not in known:
            raise fail(f"{target.entry!r} is not an architecture nvcc {toolkit.version} can target")
        if target.arch not in sass:
            sass.append(target.arch)
        if target.ptx and target.arch not in ptx:
            ptx.append(target.arch)
    return sass, ptx


def gencode_flags(sass: list[Arch], ptx: list[Arch]) -> list[str]:
    flags = [f"-gencode=arch=compute_{a.digits}{a.suffix},code=sm_{a.digits}{a.suffix}" for a in sass]
    flags += [f"-gencode=arch=compute_{a.digits}{a.suffix},code=compute_{a.digits}{a.suffix}"
              for a in ptx]
    return flags


class CudaExtension(Extension):
    """An Extension whose sources may include .cu files. `source_flags` adds compiler flags for
    single C++ sources (after the extension's own, so they win)."""

    def __init__(self, name, sources, *args, source_flags: dict[str, list[str]] | None = None, **kwargs):
        super().__init__(name, sources, *args, **kwargs)
        self.source_flags = dict(source_flags or {})


def arch_specific_targets(folders: dict[str, str], sass: list[Arch], toolkit: Toolkit) -> dict[str, Arch]:
    """The folders of `folders` (the project's arch_specific_sources: folder -> "9.0a") that a
    build of SASS `sass` with `toolkit` compiles for their target: those whose target's base
    architecture is listed, where the toolkit knows the target's suffix (sm_90a from CUDA 12.0 on:
    cuda_facts.json). Their .cu files are compiled for that target alone, with the macro
    <prefix>SM90A defined so that their host code knows; elsewhere they are compiled as the other
    sources and hold no code for it."""
    out = {}
    for folder, label in folders.items():
        (target,) = adapter_settings.arch_list(label)
        if not any(a.digits == target.arch.digits for a in sass):
            continue
        first_cuda = cuda_facts.facts()["arch_suffixes"][target.arch.suffix]["first_cuda"]
        if _version_tuple(toolkit.version) < _version_tuple(first_cuda):
            say(f"{folder}: nvcc {toolkit.version} cannot target {label} (CUDA {first_cuda} and newer): its kernels "
                "are left out, the portable ones serve")
            continue
        out[folder] = target.arch
    return out


def _version_tuple(version: str) -> tuple[int, ...]:
    """A CUDA release ("13.0") as numbers, major and minor, for comparing."""
    return tuple(int(part) for part in version.split(".")[:2])


class CudaBuildExt(build_ext):
    """build_ext for extensions whose sources mix .cpp and .cu files."""

    def initialize_options(self):
        super().initialize_options()
        self.build_plan: BuildPlan | None = None  # set by resolving_bdist_wheel before the build runs

    @exits_with_message
    def run(self):
        adapter_settings.current()  # `setup.py build_ext` and editable builds start here
        super().run()

    def build_extension(self, ext):
        settings = adapter_settings.current()
        plan = self.build_plan or BuildPlan(cpu_only=False, archs=settings.cuda_archs or "all", decision=None,
                                            archs_variable=settings.cuda_archs_variable)
        # The resolver's build_cpu decision builds without CUDA even where a toolkit is installed.
        cpu_only, decision = plan.cpu_only, plan.decision
        cpu_only_macro = settings.var("CPU_ONLY")  # what the extension's sources test for a build without CUDA
        toolkit = None if cpu_only else decided_toolkit(decision) if decision else find_toolkit()
        ext = copy.copy(ext)  # what this build adds stays off the distribution's Extension
        ext.define_macros, ext.extra_link_args = list(ext.define_macros), list(ext.extra_link_args)
        cu_sources = [s for s in ext.sources if s.endswith(".cu")]
        cpp_sources = [s for s in ext.sources if not s.endswith(".cu")]
        record = {"kind": "release" if settings.release_build else "local",
                  "variant": cuda_facts.variant_label(None), "cpu_only": True,
                  "cuda_version": None, "nvcc_version": None, "toolkit_source": None, "sass_archs": [], "ptx_archs": [],
                  "arch_specific_sass": [],
                  "compiler": compiler_version(self.compiler.compiler_so[0]),
                  "resolver": dict(decision.document) if decision else None,
                  "cache_root": str(helper_build.cache_root(settings)) if decision else None}
        nvcc_flags: list[str] = []
        special_flags: dict[str, list[str]] = {}  # folder -> nvcc flags of its arch-specific build
        if cpu_only:
            say("building the CPU-only module, as the resolver decided")
            ext.define_macros.append((cpu_only_macro, "1"))
        elif toolkit is None:
            say("=" * 72)
            say(f"no nvcc found ({TOOLKIT_SEARCH}): building the CPU-ONLY")
            say("module. GPU arrays will be refused; install a CUDA toolkit and rebuild for GPUs.")
            say("=" * 72)
            ext.define_macros.append((cpu_only_macro, "1"))
        else:
            sass, ptx = parse_archs(plan.archs, toolkit, settings.project, plan_gpus(plan, settings), plan.archs_variable)
            say(f"nvcc {toolkit.full_version} at {toolkit.nvcc} (from {toolkit.source}); SASS {[a.label for a in sass]}, "
                f"PTX {[a.label for a in ptx]}")
            nvcc_flags = cuda_flags(ext, sass, ptx)
            # Folders holding none of this extension's sources (as setup.py names them, relative to
            # the project) add no code, so the record does not claim their target.
            special = {folder: arch for folder, arch in
                       arch_specific_targets(settings.project.arch_specific_sources, sass, toolkit).items()
                       if any(src.startswith(folder) for src in cu_sources)}
            for folder, arch in special.items():
                say(f"{folder}: SASS {arch.label} only (its kernels are written for it)")
                special_flags[folder] = [*cuda_flags(ext, [arch], []), f"-D{settings.var('SM' + arch.digits + arch.suffix.upper())}"]
            ext.extra_link_args += [str(toolkit.cudart_static()), "-lrt", "-lpthread", "-ldl"]
            record.update(variant=cuda_facts.variant_label(toolkit.version), cpu_only=False,
                          cuda_version=toolkit.version, nvcc_version=toolkit.full_version, nvcc=str(toolkit.nvcc),
                          toolkit_source=toolkit.source,
                          sass_archs=[a.label for a in sass], ptx_archs=[a.label for a in ptx],
                          # what the arch-specific folders add beside the list (the module holds both)
                          arch_specific_sass=sorted({a.label for a in special.values()}))
        objects = self._compile(ext, cpp_sources, cu_sources if toolkit else [], toolkit, nvcc_flags, special_flags,
                                settings)
        # Every object is built above; setuptools only links them.
        ext.depends = [*ext.depends, *ext.sources]
        ext.sources, ext.extra_objects = [], [*objects, *ext.extra_objects]
        super().build_extension(ext)
        # Beside the module in the build tree (what a wheel packs); copy_extensions_to_source
        # carries it into the source tree for in-place builds.
        out = Path(self.build_lib, *ext.name.split(".")[:-1], BUILD_RECORD)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=2) + "\n")
        say(f"build record: {out}")

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            package = ".".join(ext.name.split(".")[:-1])
            source = Path(self.build_lib, *package.split("."), BUILD_RECORD)
            target = Path(build_py.get_package_dir(package), BUILD_RECORD)
            self.copy_file(str(source), str(target), level=self.verbose)

    def _compile(self, ext, cpp_sources, cu_sources, toolkit, nvcc_flags, special_flags, settings) -> list[str]:
        """Objects for every source, compiling only those older than their inputs; the C++ and
        CUDA files share one job pool (compile_pool). A .cu file under a folder of `special_flags`
        takes that folder's flags instead of `nvcc_flags`."""
        headers = [str(p) for d in ext.include_dirs for pattern in ("*.h", "*.cuh") for p in Path(d).rglob(pattern)]
        newest_header = max((os.path.getmtime(p) for p in headers), default=0.0)
        ccache = compile_pool.ccache_prefix()
        if ccache:
            say(f"ccache in front of the compilers ({ccache[0]}; {settings.var(CCACHE)}=0 turns it off)")
        # Python's CFLAGS carry -g; debug info doubles the objects and slows the bindings'
        # compile. `build_ext --debug` still adds it.
        compiler = copy.copy(self.compiler)
        for attribute in ("compiler_so", "compiler_so_cxx"):  # newer setuptools compiles C++ with the latter
            if hasattr(compiler, attribute):
                setattr(compiler, attribute, [*ccache, *[a for a in getattr(compiler, attribute) if a != "-g"]])
        cpp_base = [*getattr(compiler, "compiler_so_cxx", compiler.compiler_so), *ext.extra_compile_args]
        macros = [*ext.define_macros, *[(name,) for name in ext.undef_macros]]
        objects, jobs = [], []
        for src in cpp_sources:
            flags = [*ext.extra_compile_args, *ext.source_flags.get(src, [])]
            out_dir = Path(self.build_temp) / "cxx" / _tag([*cpp_base, *flags, repr(macros)])
            obj = out_dir / Path(src).with_suffix(".o")
            objects.append(str(obj))
            if not _stale(src, obj, newest_header):
                say(f"up to date: {src}")
                continue

            def compile_cpp(src=src, out_dir=out_dir, flags=flags):
                compiler.compile([src], output_dir=str(out_dir), macros=macros, include_dirs=ext.include_dirs,
                                 debug=self.debug, extra_postargs=flags, depends=ext.depends)
            jobs.append(compile_pool.CompileJob(src, compile_cpp))
        if cu_sources:
            for src in sorted(cu_sources, key=os.path.getsize, reverse=True):
                flags = next((f for folder, f in special_flags.items() if src.startswith(folder)), nvcc_flags)
                obj = Path(self.build_temp) / "cuda" / _tag([str(toolkit.nvcc), *flags]) / Path(src).with_suffix(".o")
                objects.append(str(obj))
                if not _stale(src, obj, newest_header):
                    say(f"up to date: {src}")
                    continue
                command = [*ccache, str(toolkit.nvcc), *flags, "-c", src, "-o", str(obj)]
                jobs.append(compile_pool.CompileJob(src, lambda src=src, command=command: _run_nvcc(src, command)))
        try:
            compile_pool.run_all(jobs)
        except ValueError as error:
            raise BuildError(str(error)) from None
        return objects


def cuda_flags(ext, sass: list[Arch], ptx: list[Arch]) -> list[str]:
    return ["-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xfatbin=-compress-all", "-DNDEBUG",
            *[f"-I{d}" for d in ext.include_dirs],
            *[f"-D{name}={value}" if value is not None else f"-D{name}" for name, value in ext.define_macros],
            *gencode_flags(sass, ptx)]


def _tag(parts: list[str]) -> str:
    """A folder name per distinct command line, so objects of another configuration are never reused."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _stale(src: str, obj: Path, newest_header: float) -> bool:
    return not obj.exists() or obj.stat().st_mtime <= max(newest_header, os.path.getmtime(src))


def _run_nvcc(src: str, command: list[str]) -> None:
    Path(command[command.index("-o") + 1]).parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"nvcc failed on {src} (exit {proc.returncode}):\n"
                         f"{' '.join(command)}\n{proc.stdout}{proc.stderr}")


def compiler_version(executable: str) -> str:
    try:
        out = subprocess.run([executable, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return executable
    return out.splitlines()[0].strip() if out else executable
