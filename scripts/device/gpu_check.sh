#!/usr/bin/env bash
# The GPU check in one call: install the device kit (.device/, `make device-kit`) offline into a
# private folder, print the versions and the GPU, then run scripts/device/gpu_check.py's steps
# (tests, attention benchmark, train steps, the real tools, the detector, compiled steps), each
# under its own time cap, each result written to $OUT as it ends. From the repository root of a
# copy that carries .device:
#
#   bash scripts/device/gpu_check.sh [--only STEP ...]      # results in $OUT (default work_dirs/gpu_check/out)
#
# The working tree's dna_mm is imported (a fix travels without rebuilding the kit); the kit's
# dna_mm wheel is installed beside it as a packaging check. PYTHON (default python3) is the
# interpreter that holds torch. `make device-rehearsal` runs this same script on a CPU.
set -uo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
OUT=${OUT:-work_dirs/gpu_check/out}
SITE=${DNA_MM_KIT_SITE:-/tmp/dna_mm_kit}
mkdir -p "$OUT"
export OUT PYTHONUNBUFFERED=1

if ! ls .device/wheels/*.whl >/dev/null 2>&1; then
  echo "gpu_check: no wheels in .device/wheels: run 'make device-kit' and carry .device" >&2
  exit 2
fi
if ! (cd .device/wheels && sha256sum --quiet -c ../SHA256SUMS); then
  echo "gpu_check: .device/wheels does not match .device/SHA256SUMS: rebuild it with 'make device-kit'" >&2
  exit 2
fi
start=$(date +%s)
rm -rf "$SITE"
if ! "$PYTHON" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
    --no-cache-dir --target "$SITE" .device/wheels/*.whl; then
  echo "gpu_check: installing the kit into $SITE failed (above)" >&2
  exit 2
fi
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
echo "gpu_check: kit installed into $SITE in $(( $(date +%s) - start )) s ($(ls .device/wheels | wc -l) wheels)"
"$PYTHON" -c 'import sys, torch; print("Python", sys.version.split()[0], "| torch", torch.__version__,
"| CUDA", torch.version.cuda, "|", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")'
exec "$PYTHON" scripts/device/gpu_check.py --out "$OUT" --install-seconds $(( $(date +%s) - start )) "$@"
