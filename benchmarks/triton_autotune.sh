# Sourced on the GPU machine: carries Triton's autotuning results (fla's kernels) from one device
# call to the next. fla autotunes for 90-120 s per new shape, and every device call starts on a
# bare machine, so a table of shapes against fla took several calls. With
# TRITON_CACHE_AUTOTUNING=1 Triton keeps each autotuned kernel's timings in TRITON_CACHE_DIR as
# <hash>/<kernel>.autotune.json, the hash taken over Triton's version, the GPU target, the
# kernel's source, the tuning key and the configs: a file from an earlier call on the same image
# and GPU picks the same config without benchmarking it again, and one that does not fit is never
# read. fla's timings are still measured afresh; only its choice of config is carried.
#
#   source benchmarks/triton_autotune.sh   # first: unpacks .triton-autotune/autotune.tar.gz if carried
#   ...                                    # the runs (benchmarks, the fla comparison tests)
#   triton_autotune_save "$OUT"            # last: packs every result into $OUT/autotune.tar.gz
#
# Here, between calls: copy the returned autotune.tar.gz to .triton-autotune/ (ignored by git) and
# name .triton-autotune in the next call's carry.
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache} TRITON_CACHE_AUTOTUNING=1
mkdir -p "$TRITON_CACHE_DIR"
if [[ -f .triton-autotune/autotune.tar.gz ]]; then
  tar -xzf .triton-autotune/autotune.tar.gz -C "$TRITON_CACHE_DIR" \
    && echo "[triton] autotuning results carried in: $(tar -tzf .triton-autotune/autotune.tar.gz | grep -c '\.autotune\.json$')"
fi

# triton_autotune_save DIR: every result in DIR/autotune.tar.gz (on the device tool, DIR is $OUT).
triton_autotune_save() {
  local dir=${1:?usage: triton_autotune_save DIR} results
  results=$(cd "$TRITON_CACHE_DIR" && find . -name '*.autotune.json' | sort)
  if [[ -z $results ]]; then
    echo "[triton] no autotuning results to save"
    return 0
  fi
  (cd "$TRITON_CACHE_DIR" && printf '%s\n' "$results" | tar -czf "$dir/autotune.tar.gz" -T -) \
    && echo "[triton] $(printf '%s\n' "$results" | wc -l) autotuning results saved to $dir/autotune.tar.gz"
}
