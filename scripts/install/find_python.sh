#!/usr/bin/env bash
# The path of a Python interpreter that runs, for NAME (python3.12, a path, ...), on stdout.
#
#   bash scripts/install/find_python.sh NAME [VARIABLE]      # VARIABLE: what the user sets instead (PYTHON)
#
# NAME is taken only after it has answered `-V`: a pyenv shim whose version is installed but not
# activated ("pyenv: python3.12: command not found") does not answer, and then pyenv's installed
# version is taken ($(pyenv root)/versions/3.12*/bin/python3.12, the newest that answers). When
# neither runs: one line naming VARIABLE on stderr, exit status 1.
set -euo pipefail
name=${1:?usage: find_python.sh NAME [VARIABLE]}
var=${2:-PYTHON}

answers() { "$1" -V >/dev/null 2>&1; }

if answers "$name"; then
  command -v "$name" || echo "$name"
  exit 0
fi
version=$(basename "$name" | sed -n 's/^python\([0-9][0-9]*\.[0-9][0-9]*\)$/\1/p')
root=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
if [ -n "$version" ]; then
  for dir in $(ls -d "$root/versions/$version" "$root/versions/$version".* 2>/dev/null | sort -V -r); do
    if answers "$dir/bin/python$version"; then
      echo "$dir/bin/python$version"
      exit 0
    fi
  done
fi
echo "find_python: $name does not run$([ -n "$version" ] && echo " and pyenv ($root) has no Python $version that does"); set $var=/path/to/python${version:-3}" >&2
exit 1
