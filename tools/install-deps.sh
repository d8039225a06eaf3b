#!/usr/bin/env bash
# Installs what building and testing culina needs on a Debian/Ubuntu machine:
# apt packages (when missing, as root), a venv with the Python packages, and, where no CUDA
# toolkit is installed, CUDA PYPI_CUDA from NVIDIA's PyPI packages into that venv; and a second
# venv, TORCH_VENV, with PyTorch for the torch tests (tools/requirements-torch.txt says why apart).
# Usage: tools/install-deps.sh VENV_DIR PYTHON PYPI_CUDA TORCH_VENV [TORCH_WHEELS]
#   TORCH_WHEELS: a folder of wheels pip may take torch and its needs from (--find-links)
set -euo pipefail
venv=${1:-.venv}
python=${2:-python3}
pypi_cuda=${3:-13.0}
torch_venv=${4:-build/venv-torch}
torch_wheels=${5:-}

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

# venv_with VENV PYTHON REQUIREMENTS [pip options]: VENV holds REQUIREMENTS (a stamp of the file
# skips pip when nothing changed).
venv_with() {
  local dir=$1 interpreter=$2 requirements=$3
  shift 3
  local stamp="$dir/.requirements.sha256" want
  want=$(sha256sum <"$requirements" | cut -d' ' -f1)
  if [[ ! -x $dir/bin/python ]]; then
    say "creating venv $dir with $($interpreter --version)"
    "$interpreter" -m venv "$dir"
  fi
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    say "installing Python packages from $requirements into $dir"
    "$dir/bin/python" -m pip install -q --upgrade pip "$@"
    "$dir/bin/python" -m pip install -q -r "$requirements" "$@"
    echo "$want" >"$stamp"
  else
    say "venv $dir: up to date"
  fi
}
venv_with "$venv" "$python" tools/requirements.txt
# The same interpreter as $venv, so that the extension $venv builds in place imports here too.
venv_with "$torch_venv" "$venv/bin/python" tools/requirements-torch.txt ${torch_wheels:+--find-links "$torch_wheels"}

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

