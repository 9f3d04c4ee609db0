"""
experiments.py --table=ladder at a tiny size (4 steps a run on a corpus of a few standard-library files): H-Net's rate
target is calibrated by the secant steps and holds only on the mean of every seed (the learned gater's from rung 4 on,
its plain run the first try), a run stopped by SIGTERM resumes from its checkpoint, every finished run is kept in
assets/ladder/, and the table and figure are rebuilt from those records alone (a fresh clone, with no out_dir, trains
nothing again). The fit of rungs 1-3 recovers a known line, and its prediction of rung 4 is written once, before rung 4
may train, and set beside what rung 4 measured.
"""
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from test_experiments import TRAIN, VAL, write_split

PREDICTION = 'ladder_prediction.json' # in assets/
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
    (t0, v0, n0), (t1, v1, n1) = cal['tried'] # cal_tol 0.001: two tries, then the closer one is taken
    assert n0 == n1 == 1 # one seed (ladder_seeds=1): seed 1's rate is the mean
    assert t0 == 0.18 # CALIBRATE's first guess at rung 1
    assert t1 == round(min(max(t0 * 0.2 / v0, t0 / 2, 0.01), t0 * 2, 0.9), 4) # the ratio step after one run
    assert cal['finished'] and cal['target'] == (t0 if abs(v0 - 0.2) <= abs(v1 - 0.2) else t1)
    recs = records(ladder.root)
    assert sorted(recs) == sorted(['r1/random_s1.json', f'r1/hnet_t{t0:.4f}_s1.json', f'r1/hnet_t{t1:.4f}_s1.json'])
    for t, v, _ in cal['tried']:
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
    res = ladder('--tabulate_only=True', '--ladder_methods=random') # a subset trains: the table keeps every row
    assert res.returncode == 0 and json.load(open(ladder.root / 'assets' / 'ladder_table.json'))['rows'] == before
    assert {r['method'] for r in before} == {'hnet', 'random'} and '| 1 | hnet' in res.stdout
    res = ladder() # nothing to train again
    assert res.returncode == 0 and '$ python train.py' not in res.stdout and not os.path.exists(ladder.root / 'out')


@pytest.mark.parametrize('arg,msg', [('--rungs=5', '--rungs=5'), ('--ladder_methods=foo', 'foo is not a method'),
                                     ('--skip=4/nawrot', '--skip=4/nawrot'), ('--runs=random:1', '--runs picks')])
def test_bad_ladder_input_is_one_line(ladder, tmp_path, arg, msg):
    res = subprocess.run([sys.executable, os.path.join(ROOT, 'experiments.py'), *TINY, arg,
                          f'--out_root={tmp_path}/out', f'--assets={tmp_path}/assets'],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 1 and msg in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not os.path.exists(tmp_path / 'out') and not os.path.exists(tmp_path / 'assets')


def test_the_learned_gaters_extra_seeds_come_after_every_rungs_first(ladder):
    # a ladder cut short holds `ladder_seeds` seeds of every method at every rung before the learned gater's 4th
    res = ladder('--rungs=1,2', '--ladder_methods=learned', '--more_seeds=2')
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    order = [line.split('--out_dir=')[1].split()[0].split('ladder/')[1] for line in res.stdout.splitlines()
             if line.startswith('$ python train.py')]
    assert order == ['r1/learned_s1', 'r2/learned_s1', 'r1/learned_s2', 'r2/learned_s2']


# -----------------------------------------------------------------------------
# the fit and the prediction: experiments.py's own definitions, run on records made here

def experiments(*args):
    """ experiments.py's definitions, as its command line would set them (the command itself left out) """
    src = open(os.path.join(ROOT, 'experiments.py')).read()
    src = src[:src.index('# the command (tests/test_ladder.py')]
    ns = dict(__file__=os.path.join(ROOT, 'experiments.py'), __name__='experiments')
    argv, handlers = sys.argv, {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    sys.argv = ['experiments.py', *args]
    try:
        exec(compile(src, 'experiments.py', 'exec'), ns)
    finally: # (it sets its own handlers)
        sys.argv = argv
        for s, h in handlers.items():
            signal.signal(s, h)
    return ns


def row(rung, method, flops, per_seed):
    return dict(rung=rung, method=method, flops=flops, seeds=list(range(1, len(per_seed) + 1)),
                per_seed=dict(bpb=per_seed), bpb=float(np.mean(per_seed)),
                bpb_std=float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else None)


def test_the_fit_recovers_a_line_and_its_crossing():
    ex = experiments('--table=ladder', '--boot=500')
    x = np.array([12.0, 12.5, 13.5])
    line = {'learned': (5.0, -0.2), 'hnet': (4.9, -0.19), 'random': (5.2, -0.2)} # learned - hnet = 0.1 - 0.01 x
    spread = {'learned': 0.02, 'hnet': 0.0, 'random': 0.0} # seeds v - s, v, v + s: the means are the line's
    rows = [row(k + 1, m, 10 ** x[k], [a + b * x[k] + d for d in (-spread[m], 0, spread[m])])
            for m, (a, b) in line.items() for k in range(3)]
    fit = ex['ladder_fit'](rows, 1e14)
    assert fit['x'] == pytest.approx(x) and fit['x4'] == pytest.approx(14.0)
    for m, (a, b) in line.items():
        f = fit['methods'][m]
        assert f['intercept'] == pytest.approx(a) and f['slope'] == pytest.approx(b)
        assert f['at_rung4'] == pytest.approx(a + 14 * b)
        if spread[m]: # resampled seeds move the fit: an interval around the point
            assert f['lo'] < f['at_rung4'] < f['hi'] and f['hi'] - f['lo'] < 6 * spread[m]
        else: # equal seeds: every refit is the fit
            assert f['lo'] == pytest.approx(f['at_rung4']) == pytest.approx(f['hi'])
    gap = fit['gaps']['hnet']
    assert gap['slope'] == pytest.approx(-0.01) and gap['at_rung4'] == pytest.approx(-0.04)
    assert gap['crossing_flops'] == pytest.approx(1e10) # 0.1 - 0.01 x = 0 at x = 10
    assert gap['ahead'] == 1.0 # at rung 4 the learned gater is ahead in every refit (the gap's interval is below 0)
    assert fit['gaps']['random']['crossing_flops'] is None and fit['gaps']['random']['ahead'] == 1.0 # parallel
    assert set(fit['gaps']) == {'hnet', 'random'} and not any('ahead' in f for f in fit['methods'].values())


def test_rung_4_is_predicted_once_before_it_trains(ladder, tmp_path):
    args = ['--table=ladder', '--iters=4', '--eval_iters=1', '--ladder_compile=False', '--ladder_seeds=2',
            '--more_seeds=2', '--ladder_methods=learned,random,hnet', '--cal_tol=0.01', '--boot=200',
            f'--assets={tmp_path}/assets', f'--out_root={tmp_path}/out', f'--data_dir={ladder.root}/data']
    ex = experiments(*args)
    bpb = lambda run: {'learned': 3.0, 'random': 3.1, 'hnet': 2.95}[run['meta']['method']] - 0.1 * run['meta'][
        'rung'] + 0.01 * run['meta']['seed']
    template = next(iter(records(ladder.root).values()))
    def fill(): # a record for every run the plan names: val rate 0.2, the calibration holds at once
        for _ in range(10):
            todo = [r for r in ex['ladder_plan']()[0] if ex['state'](r) == 'todo']
            for run in todo:
                os.makedirs(os.path.dirname(run['asset']), exist_ok=True)
                json.dump(dict(template, name=run['name'], **run['meta'], args=run['args'], command=run['command'],
                               val=dict(template['val'], bpb=bpb(run), rate=0.2)), open(run['asset'], 'w'))
    cli = lambda *more: subprocess.run([sys.executable, os.path.join(ROOT, 'experiments.py'), *args, *more],
                                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    ex['rungs'] = '1,2' # rungs 1 and 2 only: rung 3 is missing
    fill()
    res = cli('--predict=True')
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert 'r3/learned (0 of 2 seeds)' in res.stderr and not os.path.exists(tmp_path / 'assets' / PREDICTION)
    ex['rungs'] = '1,2,3,4'
    fill()
    plan, waiting = ex['ladder_plan']()
    assert not [r for r in plan if r['meta']['rung'] == 4] and waiting[-1].startswith('r4 (after the prediction')
    res = cli('--predict=True')
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    pred = json.load(open(tmp_path / 'assets' / PREDICTION))
    rows = {(r['rung'], r['method']): r for r in ex['ladder_rows']()}
    for m in ('learned', 'random', 'hnet'):
        means = [rows[k, m]['bpb'] for k in (1, 2, 3)]
        assert pred['methods'][m]['points'] == pytest.approx(means)
        b, a = np.polyfit(pred['x'], means, 1)
        assert pred['methods'][m]['slope'] == pytest.approx(b) and pred['methods'][m]['at_rung4'] == pytest.approx(
            a + b * pred['x4'])
    assert pred['rung4_flops'] == pytest.approx(ex['ladder_flops'](4) * rows[3, 'learned']['bytes'])
    assert pred['rung4'] == ex['rung_args'](4) and len(pred['records']) == 9 and 'least squares' in pred['fit']
    again = cli('--predict=True') # the prediction stands: never overwritten
    assert again.returncode == 1 and 'holds the prediction already' in again.stderr
    assert json.load(open(tmp_path / 'assets' / PREDICTION)) == pred
    plan, waiting = ex['ladder_plan']() # rung 4 is planned now, H-Net calibrated from rung 3's target
    assert {r['name'] for r in plan if r['meta']['rung'] == 4} >= {'r4/learned_s1', 'r4/random_s2', 'r4/hnet_t0.1800_s1'}
    fill()
    res = cli('--tabulate_only=True')
    held = json.load(open(tmp_path / 'assets' / 'ladder_table.json'))['prediction_held']
    rows = {(r['rung'], r['method']): r for r in ex['ladder_rows']()}
    assert held['learned']['measured'] == pytest.approx(rows[4, 'learned']['bpb'])
    assert held['learned - hnet']['measured'] == pytest.approx(rows[4, 'learned']['bpb'] - rows[4, 'hnet']['bpb'])
    for k, h in held.items():
        f = pred['methods'][k] if ' - ' not in k else pred['gaps'][k.split(' - ')[1]]
        assert h['held'] == (f['lo'] <= h['measured'] <= f['hi'])
    assert 'predicted from rungs 1-3' in res.stdout and os.path.getsize(tmp_path / 'assets' / 'ladder.png') > 0


def test_a_calibration_target_holds_on_the_mean_of_every_seed(ladder, tmp_path):
    """ a target within cal_tol on seed 1 runs on seeds 2 and 3 before it holds; off on their mean, the next target
        is stepped from the mean: a target set on one seed can miss on the others """
    ex = experiments('--table=ladder', '--iters=4', '--eval_iters=1', '--ladder_compile=False', '--rungs=1',
                     '--ladder_methods=hnet', f'--assets={tmp_path}/assets', f'--data_dir={ladder.root}/data')
    t1 = ex['next_target']([(0.18, (0.198 + 0.188 + 0.186) / 3)]) # the ratio step from the mean
    rates = {(0.18, 1): 0.198, (0.18, 2): 0.188, (0.18, 3): 0.186, (t1, 1): 0.2, (t1, 2): 0.201, (t1, 3): 0.199}
    template, named = next(iter(records(ladder.root).values())), []
    for _ in range(10):
        todo = [r for r in ex['ladder_plan']()[0] if ex['state'](r) == 'todo']
        named.append(sorted((r['meta']['target'], r['meta']['seed']) for r in todo))
        for run in todo:
            os.makedirs(os.path.dirname(run['asset']), exist_ok=True)
            rate = rates[run['meta']['target'], run['meta']['seed']]
            json.dump(dict(template, name=run['name'], **run['meta'], args=run['args'], command=run['command'],
                           val=dict(template['val'], rate=rate)), open(run['asset'], 'w'))
    assert named[:4] == [[(0.18, 1)], [(0.18, 2), (0.18, 3)], [(t1, 1)], [(t1, 2), (t1, 3)]] and not named[4]
    target, finished, tried = ex['calibration'](1, 'hnet')
    assert (target, finished) == (t1, True) and t1 != 0.18
    assert tried == [(0.18, pytest.approx(0.1907, abs=1e-4), 3), (t1, pytest.approx(0.2), 3)]


def test_the_learned_gater_is_calibrated_from_rung_4_on(ladder, tmp_path):
    """ at rungs 1-3 the learned gater takes train.py's own --rate; at rung 4 its plain seed-1 run is the first try
        (target 0.2), the next target is stepped from its rate, and the row holds the runs at the chosen target only,
        not the plain seeds that ran before the calibration """
    ex = experiments('--table=ladder', '--iters=4', '--eval_iters=1', '--ladder_compile=False', '--rungs=3,4',
                     '--ladder_methods=learned', '--more_seeds=3', f'--assets={tmp_path}/assets',
                     f'--data_dir={ladder.root}/data')
    os.makedirs(tmp_path / 'assets')
    open(tmp_path / 'assets' / PREDICTION, 'w').write('{}') # (rung 4 is planned once a prediction is written)
    assert not ex['calibrated'](3, 'learned') and ex['calibration'](3, 'learned') is None
    plain = ex['ladder_run'](4, 'learned', 1, 0.2)
    assert plain['name'] == 'r4/learned_s1' and plain['meta']['target'] is None
    assert not [a for a in plain['args'] if a.startswith('--rate')]
    t1 = ex['next_target']([(0.2, 0.212)])
    rates = {(4, None, 1): 0.212, (4, None, 2): 0.195, (4, None, 3): 0.214, (4, t1, 1): 0.2, (4, t1, 2): 0.199,
             (4, t1, 3): 0.201}
    template, named = next(iter(records(ladder.root).values())), []
    def write(run):
        os.makedirs(os.path.dirname(run['asset']), exist_ok=True)
        m = run['meta']
        json.dump(dict(template, name=run['name'], **m, args=run['args'], command=run['command'],
                       val=dict(template['val'], rate=rates.get((m['rung'], m['target'], m['seed']), 0.2))),
                  open(run['asset'], 'w'))
    for s in (1, 2, 3): # the plain seeds, trained before the calibration
        write(ex['ladder_run'](4, 'learned', s))
    for _ in range(6):
        todo = [r for r in ex['ladder_plan']()[0] if ex['state'](r) == 'todo']
        named.append(sorted((r['meta']['target'], r['meta']['seed']) for r in todo if r['meta']['rung'] == 4))
        if named[-1] == [(t1, 2), (t1, 3)]: # while its seeds 2-3 train, the row is seed 1's at t1, not the plain runs'
            row = {r['rung']: r for r in ex['ladder_rows']()}[4]
            assert row['target'] == t1 and row['seeds'] == [1] and row['per_seed']['rate'] == [0.2]
        for run in todo:
            write(run)
    assert named[:3] == [[(t1, 1)], [(t1, 2), (t1, 3)], []] and t1 == round(0.2 * 0.2 / 0.212, 4)
    assert ex['calibration'](4, 'learned') == (t1, True, [(0.2, 0.212, 1), (t1, pytest.approx(0.2), 3)])
    rows = {r['rung']: r for r in ex['ladder_rows']()}
    assert rows[3]['target'] is None and rows[3]['seeds'] == [1, 2, 3] and rows[3]['per_seed']['rate'] == [0.2] * 3
    assert rows[4]['target'] == t1 and rows[4]['per_seed']['rate'] == [0.2, 0.199, 0.201]


def test_the_rows_of_experiments_keys_name_what_it_defines():
    """ common.KEYS names the settings --ablate may take and the tables --table may: experiments.py's own """
    import re
    from common import KEYS
    ex = experiments('--table=ladder')
    quoted = lambda k: re.findall(r"'([^']*)'", KEYS[f'experiments.py:{k}'].partition(':')[0])
    assert quoted('ablate') == list(ex['LEVERS']) and quoted('table') == ['', *ex['TABLES']]
    assert quoted('rungs') == [str(k) for k in ex['RUNGS']]
