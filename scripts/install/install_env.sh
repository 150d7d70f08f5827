#!/usr/bin/env bash
# Create (or complete) the project environment in .venv/ on a fresh machine.
#
#   bash scripts/install/install_env.sh                                    # what `make install` runs
#   PYTHON=python3.12 VENV=.venv-python3.12 bash scripts/install/install_env.sh   # `make install PYTHON=python3.12`
#
# Steps: venv -> build tools + torch/torchvision (index builds) -> mmcv with compiled ops
# (cached wheel, or built from the sdist once and cached) -> the rest of the stack, pinned by
# requirements/lock.txt -> dna_mm in editable mode.  Each step is skipped when already done.
#
# mmcv's ops (scripts/install/cuda_toolkit.py plan): CUDA for the GPUs torch sees, or for those named
# (MMCV_CUDA_ARCHS="8.0 9.0", e.g. on a login node without a GPU), else the CPU only; compiled by
# the system's nvcc when its release is torch's CUDA, else by nvcc from the index's wheels for
# that CUDA (<cache>/cuda/X.Y), so that no system toolkit is needed. After the install, one line
# fails it when the ops lack CUDA they were to have, or a visible GPU is not among the archs.
#
# MMCV_OPS=0 (`make demo`): mmcv without its compiled ops, OpenMMLab's mmcv-lite wheel (mmcv's
# MMCV_WITH_OPS=0 build; seconds), enough for video recognition; an mmcv already there is kept,
# and a later full install replaces mmcv-lite in the same environment. Stamps: .dna_mm_installed
# (full) and .dna_mm_installed_lite (either).
#
# Cache: ${DNA_MM_CACHE:-$HOME/.cache/dna_mm}/wheels/mmcv-<mmcv>-torch<torch>[-cu<XY>-sm<archs>]-<pytag>/
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${VENV:-.venv}
# an interpreter that answers -V (a pyenv shim of an installed, not activated version falls back
# to pyenv's copy; none: one line naming PYTHON): scripts/install/find_python.sh; default python3.11, else python3
if [ -n "${PYTHON:-}" ]; then
  PYTHON=$(bash scripts/install/find_python.sh "$PYTHON" PYTHON) || exit 1
else
  PYTHON=$(bash scripts/install/find_python.sh python3.11 PYTHON 2>/dev/null || bash scripts/install/find_python.sh python3 PYTHON) || exit 1
fi
CACHE=${DNA_MM_CACHE:-$HOME/.cache/dna_mm}
MMCV_VERSION=$(sed -n 's/^mmcv==\(.*\)$/\1/p' requirements/lock.txt)
TORCH_VERSION=$(sed -n 's/^torch==\(.*\)$/\1/p' requirements/lock.txt)

log() { printf '[install_env %(%H:%M:%S)T] %s\n' -1 "$*"; }
source scripts/install/mmcv_sdist.sh

"$PYTHON" - <<'PY' || { echo "install_env: Python 3.11, 3.12 or 3.13 is required (found $("$PYTHON" -V 2>&1), set PYTHON=...)" >&2; exit 1; }
import sys; sys.exit(0 if sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)) else 1)
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

if [ "${MMCV_OPS:-1}" = 0 ]; then
  if "$PY" -c "import mmcv, sys; sys.exit(mmcv.__version__ != '$MMCV_VERSION')" 2>/dev/null; then
    log "mmcv $MMCV_VERSION is installed: kept"
  else  # OpenMMLab's wheel of mmcv built with MMCV_WITH_OPS=0 (what its setup.py names mmcv-lite)
    log "mmcv-lite $MMCV_VERSION: mmcv without its compiled ops (video recognition; 'make install' adds the ops)"
    "${PIP[@]}" install -q "${CONSTRAINTS[@]}" "mmcv-lite==$MMCV_VERSION"
  fi
  log "OpenMMLab stack + test tools"
  "${PIP[@]}" install -q "${CONSTRAINTS[@]}" -r requirements/runtime.txt -r requirements/optional.txt -r requirements/tests.txt -r requirements/lint.txt
  "${PIP[@]}" install -q --no-deps --no-build-isolation -e .
  "$PY" -c "import mmcv, mmaction.models, decord, timm, dna_mm" \
    || { echo "install_env: the environment in $VENV does not import; see above" >&2; exit 1; }
  touch "$VENV/.dna_mm_installed_lite"
  log "environment ready in $VENV (mmcv's compiled ops: $("$PY" -c 'from dna_mm.utils.mmcv_ops import has_ops; print("yes" if has_ops() else "no: make install adds them")'))"
  exit 0
fi

PLAN=$("$PY" scripts/install/cuda_toolkit.py plan) || exit 1
eval "$PLAN"
if [ -n "$MMCV_ARCHS" ]; then
  log "mmcv ops: CUDA $MMCV_CUDA for ${MMCV_ARCHS//;/ } (nvcc: $MMCV_NVCC)"
else
  log "mmcv ops: CPU only (no GPU visible; name GPUs with MMCV_CUDA_ARCHS=\"8.0 9.0\")"
fi
built_for() {  # the key of the mmcv installed in the venv (written beside it at install)
  cat "$VENV/.mmcv_key" 2>/dev/null || echo cpu
}
if ! "$PY" -c "import mmcv, mmcv.ops, sys; sys.exit(mmcv.__version__ != '$MMCV_VERSION')" 2>/dev/null \
    || [ "$(built_for)" != "$MMCV_KEY" ]; then
  PYTAG=$("$PY" -c "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')")
  SUFFIX=${MMCV_KEY/#cpu/}  # the CPU-only wheel keeps the key it always had
  WHEEL_DIR="$CACHE/wheels/mmcv-$MMCV_VERSION-torch$TORCH_VERSION${SUFFIX:+-$SUFFIX}-$PYTAG"
  WHEEL=$(ls "$WHEEL_DIR"/mmcv-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$WHEEL" ]; then
    log "no cached mmcv wheel in $WHEEL_DIR: building mmcv $MMCV_VERSION from the sdist (on 2 cores: 10-25 min for the CPU, 40-50 min with CUDA for one architecture)"
    BUILD=$(mktemp -d)
    trap 'rm -rf "$BUILD"' EXIT
    SRC=$(mmcv_sdist "$PY" "$MMCV_VERSION" "$BUILD") || exit 1  # fetched and patched (C++20, 3.13)
    start=$(date +%s)
    if [ -n "$MMCV_ARCHS" ]; then
      if [ "$MMCV_NVCC" = index ]; then
        export CUDA_HOME
        CUDA_HOME=$("$PY" scripts/install/cuda_toolkit.py toolkit --cuda "$MMCV_CUDA" --cache "$CACHE") || exit 1
        log "nvcc from the index's wheels for CUDA $MMCV_CUDA: $CUDA_HOME"
      else
        export CUDA_HOME=${MMCV_NVCC%/bin/nvcc}
      fi
      export PATH="$CUDA_HOME/bin:$PATH" TORCH_CUDA_ARCH_LIST="$MMCV_ARCHS" FORCE_CUDA=1
    fi
    MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} "${PIP[@]}" wheel -q --no-deps --no-build-isolation -w "$BUILD/dist" "$SRC"
    log "mmcv built in $(( $(date +%s) - start )) s"
    mkdir -p "$WHEEL_DIR"
    cp "$BUILD"/dist/mmcv-*.whl "$WHEEL_DIR/"
    WHEEL=$(ls "$WHEEL_DIR"/mmcv-*.whl | head -n 1)
  else
    log "reusing cached $WHEEL"
  fi
  "${PIP[@]}" uninstall -q -y mmcv-lite 2>/dev/null || true  # make demo's op-less mmcv, replaced
  "${PIP[@]}" install -q "${CONSTRAINTS[@]}" "$WHEEL"  # with its dependencies
  "${PIP[@]}" install -q --force-reinstall --no-deps "$WHEEL"  # over an mmcv 2.0.1 built for other archs
  echo "$MMCV_KEY" > "$VENV/.mmcv_key"
fi
"$PY" scripts/install/cuda_toolkit.py check --archs "$MMCV_ARCHS" || exit 1

log "OpenMMLab stack + test tools"
"${PIP[@]}" install -q "${CONSTRAINTS[@]}" -r requirements/runtime.txt -r requirements/optional.txt -r requirements/tests.txt -r requirements/lint.txt
"${PIP[@]}" install -q --no-deps --no-build-isolation -e .
"$PY" -c "import mmcv.ops, mmaction.models, mmdet.models, decord, timm, dna_mm" \
  || { echo "install_env: the environment in $VENV does not import; see above" >&2; exit 1; }
touch "$VENV/.dna_mm_installed" "$VENV/.dna_mm_installed_lite"
log "environment ready in $VENV"
