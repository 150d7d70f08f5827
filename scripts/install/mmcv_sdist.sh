# mmcv's sdist, fetched and patched for the compilers of today; sourced by scripts/install/install_env.sh
# and scripts/device/build_mmcv.sh, the two places that build mmcv's ops.
#
#   source scripts/install/mmcv_sdist.sh
#   SRC=$(mmcv_sdist PYTHON VERSION DIR)     # the unpacked, patched source tree in DIR
#
# The sdist is fetched, not prepared (scripts/install/fetch_sdist.py): pip's download would run the
# unpatched setup.py. The patches to its setup.py:
# - torch >= 2.10's headers need C++20; mmcv 2.0 / 2.1 ask for C++14 / 17;
# - Python 3.13 (PEP 667): exec() no longer writes into locals(), where get_version() reads
#   __version__; it reads it from a namespace of its own.
mmcv_sdist() {
  local py=$1 version=$2 dir=$3 src
  "$py" scripts/install/fetch_sdist.py "mmcv==$version" "$dir" >/dev/null || return 1
  tar -xzf "$dir/mmcv-$version.tar.gz" -C "$dir"
  src=$dir/mmcv-$version
  sed -i -E "s/-std=c\+\+1[47]/-std=c++20/g" "$src/setup.py"
  sed -i -E "s/exec\(compile\(f\.read\(\), version_file, 'exec'\)\)/exec(compile(f.read(), version_file, 'exec'), _ns := {})/; s/return locals\(\)\['__version__'\]/return _ns['__version__']/" "$src/setup.py"
  echo "$src"
}
