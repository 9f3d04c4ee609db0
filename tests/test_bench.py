"""
bench.py's prepared GPU measurement (--table=gpu) and its generation table, run as a user runs them but on the CPU at a
tiny size. The GPU table has one row per method with a step time, bytes/s and, for `sequential`, the sampler's
share of the step; the generation table one row per width.
Run: python -m pytest -q tests/test_bench.py
"""
import os
import subprocess
import sys

from conftest import ROOT


def test_gpu_table_runs_on_a_cpu_at_a_small_size():
    cmd = [sys.executable, 'bench.py', '--table=gpu', '--sizes=tiny', '--gpu_block=64', '--gpu_batch=2', '--steps=1',
           '--dtype=float32', '--compiles=False']
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stdout.splitlines() if l.startswith('| tiny |')]
    assert [l.split(' | ')[1:3] for l in lines] == [['sequential', 'False'], ['random', 'False']]
    for l in lines:
        ms, bps, mfu, share = l.strip('| ').split(' | ')[3:]
        assert float(ms) > 0 and float(bps.replace(',', '')) > 0 and mfu == '-'  # no MFU without a GPU's peak
    assert lines[0].endswith('% |') and lines[1].endswith('- |')  # the sampler's share: sequential only


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
