"""At import: does this installed build fit this machine? A CUDA build on a driver too old for it,
or GPUs its binary has no code for, get one warning that says why and gives the reinstall
command. NumPy arrays keep working either way, so this warns rather than failing the import;
GPU calls then raise UnsupportedDeviceError with the same reason."""
from __future__ import annotations

import warnings

from . import _C, _build


class BuildMismatchWarning(RuntimeWarning):
    """The installed culina cannot run on some or all of this machine's GPUs."""


def problems() -> list[str]:
    if not _C.built_with_cuda():
        return []
    driver = _C.driver_version()
    driver_problem = _build.driver_problem(driver)
    if driver_problem or driver == 0:
        return [driver_problem] if driver_problem else []
    found = []
    for info in _C.devices():
        if not info["supported"]:
            major, minor = info["capability"]
            found.append(f"GPU {info['ordinal']} '{info['name']}' (compute capability {major}.{minor}) has no code in "
                         f"this binary ({_build.describe_archs(_build.build_record())}); "
                         f"{_build.how_to_fit((major, minor))}")
    return found


def warn_if_mismatched() -> None:
    for problem in problems():
        warnings.warn(f"culina: {problem}", BuildMismatchWarning, stacklevel=3)
