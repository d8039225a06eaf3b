#!/usr/bin/env bash
# Installs what culina needs on a Debian/Ubuntu machine, for one of two jobs:
#   demo: what `make demo` uses: the apt packages that build the helper and the release wheel,
#         a venv with tools/requirements-demo.txt and, where no CUDA toolkit is installed, CUDA
#         PYPI_CUDA from NVIDIA's PyPI packages into that venv;
#   test: all of that, plus GoogleTest, clang and the fuzzers' runtime, ccache (the tests build the
#         same sources many times), tools/requirements.txt,
#         and a second venv, TORCH_VENV, with PyTorch for the torch tests
#         (tools/requirements-torch.txt says why it is apart).
# Usage: tools/install-deps.sh demo VENV_DIR PYTHON PYPI_CUDA
#        tools/install-deps.sh test VENV_DIR PYTHON PYPI_CUDA TORCH_VENV [TORCH_WHEELS]
#   TORCH_WHEELS: a folder of wheels uv may take torch and its needs from (--find-links)
set -euo pipefail
job=${1:?usage: tools/install-deps.sh demo|test VENV_DIR PYTHON PYPI_CUDA [TORCH_VENV [TORCH_WHEELS]]}
venv=${2:-.venv}
python=${3:-python3}
pypi_cuda=${4:-13.0}
torch_venv=${5:-build/venv-torch}
torch_wheels=${6:-}
case $job in
  demo) requirements=tools/requirements-demo.txt ;;
  test) requirements=tools/requirements.txt ;;
  *) printf '[deps] job %q is not understood; accepted: demo, test\n' "$job" >&2; exit 2 ;;
esac

say() { printf '[deps] %s\n' "$*"; }

# command-or-file to check -> Debian package that provides it: the demo's (the helper, the
# release build), then the tests' own.
declare -A needs=(
  [cmake]=cmake
  [g++]=g++
  [make]=make
  [/usr/include/nlohmann/json.hpp]=nlohmann-json3-dev
  [/usr/include/cpuinfo.h]=libcpuinfo-dev
  [/usr/lib/x86_64-linux-gnu/libcurl.so.4]=libcurl4
)
if [[ $job == test ]]; then
  needs+=(
    [ccache]=ccache
    [clang++]=clang
    [openssl]=openssl
    [/usr/include/gtest/gtest.h]=libgtest-dev
    [/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a]=libclang-rt-14-dev
  )
fi
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

# room_for DIR GIB WHAT: stops with a message naming the folder and the shortfall when the disk
# under DIR has less than GIB GiB free, rather than pip's "No space left on device" halfway in.
room_for() {
  local dir=$1 need=$2 what=$3 probe free
  probe=$dir
  until [[ -e $probe ]]; do probe=$(dirname "$probe"); done
  free=$(df -Pk "$probe" | awk 'NR == 2 { print int($4 / 1048576) }')
  if ((free < need)); then
    say "$what needs about $need GiB free under $dir; its disk has $free GiB (df -h $probe)." \
        "Free some space there, or give make a folder on a larger disk (VENV=... or TORCH_VENV=...)."
    exit 1
  fi
}

# needs_of FILE...: a hash of the requirement FILEs and the files they include with -r, the
# venv's stamp: nothing is installed again while it is unchanged.
needs_of() {
  local file
  for file; do
    (cd "$(dirname "$file")" && cat "$(basename "$file")" $(sed -n 's/^-r[[:space:]]*//p' "$(basename "$file")"))
  done | sha256sum | cut -d' ' -f1
}

# venv_with VENV PYTHON REQUIREMENTS GIB WANT INSTALL...: VENV holds REQUIREMENTS, installed by
# the command `INSTALL... -r REQUIREMENTS`, which needs about GIB GiB of disk; WANT (needs_of)
# becomes the stamp.
venv_with() {
  local dir=$1 interpreter=$2 requirements=$3 gib=$4 want=$5
  shift 5
  local stamp="$dir/.$(basename "$requirements").sha256"
  if [[ ! -x $dir/bin/python ]]; then
    say "creating venv $dir with $($interpreter --version)"
    "$interpreter" -m venv "$dir"
  fi
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    room_for "$dir" "$gib" "installing $requirements"
    say "installing Python packages from $requirements into $dir"
    "$@" -r "$requirements"
    echo "$want" >"$stamp"
  else
    say "venv $dir: up to date"
  fi
}

pip_install() {
  "$venv/bin/python" -m pip install -q --upgrade pip && "$venv/bin/python" -m pip install -q "$@"
}
venv_with "$venv" "$python" "$requirements" 1 "$(needs_of "$requirements")" pip_install

# uv (from $venv) unpacks each wheel as it arrives and hard-links the files into the venv from a
# cache in the venv's own folder (the same disk, so nothing is copied), removed afterwards: the
# disk holds the installed torch and little more, where pip kept every downloaded wheel (2.8 GiB)
# beside the installed 5.4 GiB until the end (BENCHMARKS.md). --native-tls: the system's
# certificates, as pip takes them, which hold a proxy's CA where one stands between this machine
# and PyPI (uv's own bundle has only the public CAs).
torch_install() {
  local status=0
  "$venv/bin/uv" pip install -q --native-tls --python "$torch_venv/bin/python" --link-mode hardlink \
    --cache-dir "$torch_venv/.uv-cache" ${torch_wheels:+--find-links "$torch_wheels"} "$@" || status=$?
  rm -rf "$torch_venv/.uv-cache"
  return $status
}
if [[ $job == test ]]; then
  # The same interpreter as $venv, so that the extension $venv builds in place imports here too.
  overrides=() gib=6
  if ! compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
    say "no NVIDIA GPU here: PyTorch goes without triton, torch.compile's GPU code generator (1 GiB)"
    overrides=(tools/torch-without-triton.txt) gib=5
  fi
  venv_with "$torch_venv" "$venv/bin/python" tools/requirements-torch.txt "$gib" \
    "$(needs_of tools/requirements-torch.txt "${overrides[@]}")" torch_install ${overrides:+--override "${overrides[@]}"}
fi

# The build's own toolkit search (cuda_build_ext.find_toolkit) decides whether one is needed.
toolkit=$(PYTHONPATH=resolver "$venv/bin/python" -c 'from culina_resolver import cuda_build_ext as b
t = b.find_toolkit(); print(f"{t.full_version} from {t.source}" if t else "")')
if [[ -n $toolkit ]]; then
  say "CUDA toolkit: nvcc $toolkit"
else
  say "no CUDA toolkit found: installing CUDA $pypi_cuda from NVIDIA's PyPI packages into $venv"
  room_for "$venv" 3 "installing CUDA $pypi_cuda from PyPI"
  mapfile -t toolkit_requirements < <(PYTHONPATH=resolver "$venv/bin/python" -m culina_resolver.pypi_toolkit \
                                       --requirements "$pypi_cuda")
  "$venv/bin/python" -m pip install -q "${toolkit_requirements[@]}"
fi

