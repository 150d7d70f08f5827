"""No code runs from any checkpoint source; whole-model loads are strict; the CLI names files.

Malicious files are ``torch.save`` pickles whose ``__reduce__`` would run
``os.system('touch MARKER')``; they are served by a test-local HTTP server on 127.0.0.1 (the
model tables of ``torchvision://``, ``modelzoo://``, ``mmcls://`` and ``open-mmlab://`` pointed
at it; one also planted in the download cache, one under MMENGINE_HOME) and every test checks
that MARKER stays absent. Downloads cache under the test's tmp dir (TORCH_HOME, MMENGINE_HOME).
"""

from __future__ import annotations

import csv
import functools
import http.server
import json
import os
import pickle
import re
import subprocess
import sys
import threading
import types
import urllib.request
from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, load_tool, run_main, tiny_backbone, tiny_run_options, tiny_runner
from mmengine.runner import checkpoint as mm_checkpoint
from mmengine.runner.checkpoint import CheckpointLoader, _load_checkpoint

import dna_mm
from dna_mm.checkpoint import UnsafeCheckpointError
from dna_mm.checkpoint.sources import CHECKED_SCHEMES


class _Payload:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


def write_evil(path: Path, marker: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({'state_dict': {'w': torch.zeros(2)}, 'meta': _Payload(marker)}, path)
    return path


class LoopbackServer:
    """Serve ``root`` on 127.0.0.1 (a free port) from a thread; stops on ``close()`` or by
    itself after ``lifetime`` seconds. ``requests``: the paths asked for, in order."""

    def __init__(self, root: Path, lifetime: float = 300.0) -> None:
        requests: list[str] = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_request(self, code='-', size='-') -> None:
                requests.append(self.path)

            def log_message(self, *args) -> None:
                pass

        self.root, self.requests = root, requests
        handler = functools.partial(Handler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}'
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.timer = threading.Timer(lifetime, self.close)
        self.timer.daemon = True
        self.timer.start()

    def close(self) -> None:
        self.timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def loopback(tmp_path, monkeypatch):
    """A :class:`LoopbackServer` of ``tmp_path/www``; the download caches are in ``tmp_path``
    (so no file cached by another test or by the user is ever read)."""
    root = tmp_path / 'www'
    root.mkdir()
    server = LoopbackServer(root)
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))  # torch.hub download cache
    monkeypatch.setenv('MMENGINE_HOME', str(tmp_path / 'mmengine_home'))  # open_mmlab.json
    monkeypatch.setenv('no_proxy', '127.0.0.1,localhost')
    monkeypatch.setenv('NO_PROXY', '127.0.0.1,localhost')
    yield server
    server.close()


@pytest.fixture
def served(loopback):
    """``(root dir, base URL)``: files written to root are served; downloads cache in tmp."""
    return loopback.root, loopback.url


@pytest.mark.integration
def test_the_payload_is_live(tmp_path) -> None:
    """Control: an unrestricted load of the test file does run its command (so the marker's
    absence in the other tests means something). Run in a child process on purpose."""
    marker = tmp_path / 'MARKER'
    path = write_evil(tmp_path / 'evil.pth', marker)
    subprocess.run(
        [sys.executable, '-c', f'import torch; torch.load({str(path)!r}, weights_only=False)'],
        check=True,
        capture_output=True,
    )
    assert marker.exists()


@pytest.mark.integration
def test_a_scheme_from_a_newer_mmengine_is_refused_not_fatal() -> None:
    """mmengine newer than tested registers a scheme dna_mm does not know: ``import dna_mm``
    warns and works, and loading from that scheme is refused (never mmengine's own loader)."""
    code = (
        'from mmengine.runner.checkpoint import CheckpointLoader\n'
        'CheckpointLoader.register_scheme("newhub://", lambda f, map_location=None: "UNCHECKED")\n'
        'import dna_mm\n'
        'from dna_mm.checkpoint import UnsafeCheckpointError\n'
        'try:\n'
        '    CheckpointLoader.load_checkpoint("newhub://some/model.pth")\n'
        'except UnsafeCheckpointError as err:\n'
        '    print("REFUSED", err)\n'
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert 'REFUSED newhub://some/model.pth' in out.stdout, out.stdout + out.stderr
    assert "checkpoint schemes dna_mm has not checked: ['newhub://']" in out.stdout + out.stderr


def test_every_mmengine_scheme_has_a_safe_loader() -> None:
    """Each scheme mmengine registers runs mmengine's own loader, wrapped weights-only; mmengine's
    module-level functions are left as they are."""
    assert set(CheckpointLoader._schemes) == set(CHECKED_SCHEMES), 'mmengine registers its schemes at import'
    for prefix, loader in CheckpointLoader._schemes.items():
        assert loader.dna_mm_weights_only, prefix
        assert loader.__wrapped__ is getattr(mm_checkpoint, loader.__name__), prefix
        assert getattr(mm_checkpoint, loader.__name__).__module__ == 'mmengine.runner.checkpoint'


def test_nothing_else_unpickles() -> None:
    """Package and tools reach torch's unpickler only through dna_mm.checkpoint (which calls
    mmengine's loaders, inside the weights-only policy)."""
    allowed = REPO / 'dna_mm' / 'checkpoint' / 'policy.py'
    pattern = re.compile(
        r'torch\.load\(|load_state_dict_from_url|weights_only\s*=\s*False|'
        r'pickle\.loads?\(|load_url\('
    )
    offenders = [
        f'{p.relative_to(REPO)}:{i}'
        for root in ('dna_mm', 'tools')
        for p in sorted((REPO / root).rglob('*.py'))
        if p != allowed
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, offenders


def _served_url(served, marker: Path, name: str = 'evil.pth') -> str:
    root, base = served
    write_evil(root / name, marker)
    return f'{base}/{name}'


# prefix -> the mmengine function that gives its model table (name -> URL)
URL_TABLES = {
    'torchvision': 'get_torchvision_models',
    'modelzoo': 'get_torchvision_models',
    'mmcls': 'get_mmcls_models',
}


def _table_source(scheme: str, url: str, monkeypatch) -> str:
    """``scheme://served_net``, its model table pointed at ``url``. ``open-mmlab://`` reads
    ``$MMENGINE_HOME/open_mmlab.json`` (as a user's table would); the others' tables are
    mmengine's functions, replaced here, so that mmengine's name lookup and the real download
    code fetch from the loopback server."""
    if scheme in ('open-mmlab', 'openmmlab'):
        home = Path(os.environ['MMENGINE_HOME'])
        home.mkdir(parents=True, exist_ok=True)
        (home / 'open_mmlab.json').write_text(json.dumps({'served_net': url}))
    else:
        monkeypatch.setattr(mm_checkpoint, URL_TABLES[scheme], lambda: {'served_net': url})
    return f'{scheme}://served_net'


@pytest.mark.parametrize('scheme', ['http', 'open-mmlab', 'openmmlab', 'torchvision', 'modelzoo', 'mmcls'])
def test_no_scheme_runs_a_served_pickle(scheme, loopback, tmp_path, monkeypatch) -> None:
    marker = tmp_path / 'MARKER'
    name = f'evil_{scheme}.pth'
    url = _served_url((loopback.root, loopback.url), marker, name)
    source = url if scheme == 'http' else _table_source(scheme, url, monkeypatch)
    with pytest.raises(UnsafeCheckpointError) as err:
        _load_checkpoint(source, map_location='cpu')
    message = str(err.value)
    assert f'refused to load checkpoint {url}' in message, message
    assert 'posix.system,' in message and 'whose' not in message, message
    assert loopback.requests == [f'/{name}']  # fetched from the server, into the tmp cache
    assert (tmp_path / 'torch_home' / 'hub' / 'checkpoints' / name).is_file()
    assert not marker.exists()


@pytest.mark.parametrize('where', ['download cache', 'MMENGINE_HOME'])
def test_a_planted_pickle_is_refused_too(where, loopback, tmp_path) -> None:
    """Not served: a poisoned torch.hub cache (``torchvision://`` reads it without
    downloading), and a table entry naming a file under MMENGINE_HOME (``openmmlab://``)."""
    marker = tmp_path / 'MARKER'
    if where == 'download cache':
        name = 'resnet18'
        shown = Path(mm_checkpoint.get_torchvision_models()[name].split('?')[0]).name
        write_evil(tmp_path / 'torch_home' / 'hub' / 'checkpoints' / shown, marker)
        source = f'torchvision://{name}'
    else:
        home = tmp_path / 'mmengine_home'
        write_evil(home / 'models' / 'evil_local.pth', marker)
        (home / 'open_mmlab.json').write_text(json.dumps({'evil_local': 'models/evil_local.pth'}))
        source, shown = 'openmmlab://evil_local', 'evil_local.pth'
    with pytest.raises(UnsafeCheckpointError) as err:
        _load_checkpoint(source, map_location='cpu')
    assert shown in str(err.value) and 'posix.system,' in str(err.value), str(err.value)
    assert not loopback.requests and not marker.exists()


def _install_fake_backend(scheme: str, url: str, monkeypatch) -> None:
    """pavi and petrel (s3) are not installed here: stand-ins whose fetch downloads ``url``
    from the loopback server. What is tested is dna_mm's loader registered for the prefix,
    given the bytes the backend would have returned."""

    def fetch() -> bytes:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read()

    if scheme == 'pavi':

        class Model:
            name = Path(url).name

            def download(self, path: str) -> None:
                Path(path).write_bytes(fetch())

        pavi = types.ModuleType('pavi')
        pavi.modelcloud = types.SimpleNamespace(get=lambda name: Model())
        monkeypatch.setitem(sys.modules, 'pavi', pavi)
    else:

        def get_file_backend(filename, backend_args=None):
            assert backend_args == {'backend': 'petrel'}, backend_args
            return types.SimpleNamespace(get=lambda name: fetch())

        monkeypatch.setattr(mm_checkpoint, 'get_file_backend', get_file_backend)


@pytest.mark.parametrize(
    'source',
    ['pavi://models/evil.pth', 's3://bucket/evil.pth', 'petrel://bucket/evil.pth', 'c1:s3://b/evil.pth'],
)
def test_pavi_and_ceph_loaders_refuse_a_served_pickle(source, loopback, tmp_path, monkeypatch) -> None:
    marker = tmp_path / 'MARKER'
    url = _served_url((loopback.root, loopback.url), marker)
    _install_fake_backend(source.split('://')[0].split(':')[-1], url, monkeypatch)
    with pytest.raises(UnsafeCheckpointError) as err:
        _load_checkpoint(source, map_location='cpu')
    assert f'refused to load checkpoint {source}' in str(err.value), str(err.value)
    assert 'posix.system,' in str(err.value)
    assert loopback.requests == ['/evil.pth'] and not marker.exists()


@pytest.mark.parametrize('scheme', ['torchvision', 'mmcls', 'open-mmlab', 's3'])
def test_a_harmless_served_checkpoint_loads_by_prefix(scheme, loopback, monkeypatch) -> None:
    weights = {'state_dict': {'backbone.w': torch.arange(3.0)}, 'meta': {'epoch': 2}}
    torch.save(weights, loopback.root / 'fine_net.pth')
    url = f'{loopback.url}/fine_net.pth'
    if scheme == 's3':
        _install_fake_backend(scheme, url, monkeypatch)
        source = 's3://bucket/fine_net.pth'
    else:
        source = _table_source(scheme, url, monkeypatch)
    got = _load_checkpoint(source, map_location='cpu')
    if scheme == 'mmcls':  # mmengine's key processing for MMClassification backbones
        assert list(got) == ['state_dict'] and torch.equal(got['state_dict']['w'], torch.arange(3.0))
    else:
        assert got['meta'] == {'epoch': 2}
        assert torch.equal(got['state_dict']['backbone.w'], torch.arange(3.0))
    assert loopback.requests == ['/fine_net.pth']


def test_a_harmless_served_checkpoint_loads_and_is_cached(served, tmp_path) -> None:
    root, base = served
    weights = {'state_dict': {'w': torch.arange(3.0)}, 'meta': {'epoch': 2}}
    torch.save(weights, root / 'fine.pth')
    got = _load_checkpoint(f'{base}/fine.pth', map_location='cpu')
    assert got['meta'] == {'epoch': 2} and torch.equal(got['state_dict']['w'], torch.arange(3.0))
    assert (tmp_path / 'torch_home' / 'hub' / 'checkpoints' / 'fine.pth').is_file()


@pytest.fixture(scope='module')
def tiny_checkpoint(tiny_video_set, tmp_path_factory) -> Path:
    """A real 1-epoch checkpoint of the tiny demo model (4 classes, width 32)."""
    work = tmp_path_factory.mktemp('tiny_ckpt')
    tiny_runner(work, tiny_video_set, 1).train()
    return work / 'epoch_1.pth'


def _tool(args: list[str]) -> subprocess.CompletedProcess:
    return run_main(args, check=False)


def test_train_refuses_a_served_pretrained_and_load_from(served, tiny_video_set, tmp_path) -> None:
    """The two routes of the report: ``model.backbone.pretrained=URL`` and ``load_from=URL``."""
    marker = tmp_path / 'MARKER'
    url = _served_url(served, marker)
    for i, opt in enumerate([f'model.backbone.pretrained={url}', f'load_from={url}']):
        work = tmp_path / f'w{i}'
        proc = _tool(
            [
                'tools/train.py',
                DEMO_CONFIG,
                '--work-dir',
                str(work),
                '--cfg-options',
                *tiny_run_options(tiny_video_set),
                opt,
            ]
        )
        assert proc.returncode != 0, proc.stdout[-2000:]
        assert re.search(rf'refused to load checkpoint {re.escape(url)}.*posix\.system', proc.stderr), (
            proc.stderr[-3000:]
        )
        assert not marker.exists()
        assert not list(work.glob('epoch_*.pth'))


@pytest.mark.parametrize(
    'tool',
    [
        'tools/test.py',
        'tools/infer.py',
        'tools/analysis/analyze_attention.py',
        'tools/analysis/relevance_maps.py',
    ],
)
def test_cli_refuses_a_served_checkpoint(tool, served, tiny_video_set, tmp_path) -> None:
    """Each CLI that takes a CHECKPOINT, given a malicious URL: exit status non-zero, the URL
    and the refused global on stderr, nothing run, nothing written."""
    marker = tmp_path / 'MARKER'
    url = _served_url(served, marker)
    video = str(next((tiny_video_set / 'videos').rglob('*.mp4')))
    out = tmp_path / 'out'
    extra = {
        'tools/test.py': ['--work-dir', str(out)],
        'tools/infer.py': [video, '--device', 'cpu', '--out', str(out / 'preds.csv')],
        'tools/analysis/analyze_attention.py': ['--out', str(out)],
        'tools/analysis/relevance_maps.py': ['--input', video, '--out', str(out)],
    }[tool]
    proc = _tool([tool, DEMO_CONFIG, url, *extra, '--cfg-options', *tiny_run_options(tiny_video_set)])
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert re.search(rf'refused to load checkpoint {re.escape(url)}.*posix\.system', proc.stderr), (
        proc.stderr[-3000:]
    )
    assert not marker.exists()
    assert not [p for p in out.rglob('*') if p.suffix in ('.csv', '.json', '.png', '.npz')]


def test_tools_test_strict_partial_served_and_dump(served, tiny_checkpoint, tiny_video_set, tmp_path) -> None:
    root, base = served
    good = dna_mm.checkpoint.read_checkpoint(str(tiny_checkpoint))
    opts = ['--work-dir', str(tmp_path / 'work'), '--cfg-options', *tiny_run_options(tiny_video_set)]

    # a 7-class head on the 4-class config: refused, with the file and the shapes
    seven = dict(good, state_dict=dict(good['state_dict']))
    seven['state_dict']['cls_head.fc_cls.weight'] = torch.zeros(7, 32)
    seven['state_dict']['cls_head.fc_cls.bias'] = torch.zeros(7)
    torch.save(seven, tmp_path / 'seven.pth')
    proc = _tool(['tools/test.py', DEMO_CONFIG, str(tmp_path / 'seven.pth'), *opts])
    assert proc.returncode == 2 and 'Test results' not in proc.stdout  # an input error
    assert f'checkpoint {tmp_path / "seven.pth"} does not match the model' in proc.stderr
    assert 'cls_head.fc_cls.weight: checkpoint [7, 32] vs model [4, 32]' in proc.stderr

    # --partial-load: tests, and says what was not loaded
    proc = _tool(['tools/test.py', DEMO_CONFIG, str(tmp_path / 'seven.pth'), '--partial-load', *opts])
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert 'partial load of' in out and 'cls_head.fc_cls.weight: checkpoint [7, 32] vs model [4, 32]' in out

    # the matching checkpoint, served over HTTP: loads, tests, and the CSV has real rows
    (root / 'tiny.pth').write_bytes(tiny_checkpoint.read_bytes())
    dump = tmp_path / 'preds.csv'
    proc = _tool(['tools/test.py', DEMO_CONFIG, f'{base}/tiny.pth', '--dump', str(dump), *opts])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r'Test results: top-1: [\d.]+', proc.stdout)
    rows = list(csv.DictReader(dump.open()))
    expected = {
        str(tiny_video_set / 'videos' / ln.split()[0]): ln.split()[1]
        for ln in (tiny_video_set / 'test.txt').read_text().splitlines()
    }
    assert {r['video']: r['label'] for r in rows} == expected and len(rows) == 4
    for r in rows:
        top5 = r['top5'].split()
        assert r['pred'] == top5[0] and len(top5) == 4 and 0 < float(r['score']) <= 1


def test_a_served_pretrained_backbone_still_loads(served, tiny_checkpoint) -> None:
    """Backbone initialisation from a harmless URL (non-strict, with its load report)."""
    from mmaction.registry import MODELS

    root, base = served
    (root / 'tiny_backbone.pth').write_bytes(tiny_checkpoint.read_bytes())
    backbone = MODELS.build(
        tiny_backbone(
            'DnATimeSformer', num_frames=8, num_transformer_layers=1, pretrained=f'{base}/tiny_backbone.pth'
        )
    )
    backbone.init_weights()
    weights = dna_mm.checkpoint.read_checkpoint(str(tiny_checkpoint))['state_dict']
    for key, value in backbone.state_dict().items():
        torch.testing.assert_close(value, weights[f'backbone.{key}'], rtol=0, atol=0)


def test_load_from_and_resume_are_strict(tiny_checkpoint, tiny_video_set, tmp_path) -> None:
    from mmengine.config import Config

    from dna_mm.checkpoint import CheckpointMismatchError
    from dna_mm.config import prepare_cfg
    from dna_mm.engine import build_runner

    def runner(work: Path, **cfg_keys):
        cfg = prepare_cfg(
            Config.fromfile(DEMO_CONFIG),
            DEMO_CONFIG,
            work_dir=str(work),
            cfg_options=_options(tiny_video_set),
        )
        cfg.update(cfg_keys, experiment_name=f'strict_{work.name}')
        return build_runner(cfg)

    ckpt = dna_mm.checkpoint.read_checkpoint(str(tiny_checkpoint))
    wide = dict(
        ckpt,
        state_dict={
            k: (torch.zeros(5, 32) if k == 'cls_head.fc_cls.weight' else v)
            for k, v in ckpt['state_dict'].items()
        },
    )
    torch.save(wide, tmp_path / 'wide.pth')
    with pytest.raises(
        CheckpointMismatchError,
        match=r'wide\.pth does not match(.|\n)*fc_cls\.weight: '
        r'checkpoint \[5, 32\] vs model \[4, 32\]',
    ):
        runner(tmp_path / 'a', load_from=str(tmp_path / 'wide.pth')).train()
    assert not (tmp_path / 'a' / 'epoch_1.pth').exists()

    # no model weights at all: refused on one line, naming the unexpected and missing keys; a
    # partial load of nothing too
    torch.save({'state_dict': {'foo': torch.zeros(1)}}, tmp_path / 'foo.pth')
    for partial in (False, True):
        with pytest.raises(CheckpointMismatchError) as err:
            runner(tmp_path / f'f{partial}', load_partial=partial).load_checkpoint(str(tmp_path / 'foo.pth'))
        assert re.fullmatch(
            r'checkpoint \S*foo\.pth does not match the model \(0 of its (\d+) weights match\): missing \1 '
            r'\(backbone\.cls_token, backbone\.pos_embed and \d+ more\); unexpected 1 \(foo\)\. Nothing of '
            r'it fits the model, so a partial load is refused too: use a checkpoint of this model',
            str(err.value),
        )

    r = runner(tmp_path / 'b', load_from=str(tmp_path / 'wide.pth'), load_partial=True)
    r.load_or_resume()  # partial: everything but the resized weight
    assert torch.equal(r.model.state_dict()['backbone.cls_token'], ckpt['state_dict']['backbone.cls_token'])

    torch.save({'state_dict': ckpt['state_dict']}, tmp_path / 'weights_only.pth')
    with pytest.raises(
        CheckpointMismatchError,
        match=r'cannot resume from .*weights_only\.pth: it has no '
        r"'meta' entry",
    ):
        runner(tmp_path / 'c', load_from=str(tmp_path / 'weights_only.pth'), resume=True).train()


def _options(root: Path) -> dict:
    import argparse

    from mmengine.config import DictAction

    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    return parser.parse_args(['--o', *tiny_run_options(root)]).o


def test_resume_in_an_empty_work_dir_says_so(tiny_video_set, tmp_path) -> None:
    from mmengine.config import Config

    from dna_mm.config import prepare_cfg
    from dna_mm.engine import build_runner

    cfg = prepare_cfg(
        Config.fromfile(DEMO_CONFIG),
        DEMO_CONFIG,
        work_dir=str(tmp_path),
        cfg_options=_options(tiny_video_set),
    )
    cfg.resume, cfg.experiment_name = True, 'resume_empty'
    runner = build_runner(cfg)
    runner.load_or_resume()
    log = next(tmp_path.glob('*/*.log')).read_text()
    assert (
        f'resume: no checkpoint found in {tmp_path} (no last_checkpoint file); training starts '
        f'from scratch' in log
    )
    assert 'checkpoint None' not in log and runner.epoch == 0


def _convert_tool():
    """``tools/model_converters/convert_checkpoint.py`` as a module."""
    return load_tool('tools/model_converters/convert_checkpoint.py')


def test_convert_checkpoint_refuses_a_served_pickle(served, tmp_path, capsys) -> None:
    tool = _convert_tool()
    marker = tmp_path / 'MARKER'
    url = _served_url(served, marker)
    out = tmp_path / 'out.pth'
    with pytest.raises(SystemExit) as done:
        tool.main(['dna-to-softmax', url, str(out)])
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert f'refused to load checkpoint {url}' in err and 'posix.system' in err
    assert not marker.exists() and not out.exists()


def test_softmax_to_dna_help_lists_the_variants(capsys) -> None:
    """``--variant`` takes dna_mm's variant names and the paper's, and ``--help`` says where they
    are listed (the tool checks the name after parsing: ``test_convert_checkpoint.py``)."""
    from dna_mm.models.attention import DNA_VARIANT_ALIASES, DNA_VARIANTS

    tool = _convert_tool()
    with pytest.raises(SystemExit) as done:
        tool.parse_args(['softmax-to-dna', '--help'])
    assert done.value.code == 0
    text = re.sub(r'\s+', ' ', capsys.readouterr().out)
    assert (
        "--variant VARIANT DnA variant the output is for: dna_mm's name (dna_mm.family.DNA_VARIANTS)" in text
    )
    for name in (*DNA_VARIANTS, *DNA_VARIANT_ALIASES):
        assert tool.parse_args(['softmax-to-dna', 'a', 'b', '--variant', name]).variant == name


def _unreadable_files(tmp_path: Path) -> dict[str, tuple[Path, type, str]]:
    """name -> (file, the error class, what the message says)."""
    from dna_mm.checkpoint import CorruptCheckpointError, NotACheckpointError

    good = tmp_path / 'good.pth'
    torch.save({'state_dict': {'w': torch.randn(64, 64)}, 'meta': {'epoch': 1}}, good)
    data = good.read_bytes()
    legacy = tmp_path / 'legacy_full.pth'
    torch.save({'w': torch.randn(64, 64)}, legacy, _use_new_zipfile_serialization=False)
    files = {
        'text': (b'epoch: 3\nlr: 0.1\n', NotACheckpointError, "starts with b'epoch: 3'"),
        'html': (b'<!DOCTYPE html><title>404</title>', NotACheckpointError, 'is not a PyTorch file'),
        'empty': (b'', NotACheckpointError, 'is empty (0 bytes)'),
        'random': (b'\x17' + os.urandom(4095), NotACheckpointError, 'is not a PyTorch file'),
        'truncated zip': (data[: len(data) // 2], CorruptCheckpointError, 'truncated or damaged'),
        'truncated zip head': (data[:100], CorruptCheckpointError, 'truncated or damaged'),
        'truncated legacy': (legacy.read_bytes()[:2000], CorruptCheckpointError, 'truncated or damaged'),
    }
    out = {}
    for name, (content, error, says) in files.items():
        path = tmp_path / f'{name.replace(" ", "_")}.pth'
        path.write_bytes(content)
        out[name] = (path, error, says)
    return out


def test_a_file_that_is_not_a_checkpoint_is_named_and_not_called_unsafe(tmp_path) -> None:
    """Text, HTML, empty, random bytes: NotACheckpointError; a truncated zip or legacy pickle:
    CorruptCheckpointError; both UnreadableCheckpointError (never UnsafeCheckpointError, never
    torch's bare KeyError / IndexError), and the message names the file."""
    from dna_mm.checkpoint import UnreadableCheckpointError

    for name, (path, error, says) in _unreadable_files(tmp_path).items():
        with pytest.raises(error) as err:
            _load_checkpoint(str(path), map_location='cpu')  # mmengine's loader, dna_mm's scheme
        assert isinstance(err.value, UnreadableCheckpointError) and not isinstance(
            err.value, UnsafeCheckpointError
        ), name
        assert f'checkpoint {path}' in str(err.value) and says in str(err.value), (name, str(err.value))
    broken = tmp_path / 'broken.safetensors'
    broken.write_bytes(b'\x08\x00\x00\x00\x00\x00\x00\x00{"a": 1')
    with pytest.raises(
        UnreadableCheckpointError, match=r'broken\.safetensors cannot be read as a safetensors'
    ):
        dna_mm.checkpoint.read_checkpoint(str(broken))


def test_convert_checkpoint_says_a_text_file_is_not_a_checkpoint(tmp_path, capsys) -> None:
    tool = _convert_tool()
    files = _unreadable_files(tmp_path)
    for name in ('text', 'truncated zip'):
        path, _, says = files[name]
        with pytest.raises(SystemExit) as done:
            tool.main(['dna-to-softmax', str(path), str(tmp_path / 'out.pth')])
        err = capsys.readouterr().err.strip().splitlines()
        assert done.value.code == 2 and len(err) == 2 and str(path) in err[0] and says in err[0], err
    assert not (tmp_path / 'out.pth').exists()


class _Evil:
    def __reduce__(self):
        return (os.system, ('echo pwned > /dev/null',))


def test_checkpoint_with_a_callable_is_refused(tmp_path) -> None:
    from mmengine.runner import load_checkpoint

    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'meta': _Evil()}, path)
    with pytest.raises(
        pickle.UnpicklingError,
        match=r'refused to load checkpoint \S*evil\.pth: its pickle '
        r'refers to the global posix\.system, which',
    ):
        load_checkpoint(torch.nn.Linear(2, 2), str(path))
    with pytest.raises(dna_mm.checkpoint.UnsafeCheckpointError):
        dna_mm.checkpoint.read_checkpoint(str(path))


def test_getattr_in_a_pickle_is_restricted(tmp_path) -> None:
    """mmengine checkpoints use getattr(HistoryBuffer, 'min'); nothing else may, not even
    another attribute of that allow-listed class."""
    from mmengine.logging.history_buffer import HistoryBuffer

    class Sneaky:
        def __reduce__(self):
            return (getattr, (HistoryBuffer, '__init__'))

    path = tmp_path / 'sneaky.pth'
    torch.save({'x': Sneaky()}, path)
    with pytest.raises(pickle.UnpicklingError, match='getattr'):
        dna_mm.checkpoint.read_checkpoint(str(path))


def test_missing_checkpoint_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match='nope.pth'):
        dna_mm.checkpoint.read_checkpoint(str(tmp_path / 'nope.pth'))


@pytest.mark.parametrize('written_with', ['numpy1', 'numpy2'])
def test_a_checkpoint_saved_under_either_numpy_major_loads(written_with) -> None:
    """mmengine's Runner pickles its message hub's numpy values under the module names of the
    numpy it ran with (``numpy.core.multiarray`` in 1.x, ``numpy._core.multiarray`` in 2.x):
    a checkpoint trained with one (a GPU machine's numpy 2) loads where the other runs. The
    files were written by mmengine 0.10.7 itself (``fixtures/make_runner_checkpoint.py``)."""
    from mmengine.runner import load_checkpoint

    path = Path(__file__).parent / 'fixtures' / f'runner_{written_with}.pth'
    ckpt = dna_mm.checkpoint.read_checkpoint(str(path))
    assert ckpt['meta']['iter'] == 2 and set(ckpt['state_dict']) == {'fc.weight', 'fc.bias'}
    scalars = ckpt['message_hub']['log_scalars']
    assert scalars['train/loss'].data[0].dtype.kind == 'f' and len(scalars['train/loss'].data[0]) == 2
    model = torch.nn.Module()
    model.fc = torch.nn.Linear(2, 1)
    load_checkpoint(model, str(path))  # mmengine's loader, as the tools call it
    assert torch.equal(model.fc.weight, ckpt['state_dict']['fc.weight'])  # loaded: the same values
