"""
bench.py measures speed only. Each table runs at a tiny size on the CPU, in this process as `python bench.py ...` runs
(runpy: one torch import less per test): the step table is train.py's own step, its numbers the medians it recomputes
here from the log.jsonl of the train.py runs, and bench.py holds no loss of its own; the GPU table is the same path in
bfloat16; the sampler, forward and generation tables time model.py's code. Timeouts are hang guards only (a busy
machine runs these many times slower), never speed checks.
Run: python -m pytest -q tests/test_bench.py
"""
import ast
import json
import os
import re
import runpy
import signal
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

HANG = 1800 # seconds: a hang guard, not a speed limit


def bench(args, monkeypatch, capsys):
    """ bench.py with these flags, run in this process (no second torch import; train.py runs are subprocesses on one
        thread) -> its stdout, and its table rows split into cells """
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, 'argv', ['bench.py', *args])
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    runpy.run_path('bench.py', run_name='__main__')
    out = capsys.readouterr().out
    assert f"\n$ python bench.py {' '.join(args)}\n" in out # the command that made it
    return out, [l.strip('| ').split(' | ') for l in out.splitlines() if l.startswith('| ') and '---' not in l]


def is_ratio(r, a, b):
    """ the printed r is the printed a over the printed b, up to the rounding of each (half a unit of its last digit) """
    x, y, z = (float(s.replace(',', '').rstrip('x')) for s in (r, a, b))
    e = [0.5 * 10 ** -len(s.rstrip('x').partition('.')[2]) for s in (r, a, b)]
    return y > 0 and z > e[2] and (y - e[1]) / (z + e[2]) - e[0] <= x <= (y + e[1]) / (z - e[2]) + e[0]


def median(xs):
    return sorted(xs)[len(xs) // 2]


def step_rows(out, cells, B, T, iters):
    """ each row of a step table against the log.jsonl of the train.py run that made it: the same medians """
    cmds = re.findall(r'^row \d+: (python train\.py .*)$', out, re.M)
    assert len(cmds) == len(cells) - 1
    for row, cmd in zip(cells[1:], cmds):
        size, method, comp, dtype, ms, bps, mfu, mem, share = row
        assert f'config/method_{method}.py' in cmd and f'--compile={comp}' in cmd and f'--dtype={dtype}' in cmd
        assert f'--batch_size={B}' in cmd and f'--block_size={T}' in cmd and '--log_interval=1' in cmd
        out_dir = re.search(r'--out_dir=(\S+)', cmd).group(1)
        log = [json.loads(l) for l in open(os.path.join(out_dir, 'log.jsonl'))]
        train = [r for r in log if r['split'] == 'train']
        n = int(re.search(r'--max_iters=(\d+)', cmd).group(1))
        assert [r['iter'] for r in train] == list(range(n)) and [r['split'] for r in log].count('val') == 2
        assert all(b['bytes'] - a['bytes'] == B * (T - 1) for a, b in zip(train, train[1:])) # random bytes: full rows
        timed = train[n - iters:]
        assert bps == f"{median([r['bytes_per_sec'] for r in timed]):,.0f}"
        assert ms == f"{median([B * (T - 1) / r['bytes_per_sec'] for r in timed]) * 1000:.1f}"
        assert mfu == '-' and mem == '-' # a CPU: no peak to divide by, no CUDA memory
        # the sampler's time over the step's, sequential only (a tiny step on a busy machine can print 0.0%)
        assert re.fullmatch(r'\d+\.\d%', share) if method == 'sequential' else share == '-'
    return cells[1:]


def test_the_step_table_is_train_py_own_step(tmp_path, monkeypatch, capsys):
    """ every number of the step table is a median over the timed iterations of a train.py run's log.jsonl """
    out, cells = bench(['--table=step', '--sizes=tiny', '--batch_size=2', '--block_size=64', '--iters=3', '--warmup=1',
                        f'--out_root={tmp_path}'], monkeypatch, capsys)
    assert cells[0] == ['size', 'method', 'compile', 'dtype', 'ms/step', 'bytes/s', 'MFU', 'peak GB', 'sampler share']
    rows = step_rows(out, cells, 2, 64, 3)
    assert [r[:4] for r in rows] == [['tiny', m, 'False', 'float32'] for m in ('sequential', 'random')]
    assert 'random bytes' in out and '--max_iters=4 ' in out # 3 timed after 1


def test_bench_holds_no_training_step_of_its_own():
    """ no loss, no REINFORCE, no optimizer, no boundary metric: those are train.py's and model.py's alone """
    tree = ast.parse(open(os.path.join(ROOT, 'bench.py')).read())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | \
        {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    shipped = {'next_byte_nll', 'discounted_returns', 'cross_entropy', 'binary_cross_entropy_with_logits', 'backward',
               'clip_grad_norm_', 'AdamW', 'configure_optimizers', 'hnet_ratio_loss', 'binomial_prior',
               'boundary_counts', 'boundary_metrics', 'WHITESPACE', 'estimate_mfu', 'zero_grad'}
    assert not names & shipped


def test_gpu_table_on_a_cpu(tmp_path, monkeypatch, capsys):
    """ the GPU table's path at a tiny size on the CPU, in bfloat16 as on a GPU, its numbers the medians of its run's
        log; MFU and peak memory need CUDA """
    out, cells = bench(['--table=gpu', '--device=cpu', '--sizes=tiny', '--methods=sequential', '--compiles=False',
                        '--batch_size=2', '--block_size=64', '--iters=2', '--warmup=1', f'--out_root={tmp_path}'],
                       monkeypatch, capsys)
    assert [r[:4] for r in step_rows(out, cells, 2, 64, 2)] == [['tiny', 'sequential', 'False', 'bfloat16']]


def test_sampler_table(monkeypatch, capsys):
    """ the parallel sampler and its loop drew the same gates; the speed-up is the rounds' median ratio (one round
        here: the ratio of the two times) """
    out, cells = bench(['--table=sampler', '--batch_size=2', '--block_size=256', '--reps=1'], monkeypatch, capsys)
    rows = dict(cells)
    assert rows['sampler, B=2 T=256 w=8'] == 's' and 'drew the same gates' in out
    assert is_ratio(rows['speed-up'], rows['loop (scan)'], rows['parallel (sample)'])


def test_forward_table(monkeypatch, capsys):
    """ one row per size: both forwards timed, the ratio the rounds' median (one round: the ratio of the times) """
    out, cells = bench(['--table=forward', '--sizes=tiny', '--batch_size=2', '--block_size=128', '--reps=1'],
                       monkeypatch, capsys)
    assert cells[0][0] == 'forward, B=2 T=128' and len(cells) == 2
    label, uni, seq, ratio = cells[1]
    assert label == 'tiny (D=64, 1/2/1)' and is_ratio(ratio, seq, uni)


@pytest.mark.parametrize('points', [0, 3])
def test_generation_table(points, monkeypatch, capsys):
    """ generate against re-running the row, timed, or summed from forwards timed at a few row lengths """
    out, cells = bench(['--table=generate', '--sizes=tiny', '--block_size=64', '--gen_bytes=8', '--reps=1',
                        f'--gen_points={points}'], monkeypatch, capsys)
    assert len(cells) == 2 and cells[1][0] == 'tiny (D=64, 1/2/1)' and ('summed' in out) == bool(points)
    fast, slow, up = cells[1][2:]
    assert is_ratio(up, fast, slow) # bytes/s over bytes/s: the re-run's time over generate's


def must(key, value):
    """ check_config's line for a value that bench.py's row of the key (common.KEYS) refuses """
    from common import rows_of
    return f"bench.py: --{key}={value} must be {rows_of('bench.py')[key].partition(' ')[2]}"


@pytest.mark.parametrize('args, line', [
    (['--table=cpu'], must('table', 'cpu')),
    (['--sizes=nope'], must('sizes', 'nope')),
    (['--sizes=40m'], "bench.py: --sizes=40m: there is no config/size_40m.py for train.py to run"), # a preset
    (['--methods=sequential,nope'], "bench.py: --methods=sequential,nope: there is no config/method_nope.py for "
                                    "train.py to run"),
    (['--compiles=yes'], must('compiles', 'yes')),
    (['--dtypes=bfloat16,float64'], must('dtypes', 'bfloat16,float64')),
    (['--iters=0'], must('iters', 0)),
    (['--warmup=-1'], must('warmup', -1)),
    (['--batch_size=0'], must('batch_size', 0)),
    (['--block_size=1'], must('block_size', 1)),
    (['--threads=-1'], must('threads', -1)),
    (['--seed=-1'], must('seed', -1)),
    (['--data=nope'], "bench.py: --data=nope: there is no data/nope/train.bin; run `python prepare.py nope` first"),
    (['--table=generate', '--gen_points=-2'], must('gen_points', -2)),
    (['--table=generate', '--gen_points=1'], "bench.py: --gen_points=1 must be 0 or >= 2 (the first and the last "
                                             "byte)"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys, args, line):
    """ each key's row of common.KEYS, or the files a run needs: one line, before any folder is made """
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, 'argv', ['bench.py', *args, f'--out_root={tmp_path / "out"}'])
    with pytest.raises(SystemExit) as e:
        runpy.run_path('bench.py', run_name='__main__')
    assert e.value.code == line and not (tmp_path / 'out').exists() and '$ python' not in capsys.readouterr().out


def test_bad_input_from_the_shell():
    """ as a user sees it: the one line on stderr, no traceback, exit status 1 """
    res = subprocess.run([sys.executable, 'bench.py', '--table=cpu'], cwd=ROOT, capture_output=True, text=True,
                         timeout=HANG)
    assert res.returncode == 1 and res.stderr == must('table', 'cpu') + '\n'


def test_ctrl_c_is_one_line():
    """ a Ctrl-C while a table is timed: one line, not a traceback (the rows so far stay printed) """
    p = subprocess.Popen([sys.executable, 'bench.py', '--table=generate', '--sizes=tiny', '--block_size=64',
                          '--gen_bytes=10000000', '--reps=1'], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS='1',
                                                                    PYTHONUNBUFFERED='1'))
    try:
        next(line for line in p.stdout if line.startswith('| size |')) # the table has begun
        p.send_signal(signal.SIGINT)
        err = p.communicate(timeout=HANG)[1]
    finally:
        p.kill()
    assert p.returncode == 1 and err.splitlines() == ['bench.py: interrupted (Ctrl-C)'], err[-3000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason='this machine has CUDA')
def test_gpu_table_without_cuda_says_so(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, 'argv', ['bench.py', '--table=gpu'])
    with pytest.raises(SystemExit) as e:
        runpy.run_path('bench.py', run_name='__main__')
    assert e.value.code == "bench.py: --device=cuda but this PyTorch sees no CUDA GPU; use --device=cpu"
