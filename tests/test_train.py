"""
train.py run as a user runs it: a tiny CPU run lowers val loss and writes log.jsonl and ckpt.pt; resume
reproduces the uninterrupted run, also after a preemption (SIGTERM, SIGUSR1) and with rows of the killed run in the
log; non-finite steps are skipped, too many stop the run; two gloo processes (torchrun) match one
process on the same global batch, also with the defaults' single micro-batch; the rate loss moves the realised rate;
a collapsing rate warns; a bad ckpt.pt gets one line; every config/ file gives a valid model of its size. And as a new
user meets it (issue 29): a rerun overwrites nothing, progress lines reach a pipe as they are printed, a run ends with
a summary, every bad input is one line that writes nothing, a resume refuses model flags that contradict its
checkpoint, train.py runs from any directory. And nothing lost: Ctrl-C saves as SIGTERM does and a second
one exits at once, a run owns its out_dir, --eval_only and a max_iters behind the checkpoint leave it as it is, a full
disk keeps the last checkpoint, folders and wandb are checked before any work. Fault injection comes from NANOTOK_*
environment variables.
Run: python -m pytest -q tests/test_train.py   (about eight minutes on 2 busy cores)
"""
import argparse
import ast
import base64
import json
import os
import runpy
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, ctrl_c_on_fifo, tiny_encoding
from model import UNetConfig, ByteUNet, PRESETS
from common import bpe_ends

TINY = ['--device=cpu', '--dtype=float32', '--block_size=64', '--batch_size=4', '--n_embd=32', '--n_head=2',
        '--n_down=1', '--n_mid=1', '--n_up=1', '--window=16', '--eval_iters=2', '--log_interval=1',
        '--warmup_iters=2', '--lr_decay_iters=40']


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
    """ a small corpus in prepare.py's format: documents of varied length, some shorter than a row (padding) """
    root = tmp_path_factory.mktemp('data')
    rng = np.random.default_rng(0)
    words = [b'def ', b'return ', b'self', b'.x', b' = ', b'(', b')', b':\n', b'    ', b'if ', b'None', b'1']
    for split, n in (('train', 200), ('val', 16)):
        docs = [b''.join(rng.choice(words, size=rng.integers(5, 60))) for _ in range(n)]
        os.makedirs(root / 'tiny', exist_ok=True)
        (root / 'tiny' / f'{split}.bin').write_bytes(b''.join(docs))
        np.save(root / 'tiny' / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]).astype(np.int64))
        docs = [(d * 63)[:63 * (1 + i % 2)] for i, d in enumerate(docs)] # and 'full': windows of 63, no padding
        os.makedirs(root / 'full', exist_ok=True)
        (root / 'full' / f'{split}.bin').write_bytes(b''.join(docs))
        np.save(root / 'full' / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]).astype(np.int64))
    return str(root)


def train_cmd(out_dir, data_dir, *args, nproc=1, dataset='tiny'):
    launcher = [sys.executable] if nproc == 1 else [sys.executable, '-m', 'torch.distributed.run', '--standalone',
                                                    f'--nproc_per_node={nproc}']
    return launcher + ['train.py', *TINY, f'--data_dir={data_dir}', f'--dataset={dataset}', f'--out_dir={out_dir}',
                       *args]


def run(cmd, cwd=ROOT, **env):
    """ env: more environment variables, e.g. the fault injection's NANOTOK_NAN_AT_ITER='2' """
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800,
                          env=dict(os.environ, OMP_NUM_THREADS='1', **env))


def read_log(out_dir):
    return [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]


def train(out_dir, data_dir, *args, nproc=1, dataset='tiny', **env):
    r = run(train_cmd(out_dir, data_dir, *args, nproc=nproc, dataset=dataset), **env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return read_log(out_dir)


def rows(log): # what a resumed run must reproduce, row for row
    return [(r['iter'], r['split'], r['loss'], r['rate'], r.get('bad_steps')) for r in log]


def test_tiny_run_lowers_val_loss_and_writes_log_and_checkpoint(tmp_path, data_dir):
    log = train(tmp_path, data_dir, '--max_iters=30', '--eval_interval=15', '--learning_rate=1e-2')
    val = [row for row in log if row['split'] == 'val']
    assert [row['iter'] for row in val] == [0, 15, 30]
    assert val[-1]['loss'] < val[0]['loss'] - 1.0 # nats per byte
    metrics = ('ws_boundary', 'word_boundary', 'boundary_precision')
    for row in log:
        assert {'iter', 'split', 'loss', 'bpb', 'rate', *metrics} <= set(row)
        assert row['bpb'] == pytest.approx(row['loss'] / np.log(2))
        assert 0 < row['rate'] <= 1 and all(0 <= row[k] <= 1 for k in metrics)
        assert row['ws_boundary'] <= row['word_boundary'] # a gate on the space is a word edge too
    ckpt = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert {'model', 'optimizer', 'model_args', 'config', 'iter_num', 'best_val_loss', 'bytes_seen'} <= set(ckpt)
    assert ckpt['iter_num'] == 30 and ckpt['config']['dataset'] == 'tiny'
    assert ckpt['bytes_seen'] > 30 * 4 * 4 # 30 steps of 4 rows, each row at least 5 words
    model = ByteUNet(UNetConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model']) # the checkpoint rebuilds the model it came from
    assert not any(name.endswith('.tmp') for name in os.listdir(tmp_path)) # written atomically, nothing left over


def test_whitespace_gater_logs_full_word_boundaries(tmp_path, data_dir):
    """ gates on every whitespace byte: both recalls are 1 in every row, train and val, and so is the precision: the
        forced gates (BOS, a row's last byte), decisions of nobody, are not counted (C1) """
    log = train(tmp_path, data_dir, '--max_iters=2', '--eval_interval=2', '--gater=whitespace')
    assert {row['split'] for row in log} == {'train', 'val'}
    for row in log:
        assert row['ws_boundary'] == row['word_boundary'] == 1.0
        assert row['boundary_precision'] == 1.0


FULL = ['--max_iters=12', '--eval_interval=4']


@pytest.fixture(scope='module')
def full_run(tmp_path_factory, data_dir):
    """ the uninterrupted run that resumed ones must reproduce; init_from='auto' with no checkpoint: from scratch """
    out = tmp_path_factory.mktemp('full')
    return out, train(out, data_dir, *FULL, '--init_from=auto')


def test_resume_reproduces_the_uninterrupted_run(tmp_path, data_dir, full_run):
    """ and the log after it is the uninterrupted run's: the rows a killed run wrote past its checkpoint (here the
        uninterrupted run's own, and a line cut short) are dropped, not repeated """
    full_dir, full = full_run
    train(tmp_path, data_dir, '--max_iters=4', '--eval_interval=4')
    with open(tmp_path / 'log.jsonl', 'a') as f: # the checkpoint is at 4: as if killed in iteration 6
        f.writelines(json.dumps(r) + '\n' for r in full if 4 <= r['iter'] <= 5)
        f.write('{"iter": 6, "spl')
    resumed = train(tmp_path, data_dir, *FULL, '--init_from=resume')
    assert rows(resumed) == rows(full) # same data, same gate samples, same optimizer state; no row twice
    a = torch.load(full_dir / 'ckpt.pt', weights_only=True)
    b = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert a['bytes_seen'] == b['bytes_seen'] and a['iter_num'] == b['iter_num'] == 12
    for k in a['model']:
        assert torch.equal(a['model'][k], b['model'][k]), k


def test_resume_restores_the_fp16_loss_scaler(tmp_path, data_dir):
    """ float16 (autocast on a CPU too): 2 steps, then a resume to 4, leave the scaler as 4 steps in one run do """
    flags = ('--dtype=float16', '--eval_interval=2', '--always_save_checkpoint=True')
    train(tmp_path / 'full', data_dir, *flags, '--max_iters=4')
    train(tmp_path, data_dir, *flags, '--max_iters=2')
    first = torch.load(tmp_path / 'ckpt.pt', weights_only=True)['scaler']
    train(tmp_path, data_dir, *flags, '--max_iters=4', '--init_from=resume')
    full = torch.load(tmp_path / 'full' / 'ckpt.pt', weights_only=True)['scaler']
    resumed = torch.load(tmp_path / 'ckpt.pt', weights_only=True)['scaler']
    assert resumed == full # the scale and the steps since its last backoff, as if never stopped
    assert full['_growth_tracker'] == first['_growth_tracker'] + 2 # a fresh scaler after the resume would count 2


def test_bfloat16_autocasts_on_a_cpu_too(tmp_path, data_dir):
    """ --dtype=bfloat16 is honoured on a CPU (it was silently float32): the step-0 val loss of the same weights and rows
        moves by bfloat16 rounding, no more """
    loss = {dt: train(tmp_path / dt, data_dir, f'--dtype={dt}', '--max_iters=0')[0]['loss'] for dt in ('float32',
                                                                                                       'bfloat16')}
    assert loss['float32'] != loss['bfloat16'] and abs(loss['float32'] - loss['bfloat16']) < 0.02, loss


def test_preempted_two_process_run_resumes_exactly_and_skips_a_nan_step_on_both_ranks(tmp_path, data_dir):
    """ two gloo processes with the defaults' single micro-batch (each runs half of its rows); rank 1's loss is NaN at
        iteration 2, and rank 0 alone gets SIGTERM in iteration 5 (the flags are all-reduced, so both stop after it) """
    both, nan = ['--max_iters=8', '--eval_interval=4'], dict(NANOTOK_NAN_AT_ITER='2')
    full = train(tmp_path / 'full', data_dir, *both, nproc=2, **nan)
    r = run(train_cmd(tmp_path / 'part', data_dir, *both, nproc=2), NANOTOK_SIGNAL_AT_ITER='5', **nan)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'stopped by SIGTERM after iteration 5' in r.stdout and '--init_from=resume' in r.stdout
    assert torch.load(tmp_path / 'part' / 'ckpt.pt', weights_only=True)['iter_num'] == 6
    resumed = train(tmp_path / 'part', data_dir, *both, '--init_from=resume', nproc=2, **nan)
    assert rows(resumed) == rows(full)
    assert [r['bad_steps'] for r in full if r['split'] == 'train'] == [0, 0, 1, 1, 1, 1, 1, 1] # counted in the log
    assert all(np.isfinite(r['loss']) for r in full if r['split'] == 'val') # rank 1's share of val: its weights too
    ckpt = torch.load(tmp_path / 'part' / 'ckpt.pt', weights_only=True)
    assert ckpt['optimizer']['state'][0]['step'] == 7 # 8 iterations, one skipped


def test_sigusr1_stops_one_process_and_auto_resumes_it_exactly(tmp_path, data_dir, full_run):
    """ a real signal from outside, sent once the run has logged iteration 3; init_from='auto' both ways """
    args, full = [*FULL, '--init_from=auto'], full_run[1]
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1') # each line as it is printed
    p = subprocess.Popen(train_cmd(tmp_path, data_dir, *args), cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    for line in p.stdout:
        seen.append(line)
        if line.startswith('iter 3/'):
            p.send_signal(signal.SIGUSR1)
            break
    out, err = p.communicate(timeout=600)
    out = ''.join(seen) + out
    assert p.returncode == 0, err[-3000:]
    assert 'stopped by SIGUSR1' in out and "init_from='auto'" in out
    stopped = torch.load(tmp_path / 'ckpt.pt', weights_only=True)['iter_num']
    assert 4 <= stopped < 12 # at the end of the iteration the signal came in
    resumed = train(tmp_path, data_dir, *args) # the same command: the checkpoint is there, it resumes
    assert rows(resumed) == rows(full)
    assert all(0 <= r['undecided'] <= 1 for r in full if r['split'] == 'train') # a learned gater: its share logged


def test_ctrl_c_saves_as_sigterm_does_and_a_second_ctrl_c_exits_at_once(tmp_path, data_dir):
    """ SIGINT in iteration 3 (NANOTOK_SIGNALS: rank 0 sends it to itself, once or twice in a row): once, the step
        ends, the checkpoint is saved and the run exits 0 as on SIGTERM (it was a KeyboardInterrupt traceback, and all
        since the last eval lost); twice, it exits at once, unsaved, in one line """
    args = ['--max_iters=20', '--eval_interval=20']
    procs = [subprocess.Popen(train_cmd(tmp_path / n, data_dir, *args), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS='1',
                              NANOTOK_SIGNAL_AT_ITER='3', NANOTOK_SIGNALS=n)) for n in ('INT', 'INT,INT')]
    (out, err), (_, err2) = [p.communicate(timeout=600) for p in procs]
    notice = 'train.py: Ctrl-C: saving after this step, then exiting (Ctrl-C again: exit now, unsaved)'
    assert procs[0].returncode == 0 and err.strip().splitlines() == [notice], err[-3000:]
    assert 'stopped by SIGINT after iteration 3' in out and '--init_from=resume' in out
    assert torch.load(tmp_path / 'INT' / 'ckpt.pt', weights_only=True)['iter_num'] == 4
    assert procs[1].returncode == 1 and err2.strip().splitlines() == [
        notice, 'train.py: stopped by a second Ctrl-C in iteration 3, unsaved; no checkpoint was written'], err2[-3000:]
    assert not (tmp_path / 'INT,INT' / 'ckpt.pt').exists()


def test_ctrl_c_before_the_loop_is_one_line_naming_what_it_stopped(tmp_path, data_dir):
    """ before the loop, here while train.py reads the checkpoint it resumes (a FIFO that never gets a byte): one line,
        exit 1, no traceback (it was a KeyboardInterrupt's), nothing written """
    ckpt = tmp_path / 'run' / 'ckpt.pt'
    ckpt.parent.mkdir()
    os.mkfifo(ckpt)
    out, err, rc = ctrl_c_on_fifo(train_cmd(ckpt.parent, data_dir, '--init_from=resume'), ckpt, cwd=ROOT,
                                  env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert rc == 1 and err.splitlines() == [f'train.py: Ctrl-C while loading {ckpt}: stopped before training'], err
    assert os.listdir(ckpt.parent) == ['ckpt.pt']


@pytest.mark.parametrize('to', ['the terminal', 'train.py alone'])
def test_ctrl_c_while_train_py_makes_pycode_leaves_no_half_dataset(tmp_path, to):
    """ train.py makes data_dir/pycode itself (prepare.py pycode) when it is not there. A Ctrl-C then, at the terminal
        (the process group: prepare.py gets it too) or to train.py alone (which passes it on after a second): train.py's
        one line, and no half-made dataset in data_dir, no .tmp file: none at all, or a whole one """
    data = tmp_path / 'data'
    p = subprocess.Popen(train_cmd(tmp_path / 'out', data, dataset='pycode'), cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'),
                         start_new_session=True) # its own process group, as a terminal's job
    try:
        next(line for line in p.stdout if 'is missing: running `python prepare.py pycode' in line)
        os.killpg(p.pid, signal.SIGINT) if to == 'the terminal' else p.send_signal(signal.SIGINT)
        err = p.communicate(timeout=600)[1]
    finally:
        p.kill()
    assert p.returncode == 1 and err.splitlines() == [
        f"train.py: Ctrl-C while preparing the data in {data / 'pycode'}: stopped before training"], err[-3000:]
    made = sorted(os.listdir(data / 'pycode')) if (data / 'pycode').exists() else []
    assert made in ([], ['meta.json', 'train.bin', 'train_offsets.npy', 'val.bin', 'val_offsets.npy']), made
    assert not (tmp_path / 'out').exists()


def test_a_run_owns_its_out_dir_and_a_killed_one_leaves_no_lock_behind(tmp_path, data_dir):
    """ a second train.py into an out_dir that a running one writes is refused in one line (both ran, into one log,
        either checkpoint winning); after a kill -9 the lock file is still there, yet blocks nothing """
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
    p = subprocess.Popen(train_cmd(tmp_path, data_dir, '--max_iters=100000', '--eval_interval=100000'), cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        next(line for line in p.stdout if line.startswith('iter 0/')) # it has made out_dir and holds it
        log = (tmp_path / 'log.jsonl').read_bytes()
        r = run(train_cmd(tmp_path, data_dir, '--max_iters=2', '--init_from=auto'))
    finally:
        p.kill()
        p.wait(timeout=600)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f'train.py: {tmp_path} is in use by another train.py (pid {p.pid}); wait for it to end, or stop it, or use '
        f'another --out_dir'], r.stderr[-2000:]
    assert (tmp_path / 'log.jsonl').read_bytes().startswith(log) and (tmp_path / 'lock').exists()
    train(tmp_path, data_dir, '--max_iters=2', '--eval_interval=2') # killed: its lock went with it


def test_eval_only_and_a_max_iters_behind_the_checkpoint_leave_it_as_it_is(tmp_path, data_dir, full_run):
    """ --eval_only=True evaluates and writes no ckpt.pt (it rewrote the saved config: dataset, max_iters, eval_only);
        a resume with --max_iters below the checkpoint's iteration says so in one line (it evaluated, then saved the
        checkpoint with the lower max_iters); a resume says where it starts """
    shutil.copytree(full_run[0], tmp_path / 'run')
    ckpt = (tmp_path / 'run' / 'ckpt.pt').read_bytes()
    r = run(train_cmd(tmp_path / 'run', data_dir, '--init_from=resume', '--eval_only=True', '--max_iters=0',
                      '--eval_iters=1'))
    assert r.returncode == 0 and f"resumed from iter 12 of {tmp_path / 'run' / 'ckpt.pt'}" in r.stdout, r.stderr[-2000:]
    assert 'iter 12/0 val: bpb ' in r.stdout and (tmp_path / 'run' / 'ckpt.pt').read_bytes() == ckpt
    log = (tmp_path / 'run' / 'log.jsonl').read_bytes()
    msg = exit_message(*TINY, f'--data_dir={data_dir}', '--dataset=tiny', f'--out_dir={tmp_path / "run"}',
                       '--threads=1', '--init_from=resume', '--max_iters=4')
    assert msg == (f"train.py: {tmp_path / 'run' / 'ckpt.pt'} is at iteration 12, past --max_iters=4: nothing to "
                   f"train, it stays as it is; raise --max_iters to go on, or evaluate it with --eval_only=True")
    assert (tmp_path / 'run' / 'ckpt.pt').read_bytes() == ckpt and (tmp_path / 'run' / 'log.jsonl').read_bytes() == log


FULL_DISK = """
import errno, os, runpy, sys
import torch
save, calls = torch.save, []
def full_disk(obj, path): # the first checkpoint is written; the second fills the disk halfway through
    calls.append(path)
    if len(calls) == 1:
        return save(obj, path)
    open(path, 'wb').write(b'PK half a checkpoint')
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
torch.save = full_disk
sys.argv = ['train.py', *sys.argv[1:]]
sys.path.insert(0, os.getcwd())
runpy.run_path('train.py', run_name='__main__')
"""


def test_a_checkpoint_that_cannot_be_written_keeps_the_last_one(tmp_path, data_dir):
    """ a full disk at the second checkpoint (torch.save fails halfway): one line, exit 1, the first checkpoint as it
        was and no half-written file """
    (tmp_path / 'full_disk.py').write_text(FULL_DISK)
    r = run([sys.executable, str(tmp_path / 'full_disk.py'), *train_cmd(tmp_path / 'out', data_dir, '--max_iters=4',
                                                                         '--eval_interval=2')[2:]])
    path = tmp_path / 'out' / 'ckpt.pt'
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f'train.py: cannot write {path} (No space left on device); the last one is as it was: resume it with '
        f'--init_from=resume when there is room'], r.stderr[-3000:]
    assert torch.load(path, weights_only=True)['iter_num'] == 2 # the first one, whole
    assert sorted(os.listdir(tmp_path / 'out')) == ['ckpt.pt', 'lock', 'log.jsonl'] # no ckpt.pt.tmp


def test_non_finite_steps_in_a_row_stop_the_run_with_its_last_good_checkpoint(tmp_path, data_dir):
    r = run(train_cmd(tmp_path, data_dir, '--max_iters=20', '--eval_interval=2', '--max_bad_steps=3'),
            NANOTOK_NAN_AT_ITER='3', NANOTOK_NAN_ITERS='99')
    assert r.returncode != 0 and 'Traceback' not in r.stderr, r.stderr[-3000:]
    assert '3 non-finite steps in a row (to iteration 5, --max_bad_steps=3)' in r.stderr
    assert str(tmp_path / 'ckpt.pt') in r.stderr
    ckpt = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert ckpt['iter_num'] == 4 and ckpt['bad_steps'] == 1 # saved at the eval of 4, after the skip at 3
    assert ckpt['optimizer']['state'][0]['step'] == 3 # iterations 0, 1, 2: no bad step reached the weights
    assert all(torch.isfinite(v).all() for v in ckpt['model'].values())


def test_a_rate_off_target_for_three_evals_warns_and_a_bad_checkpoint_gets_one_line(tmp_path, data_dir):
    """ no rate loss: Nawrot's gater starts near 0.5 (its MLP knows no rate), over twice 0.2 but under twice 0.3 (a
        calibrated target sits off its rate on purpose: Nawrot's 0.2524 holds 0.20); then its ckpt.pt is spoilt """
    nawrot = ['--max_iters=3', '--eval_interval=1', '--gater=nawrot', '--downsampler=nawrot', '--upsampler=nawrot',
              '--rate_weight=0']
    r = run(train_cmd(tmp_path / 'calibrated', data_dir, *nawrot, '--rate=0.3'))
    assert r.returncode == 0 and 'iter 3/3 val: bpb' in r.stdout, r.stderr[-3000:]
    assert 'warning: the val rate' not in r.stdout, r.stdout
    r = run(train_cmd(tmp_path, data_dir, *nawrot))
    assert r.returncode == 0, r.stderr[-3000:]
    warnings = [line for line in r.stdout.splitlines() if line.startswith('warning: the val rate')]
    assert len(warnings) == 1 and 'twice its target 0.200 for 3 evals' in warnings[0], r.stdout # evals 1-3 (not 0)
    good = (tmp_path / 'ckpt.pt').read_bytes()
    for name, write in (('truncated', lambda p: p.write_bytes(good[:len(good) // 2])),
                        ('foreign', lambda p: torch.save(dict(model={}, model_args=dict(n_layer=12)), p)),
                        ('random', lambda p: p.write_bytes(np.random.default_rng(0).bytes(5000))),
                        ('pickled', lambda p: torch.save(argparse.Namespace(lr=1), p))): # weights_only refuses it
        write(tmp_path / 'ckpt.pt')
        spoilt = (tmp_path / 'ckpt.pt').read_bytes()
        r = run(train_cmd(tmp_path, data_dir, '--max_iters=2', '--init_from=resume'))
        assert r.returncode != 0 and 'Traceback' not in r.stderr, (name, r.stderr[-2000:])
        assert len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
        assert f"{tmp_path / 'ckpt.pt'} is truncated or not a nanotok checkpoint" in r.stderr, (name, r.stderr)
        assert '--init_from=scratch' in r.stderr and 'weights_only' not in r.stderr # not PyTorch's unsafe advice
        assert (tmp_path / 'ckpt.pt').read_bytes() == spoilt # left as it was


def test_every_epoch_reads_every_byte_once_when_the_batch_does_not_divide_the_corpus(tmp_path):
    """ 9 documents in 12 rows of up to 63 bytes, 8 rows per step: micro-batches straddle epoch boundaries; 9 steps
        are exactly 6 epochs """
    docs = [b'x' * n for n in (3, 10, 20, 40, 63, 64, 80, 100, 7)]
    write_corpus(tmp_path / 'data' / 'nine', docs, docs)
    cmd = [sys.executable, 'train.py', *TINY, f'--data_dir={tmp_path / "data"}', '--dataset=nine',
           f'--out_dir={tmp_path / "out"}', '--max_iters=9', '--eval_interval=9', '--gradient_accumulation_steps=2',
           '--always_save_checkpoint=True']
    env = dict(os.environ, OMP_NUM_THREADS='1')
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = torch.load(tmp_path / 'out' / 'ckpt.pt', weights_only=True)
    assert ckpt['bytes_seen'] == 6 * sum(map(len, docs)) # every byte, the tails of the long documents too


def write_corpus(path, train_docs, val_docs):
    """ a dataset folder in prepare.py's format """
    os.makedirs(path, exist_ok=True)
    for split, docs in (('train', train_docs), ('val', val_docs)):
        (path / f'{split}.bin').write_bytes(b''.join(docs))
        np.save(path / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]).astype(np.int64))


def train_functions(ns, *names):
    """ the named functions of train.py, the lines that ship, defined with the dict ns as their globals """
    tree = ast.parse(open(os.path.join(ROOT, 'train.py')).read())
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert len(defs) == len(names)
    exec(compile(ast.Module(defs, type_ignores=[]), 'train.py', 'exec'), ns)
    return [ns[n] for n in names]


def test_row_index_cuts_every_document_into_windows():
    from common import row_index
    start, n = row_index(np.array([0, 5, 7]), 2) # the docstring's example
    assert start.tolist() == [0, 2, 4, 5] and n.tolist() == [2, 2, 1, 2]
    rng = np.random.default_rng(0)
    off = np.cumsum([0, *rng.integers(1, 700, size=300)])
    for w in (1, 63, 255, 4095):
        start, n = row_index(off, w)
        assert len(start) == sum(-(-(b - a) // w) for a, b in zip(off[:-1], off[1:])) # ceil(n / w) per document
        counts = np.zeros(off[-1], dtype=int)
        for a, k in zip(start, n):
            counts[a:a + k] += 1
        assert (counts == 1).all() and (n > 0).all() and (n <= w).all() # every byte once, windows of <= w bytes
        doc = np.searchsorted(off, start, side='right') - 1
        assert (start + n <= off[doc + 1]).all() # a window never crosses into the next document


def test_documents_of_one_row_give_exactly_the_rows_of_the_document_order():
    """ the paper's case, 4095-byte documents at block 4096: one row per document, and the stream of rows is the
        stream of documents train.py read before rows were windows (a seeded permutation of documents per epoch) """
    n_docs, batch, accum, seed = 37, 4, 3, 1337
    from common import row_index
    start, n = row_index(np.arange(n_docs + 1) * 4095, 4096 - 1)
    assert (start == np.arange(n_docs) * 4095).all() and (n == 4095).all()
    ns = dict(np=np, seed=seed, batch_size=batch, gradient_accumulation_steps=accum, n_rows={'train': n_docs}, _perm={})
    train_rows, = train_functions(ns, 'train_rows')
    for it in range(12): # 144 rows: several epochs, micro-batches across their boundaries
        for micro in range(accum):
            first = (it * accum + micro) * batch
            old = [np.random.default_rng([seed, i // n_docs]).permutation(n_docs)[i % n_docs]
                   for i in range(first, first + batch)]
            assert train_rows(it, micro).tolist() == old


def test_val_rows_are_spread_over_the_whole_split():
    ns = dict(np=np, eval_iters=8, batch_size=4, n_rows={'val': 1000})
    val_rows, = train_functions(ns, 'val_rows')
    rows = val_rows()
    assert len(rows) == 32 and rows[0] == 0 and rows[-1] == 999 and (np.diff(rows) >= 32).all() # evenly spaced
    assert (np.diff(rows) <= 33).all() and (val_rows() == rows).all() # and the same at every call
    ns['n_rows'] = {'val': 20}
    assert val_rows().tolist() == list(range(20)) # a split smaller than the eval: all of it, once


RECORDER = """
import json, os, runpy, sys
import numpy as np
reads, memmap = [], np.memmap
class Recorded: # the memmap train.py opens, noting every slice it reads
    def __init__(self, path, **kw):
        self.name, self.a = os.path.basename(path), memmap(path, **kw)
    def __getitem__(self, key):
        reads.append((self.name, int(key.start), int(key.stop)))
        return self.a[key]
    def __len__(self):
        return len(self.a)
np.memmap = Recorded
out, sys.argv = sys.argv[1], ['train.py', *sys.argv[2:]]
sys.path.insert(0, os.getcwd()) # train.py imports model.py from the repository root
runpy.run_path('train.py', run_name='__main__')
with open(os.path.join(out, f"reads{os.environ.get('RANK', 0)}.json"), 'a') as f:
    f.write(json.dumps(reads) + '\\n')
"""


def test_one_epoch_reads_every_byte_once_with_one_process_two_and_across_a_resume(tmp_path):
    """ documents 4.5 rows long: 8 of them are 40 rows, 8 rows per step, so 5 steps are one epoch. The slices train.py
        reads from train.bin are recorded: every byte exactly once. The val rows are the same at both evals and come
        from all of val.bin """
    rng = np.random.default_rng(0)
    docs = lambda: [rng.integers(32, 127, size=288, dtype=np.uint8).tobytes() for _ in range(8)] # 288 = 4.5 x 64
    write_corpus(tmp_path / 'data' / 'long', docs(), docs())
    (tmp_path / 'recorder.py').write_text(RECORDER)

    def reads(name, *args, nproc=1):
        out = tmp_path / name
        os.makedirs(out, exist_ok=True)
        launcher = [sys.executable] if nproc == 1 else [sys.executable, '-m', 'torch.distributed.run', '--standalone',
                                                        f'--nproc_per_node={nproc}']
        cmd = launcher + [str(tmp_path / 'recorder.py'), str(out), *TINY, f'--data_dir={tmp_path / "data"}',
                          '--dataset=long', f'--out_dir={out}', '--gradient_accumulation_steps=2', '--eval_interval=5',
                          *args]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, OMP_NUM_THREADS='1'))
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        runs = [json.loads(line) for f in sorted(os.listdir(out)) if f.startswith('reads') for line in open(out / f)]
        return [[tuple(x) for x in run] for run in runs], torch.load(out / 'ckpt.pt', weights_only=True)

    size = 8 * 288
    one, ckpt = reads('one', '--max_iters=5')
    two, _ = reads('two', '--max_iters=5', nproc=2)
    reads('resumed', '--max_iters=2')
    resumed, ckpt_resumed = reads('resumed', '--max_iters=5', '--init_from=resume')
    for runs in (one, two, resumed):
        counts = np.zeros(size, dtype=int)
        for _, a, b in [x for run in runs for x in run if x[0] == 'train.bin']:
            counts[a:b] += 1
        assert (counts == 1).all(), counts
    assert ckpt['bytes_seen'] == ckpt_resumed['bytes_seen'] == size # bytes_seen counts the bytes read
    val = [x for x in one[0] if x[0] == 'val.bin']
    assert len(val) == 16 and val[:8] == val[8:] # eval_iters * batch_size rows, the same at iter 0 and iter 5
    assert min(a for _, a, _ in val) == 0 and max(b for _, _, b in val) == size # from the first row to the last
    assert sorted(x for run in two for x in run if x[0] == 'val.bin') == sorted(val) # any process count


def test_a_broken_data_file_is_one_line_with_the_command_that_remakes_it(tmp_path):
    breakages = {'missing': 'val_offsets.npy is missing',
                 'short': 'train_offsets.npy ends at byte 4,000 but train.bin has 4,096 bytes',
                 'malformed': 'val_offsets.npy is not',
                 'decreasing': 'train_offsets.npy is not n_docs+1 increasing integers'}
    procs = {}
    for breakage in breakages: # one corpus each, all the runs at once
        path = tmp_path / breakage / 'broken'
        write_corpus(path, [b'a' * 1000] * 4 + [b'b' * 96], [b'c' * 100])
        if breakage == 'missing':
            os.remove(path / 'val_offsets.npy')
        elif breakage == 'short':
            np.save(path / 'train_offsets.npy', np.array([0, 1000, 2000, 3000, 4000]))
        elif breakage == 'malformed':
            (path / 'val_offsets.npy').write_bytes(b'not numpy')
        else:
            np.save(path / 'train_offsets.npy', np.array([0, 3000, 2000, 4096]))
        procs[breakage] = subprocess.Popen([sys.executable, 'train.py', *TINY, f'--data_dir={tmp_path / breakage}',
                                            '--dataset=broken', f'--out_dir={tmp_path / breakage / "out"}'],
                                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for breakage, p in procs.items():
        path, err = tmp_path / breakage / 'broken', p.communicate(timeout=300)[1]
        lines = err.strip().splitlines()
        assert p.returncode != 0 and len(lines) == 1 and 'Traceback' not in err, err[-2000:]
        assert breakages[breakage] in lines[0] and str(path) in lines[0], lines[0]
        assert f'python prepare.py files --path=DIR --out_dir={path}' in lines[0] # 'broken' is no name prepare.py knows


@pytest.mark.parametrize('gater', ['sequential', 'hnet', 'equidistant'])
def test_two_processes_match_one_on_the_same_global_batch(tmp_path, data_dir, gater):
    """ equidistant: the defaults' one micro-batch, whose rows the two processes split (full rows and fixed gates:
        the mean of their halves' losses is the whole batch's, and the gate samples do not enter) """
    extra = ['--max_iters=2', '--eval_interval=2', f'--gater={gater}']
    if gater != 'equidistant':
        extra += ['--gradient_accumulation_steps=2']
    if gater == 'hnet':
        extra += ['--downsampler=hnet', '--upsampler=hnet']
    dataset = 'full' if gater == 'equidistant' else 'tiny'
    one = train(tmp_path / 'one', data_dir, *extra, dataset=dataset)
    two = train(tmp_path / 'two', data_dir, *extra, nproc=2, dataset=dataset)
    val = lambda log: [r for r in log if r['split'] == 'val']
    for r1, r2 in zip(val(one), val(two), strict=True):
        assert r1['loss'] == pytest.approx(r2['loss'], abs=1e-5) and r1['rate'] == pytest.approx(r2['rate'])
    a = torch.load(tmp_path / 'one' / 'ckpt.pt', weights_only=True)['model']
    b = torch.load(tmp_path / 'two' / 'ckpt.pt', weights_only=True)['model']
    for k in a: # equal weights after two AdamW steps: the averaged gradients were equal
        torch.testing.assert_close(a[k], b[k], atol=2e-5, rtol=1e-4, msg=k)


def test_rate_loss_moves_the_realised_rate_toward_its_target(tmp_path, data_dir):
    """ H-Net's router knows no rate and starts far below 0.2 here; train.py's rate_loss='hnet' brings it there (the
        'ours' loss, from above and below, is tested in tests/test_reinforce.py through train.py's own lines) """
    log = train(tmp_path, data_dir, '--gater=hnet', '--downsampler=hnet', '--upsampler=hnet', '--rate_loss=hnet',
                '--pg_weight=0', '--rate_weight=1', '--learning_rate=1e-2', '--max_iters=30',
                '--eval_interval=30')
    rates = [r['rate'] for r in log if r['split'] == 'train']
    assert rates[0] < 0.1, rates # starts far below the target
    assert abs(np.mean(rates[-10:]) - 0.2) < 0.05, rates # and is held near it


def cats(path):
    """ data/cats: 16 documents of 'the cat sat on the log.' words (train = val), tokens of a few bytes under the 'tiny'
        encoding -> the val rate that BPE guidance gives on train.py's TINY rows, worked out here from the bytes: the
        first byte of every token but the first gated, counted at the decided positions (not 0 or 63, C1) """
    rng = np.random.default_rng(0)
    words = [b'the', b' cat', b' sat', b' on', b' the', b' log', b'.']
    docs = [b''.join(rng.choice(words, size=rng.integers(3, 30))) for _ in range(16)]
    write_corpus(path / 'cats', docs, docs)
    gates = positions = 0
    windows = [doc[i:i + 63] for doc in docs for i in range(0, len(doc), 63)] # a row: BOS + up to 63 bytes
    for r in np.linspace(0, len(windows) - 1, 2 * 4).round().astype(int): # eval_iters * batch_size, spread evenly
        doc = windows[r]
        end = min(1 + len(doc), 63) # the decided positions are 1..end-1
        gates += len({e + 2 for e in bpe_ends(tiny_encoding(), doc) if e + 2 < end}) # a token's first byte
        positions += end - 1
    assert 0.15 < gates / positions < 0.5 # tokens of a few bytes: far from a gate at every byte
    return gates / positions


def test_bpe_guidance_gates_the_first_byte_of_every_token_but_the_first(tmp_path, plugin):
    """ train.py with prescribe='bpe' and the 'tiny' encoding (by name, from a tiktoken plugin): the val rate it logs is
        the count of BPE gates worked out from the same bytes """
    rate = cats(tmp_path / 'data')
    env = dict(PYTHONPATH=str(plugin), TIKTOKEN_CACHE_DIR=str(plugin / 'cache'))
    r = run(train_cmd(tmp_path / 'out', tmp_path / 'data', '--prescribe=bpe', '--bpe_encoding=tiny',
                      '--eval_only=True', dataset='cats'), **env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert read_log(tmp_path / 'out')[0]['rate'] == pytest.approx(rate, abs=1e-6)


def test_bpe_guidance_reads_a_tiktoken_file(tmp_path):
    """ --bpe_encoding=FILE.tiktoken: tiktoken's own format ("base64(token) rank" per line), loaded by common.load_bpe
        with GPT-2's split, which cuts these words as the 'tiny' encoding's does: the same gates. A file that is not
        there is one line """
    rate = cats(tmp_path / 'data')
    path = tmp_path / 'tiny.tiktoken'
    ranks = tiny_encoding()._mergeable_ranks
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    r = run(train_cmd(tmp_path / 'out', tmp_path / 'data', '--prescribe=bpe', f'--bpe_encoding={path}',
                      '--eval_only=True', dataset='cats'))
    assert r.returncode == 0, r.stderr[-3000:]
    assert read_log(tmp_path / 'out')[0]['rate'] == pytest.approx(rate, abs=1e-6)
    missing = tmp_path / 'no.tiktoken'
    r = run(train_cmd(tmp_path / 'none', tmp_path / 'data', '--prescribe=bpe', f'--bpe_encoding={missing}',
                      dataset='cats'))
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    assert 'no.tiktoken' in lines[0] and not os.path.exists(tmp_path / 'none')


def test_bad_flags_name_the_key(tmp_path, data_dir):
    cases = (('--batch_sise=4', 'batch_sise'), ('--batch_size=0', 'batch_size=0'),
             ('--gater=seq', "--gater=seq must be one of 'sequential',"), ('--dtype=fp8', 'dtype=fp8')) # (and
    # every key's type and range: tests/test_configurator.py)
    procs = [subprocess.Popen([sys.executable, 'train.py', arg], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for arg, _ in cases] # all at once: each is an import
    for (arg, key), p in zip(cases, procs):
        err = p.communicate(timeout=300)[1]
        assert p.returncode != 0 and key in err and 'Traceback' not in err, (arg, err[-2000:])
    r = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', 'train.py',
                        *TINY, f'--data_dir={data_dir}', '--dataset=tiny', f'--out_dir={tmp_path}', '--batch_size=3'],
                       cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert r.returncode != 0 and '2 processes cannot split --gradient_accumulation_steps=1 micro-batches of ' \
                                 '--batch_size=3 rows' in r.stderr
    assert 'train.py", line' not in r.stderr # torchrun prints its own traceback, but none comes from train.py
    r = subprocess.run([sys.executable, 'train.py', '--dataset=nope', f'--data_dir={tmp_path}'], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode != 0 and 'Traceback' not in r.stderr and f'--dataset=nope is not in {tmp_path}' in r.stderr
    assert 'prepare.py files --path=DIR' in r.stderr and 'prepare.py nope' not in r.stderr # no name prepare.py knows


def test_a_rerun_overwrites_nothing_and_a_run_ends_with_a_summary(tmp_path, data_dir):
    """ a fresh run (init_from='scratch', the default) into an out_dir with a checkpoint stops with one line saying how
        to resume or start over, and leaves ckpt.pt and log.jsonl as they were; with a log but no checkpoint (a run
        killed before its first save) the log starts afresh, so no iteration is in it twice """
    args = ['--max_iters=2', '--eval_interval=2']
    r = run(train_cmd(tmp_path, data_dir, *args))
    assert r.returncode == 0, r.stderr[-3000:]
    done = r.stdout.strip().splitlines()[-3:] # the closing summary
    assert done[0].startswith('done: 2 iterations in ') and 'val bpb ' in done[0] and 'word_boundary ' in done[0]
    assert done[1:] == [f"checkpoint: {tmp_path / 'ckpt.pt'}", f'next: python sample.py --out_dir={tmp_path} '
                        '--show_boundaries']
    ckpt, log = (tmp_path / 'ckpt.pt').read_bytes(), (tmp_path / 'log.jsonl').read_bytes()
    r = run(train_cmd(tmp_path, data_dir, *args))
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    assert str(tmp_path / 'ckpt.pt') in lines[0] and '--init_from=resume' in lines[0] and '--out_dir' in lines[0]
    assert (tmp_path / 'ckpt.pt').read_bytes() == ckpt and (tmp_path / 'log.jsonl').read_bytes() == log
    os.remove(tmp_path / 'ckpt.pt')
    again = train(tmp_path, data_dir, *args)
    keys = [(r['iter'], r['split']) for r in again]
    assert keys == [(r['iter'], r['split']) for r in map(json.loads, log.decode().splitlines())]
    assert len(set(keys)) == len(keys) == 4 # val 0, train 0, train 1, val 2: once each


def test_progress_lines_reach_a_pipe_while_the_run_goes_on(tmp_path, data_dir):
    """ stdout is line-buffered from train.py's first line: through a pipe (tee, nohup, a batch log) the first progress
        line arrives while the run is still going, not when it ends (block-buffered, it would wait for 8 KB) """
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONUNBUFFERED'}
    cmd = train_cmd(tmp_path, data_dir, '--max_iters=100000', '--eval_interval=100000', '--log_interval=100000')
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env=dict(env, OMP_NUM_THREADS='1'))
    try:
        line = next((line for line in p.stdout if line.startswith('iter 0/100000:')), '')
        running = p.poll() is None
    finally:
        p.kill()
        p.wait(timeout=1800)
    assert line and running, 'the first progress line came only when the run ended'
    for part in ('loss ', 'bpb ', 'rate ', 'word_boundary ', ' bytes/s', ' left'): # short: i/N, the figures, time left
        assert part in line, line
    assert len(line) < 120, line


BAD = {'--rate=0': '--rate=0.0 must be in (0, 1)', '--rate=1.5': '--rate=1.5 must be in (0, 1)',
       '--rate=1.5 --gater=uniform': '--rate=1.5 must be in (0, 1)', '--word_rate=1.0': 'word_rate=1.0 must be in [0, 1)',
       '--device=mps': '--device=mps but MPS', '--device=cuda:7': '--device=cuda:7 but this PyTorch sees',
       '--device=nonsense': '--device=nonsense is not a device', '--bach_size=4': 'did you mean --batch_size',
       '--nan_at_iter=2': "unknown config key 'nan_at_iter'", # fault injection comes from the environment
       '--dataset=pydocs': 'python prepare.py pydocs --out_dir=', # a name prepare.py knows
       '--dataset=mine': 'is not in',
       # once silently wrong runs or tracebacks (every key's range: tests/test_configurator.py)
       '--grad_clip=-1': '--grad_clip=-1.0 must be >= 0', '--early_weight=1.5': '--early_weight=1.5 must be in [0, 1]',
       '--prescribe=foo': "--prescribe=foo must be one of '', 'bpe'", '--n_down=-1': '--n_down=-1 must be >= 0',
       '--max_iters=-5': '--max_iters=-5 must be >= 0', '--n_head=0': '--n_head=0 must be > 0',
       '--n_embd=-64': '--n_embd=-64 must be >= 2', '--window=-1': '--window=-1 must be >= 0',
       '--filter_size=0': '--filter_size=0 must be > 0', '--threads=-1': '--threads=-1 must be >= 0',
       '--learning_rate=-0.003': '--learning_rate=-0.003 must be > 0', '--learning_rate=1e999': 'must be finite',
       # and the folders: one that cannot be made, an empty name, a data_dir for pycode that cannot be made
       '--out_dir=/proc/nanotok': '--out_dir=/proc/nanotok: cannot write in /proc',
       '--out_dir=': '--out_dir= must be a folder',
       '--data_dir=/proc/nanotok --dataset=pycode': 'prepare.py: --out_dir=/proc/nanotok/pycode: cannot write in /proc'}


def exit_message(*args):
    """ train.py run in this process (runpy: no second torch import) -> the message of the SystemExit it ends with """
    argv, sys.argv = sys.argv, ['train.py', *args]
    try:
        runpy.run_path(os.path.join(ROOT, 'train.py'), run_name='__main__')
    except SystemExit as e:
        return e.code
    finally:
        sys.argv = argv


def test_each_bad_input_is_one_line_and_writes_nothing(tmp_path, data_dir):
    """ issue 29: one line naming the value and the fix (a SystemExit with a message: exit code 1, no traceback, which
        any other exception would print), and no out_dir; as a user sees it, once, in a subprocess at the end """
    if torch.backends.mps.is_available() or torch.cuda.device_count() > 7:
        pytest.skip('mps or 8 GPUs are there: those flags are valid here')
    line = {}
    for i, bad in enumerate(BAD):
        msg = exit_message(*TINY, f'--data_dir={data_dir}', '--dataset=tiny', f'--out_dir={tmp_path / str(i)}',
                           '--threads=1', *bad.split()) # (threads: the cores left idle, looked at in this process)
        assert isinstance(msg, str) and '\n' not in msg and BAD[bad] in msg, (bad, msg)
        assert not os.path.exists(tmp_path / str(i)), bad # nothing written
        line[bad] = msg
    assert 'did you mean --batch_size or' in line['--bach_size=4'] and 'valid keys' not in line['--bach_size=4']
    assert f'--dataset=mine is not in {data_dir} (it has: full, tiny)' in line['--dataset=mine'] # and how to make one
    assert f"python prepare.py files --path=DIR --out_dir={os.path.join(data_dir, 'mine')}" in line['--dataset=mine']
    r = run(train_cmd(tmp_path / 'x', data_dir, '--rate=0'))
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [line['--rate=0']]
    out = run([sys.executable, 'train.py', '--help']).stdout
    assert '--rate=0.2' in out and 'nan_at_iter' not in out and 'signal_at_iter' not in out # no test-only options


def test_what_a_run_needs_of_the_machine_fails_in_one_line_before_any_work(tmp_path, data_dir, monkeypatch):
    """ an out_dir or a data_dir that is a file, an out_dir under one, --wandb_log=True without wandb: one
        line each and nothing made; '~' in out_dir is the home folder (it made a folder named '~') """
    (tmp_path / 'file').write_text('not a folder')
    monkeypatch.setitem(sys.modules, 'wandb', None) # `import wandb` fails, as where it is not installed
    cases = {f'--out_dir={tmp_path / "file"}': f'--out_dir={tmp_path / "file"} must be a folder',
             f'--out_dir={tmp_path / "file" / "run"}': f'{tmp_path / "file"} is a file, not a folder',
             f'--data_dir={tmp_path / "file"}': f"--data_dir={tmp_path / 'file'} must be a folder or ''",
             '--wandb_log=True': '--wandb_log=True needs wandb: pip install wandb'}
    for arg, says in cases.items():
        msg = exit_message(*TINY, f'--data_dir={data_dir}', '--dataset=tiny', f'--out_dir={tmp_path / "out"}',
                           '--threads=1', arg)
        assert isinstance(msg, str) and '\n' not in msg and says in msg, (arg, msg)
        assert sorted(os.listdir(tmp_path)) == ['file'] # no out_dir, no log.jsonl
    r = run(train_cmd('~/run', data_dir, '--max_iters=0'), HOME=str(tmp_path))
    assert r.returncode == 0 and (tmp_path / 'run' / 'log.jsonl').exists(), r.stderr[-2000:]
    assert not os.path.exists(os.path.join(ROOT, '~')) # (train.py runs in ROOT)


def test_a_resume_refuses_model_flags_that_contradict_its_checkpoint(tmp_path, data_dir, full_run):
    """ the architecture of a resumed run is its checkpoint's: a flag that says otherwise is refused by name (it was
        silently ignored, yet written into the saved config); flags equal to it pass; the keys not given are the
        checkpoint's, in the run (block_size cuts the rows) and in the config it saves """
    out = tmp_path / 'run'
    shutil.copytree(full_run[0], out)
    before = {f: (out / f).read_bytes() for f in ('ckpt.pt', 'log.jsonl')}
    r = run(train_cmd(out, data_dir, '--init_from=resume', '--max_iters=13', '--n_embd=128', '--gater=hnet',
                      '--rate=0.3'))
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    for part in ('n_embd=32', 'gater=sequential', 'rate=0.2', '--n_embd=128', '--gater=hnet', '--rate=0.3'):
        assert part in lines[0], lines[0]
    assert all((out / f).read_bytes() == b for f, b in before.items()) # nothing written
    r = run([sys.executable, 'train.py', '--device=cpu', '--dtype=float32', f'--data_dir={data_dir}', '--dataset=tiny',
             f'--out_dir={out}', '--init_from=resume', '--n_embd=32', '--max_iters=13', '--eval_interval=13'])
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = torch.load(out / 'ckpt.pt', weights_only=True)
    assert ckpt['iter_num'] == 13 and ckpt['model_args'] == torch.load(full_run[0] / 'ckpt.pt')['model_args']
    assert {k: ckpt['config'][k] for k in ('n_embd', 'n_mid', 'window', 'block_size', 'rate')} == dict(
        n_embd=32, n_mid=1, window=16, block_size=64, rate=0.2) # not train.py's defaults (n_mid 4, window 8, 256)


def test_train_py_runs_from_another_directory_with_a_config_file(tmp_path, data_dir):
    """ configurator.py, the config file and the config files it execs are found next to train.py; the default
        data_dir is the data/ folder there """
    r = run([sys.executable, os.path.join(ROOT, 'train.py'), 'config/train_tiny_pycode.py', *TINY,
             f'--data_dir={data_dir}', '--dataset=tiny', '--out_dir=here', '--max_iters=1', '--eval_interval=1'],
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    config = torch.load(tmp_path / 'here' / 'ckpt.pt', weights_only=True)['config']
    assert config['pg_weight'] == 0.1 and config['gamma'] == 0.99 # the config file's, and method_sequential.py's
    assert config_globals('config/train_tiny_pycode.py')['data_dir'] == os.path.join(ROOT, 'data')


def config_globals(path):
    """ train.py's defaults, then the configurator on one config file: what train.py would run with """
    src = open(os.path.join(ROOT, 'train.py')).read()
    defaults = src[src.index('# default config values'):src.index("config_keys = ")]
    ns = {'torch': torch, 'os': os, '__file__': os.path.join(ROOT, 'train.py'), '__builtins__': __builtins__}
    exec(defaults, ns)
    argv, cwd = sys.argv, os.getcwd()
    try: # from another folder: the config file and the files it execs are found next to train.py
        sys.argv, _ = ['train.py', path], os.chdir(os.path.join(ROOT, 'tests'))
        exec(open(os.path.join(ROOT, 'configurator.py')).read(), ns)
    finally:
        sys.argv, _ = argv, os.chdir(cwd)
    return ns


CONFIGS = sorted(f for f in os.listdir(os.path.join(ROOT, 'config')) if f.startswith('train_'))
# (micro-batch, global batch) in rows: the paper's jobs (18M on 1 GPU x 32, 32M and 130M on 2 GPUs x 32, 73M, 90M and
# 147M on 4 GPUs x 8; 346M has no stored job); the batch baseline averages over the micro-batch
PAPER_BATCH = {'18m': (32, 32), '32m': (32, 64), '73m': (8, 128), '90m': (8, 128), '130m': (32, 128),
               '147m': (8, 128), '346m': (8, 256)}


@pytest.mark.parametrize('name', CONFIGS)
def test_every_config_builds_its_model(name):
    ns = config_globals(os.path.join('config', name))
    cfg = UNetConfig(**{k: ns[k] for k in UNetConfig.__dataclass_fields__ if k != 'vocab_size'})
    with torch.device('meta'):
        model = ByteUNet(cfg)
    size = name.split('_')[1]
    if size in PRESETS: # the name is the paper's size, and the batch is the paper's 4096-byte rows
        assert all(getattr(cfg, k) == v for k, v in PRESETS[size].items())
        micro, rows = PAPER_BATCH[size]
        assert ns['block_size'] == 4096 and ns['batch_size'] == micro and ns['window'] == 64 # not the quick start's 8
        if 'sequential' in name: # the paper's loss weights and gate scale, not train.py's quick-start defaults
            assert ns['gate_scale'] == 1 / 16 and ns['pg_weight'] == 0.01
            assert ns['rate_weight'] == (0.0 if 'no_rate_loss' in name else 0.01)
        assert ns['batch_size'] * ns['gradient_accumulation_steps'] == rows
        assert ns['eval_iters'] * ns['batch_size'] == 256 # the paper's 256 val documents
        assert ns['max_iters'] * ns['gradient_accumulation_steps'] * ns['batch_size'] * 4095 > 8e8
    assert model.get_num_params() > 0 and ns['out_dir'] != 'out'
