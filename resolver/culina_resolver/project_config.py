"""What pyproject.toml tells the build adapter: the project's name and version, and the adapter's
table (the extension to build, the environment-variable prefix, the release URL template, the
release architectures per CUDA major). The one place that reads the file; docs/ADOPTING.md lists
the keys.

The table is `[tool.culina-resolver]` in any project that adopts the resolver; culina names its
own `[tool.culina]`. A project has one of the two.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import sys
from pathlib import Path

from .adapter_error import AdapterError
from .prebuilt_wheel import normalized_name

# The build record the build writes beside the extension (cuda_build_ext) and delivery amends.
BUILD_RECORD = "_build_info.json"

TABLES = ("culina-resolver", "culina")
ACCEPTED_PREFIX = "upper-case letters, digits and underscores ending in '_', such as 'CULINA_'"


class ConfigError(AdapterError, ValueError):
    """pyproject.toml cannot configure the adapter; the message names the file, the key and the fix."""

    context = "cannot build"


def project_root() -> Path:
    """The project being built: the PEP 517 working directory, where a frontend runs every hook and
    setuptools every command, whether the backend is installed (culina-resolver) or in the tree."""
    return Path.cwd()


def load_pyproject(root: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomli (bundled into the sdist, see bundled_python)
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ConfigError(f"reading {root / 'pyproject.toml'} on Python 3.10 needs tomli, which is not installed "
                              f"in this build environment ({sys.executable})",
                              f'Fix: {sys.executable} -m pip install "tomli>=1.1"') from None
    try:
        with open(root / "pyproject.toml", "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{root} has no pyproject.toml, and the project the build adapter builds is the folder it "
                          "runs in", "Fix: run the build in the project's root (where pyproject.toml is)") from None


def redacted(value: str) -> str:
    """A URL as messages show it, as the helper's redacted_url (fetch/url_policy.cpp) shows it:
    without its userinfo (all before the last @ of the authority, so a password holding @ goes
    whole) and without its query and fragment (?token=...), so no credential reaches a log. A
    value without :// is shown as it is."""
    scheme_end = value.find("://")
    if scheme_end < 0:
        return value
    authority_begin = scheme_end + 3
    path_begin = next((i for i in range(authority_begin, len(value)) if value[i] in "/?#"), len(value))
    path_end = next((i for i in range(path_begin, len(value)) if value[i] in "?#"), len(value))
    authority = value[authority_begin:path_begin]
    return value[:authority_begin] + authority[authority.rfind("@") + 1:] + value[path_begin:path_end]


def release_base(path: Path, table: str, template, version: str) -> str:
    """The release URL template with {version} filled in, or ConfigError naming the template."""
    fix = "a URL with {version} as its only placeholder, e.g. 'https://github.com/o/r/releases/download/v{version}'"
    if not isinstance(template, str):
        raise ConfigError(f"{path}: {table} release_url = {template!r} must be a string: {fix}")
    try:
        return template.format(version=version).rstrip("/")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"{path}: {table} release_url = {redacted(template)!r} is not a template the build adapter can fill "
                          f"({type(exc).__name__}: {exc}): {fix}") from None


@dataclasses.dataclass(frozen=True)
class ProjectConfig:
    name: str                         # the distribution name ([project] name)
    version: str
    extension: str                    # the extension module the build compiles ("culina._C")
    env_prefix: str                   # of every variable the adapter and the helper read ("CULINA_")
    release_url: str                  # base URL of the release assets, {version} filled in
    # CUDA major -> the list a release wheel carries (<prefix>CUDA_ARCHS=all)
    release_archs: dict[int, str] = dataclasses.field(hash=False)
    table: str = "[tool.culina-resolver]"  # where these came from, for messages
    # A folder of .cu sources -> the one arch-specific target its kernels are written for
    # ("csrc/cuda/hopper/" -> "9.0a"): built for that target alone wherever a build's list holds
    # its base architecture (cuda_build_ext.arch_specific_targets).
    arch_specific_sources: dict[str, str] = dataclasses.field(default_factory=dict, hash=False)

    @classmethod
    def load(cls, root: Path) -> "ProjectConfig":
        path = root / "pyproject.toml"
        pyproject = load_pyproject(root)
        project, tools = pyproject.get("project", {}), pyproject.get("tool", {})
        found = [name for name in TABLES if name in tools]
        if len(found) != 1:
            raise ConfigError(f"{path}: {'has both ' + ' and '.join(f'[tool.{n}]' for n in found) if found else 'has no [tool.culina-resolver] table'}"
                              "; the build adapter reads exactly one (docs/ADOPTING.md lists its keys)")
        table, tool = f"[tool.{found[0]}]", tools[found[0]]
        if not project.get("name") or not project.get("version"):
            raise ConfigError(f"{path}: [project] needs a static name and version; the release manifest and the "
                              "wheel names are made of them")
        name = project["name"]
        extension = tool.get("extension", f"{normalized_name(name)}._C")
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", extension):
            raise ConfigError(f"{path}: {table} extension = {extension!r} must be a module inside a package, "
                              "such as 'culina._C'")
        prefix = tool.get("env_prefix", f"{normalized_name(name).upper()}_")
        if not isinstance(prefix, str) or not re.fullmatch(r"[A-Z][A-Z0-9_]*_", prefix):
            raise ConfigError(f"{path}: {table} env_prefix = {prefix!r}: accepted: {ACCEPTED_PREFIX}")
        if "release_url" not in tool or "release_archs" not in tool:
            raise ConfigError(f"{path}: {table} needs release_url (a URL template with {{version}}) and a "
                              f"[{table[1:-1]}.release_archs] table of CUDA major to architecture list")
        archs = tool["release_archs"]
        if not isinstance(archs, dict) or not all(str(k).isdigit() and isinstance(v, str) for k, v in archs.items()):
            raise ConfigError(f"{path}: {table} release_archs = {archs!r} must be a table of CUDA major to list, "
                              f'e.g. [{table[1:-1]}.release_archs] "13" = "7.5;8.0;12.0+PTX"')
        special = tool.get("arch_specific_sources", {})
        if not isinstance(special, dict) or not all(
                isinstance(folder, str) and folder.endswith("/") and isinstance(arch, str)
                and re.fullmatch(r"\d+\.\da", arch) for folder, arch in special.items()):
            raise ConfigError(f"{path}: {table} arch_specific_sources = {special!r} must be a table of source folder "
                              f'(ending in "/") to one arch-specific target, e.g. [{table[1:-1]}.arch_specific_sources] '
                              '"csrc/cuda/hopper/" = "9.0a"')
        return cls(name, project["version"], extension, prefix, release_base(path, table, tool["release_url"],
                                                                             project["version"]),
                   {int(major): value for major, value in archs.items()}, table, dict(special))

    @property
    def package(self) -> str:
        """The import package that holds the extension ("culina")."""
        return self.extension.rsplit(".", 1)[0]

    @property
    def build_record_member(self) -> str:
        """Where a wheel holds the build record: beside the extension."""
        return f"{self.package.replace('.', '/')}/{BUILD_RECORD}"

    @property
    def cache_name(self) -> str:
        """The folder of this project's cache under XDG_CACHE_HOME or ~/.cache."""
        return normalized_name(self.name).replace("_", "-")

    def release_archs_for(self, cuda_version: str) -> str:
        """The release list for a toolkit of this CUDA version ("13.0"): its major's entry."""
        major = int(cuda_version.split(".")[0])
        if major not in self.release_archs:
            raise ConfigError(f"pyproject.toml [{self.table[1:-1]}.release_archs] has no list for CUDA {major} (toolkit "
                              f"{cuda_version}; listed: {', '.join(map(str, sorted(self.release_archs)))}): add a "
                              f'"{major}" entry, or build with a toolkit of a listed major')
        return self.release_archs[major]

    @property
    def newest_release_archs(self) -> str:
        """The list of the newest CUDA major listed."""
        return self.release_archs[max(self.release_archs)]


@functools.lru_cache(maxsize=None)
def current() -> ProjectConfig:
    """The configuration of the project this adapter builds, read once per process."""
    return ProjectConfig.load(project_root())
