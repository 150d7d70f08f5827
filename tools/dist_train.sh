#!/usr/bin/env bash
# Distributed training with torchrun and mmengine's 'pytorch' launcher (gloo without CUDA).
#   bash tools/dist_train.sh CONFIG NPROC [train.py options]
# Env: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (29500), PYTHON (python).
# torchrun is run as dna_mm.tools.torchrun: exit status 128 + N when signal N stopped the run
# (143: SIGTERM, 138: SIGUSR1, which the agent forwards to the ranks too; 137: a rank killed), so
# that a job script can requeue on [ $? -ge 128 ]; 0 done, 1 a crash, 2 a mistake in the input.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 CONFIG NPROC [train.py options]" >&2
  exit 2
fi
NPROC=${2}
ARGS=("${@:1:1}")
export PYTHONPATH="$(dirname "$0")/..${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m dna_mm.tools.torchrun \
  --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" \
  --master_addr="${MASTER_ADDR:-127.0.0.1}" --master_port="${PORT:-29500}" \
  --nproc_per_node="$NPROC" "$(dirname "$0")/train.py" "${ARGS[@]}" --launcher pytorch "${@:3}"
