#!/usr/bin/env bash
# Distributed training with torchrun and mmengine's 'pytorch' launcher (gloo without CUDA).
#   bash tools/dist_train.sh CONFIG NPROC [train.py options]
# Env: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (29500), PYTHON (python).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 CONFIG NPROC [train.py options]" >&2
  exit 2
fi
NPROC=${2}
ARGS=("${@:1:1}")
exec "${PYTHON:-python}" -m torch.distributed.run \
  --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" \
  --master_addr="${MASTER_ADDR:-127.0.0.1}" --master_port="${PORT:-29500}" \
  --nproc_per_node="$NPROC" "$(dirname "$0")/train.py" "${ARGS[@]}" --launcher pytorch "${@:3}"
