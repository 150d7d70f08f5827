#!/usr/bin/env bash
# mmcv 2.0.1 with its compiled ops for the GPU machines' stack (CPython 3.12, torch 2.11 + CUDA
# 13.0, sm_90), built here without a GPU, for the device kit (scripts/device/build_kit.sh):
#
#   make device-mmcv        # what it runs: bash scripts/device/build_mmcv.sh
#
# The torch it compiles against is the rehearsal environment's (requirements/device-image.txt,
# made by `make device-rehearsal`), seen from a build environment of its own (setuptools, ninja);
# nvcc and the CUDA headers come from the index's wheels for CUDA 13.0 (scripts/install/cuda_toolkit.py
# toolkit). The build's wheel stays in ${DNA_MM_CACHE:-~/.cache/dna_mm}/device-mmcv/dist; the kit's copy,
# without the debug information (82 of the extension's 108 MB: the host code is compiled with
# Python's -g), goes to ${DNA_MM_CACHE:-~/.cache/dna_mm}/wheels/mmcv-2.0.1-torch2.11.0-cu130-sm90-cp312/.
set -euo pipefail
cd "$(dirname "$0")/../.."

CACHE=${DNA_MM_CACHE:-$HOME/.cache/dna_mm}
IMAGE=$CACHE/device-rehearsal/venv
BUILD_ENV=$CACHE/device-mmcv/venv
OUT=$CACHE/wheels/mmcv-2.0.1-torch2.11.0-cu130-sm90-cp312
log() { printf '[device-mmcv %(%H:%M:%S)T] %s\n' -1 "$*"; }
source scripts/install/mmcv_sdist.sh

if ls "$OUT"/mmcv-2.0.1-cp312-*.whl >/dev/null 2>&1; then
  log "already built: $(ls "$OUT"/*.whl)"
  exit 0
fi
if [ ! -x "$IMAGE/bin/python" ]; then
  echo "device-mmcv: no rehearsal environment in $IMAGE: run 'make device-rehearsal' first" >&2
  exit 2
fi
if [ ! -x "$BUILD_ENV/bin/python" ]; then
  "$(readlink -f "$IMAGE/bin/python")" -m venv "$BUILD_ENV"
  site=$("$IMAGE/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  echo "$site" > "$("$BUILD_ENV/bin/python" -c 'import site; print(site.getsitepackages()[0])')/device-image.pth"
fi
PY=$BUILD_ENV/bin/python
DIST=$CACHE/device-mmcv/dist
"$PY" -m pip install -q --disable-pip-version-check setuptools wheel ninja
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
if ! ls "$DIST"/mmcv-2.0.1-cp312-*.whl >/dev/null 2>&1; then
  SRC=$(mmcv_sdist "$PY" 2.0.1 "$BUILD")  # fetched and patched (scripts/install/mmcv_sdist.sh)
  CUDA_HOME=$("$PY" scripts/install/cuda_toolkit.py toolkit --cuda 13.0 --cache "$CACHE")
  export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH" TORCH_CUDA_ARCH_LIST=9.0 FORCE_CUDA=1 MMCV_WITH_OPS=1
  log "building mmcv 2.0.1 for sm_90 against $("$PY" -c 'import torch; print(torch.__version__)') with $CUDA_HOME/bin/nvcc"
  start=$(date +%s)
  MAX_JOBS=${MAX_JOBS:-$(nproc)} "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$BUILD/dist" "$SRC"
  mkdir -p "$DIST"
  cp "$BUILD"/dist/mmcv-*.whl "$DIST/"
  log "built in $(( $(date +%s) - start )) s: $(ls "$DIST"/*.whl) ($(du -h "$DIST"/*.whl | cut -f1))"
fi
# the kit's copy: the same wheel with its extension's debug information stripped (RECORD rewritten)
"$PY" -m wheel unpack -d "$BUILD/unpacked" "$DIST"/mmcv-2.0.1-cp312-*.whl >/dev/null
strip --strip-debug "$BUILD"/unpacked/mmcv-2.0.1/mmcv/*.so
mkdir -p "$OUT"
"$PY" -m wheel pack -d "$OUT" "$BUILD/unpacked/mmcv-2.0.1" >/dev/null
log "without debug information: $(ls "$OUT"/*.whl) ($(du -h "$OUT"/*.whl | cut -f1))"
