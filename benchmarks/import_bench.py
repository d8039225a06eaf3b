"""What `import culina` costs on a GPU machine: time, GPU memory, contexts, and fork safety.

Every measurement runs in fresh interpreters with PYTHONPATH set to --package-dir, so two builds
(say this tree's and HEAD~'s) compare side by side on one machine:
  import_s      wall time of `import culina` (numpy included), median over --runs interpreters
  nvml_s        of that, the NVML query the fit check makes (median)
  memory_mib    GPU memory in use per GPU (nvidia-smi) while a child sits idle after the import,
                minus the same before it started; and the child's own entry in
                --query-compute-apps, if the driver lists it
  contexts      primary contexts active on each GPU (cuDevicePrimaryCtxGetState) in a child after
                `import culina` alone, then after torch.ones and a culina call on each GPU in
                turn, the last GPU first (so a stray context on GPU 0 shows)
  fork          a child forked after `import culina, torch` runs torch.ones(4, device="cuda")

Usage: python benchmarks/import_bench.py --package-dir package --label after [--runs 15] [--out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

IMPORT_TIME = """
import time
start = time.perf_counter()
import culina
elapsed = time.perf_counter() - start
from culina import _C
start = time.perf_counter()
_C.nvml_report() if hasattr(_C, "nvml_report") else None
print(elapsed, time.perf_counter() - start)
"""

IDLE_AFTER_IMPORT = """
import sys, time
import culina
print("imported", flush=True)
sys.stdin.readline()
"""

CONTEXTS = """
import ctypes, json, sys
import culina
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
count = ctypes.c_int()
cuda.cuDeviceGetCount(ctypes.byref(count))

def active():
    states = []
    for ordinal in range(count.value):
        device, flags, state = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        cuda.cuDeviceGet(ctypes.byref(device), ordinal)
        cuda.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(state))
        states.append(state.value)
    return states

print(json.dumps(["after import culina", active()]), flush=True)
import torch
for ordinal in reversed(range(count.value)):
    x = torch.ones(1, 1, 64, 64, device=f"cuda:{ordinal}", dtype=torch.float16)
    print(json.dumps([f"after torch.ones on cuda:{ordinal}", active()]), flush=True)
    culina.linear_attention(x, x, x)
    torch.cuda.synchronize(ordinal)
    print(json.dumps([f"after a culina call on cuda:{ordinal}", active()]), flush=True)
"""

FORK = """
import os
import culina, torch
pid = os.fork()
if pid == 0:
    try:
        ok = torch.ones(4, device="cuda").sum().item() == 4
    except Exception as exc:
        print("child:", exc, flush=True)
        ok = False
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status))
"""


def python(code, env, **kwargs):
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          **kwargs)


def gpu_memory_mib():
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return {int(i): int(m) for i, m in (line.split(",") for line in out.strip().splitlines())}


def compute_apps():
    return subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()


def measure_memory(env):
    before = gpu_memory_mib()
    child = subprocess.Popen([sys.executable, "-c", IDLE_AFTER_IMPORT], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "imported"
        time.sleep(1)  # let the driver's accounting catch up
        during = gpu_memory_mib()
        apps = compute_apps()
    finally:
        child.communicate("\n", timeout=60)
    listed = [line for line in apps.splitlines() if line.split(",")[0].strip() == str(child.pid)]
    return {"delta_per_gpu": {i: during[i] - before[i] for i in before}, "child_in_compute_apps": listed}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package-dir", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.package_dir), PYTHONWARNINGS="ignore")

    samples = [python(IMPORT_TIME, env, check=True).stdout.split() for _ in range(args.runs)]
    result = {
        "label": args.label,
        "import_s": statistics.median(float(s[0]) for s in samples),
        "nvml_s": statistics.median(float(s[1]) for s in samples),
        "runs": args.runs,
        "memory_mib": measure_memory(env),
    }
    contexts = python(CONTEXTS, env)
    result["contexts"] = dict(json.loads(line) for line in contexts.stdout.splitlines())
    if contexts.returncode != 0:
        result["contexts"]["failed"] = contexts.stderr.strip().splitlines()[-1]
    fork = python(FORK, env)
    result["fork"] = (fork.stdout + fork.stderr).strip()[-2000:]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
