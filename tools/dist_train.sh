#!/usr/bin/env bash
# Distributed training with torchrun and mmengine's 'pytorch' launcher (gloo without CUDA).
#   bash tools/dist_train.sh CONFIG NPROC [train.py options]
# NPROC: the processes on this machine, a number >= 1 (or auto, cpu, gpu: torchrun's words).
# Env: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT, PYTHON (python). PORT: the
# rendezvous port; unset on one machine, a free one is picked (runs side by side do not collide),
# unset across machines (NNODES > 1) 29500.
# torchrun is run as dna_mm.tools.torchrun: exit status 128 + N when signal N stopped the run
# (143: SIGTERM, 138: SIGUSR1, which the agent forwards to the ranks too; 137: a rank killed), so
# that a job script can requeue on [ $? -ge 128 ]; 0 done, 1 a crash, 2 a mistake in the input.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 CONFIG NPROC [train.py options]" >&2
  exit 2
fi
NPROC=${2}
if ! [[ $NPROC =~ ^(auto|cpu|gpu)$ || ($NPROC =~ ^[0-9]+$ && 10#$NPROC -gt 0) ]]; then
  echo "$0: error: NPROC=$NPROC: expected the number of processes, a whole number >= 1 (usage: $0 CONFIG NPROC [train.py options])" >&2
  exit 2
fi
if [[ -n ${PORT:-} && ! $PORT =~ ^[0-9]+$ ]]; then
  echo "$0: error: PORT=$PORT: expected a port number (or leave PORT unset on one machine: a free port is picked)" >&2
  exit 2
fi
ARGS=("${@:1:1}")
RDZV=()  # one machine without PORT: dna_mm.tools.torchrun picks a free port
if [[ -n ${PORT:-} || ${NNODES:-1} != 1 ]]; then
  RDZV=(--node_rank="${NODE_RANK:-0}" --master_addr="${MASTER_ADDR:-127.0.0.1}" --master_port="${PORT:-29500}")
fi
export PYTHONPATH="$(dirname "$0")/..${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python}" -m dna_mm.tools.torchrun --nnodes="${NNODES:-1}" ${RDZV[@]+"${RDZV[@]}"} \
  --nproc_per_node="$NPROC" "$(dirname "$0")/train.py" "${ARGS[@]}" --launcher pytorch "${@:3}"
