"""
bench.py's prepared GPU measurement (--table=gpu), its CPU step table, its generation table and its seeded comparison,
run as a user runs them but on the CPU at a tiny size. The GPU table has a row per attention implementation (the
model's and the FlexAttention candidate) and then one per method with a step time, bytes/s and, for `sequential`, the
sampler's share of the step; the step table a time and speed-up per precision; the generation table one row per width;
the comparison a row per method with the mean and spread over 3 seeds, in its JSON table too, and a plot.
Run: python -m pytest -q tests/test_bench.py
"""
import ast
import json
import os
import subprocess
import sys
import sysconfig

import numpy as np

from conftest import ROOT


def test_gpu_table_runs_on_a_cpu_at_a_small_size():
    """ the attention rows first: model.attention and the FlexAttention candidate, forward only on a CPU, the candidate
        equal to model.attention in float32 (rows of 200 bytes: the window of 64 bites), alone and inside a compiled
        model; then a step row per method """
    cmd = [sys.executable, 'bench.py', '--table=gpu', '--sizes=tiny', '--gpu_block=200', '--gpu_batch=2', '--steps=1',
           '--dtype=float32', '--compiles=False']
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert res.returncode == 0, res.stderr
    attn = [l.strip('| ').split(' | ') for l in res.stdout.splitlines()
            if l.startswith(('| byte layer', '| mid layer'))]
    assert [(a[0].split(',')[0], a[1]) for a in attn] == [('byte layer', 'model'), ('byte layer', 'flex'),
                                                         ('mid layer', 'model'), ('mid layer', 'flex')]
    for label, impl, ms, err, gerr in attn:
        assert ms.endswith(' (forward)') and float(ms.split()[0]) > 0 and gerr == '-' # no FlexAttention backward
        assert float(err) < 1e-5 # float32 both ways: rounding only (the reference against itself: 0)
    compiled = [l for l in res.stdout.splitlines() if 'compiled with flex' in l]
    assert len(compiled) == 1 and float(compiled[0].split()[-1]) < 1e-4 # inside a compiled model too (it was 12)
    lines = [l for l in res.stdout.splitlines() if l.startswith('| tiny |')]
    assert [l.split(' | ')[1:4] for l in lines] == [['sequential', 'False', 'model'], ['random', 'False', 'model']]
    for l in lines:
        ms, bps, mfu, share = l.strip('| ').split(' | ')[4:]
        assert float(ms) > 0 and float(bps.replace(',', '')) > 0 and mfu == '-'  # no MFU without a GPU's peak
    assert lines[0].endswith('% |') and lines[1].endswith('- |')  # the sampler's share: sequential only


def test_gpu_table_refuses_flex_steps_on_a_cpu():
    res = subprocess.run([sys.executable, 'bench.py', '--table=gpu', '--attns=model,flex'], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and res.stderr.strip().splitlines()[-1] == \
        "bench.py: --attns=flex needs CUDA: FlexAttention has no backward on a CPU"


def test_cpu_step_table_runs_at_a_small_size():
    """ --parts=step with this checkout as its own 'before': a row per method, a time and a speed-up for the float32
        step and for bfloat16 autocast (not compiled here: minutes) """
    cmd = [sys.executable, 'bench.py', '--table=cpu', '--parts=step', f'--base={ROOT}', '--step_size=tiny',
           '--steps=1', '--step_compile=False']
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert res.returncode == 0, res.stderr
    assert 'after, float32 s/step | speed-up | after, bfloat16 autocast s/step | speed-up |' in res.stdout
    lines = [l.strip('| ').split(' | ') for l in res.stdout.splitlines() if l.startswith(('| sequential', '| random'))]
    assert [l[0] for l in lines] == ['sequential', 'random']
    for _, before, after, up, bf16, up16 in lines:
        assert float(before) > 0 and float(after) > 0 and float(bf16) > 0
        assert float(up[:-1]) > 0 and up16.endswith('x') # the median of the rounds' ratios (one round here)
        assert abs(float(up[:-1]) - float(before) / float(after)) < 0.01


def test_generation_table_with_the_re_run_timed_at_a_few_lengths():
    """ --gen_points: the re-run baseline summed from forwards timed at 2 row lengths; both widths get a row """
    cmd = [sys.executable, 'bench.py', '--generate=True', '--gen_bytes=8', '--gen_points=2', '--gen_rounds=1',
           '--block_size=64']
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stdout.splitlines() if l.startswith(('| tiny', '| 18m'))]
    assert len(lines) == 2 and 're-run: 2 row lengths timed' in res.stdout
    for l in lines:
        fast, slow, ratio = l.strip('| ').split(' | ')[2:]
        assert float(fast.replace(',', '')) > 0 and float(slow.replace(',', '')) > 0 and ratio.endswith('x')


def test_comparison_trains_three_seeds_per_method_and_writes_its_table(tmp_path):
    """ --compare at 3 steps a run on a small English corpus: 3 seeds of each method, at the flags of its SWEEP
        setting; every run measured; the mean ± std table printed and written as JSON, the plot drawn """
    rng = np.random.default_rng(0)
    words = [b'the ', b'file ', b'is ', b'a ', b'name ', b'of ', b'bytes, ', b'return ', b'it.\n']
    for name in ('pydocs', 'pycode'): # small stand-ins for the two embedded corpora the settings train on
        for split, n in (('train', 40), ('val', 8)):
            docs = [b''.join(rng.choice(words, size=rng.integers(20, 80))) for _ in range(n)]
            os.makedirs(tmp_path / 'data' / name, exist_ok=True)
            (tmp_path / 'data' / name / f'{split}.bin').write_bytes(b''.join(docs))
            np.save(tmp_path / 'data' / name / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]))
    out = tmp_path / 'compare.json'
    cmd = [sys.executable, 'bench.py', '--compare=True', '--methods=random,sequential', '--compare_extra=',
           '--sweep_iters=3', f'--data_dir={tmp_path / "data"}', f'--out_root={tmp_path / "out"}',
           f'--compare_json={out}', '--sweep_rows=4']
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    runs = json.load(open(out))
    consts = {n.targets[0].id: n.value.value for n in ast.parse(open(os.path.join(ROOT, 'bench.py')).read()).body
              if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)}
    compare, compare_seq = consts['COMPARE'], consts['COMPARE_SEQ'] # the settings as bench.py ships them
    assert sorted(runs) == sorted(f'{s}:{m}:{k}' for s, m in ((compare, 'random'), (compare_seq, 'sequential'))
                                  for k in (1, 2, 3))
    for run, r in runs.items():
        assert '--window=8 --n_mid=4' in r['command'] and '--max_iters=3' in r['command'] and f"--seed={r['seed']}" in r['command']
        assert 0 < r['bpb'] < 20 and 0 <= r['rate'] <= 1 and r['val_rows'] == 4, run
        assert [c['bytes'] for c in r['curve']][0] == 0 and r['curve'][-1]['bytes'] == r['bytes'] > 0
    assert ('--gate_scale=1.0' in runs[f'{compare_seq}:sequential:1']['command']) and \
        '--gate_scale' not in runs[f'{compare}:random:1']['command']
    table = json.load(open(tmp_path / 'compare_table.json'))['rows']
    assert [(r['method'], r['seeds']) for r in table] == [('random', 3), ('sequential', 3)]
    seq = [runs[f'{compare_seq}:sequential:{k}']['bpb'] for k in (1, 2, 3)]
    assert abs(table[1]['bpb'] - np.mean(seq)) < 1e-9 and abs(table[1]['bpb_std'] - np.std(seq, ddof=1)) < 1e-9
    assert f"| {compare_seq} | sequential | 3 | {np.mean(seq):.3f} ± {np.std(seq, ddof=1):.3f} |" in res.stdout
    assert (tmp_path / 'compare.png').stat().st_size > 0 and "sequential, seed 1 ('|' = chunk end): " in res.stdout


def test_paper_run_makes_its_data_from_local_python_files_and_reports_both_methods(tmp_path):
    """ --paper_run on the CPU at a tiny size (flags override the 18M config): sitepy is made by prepare.py from a
        folder of .py files, random and sequential train on it, and the table holds both at every eval """
    src = tmp_path / 'pkgs'
    src.mkdir()
    for name in ('json/decoder.py', 'json/encoder.py', 'textwrap.py', 'shlex.py', 'glob.py', 'fnmatch.py'):
        (src / name.replace('/', '_')).write_bytes(open(os.path.join(sysconfig.get_paths()['stdlib'], name), 'rb').read())
    out = tmp_path / 'paper.json'
    flags = ('--dtype=float32 --compile=False --n_embd=32 --n_head=2 --n_down=1 --n_mid=1 --n_up=1 --block_size=64 '
             '--batch_size=2 --max_iters=2 --lr_decay_iters=2 --warmup_iters=1 --eval_interval=1 --eval_iters=1 '
             '--log_interval=1')
    cmd = [sys.executable, 'bench.py', '--paper_run=18m', f'--paper_path={src}', f'--data_dir={tmp_path / "data"}',
           f'--out_root={tmp_path / "out"}', f'--paper_json={out}', '--device=cpu', f'--paper_flags={flags}']
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert res.returncode == 0, res.stderr
    assert (tmp_path / 'data' / 'sitepy' / 'train.bin').stat().st_size > 0
    runs = json.load(open(out))['runs']
    assert list(runs) == ['random', 'sequential']
    for method, r in runs.items():
        assert f'config/train_18m_{method}.py --dataset=sitepy' in r['command'] and '--n_embd=32' in r['command']
        assert [v['iter'] for v in r['val']] == [0, 1, 2] and r['val'][-1]['bytes'] > 0
    lines = [l for l in res.stdout.splitlines() if l.startswith('| ') and ('| random |' in l or '| sequential |' in l)]
    assert len(lines) == 6 # 3 evals x 2 methods


def test_cpu_sampler_and_gemm_tables():
    """ --parts=sampler,gemm: the loop and the parallel sampler timed in alternation, the speed-up the median of the
        rounds' ratios (one round here: the ratio of the two times); a rate for each matmul library """
    cmd = [sys.executable, 'bench.py', '--table=cpu', '--parts=sampler,gemm', '--reps=1', '--threads=1']
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rows = dict(l.strip('| ').split(' | ') for l in res.stdout.splitlines() if l.startswith('| ') and '---' not in l)
    loop, par, up = float(rows['loop (scan)']), float(rows['parallel (sample)']), float(rows['speed-up'][:-1])
    assert loop > 0 and par > 0 and abs(up - loop / par) < 0.05 * up + 0.1 # 3 and 4 digits printed
    for k in ('float32, F.linear (MKL)', 'float32, oneDNN (mkldnn_linear)', 'bfloat16, F.linear (oneDNN)'):
        assert float(rows[k]) > 0
