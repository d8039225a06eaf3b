#!/usr/bin/env bash
# Installs what building and testing culina needs on a Debian/Ubuntu machine:
# apt packages (when missing, as root), a venv with the Python packages, and, where no CUDA
# toolkit is installed, CUDA PYPI_CUDA from NVIDIA's PyPI packages into that venv.
# Usage: tools/install-deps.sh VENV_DIR PYTHON PYPI_CUDA
set -euo pipefail
venv=${1:-.venv}
python=${2:-python3}
pypi_cuda=${3:-13.0}

say() { printf '[deps] %s\n' "$*"; }

# command-or-file to check -> Debian package that provides it
declare -A needs=(
  [cmake]=cmake
  [g++]=g++
  [make]=make
  [clang++]=clang
  [openssl]=openssl
  [/usr/include/nlohmann/json.hpp]=nlohmann-json3-dev
  [/usr/include/gtest/gtest.h]=libgtest-dev
  [/usr/include/cpuinfo.h]=libcpuinfo-dev
  [/usr/lib/x86_64-linux-gnu/libcurl.so.4]=libcurl4
  [/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a]=libclang-rt-14-dev
)
missing=()
for thing in "${!needs[@]}"; do
  if [[ $thing == /* ]]; then [[ -e $thing ]] || missing+=("${needs[$thing]}")
  else command -v "$thing" >/dev/null || missing+=("${needs[$thing]}"); fi
done
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    say "installing apt packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "missing packages: ${missing[*]} — install them (sudo apt-get install ${missing[*]}) and run again"
    exit 1
  fi
else
  say "apt packages: all present"
fi

stamp="$venv/.requirements.sha256"
want=$(cat tools/requirements.txt | sha256sum | cut -d' ' -f1)
if [[ ! -x $venv/bin/python ]]; then
  say "creating venv $venv with $($python --version)"
  "$python" -m venv "$venv"
fi
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  say "installing Python packages from tools/requirements.txt into $venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r tools/requirements.txt
  echo "$want" >"$stamp"
else
  say "venv $venv: up to date"
fi

# The build's own toolkit search (cuda_build_ext.find_toolkit) decides whether one is needed.
toolkit=$("$venv/bin/python" -c 'import sys; sys.path.insert(0, "resolver/adapter"); import cuda_build_ext as b
t = b.find_toolkit(); print(f"{t.full_version} from {t.source}" if t else "")')
if [[ -n $toolkit ]]; then
  say "CUDA toolkit: nvcc $toolkit"
else
  say "no CUDA toolkit found: installing CUDA $pypi_cuda from NVIDIA's PyPI packages into $venv"
  mapfile -t requirements < <("$venv/bin/python" resolver/adapter/pypi_toolkit.py --requirements "$pypi_cuda")
  "$venv/bin/python" -m pip install -q "${requirements[@]}"
fi

