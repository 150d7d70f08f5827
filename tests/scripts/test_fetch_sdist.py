"""scripts/install/fetch_sdist.py: an sdist taken from the index's simple page without running its setup.py
(pip's download would, and mmcv 2.0.1's fails on Python 3.13), its sha256 checked. A simple
index on disk stands for the index."""

from __future__ import annotations

import hashlib

import pytest
from conftest import load_tool

fs = load_tool('scripts/install/fetch_sdist.py')


def _index(tmp_path, data: bytes, sha: str) -> str:
    """A PEP 503 simple index in ``tmp_path`` holding ``mmcv-2.0.1.tar.gz`` (and a wheel beside it)."""
    (tmp_path / 'files').mkdir()
    (tmp_path / 'files' / 'mmcv-2.0.1.tar.gz').write_bytes(data)
    page = tmp_path / 'simple' / 'mmcv' / 'index.html'
    page.parent.mkdir(parents=True)
    page.write_text(
        '<html><body>'
        '<a href="../../files/mmcv-2.0.0.tar.gz#sha256=00">mmcv-2.0.0.tar.gz</a>'
        '<a href="../../files/mmcv-2.0.1-py3-none-any.whl">mmcv-2.0.1-py3-none-any.whl</a>'
        f'<a href="../../files/mmcv-2.0.1.tar.gz#sha256={sha}" data-requires-python="&gt;=3.7">x</a>'
        '</body></html>'
    )
    return (tmp_path / 'simple').as_uri()


def test_the_sdist_is_fetched_and_its_hash_checked(tmp_path) -> None:
    data = b'not really a tarball'
    index = _index(tmp_path, data, hashlib.sha256(data).hexdigest())
    got = fs.fetch('mmcv==2.0.1', tmp_path / 'out', index)
    assert got.name == 'mmcv-2.0.1.tar.gz' and got.read_bytes() == data


def test_a_hash_that_differs_is_refused_and_nothing_is_written(tmp_path) -> None:
    index = _index(tmp_path, b'tampered', hashlib.sha256(b'original').hexdigest())
    with pytest.raises(ValueError, match='sha256 differs'):
        fs.fetch('mmcv==2.0.1', tmp_path / 'out', index)
    assert not (tmp_path / 'out' / 'mmcv-2.0.1.tar.gz').exists()


def test_a_version_the_index_lacks_is_one_line(tmp_path, capsys) -> None:
    index = _index(tmp_path, b'x', hashlib.sha256(b'x').hexdigest())
    assert fs.main(['mmcv==9.9.9', str(tmp_path / 'out'), '--index', index]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'no mmcv-9.9.9.tar.gz' in err


def test_names_are_matched_as_the_index_normalises_them() -> None:
    page = '<a href="https://files.example/Mmcv_Full-1.7.2.tar.gz#sha256=ab">x</a>'
    assert fs.find_sdist(page, 'https://i/simple/mmcv-full/', 'mmcv-full', '1.7.2') == (
        'https://files.example/Mmcv_Full-1.7.2.tar.gz',
        'ab',
    )


#: the lines of mmcv 2.0.1's setup.py that scripts/install/mmcv_sdist.sh patches, as the sdist has them
MMCV_SETUP = """def get_version():
    with open(version_file) as f:
        exec(compile(f.read(), version_file, 'exec'))
    return locals()['__version__']
            'nvcc': [cuda_args, '-std=c++14'] if cuda_args else ['-std=c++14'],
            extra_compile_args['cxx'] = ['-Wall', '-std=c++17']
"""


def test_the_mmcv_source_is_fetched_and_patched_for_cpp20_and_python_3_13(tmp_path) -> None:
    """``mmcv_sdist`` (scripts/install/mmcv_sdist.sh, what both mmcv builds use) on an index that holds a
    tarball laid out as mmcv's sdist is."""
    import io
    import subprocess
    import sys
    import tarfile

    from conftest import REPO

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w:gz') as tar:
        info = tarfile.TarInfo('mmcv-2.0.1/setup.py')
        info.size = len(MMCV_SETUP.encode())
        tar.addfile(info, io.BytesIO(MMCV_SETUP.encode()))
    data = buf.getvalue()
    index = _index(tmp_path, data, hashlib.sha256(data).hexdigest())
    script = f'source scripts/install/mmcv_sdist.sh && mmcv_sdist {sys.executable} 2.0.1 {tmp_path / "build"}'
    out = subprocess.run(
        ['bash', '-c', script],
        cwd=REPO,
        env={'PATH': '/usr/bin:/bin', 'PIP_INDEX_URL': index},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    src = tmp_path / 'build' / 'mmcv-2.0.1'
    assert out.strip() == str(src)
    setup = (src / 'setup.py').read_text()
    assert "exec(compile(f.read(), version_file, 'exec'), _ns := {})" in setup
    assert "return _ns['__version__']" in setup and 'locals()' not in setup
    assert setup.count('-std=c++20') == 3 and 'c++14' not in setup and 'c++17' not in setup
