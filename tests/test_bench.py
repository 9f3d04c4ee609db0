"""
bench.py's prepared GPU measurement (--table=gpu), run as a user runs it but on the CPU at a tiny size: the table has
one row per method with a step time, bytes/s and, for `sequential`, the sampler's share of the step.
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
