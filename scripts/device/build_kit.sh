#!/usr/bin/env bash
# Build the device kit: .device/wheels/, Python 3.12 wheels of everything dna_mm needs on a GPU
# machine whose image (requirements/device-image.txt) lacks it, and dna_mm's own wheel.
#
#   make device-kit                      # what it runs: bash scripts/device/build_kit.sh
#
# The wheels are fetched from the package index for CPython 3.12 on manylinux x86-64 (pinned in
# requirements/device-kit.txt; cached in ${DNA_MM_CACHE:-~/.cache/dna_mm}/device-wheels), so the
# kit can be built on any machine with pip. The kit must stay under 48 MiB: it travels with the
# working tree, whose limit is 64 MiB. scripts/device/gpu_check.sh installs it offline.
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${PY:-.venv/bin/python}
KIT=.device
CACHE=${DNA_MM_CACHE:-$HOME/.cache/dna_mm}/device-wheels
LIMIT_MIB=48
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux2010_x86_64)

log() { printf '[device-kit %(%H:%M:%S)T] %s\n' -1 "$*"; }

mkdir -p "$CACHE"
log "wheels for CPython 3.12 (requirements/device-kit.txt) into $CACHE"
"$PY" -m pip --disable-pip-version-check download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp "${PLATFORMS[@]}" -d "$CACHE" -r requirements/device-kit.txt

rm -rf "$KIT"
mkdir -p "$KIT/wheels"
# exactly the pinned set (the cache may hold other versions)
"$PY" - "$CACHE" "$KIT/wheels" <<'PY'
import re, shutil, sys
from pathlib import Path

cache, dest = Path(sys.argv[1]), Path(sys.argv[2])
norm = lambda s: re.sub(r'[-_.]+', '_', s).lower()
for line in Path('requirements/device-kit.txt').read_text().splitlines():
    line = line.split('#')[0].strip()
    if not line:
        continue
    name, version = line.split('==')
    hits = [w for w in cache.glob('*.whl') if [norm(p) for p in w.name.split('-')[:2]] == [norm(name), norm(version)]]
    if len(hits) != 1:
        sys.exit(f'device-kit: expected one wheel of {line} in {cache}, found {[h.name for h in hits]}')
    shutil.copy2(hits[0], dest)
PY

log "dna_mm's wheel (from this tree, built in a copy: the tree's own build files stay as they are)"
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
cp -r setup.py README.md requirements dna_mm "$SRC/"
find "$SRC" -name __pycache__ -prune -exec rm -rf {} +
"$PY" -m pip --disable-pip-version-check wheel -q --no-deps --no-build-isolation -w "$KIT/wheels" "$SRC" >/dev/null

# mmcv with compiled ops for the device's stack (CPython 3.12, torch 2.11 + CUDA 13.0, sm_90), in
# place of mmcv-lite, when it has been built here (`make device-mmcv`: nvcc from the index's
# wheels, no GPU needed) and the kit still fits: Mask R-CNN's RoIAlign and nms then run in the
# GPU check
DEVICE_MMCV=${DEVICE_MMCV:-${DNA_MM_CACHE:-$HOME/.cache/dna_mm}/wheels/mmcv-2.0.1-torch2.11.0-cu130-sm90-cp312}
kit_bytes() { du -cb "$KIT"/wheels/*.whl | tail -n 1 | cut -f 1; }
if ls "$DEVICE_MMCV"/mmcv-2.0.1-cp312-*.whl >/dev/null 2>&1; then
  lite=$(ls "$KIT"/wheels/mmcv_lite-*.whl)
  with_ops=$(ls "$DEVICE_MMCV"/mmcv-2.0.1-cp312-*.whl)
  swapped=$(( $(kit_bytes) - $(stat -c %s "$lite") + $(stat -c %s "$with_ops") ))
  if (( swapped <= LIMIT_MIB * 1024 * 1024 )); then
    rm "$lite"
    cp "$with_ops" "$KIT/wheels/"
    log "mmcv with CUDA ops (sm_90, $(( $(stat -c %s "$with_ops") / 1024 / 1024 )) MiB) from $DEVICE_MMCV, in place of mmcv-lite"
  else
    log "mmcv-lite kept: with $with_ops the kit would be $(( swapped / 1024 / 1024 )) MiB, over ${LIMIT_MIB} MiB"
  fi
else
  log "mmcv-lite (no compiled ops: no Mask R-CNN on the GPU); build mmcv for the device with 'make device-mmcv'"
fi

(cd "$KIT/wheels" && sha256sum *.whl) > "$KIT/SHA256SUMS"
size=$(kit_bytes)
log "$(ls "$KIT"/wheels | wc -l) wheels, $(( size / 1024 / 1024 )) MiB in $KIT/wheels"
if (( size > LIMIT_MIB * 1024 * 1024 )); then
  echo "device-kit: $KIT is $(( size / 1024 / 1024 )) MiB, over the ${LIMIT_MIB} MiB it may take" >&2
  exit 1
fi
