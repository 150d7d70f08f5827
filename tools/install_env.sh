#!/usr/bin/env bash
# Create (or complete) the project environment in .venv/ on a fresh machine.
#
#   bash tools/install_env.sh                                    # what `make install` runs
#   PYTHON=python3.12 VENV=.venv-python3.12 bash tools/install_env.sh   # `make install PYTHON=python3.12`
#
# Steps: venv -> build tools + torch/torchvision (index builds) -> mmcv with compiled ops
# (cached wheel, or built from the sdist once and cached) -> the rest of the stack, pinned by
# requirements/lock.txt -> dna_mm in editable mode.  Each step is skipped when already done.
#
# Cache: ${DNA_MM_CACHE:-$HOME/.cache/dna_mm}/wheels/mmcv-<mmcv>-torch<torch>-<pytag>/
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
# an interpreter that answers -V (a pyenv shim of an installed, not activated version falls back
# to pyenv's copy; none: one line naming PYTHON): tools/find_python.sh; default python3.11, else python3
if [ -n "${PYTHON:-}" ]; then
  PYTHON=$(bash tools/find_python.sh "$PYTHON" PYTHON) || exit 1
else
  PYTHON=$(bash tools/find_python.sh python3.11 PYTHON 2>/dev/null || bash tools/find_python.sh python3 PYTHON) || exit 1
fi
CACHE=${DNA_MM_CACHE:-$HOME/.cache/dna_mm}
MMCV_VERSION=$(sed -n 's/^mmcv==\(.*\)$/\1/p' requirements/lock.txt)
TORCH_VERSION=$(sed -n 's/^torch==\(.*\)$/\1/p' requirements/lock.txt)

log() { printf '[install_env %(%H:%M:%S)T] %s\n' -1 "$*"; }

"$PYTHON" - <<'PY' || { echo "install_env: Python 3.11 or 3.12 is required (found $("$PYTHON" -V 2>&1), set PYTHON=...)" >&2; exit 1; }
import sys; sys.exit(0 if sys.version_info[:2] in ((3, 11), (3, 12)) else 1)
PY

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi
want=$("$PYTHON" -c 'import sys; print(*sys.version_info[:2], sep=".")')
have=$("$VENV/bin/python" -c 'import sys; print(*sys.version_info[:2], sep=".")')
if [ "$want" != "$have" ]; then
  echo "install_env: $VENV holds Python $have, not $want: remove it, or name another VENV" >&2
  exit 1
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)
CONSTRAINTS=(-c requirements/lock.txt)

log "build tools, torch $TORCH_VERSION"
"${PIP[@]}" install -q "${CONSTRAINTS[@]}" -r requirements/build.txt -r requirements/torch.txt

if ! "$PY" -c "import mmcv, mmcv.ops, sys; sys.exit(mmcv.__version__ != '$MMCV_VERSION')" 2>/dev/null; then
  PYTAG=$("$PY" -c "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')")
  WHEEL_DIR="$CACHE/wheels/mmcv-$MMCV_VERSION-torch$TORCH_VERSION-$PYTAG"
  WHEEL=$(ls "$WHEEL_DIR"/mmcv-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$WHEEL" ]; then
    log "no cached mmcv wheel in $WHEEL_DIR: building mmcv $MMCV_VERSION from the sdist (10-25 min on 2 cores)"
    BUILD=$(mktemp -d)
    trap 'rm -rf "$BUILD"' EXIT
    "${PIP[@]}" download -q --no-deps --no-binary :all: --no-build-isolation -d "$BUILD" "mmcv==$MMCV_VERSION"
    tar -xzf "$BUILD"/mmcv-*.tar.gz -C "$BUILD"
    SRC=$(ls -d "$BUILD"/mmcv-*/ | head -n 1)
    # torch >= 2.10 headers need C++20; mmcv 2.0/2.1 ask for C++14/17.
    sed -i -E "s/-std=c\+\+1[47]/-std=c++20/g" "$SRC/setup.py"
    # Python 3.13 (PEP 667): exec() no longer writes into locals(), where get_version() reads
    # __version__; read it from a namespace of its own (3.13 is not admitted yet: pip's download
    # above already runs the unpatched setup.py, docs/installation.md)
    sed -i -E "s/exec\(compile\(f\.read\(\), version_file, 'exec'\)\)/exec(compile(f.read(), version_file, 'exec'), _ns := {})/; s/return locals\(\)\['__version__'\]/return _ns['__version__']/" "$SRC/setup.py"
    start=$(date +%s)
    MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} "${PIP[@]}" wheel -q --no-deps --no-build-isolation -w "$BUILD/dist" "$SRC"
    log "mmcv built in $(( $(date +%s) - start )) s"
    mkdir -p "$WHEEL_DIR"
    cp "$BUILD"/dist/mmcv-*.whl "$WHEEL_DIR/"
    WHEEL=$(ls "$WHEEL_DIR"/mmcv-*.whl | head -n 1)
  else
    log "reusing cached $WHEEL"
  fi
  "${PIP[@]}" install -q "${CONSTRAINTS[@]}" "$WHEEL"
fi

log "OpenMMLab stack + test tools"
"${PIP[@]}" install -q "${CONSTRAINTS[@]}" -r requirements/runtime.txt -r requirements/optional.txt -r requirements/tests.txt -r requirements/lint.txt
"${PIP[@]}" install -q --no-deps --no-build-isolation -e .
"$PY" -c "import mmcv.ops, mmaction.models, mmdet.models, decord, timm, dna_mm" \
  || { echo "install_env: the environment in $VENV does not import; see above" >&2; exit 1; }
touch "$VENV/.dna_mm_installed"
log "environment ready in $VENV"
