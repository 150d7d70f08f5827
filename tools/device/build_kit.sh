#!/usr/bin/env bash
# Build the device kit: .device/wheels/, Python 3.12 wheels of everything dna_mm needs on a GPU
# machine whose image (requirements/device-image.txt) lacks it, and dna_mm's own wheel.
#
#   make device-kit                      # what it runs: bash tools/device/build_kit.sh
#
# The wheels are fetched from the package index for CPython 3.12 on manylinux x86-64 (pinned in
# requirements/device-kit.txt; cached in ${DNA_MM_CACHE:-~/.cache/dna_mm}/device-wheels), so the
# kit can be built on any machine with pip. The kit must stay under 48 MiB: it travels with the
# working tree, whose limit is 64 MiB. tools/device/gpu_check.sh installs it offline.
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

(cd "$KIT/wheels" && sha256sum *.whl) > "$KIT/SHA256SUMS"
size=$(du -cb "$KIT"/wheels/*.whl | tail -n 1 | cut -f 1)
log "$(ls "$KIT"/wheels | wc -l) wheels, $(( size / 1024 / 1024 )) MiB in $KIT/wheels"
if (( size > LIMIT_MIB * 1024 * 1024 )); then
  echo "device-kit: $KIT is $(( size / 1024 / 1024 )) MiB, over the ${LIMIT_MIB} MiB it may take" >&2
  exit 1
fi
