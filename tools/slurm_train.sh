#!/usr/bin/env bash
# Training on a SLURM cluster: one srun task per GPU, mmengine's 'slurm' launcher.
#   [GPUS=8] [GPUS_PER_NODE=8] bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]
# Env: GPUS (8, the tasks), GPUS_PER_NODE (8), CPUS_PER_TASK (5), SRUN_ARGS (extra srun options),
# MASTER_PORT (29500), PYTHON (python). An sbatch script: docs/training.md.
# Exit status: srun's, the highest of the tasks' (128 + N for a task that signal N ended): 143 /
# 138 when SIGTERM (scancel, preemption) / SIGUSR1 stopped the run, its iteration saved (a job
# script requeues on [ $? -ge 128 ]); 137 when a task was killed (kill -9, out of memory; the
# others stop at once with 1); 1 a crash, 2 a mistake in the input.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]" >&2
  exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-$((GPUS < 8 ? GPUS : 8))}
read -r -a EXTRA <<< "${SRUN_ARGS:-}"
export PYTHONPATH="$(dirname "$0")/..${PYTHONPATH:+:$PYTHONPATH}"
exec srun -p "$PARTITION" \
  --job-name="$JOB_NAME" \
  --gres=gpu:"$GPUS_PER_NODE" \
  --ntasks="$GPUS" \
  --ntasks-per-node="$GPUS_PER_NODE" \
  --cpus-per-task="${CPUS_PER_TASK:-5}" \
  --kill-on-bad-exit=1 \
  "${EXTRA[@]}" \
  "${PYTHON:-python}" -u "$(dirname "$0")/train.py" "$CONFIG" --work-dir="$WORK_DIR" --launcher slurm "${@:5}"
