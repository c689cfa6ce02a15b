#!/usr/bin/env bash
# The GPU run of bench/finetune_gpu.py, as one command for the device tool:
# install the carried wheels (bench/device/wheels.sh made them) beside the
# image's CUDA torch, show what runs, then benchmark. Extra arguments go to the
# bench. Results land in $OUT (the device tool's folder) or the current one.
#
#   run(command="bash bench/device/finetune_gpu.sh", carry=[".whl"], timeout_s=540)
set -euo pipefail
out="${OUT:-.}"
site="${JG_SITE:-/tmp/site}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${WHEEL_DIR:-.whl}"/*.whl
export PYTHONPATH="$site" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>/dev/null || true
python3 -P -c "import torch, transformers, trl, peft, judgegraph.finetune as f; \
print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), '| transformers', transformers.__version__, \
'| trl', trl.__version__, '| peft', peft.__version__, '| judgegraph.finetune from', f.__file__)"
python3 bench/finetune_gpu.py --out "$out/finetune_gpu.json" "$@" 2>&1 | tee "$out/finetune_gpu.log"
