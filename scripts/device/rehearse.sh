#!/usr/bin/env bash
# make device-rehearsal: scripts/device/gpu_check.sh on this CPU, before it ever meets a GPU, in a
# Python 3.12 environment built like the GPU machines' image (requirements/device-image.txt:
# torch 2.11, triton 3.6, numpy 2, ...; cached in ${DNA_MM_CACHE:-~/.cache/dna_mm}/device-rehearsal)
# plus the kit, installed with no package index reachable (a network namespace without a network
# where `unshare -n` works, and pip's configuration dropped either way). The CUDA steps run at
# tiny shapes on the CPU, the Triton kernel in its interpreter. It runs, as the GPU machine
# does, in a copy of the working tree (the tracked and untracked files, .device carried; in
# ${DNA_MM_REHEARSAL_TREE:-/tmp/dna_mm_rehearsal_tree}): the data it generates with the image's
# OpenCV and its runs stay out of this tree. Results in $OUT (default
# work_dirs/device-rehearsal/out); exit status 0 when every step passed.
set -euo pipefail
cd "$(dirname "$0")/../.."

CACHE=${DNA_MM_CACHE:-$HOME/.cache/dna_mm}
ENV=$CACHE/device-rehearsal/venv
PY312=${PYTHON312:-$(bash scripts/install/find_python.sh python3.12 PYTHON312)} || exit 1
OUT=$(realpath -m "${OUT:-work_dirs/device-rehearsal/out}")
TREE=${DNA_MM_REHEARSAL_TREE:-/tmp/dna_mm_rehearsal_tree}
log() { printf '[device-rehearsal %(%H:%M:%S)T] %s\n' -1 "$*"; }

stamp="$ENV/.image-$(sha256sum requirements/device-image.txt | cut -c 1-16)"
if [ ! -f "$stamp" ]; then
  log "building the image's environment in $ENV with $PY312 (requirements/device-image.txt; ~5 GB)"
  rm -rf "$ENV"
  "$PY312" -m venv "$ENV"
  "$ENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements/device-image.txt
  touch "$stamp"
fi
"$ENV/bin/python" -c 'import sys, torch, triton, numpy; print("image:", "Python", sys.version.split()[0],
"torch", torch.__version__, "triton", triton.__version__, "numpy", numpy.__version__)'

rm -rf "$OUT" "$TREE"
mkdir -p "$OUT" "$TREE"
log "copying the working tree to $TREE, as the GPU machine gets it"
{ git ls-files -z -co --exclude-standard; printf '%s\0' .device; } |
  tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$TREE"
offline=()
if unshare -n true 2>/dev/null; then
  offline=(unshare -n)
  log "running without a network (unshare -n)"
fi
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_FIND_LINKS=
export PYTHON="$ENV/bin/python" OUT DNA_MM_KIT_SITE=${DNA_MM_KIT_SITE:-/tmp/dna_mm_kit_rehearsal}
start=$(date +%s)
status=0
"${offline[@]}" bash "$TREE/scripts/device/gpu_check.sh" --profile rehearsal "$@" || status=$?
log "gpu_check.sh exited with status $status after $(( $(date +%s) - start )) s; results in $OUT"
exit $status
