"""
experiments.py --table=ladder at a tiny size (4 steps a run on a corpus of a few standard-library files): H-Net's
rate target is calibrated by the secant steps, a run stopped by SIGTERM resumes from its checkpoint, every finished
run is kept in assets/ladder/, and the table and figure are rebuilt from those records alone (a fresh clone, with no
out_dir, trains nothing again).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from test_experiments import TRAIN, VAL, write_split

TINY = ['--table=ladder', '--rungs=1', '--ladder_methods=hnet,random', '--ladder_seeds=1', '--iters=4',
        '--eval_iters=1', '--jobs=1', '--ladder_compile=False', '--cal_tries=2', '--cal_tol=0.001']


@pytest.fixture(scope='module')
def ladder(tmp_path_factory):
    root = tmp_path_factory.mktemp('ladder')
    (root / 'data' / 'pycode').mkdir(parents=True)
    write_split(root / 'data' / 'pycode', 'train', TRAIN)
    write_split(root / 'data' / 'pycode', 'val', VAL)

    def run(*args, env=None):
        cmd = [sys.executable, os.path.join(ROOT, 'experiments.py'), f'--out_root={root}/out',
               f'--assets={root}/assets', f'--data_dir={root}/data', *TINY, *args]
        return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=1800,
                              env={**os.environ, 'OMP_NUM_THREADS': '1', **(env or {})})
    run.root = root
    run.stopped = run(env={'NANOTOK_SIGNAL_AT_ITER': '2'}) # every run is preempted in its step 2
    run.records_stopped = records(root)
    run.resumed = run()
    return run


def records(root):
    return {os.path.relpath(os.path.join(d, f), root / 'assets' / 'ladder'): json.load(open(os.path.join(d, f)))
            for d, _, fs in os.walk(root / 'assets' / 'ladder') for f in fs if f.endswith('.json')}


def test_a_stopped_run_resumes_from_its_checkpoint(ladder):
    assert ladder.stopped.returncode == 1 and 'stopped before their last step' in ladder.stopped.stderr
    assert not ladder.records_stopped # a stopped run is not a finished one
    assert ladder.resumed.returncode == 0, ladder.resumed.stdout[-2000:] + ladder.resumed.stderr[-2000:]
    assert ladder.resumed.stdout.count('(resumes)') == 2 # hnet's first calibration run and random's
    out = ladder.root / 'out' / 'ladder' / 'r1' / 'random_s1'
    txt = open(out / 'train.txt').read()
    assert 'stopped by SIGTERM after iteration 2' in txt and 'resumed from iter 3' in txt
    val = [r['iter'] for r in map(json.loads, open(out / 'log.jsonl')) if r['split'] == 'val']
    train = [r['iter'] for r in map(json.loads, open(out / 'log.jsonl')) if r['split'] == 'train']
    assert val == [0, 4] and train == sorted(set(train)) # the log goes on where the checkpoint was, nothing twice
    rec = records(ladder.root)['r1/random_s1.json']
    assert [c['iter'] for c in rec['curve']] == [0, 4] and rec['val']['iter'] == 4 and rec['wall_s'] > 0


def test_hnet_rate_target_is_calibrated_by_secant_steps(ladder):
    table = json.load(open(ladder.root / 'assets' / 'ladder_table.json'))
    cal = table['calibration']['r1/hnet']
    (t0, v0), (t1, v1) = cal['tried'] # cal_tol 0.001: two tries, then the closer one is taken
    assert t0 == 0.18 # CALIBRATE's first guess at rung 1
    assert t1 == round(min(max(t0 * 0.2 / v0, t0 / 2, 0.01), t0 * 2, 0.9), 4) # the ratio step after one run
    assert cal['finished'] and cal['target'] == (t0 if abs(v0 - 0.2) <= abs(v1 - 0.2) else t1)
    recs = records(ladder.root)
    assert sorted(recs) == sorted(['r1/random_s1.json', f'r1/hnet_t{t0:.4f}_s1.json', f'r1/hnet_t{t1:.4f}_s1.json'])
    for t, v in cal['tried']:
        rec = recs[f'r1/hnet_t{t:.4f}_s1.json']
        assert f'--rate={t:.4f}' in rec['command'] and rec['val']['rate'] == v
    rows = {r['method']: r for r in table['rows']}
    assert rows['hnet']['target'] == cal['target'] and rows['hnet']['seeds'] == [1]
    assert rows['random']['bpb'] == recs['r1/random_s1.json']['val']['bpb']
    assert rows['random']['equal_rate'] == (abs(rows['random']['rate'] - 0.2) <= 0.01)
    assert os.path.getsize(ladder.root / 'assets' / 'ladder.png') > 0


def test_the_table_is_rebuilt_from_assets_alone(ladder):
    before = json.load(open(ladder.root / 'assets' / 'ladder_table.json'))['rows']
    shutil.rmtree(ladder.root / 'out') # a fresh clone: the records in assets/, no out_dir
    res = ladder('--tabulate_only=True')
    assert res.returncode == 0 and json.load(open(ladder.root / 'assets' / 'ladder_table.json'))['rows'] == before
    res = ladder() # nothing to train again
    assert res.returncode == 0 and '$ python train.py' not in res.stdout and not os.path.exists(ladder.root / 'out')


@pytest.mark.parametrize('arg,msg', [('--rungs=4', '--rungs=4'), ('--ladder_methods=foo', 'foo is not a method')])
def test_bad_ladder_input_is_one_line(ladder, tmp_path, arg, msg):
    res = subprocess.run([sys.executable, os.path.join(ROOT, 'experiments.py'), *TINY, arg,
                          f'--out_root={tmp_path}/out', f'--assets={tmp_path}/assets'],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 1 and msg in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not os.path.exists(tmp_path / 'out') and not os.path.exists(tmp_path / 'assets')


def test_the_learned_gaters_extra_seeds_come_after_every_rungs_first(ladder):
    # a ladder cut short holds `ladder_seeds` seeds of every method at every rung before the learned gater's 4th
    res = ladder('--rungs=1,2', '--ladder_methods=learned', '--learned_seeds=2')
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    order = [line.split('--out_dir=')[1].split()[0].split('ladder/')[1] for line in res.stdout.splitlines()
             if line.startswith('$ python train.py')]
    assert order == ['r1/learned_s1', 'r2/learned_s1', 'r1/learned_s2', 'r2/learned_s2']
