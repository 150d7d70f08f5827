"""Fetch a package's source distribution from the package index without running it.

usage: python scripts/install/fetch_sdist.py NAME==VERSION DEST_DIR

``pip download --no-binary`` prepares the sdist's metadata, that is, it runs its ``setup.py``
before anything can patch it; mmcv 2.0.1's fails on Python 3.13 (its version read, PEP 667).
This reads the index's simple page instead (``PIP_INDEX_URL``, else pip's configured
``index-url``, else PyPI), downloads ``NAME-VERSION.tar.gz``, checks the sha256 the page gives,
and prints the file's path. The standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional

PYPI = 'https://pypi.org/simple'


def index_url() -> str:
    """The index pip uses: ``PIP_INDEX_URL``, pip's configured ``index-url``, else PyPI."""
    if os.environ.get('PIP_INDEX_URL'):
        return os.environ['PIP_INDEX_URL']
    out = subprocess.run(
        [sys.executable, '-m', 'pip', 'config', 'list'], capture_output=True, text=True, timeout=60
    ).stdout
    m = re.search(r"^[\w:.]*index-url='([^']+)'", out, re.M)
    return m.group(1) if m else PYPI


def find_sdist(page: str, base: str, name: str, version: str) -> tuple[str, Optional[str]]:
    """``(url, sha256 or None)`` of ``name-version.tar.gz`` among the links of a simple page."""
    wanted = f'{re.sub(r"[-_.]+", "[-_.]", name)}-{re.escape(version)}\\.tar\\.gz'
    for href in re.findall(r'href="([^"]+)"', page):
        href = html.unescape(href)
        url, _, fragment = href.partition('#')
        if re.fullmatch(wanted, url.rsplit('/', 1)[-1], re.I):
            sha = fragment[len('sha256=') :] if fragment.startswith('sha256=') else None
            return urllib.parse.urljoin(base, url), sha
    raise LookupError(f'{name}=={version}: no {name}-{version}.tar.gz on {base}')


def fetch(requirement: str, dest: Path, index: Optional[str] = None) -> Path:
    """Download the sdist of ``NAME==VERSION`` into ``dest``; returns its path."""
    name, sep, version = requirement.partition('==')
    if not sep or not name or not version:
        raise ValueError(f'expected NAME==VERSION, got {requirement!r}')
    base = (index or index_url()).rstrip('/') + f'/{name.lower()}/'
    page_url = base + 'index.html' if base.startswith('file:') else base  # a folder index on disk
    with urllib.request.urlopen(page_url, timeout=120) as r:
        page = r.read().decode('utf-8', 'replace')
    url, sha = find_sdist(page, base, name, version)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / url.rsplit('/', 1)[-1]
    with urllib.request.urlopen(url, timeout=600) as r:
        data = r.read()
    if sha is not None and hashlib.sha256(data).hexdigest() != sha:
        raise ValueError(f'{url}: sha256 differs from the index page ({sha})')
    target.write_bytes(data)
    return target


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('requirement', help='NAME==VERSION')
    p.add_argument('dest', type=Path)
    p.add_argument('--index', help='a simple index URL (default: pip\'s)')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    try:
        print(fetch(args.requirement, args.dest, args.index))
    except (ValueError, LookupError, OSError) as err:
        if args.debug:
            raise
        print(f'fetch_sdist: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
