#!/usr/bin/env bash
# GPU check of the GRPO training path (SPEC 11): a few real steps of multi-turn GRPO on a randomly
# initialised ~1B Llama, printing the step time split (generation / buyer turns / update) and the
# generation tokens/s. Arguments are passed to benchmarks/gpu_grpo_check.py (see --help).
#
# The lent GPU image (Python 3.12) has torch and transformers but not trl or datasets (and no network).
# On the CPU machine, once:   benchmarks/gpu_check.sh --prepare
# downloads Python 3.12 wheels of trl, datasets and their missing deps (dill, multiprocess) at the
# versions pinned here, and copies the SmolLM2 tokenizer files if cached, into .cache/gpu_pkgs
# (git-ignored, ~2 MB). On the device the wheels are installed into a temporary folder. Then:
#   run(command="bash benchmarks/gpu_check.sh --json $OUT/gpu_check.json", carry=[".cache/gpu_pkgs"])
# CPU smoke test of the same script:   benchmarks/gpu_check.sh --dry-run
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PKGS="$ROOT/.cache/gpu_pkgs"

if [ "${1:-}" = "--prepare" ]; then
    PY=${PYTHON:-"$ROOT/.venv/bin/python"}
    VERSIONS=$("$PY" - <<'PYEOF'
from importlib.metadata import version
print(" ".join(f"{p}=={version(p)}" for p in ("trl", "datasets", "dill", "multiprocess")))
PYEOF
)
    rm -rf "${PKGS:?}/wheels"
    mkdir -p "$PKGS/wheels"
    # shellcheck disable=SC2086
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$PKGS/wheels" $VERSIONS
    find "$PKGS" -name __pycache__ -type d -prune -exec rm -rf {} +
    TOK="${NEGOBOOK_CACHE:-$HOME/.cache/negobook}/models/smollm2-135m-instruct"
    [ -n "${NEGOBOOK_CACHE:-}" ] && TOK="$NEGOBOOK_CACHE/models/smollm2-135m-instruct"
    if [ -f "$TOK/tokenizer.json" ]; then
        mkdir -p "$PKGS/tokenizer"
        cp "$TOK"/tokenizer.json "$TOK"/tokenizer_config.json "$PKGS/tokenizer/"
        [ -f "$TOK/chat_template.jinja" ] && cp "$TOK/chat_template.jinja" "$PKGS/tokenizer/"
    fi
    du -sh "$PKGS"
    exit 0
fi

PY=${PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x "$ROOT/.venv/bin/python" ] && [ "${1:-}" = "--dry-run" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ -d "$PKGS/wheels" ] && ! "$PY" -c "import trl, datasets" 2>/dev/null; then
    SITE_DIR=$(mktemp -d /tmp/negobook-site-XXXX)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE_DIR" "$PKGS"/wheels/*.whl
    export PYTHONPATH="$PYTHONPATH:$SITE_DIR"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if ! "$PY" -c "import trl, datasets" 2>/dev/null; then
    echo "gpu_check: trl/datasets not importable by $PY; run 'benchmarks/gpu_check.sh --prepare' on the CPU" \
         "machine and carry .cache/gpu_pkgs" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import torch, transformers, trl; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'transformers', transformers.__version__, 'trl', trl.__version__)"
exec "$PY" benchmarks/gpu_grpo_check.py "$@"
