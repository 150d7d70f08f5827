"""A training run into a work dir an earlier run used: a new run (no ``--resume``) moves the
earlier run's checkpoints and config copy into ``earlier_run_<time>/`` before it writes its own,
nothing overwritten and no stale checkpoint beside the new ones; a run that fails on its config
leaves the work dir's config copy as it was (the copy is written once the run's parts are built)."""

from __future__ import annotations

from conftest import DEMO_CONFIG, run_main, tiny_run_options

from dna_mm.engine.earlier_run import EARLIER_RUN


def test_a_new_run_moves_the_earlier_one_aside_and_a_failed_one_changes_nothing(
    tiny_video_set, tmp_path
) -> None:
    work = tmp_path / 'work'
    train = ['tools/train.py', DEMO_CONFIG, '--seed', '0', '--work-dir', str(work), '--cfg-options']
    first = [*tiny_run_options(tiny_video_set, epochs=2), 'default_hooks.checkpoint.interval=1']
    run_main([*train, *first])
    dump = work / 'timesformer_dna_demo.py'
    earlier = {p.name: p.read_bytes() for p in (work / 'epoch_1.pth', work / 'epoch_2.pth', dump)}

    # a typo the data loader meets: refused, the work dir's files as they were
    typo = run_main([*train, *first, 'train_dataloader.batchsize=4'], check=False)
    assert typo.returncode == 2 and 'batchsize' in typo.stderr, typo.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in work.iterdir() if p.name in earlier} == earlier

    # another run, 1 epoch wider: the earlier run's files moved aside, whole
    second = run_main(
        [*train, *tiny_run_options(tiny_video_set, epochs=1), 'model.cls_head.dropout_ratio=0.25']
    )
    (aside,) = work.glob(f'{EARLIER_RUN}*')
    assert {p.name: p.read_bytes() for p in aside.iterdir() if p.name in earlier} == earlier
    assert (aside / 'last_checkpoint').read_text() == str(aside / 'epoch_2.pth')
    assert (
        'held an earlier run (' in second.stdout + second.stderr
        and str(aside) in second.stdout + second.stderr
    )
    assert sorted(p.name for p in work.glob('*.pth')) == ['epoch_1.pth']  # no stale epoch_2.pth beside it
    assert (work / 'epoch_1.pth').read_bytes() != earlier[
        'epoch_1.pth'
    ] and 'dropout_ratio=0.25' in dump.read_text()

    # --resume continues the run there, moving nothing
    run_main(
        [
            *train[:-1],
            '--resume',
            '--cfg-options',
            *tiny_run_options(tiny_video_set, epochs=2),
            'model.cls_head.dropout_ratio=0.25',
        ]
    )
    assert len(list(work.glob(f'{EARLIER_RUN}*'))) == 1 and (work / 'epoch_2.pth').is_file()


def test_a_work_dir_that_cannot_be_one_is_one_line(tiny_video_set, tmp_path) -> None:
    """A work dir that is a file, or inside a folder that cannot be written: one line naming it."""
    (tmp_path / 'afile').write_text('')
    locked = tmp_path / 'locked'
    locked.mkdir(mode=0o500)
    inside = tmp_path / 'afile' / 'run'
    cases = ((tmp_path / 'afile', 'is a file, not a folder'), (inside, 'cannot be made: Not a directory'))
    for work, why in (*cases, (locked / 'run', 'cannot be made: Permission denied')):
        args = ['tools/train.py', DEMO_CONFIG, '--work-dir', str(work), '--cfg-options']
        proc = run_main([*args, *tiny_run_options(tiny_video_set)], check=False)
        if 'Permission denied' in why and proc.returncode == 0:
            continue  # root writes anywhere
        assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
        where = f"train.py: error: work dir {work} (--work-dir, or the config's work_dir)"
        assert f'{where} {why}' in proc.stderr, proc.stderr[-3000:]
