"""
train.py run as a user runs it: a tiny CPU run lowers val loss and writes log.jsonl and ckpt.pt in the DESIGN.md
format; resume reproduces the uninterrupted run; two gloo processes (torchrun) match one process on the same global
batch; the rate loss moves the realised rate; every config/ file gives a valid model of its size.
Run: python -m pytest -q tests/test_train.py   (about a minute on 2 cores)
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, tiny_encoding
from model import UNetConfig, ByteUNet, PRESETS, bpe_ends

TINY = ['--device=cpu', '--dtype=float32', '--block_size=64', '--batch_size=4', '--n_embd=32', '--n_head=2',
        '--n_down=1', '--n_mid=1', '--n_up=1', '--window=16', '--eval_iters=2', '--log_interval=1',
        '--warmup_iters=2', '--lr_decay_iters=40']


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
    """ a small corpus in the DESIGN.md format: documents of varied length, some shorter than a row (padding) """
    root = tmp_path_factory.mktemp('data')
    rng = np.random.default_rng(0)
    words = [b'def ', b'return ', b'self', b'.x', b' = ', b'(', b')', b':\n', b'    ', b'if ', b'None', b'1']
    for split, n in (('train', 200), ('val', 16)):
        docs = [b''.join(rng.choice(words, size=rng.integers(5, 60))) for _ in range(n)]
        os.makedirs(root / 'tiny', exist_ok=True)
        (root / 'tiny' / f'{split}.bin').write_bytes(b''.join(docs))
        np.save(root / 'tiny' / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]).astype(np.int64))
    return str(root)


def train(out_dir, data_dir, *args, nproc=1):
    launcher = [sys.executable] if nproc == 1 else [sys.executable, '-m', 'torch.distributed.run', '--standalone',
                                                    f'--nproc_per_node={nproc}']
    cmd = launcher + ['train.py', *TINY, f'--data_dir={data_dir}', '--dataset=tiny', f'--out_dir={out_dir}', *args]
    env = dict(os.environ, OMP_NUM_THREADS='1')
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]


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
    """ gates on every whitespace byte: both recalls are 1 in every row, train and val; the precision is below 1 only by
        the forced gates (BOS, and a full row's last byte) that are not on a word edge """
    log = train(tmp_path, data_dir, '--max_iters=2', '--eval_interval=2', '--gater=whitespace')
    assert {row['split'] for row in log} == {'train', 'val'}
    for row in log:
        assert row['ws_boundary'] == row['word_boundary'] == 1.0
        assert 0.8 < row['boundary_precision'] < 1.0


def test_resume_reproduces_the_uninterrupted_run(tmp_path, data_dir):
    full = train(tmp_path / 'full', data_dir, '--max_iters=8', '--eval_interval=4')
    train(tmp_path / 'part', data_dir, '--max_iters=4', '--eval_interval=4')
    resumed = train(tmp_path / 'part', data_dir, '--max_iters=8', '--eval_interval=4', '--init_from=resume')
    later = lambda log: [(r['iter'], r['split'], r['loss'], r['rate']) for r in log if r['iter'] > 4]
    assert later(resumed) == later(full) # same data, same gate samples, same optimizer state
    a = torch.load(tmp_path / 'full' / 'ckpt.pt', weights_only=True)
    b = torch.load(tmp_path / 'part' / 'ckpt.pt', weights_only=True)
    assert a['bytes_seen'] == b['bytes_seen'] and a['iter_num'] == b['iter_num'] == 8
    for k in a['model']:
        assert torch.equal(a['model'][k], b['model'][k]), k


def test_resume_restores_the_fp16_loss_scaler(tmp_path, data_dir):
    """ float16 (on a CPU: fp32 compute, scaled loss): the scaler counts its steps since the last backoff """
    train(tmp_path, data_dir, '--dtype=float16', '--max_iters=2', '--eval_interval=2', '--always_save_checkpoint=True')
    train(tmp_path, data_dir, '--dtype=float16', '--max_iters=4', '--eval_interval=2', '--always_save_checkpoint=True',
          '--init_from=resume')
    scaler = torch.load(tmp_path / 'ckpt.pt', weights_only=True)['scaler']
    assert scaler['scale'] == 2.0 ** 16 and scaler['_growth_tracker'] == 4 # 2 + 2 steps: the count survived


def test_every_epoch_reads_every_document_once_when_the_batch_does_not_divide_the_corpus(tmp_path):
    """ 9 documents, 8 rows per step: micro-batches straddle epoch boundaries; 9 steps are exactly 8 epochs """
    docs = [b'x' * n for n in (3, 10, 20, 40, 63, 64, 80, 100, 7)]
    for split in ('train', 'val'):
        os.makedirs(tmp_path / 'data' / 'nine', exist_ok=True)
        (tmp_path / 'data' / 'nine' / f'{split}.bin').write_bytes(b''.join(docs))
        np.save(tmp_path / 'data' / 'nine' / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]))
    cmd = [sys.executable, 'train.py', *TINY, f'--data_dir={tmp_path / "data"}', '--dataset=nine',
           f'--out_dir={tmp_path / "out"}', '--max_iters=9', '--eval_interval=9', '--gradient_accumulation_steps=2',
           '--always_save_checkpoint=True']
    env = dict(os.environ, OMP_NUM_THREADS='1')
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = torch.load(tmp_path / 'out' / 'ckpt.pt', weights_only=True)
    assert ckpt['bytes_seen'] == 8 * sum(min(len(d), 63) for d in docs) # a row reads at most block_size-1 bytes


@pytest.mark.parametrize('gater', ['sequential', 'hnet'])
def test_two_processes_match_one_on_the_same_global_batch(tmp_path, data_dir, gater):
    extra = ['--max_iters=2', '--eval_interval=2', '--gradient_accumulation_steps=2', f'--gater={gater}']
    if gater == 'hnet':
        extra += ['--downsampler=hnet', '--upsampler=hnet']
    one = train(tmp_path / 'one', data_dir, *extra)
    two = train(tmp_path / 'two', data_dir, *extra, nproc=2)
    val = lambda log: [r for r in log if r['split'] == 'val']
    for r1, r2 in zip(val(one), val(two), strict=True):
        assert r1['loss'] == pytest.approx(r2['loss'], abs=1e-5) and r1['rate'] == pytest.approx(r2['rate'])
    a = torch.load(tmp_path / 'one' / 'ckpt.pt', weights_only=True)['model']
    b = torch.load(tmp_path / 'two' / 'ckpt.pt', weights_only=True)['model']
    for k in a: # equal weights after two AdamW steps: the averaged gradients were equal
        torch.testing.assert_close(a[k], b[k], atol=2e-5, rtol=1e-4, msg=k)


def test_rate_loss_moves_the_realised_rate_toward_its_target(tmp_path, data_dir):
    log = train(tmp_path, data_dir, '--gater=linear', '--pg_weight=0', '--rate_weight=1', '--rate_target=0.6',
                '--learning_rate=1e-2', '--max_iters=30', '--eval_interval=30')
    rates = [r['rate'] for r in log if r['split'] == 'train']
    assert rates[0] < 0.3 # starts near the gater's own rate, 0.2
    assert abs(np.mean(rates[-10:]) - 0.6) < 0.1, rates # and is held near the target


def test_bpe_guidance_gates_the_first_byte_of_every_token_but_the_first(tmp_path, plugin):
    """ train.py with prescribe='bpe' and the 'tiny' encoding: the val rate it logs is the count of BPE gates
        worked out here from the same bytes (plus the forced BOS gate, and the forced last gate of full rows) """
    rng = np.random.default_rng(0)
    words = [b'the', b' cat', b' sat', b' on', b' the', b' log', b'.']
    docs = [b''.join(rng.choice(words, size=rng.integers(3, 30))) for _ in range(16)]
    for split in ('train', 'val'):
        os.makedirs(tmp_path / 'data' / 'cats', exist_ok=True)
        (tmp_path / 'data' / 'cats' / f'{split}.bin').write_bytes(b''.join(docs))
        np.save(tmp_path / 'data' / 'cats' / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]))
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=str(plugin), TIKTOKEN_CACHE_DIR=str(plugin / 'cache'))
    cmd = [sys.executable, 'train.py', *TINY, f'--data_dir={tmp_path / "data"}', '--dataset=cats',
           f'--out_dir={tmp_path / "out"}', '--prescribe=bpe', '--bpe_encoding=tiny', '--eval_only=True']
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    val = [json.loads(line) for line in open(tmp_path / 'out' / 'log.jsonl')][0]
    gates = positions = 0
    for doc in docs[:2 * 4]: # eval_iters * batch_size documents
        doc = doc[:63] # a row: BOS + up to 63 bytes
        n = 1 + len(doc)
        starts = {e + 2 for e in bpe_ends(tiny_encoding(), doc) if e + 2 < n} # every token's first byte but the first
        gates += 1 + len(starts | ({63} if n == 64 else set())) # BOS, the token starts, the last position if real
        positions += n
    assert 0.15 < gates / positions < 0.5 # tokens of a few bytes: far from a gate at every byte
    assert val['rate'] == pytest.approx(gates / positions, abs=1e-6)


def test_bad_flags_name_the_key(tmp_path, data_dir):
    for arg, key in (('--batch_sise=4', 'batch_sise'), ('--batch_size=four', 'batch_size'),
                     ('--batch_size=0', 'batch_size=0'), ('--gater=seq', "unknown gater 'seq'"),
                     ('--dtype=fp8', 'dtype=fp8'), ('--device=gpu', 'device=gpu'),
                     ('--downsampler=nawrot', 'nawrot pair')):
        r = subprocess.run([sys.executable, 'train.py', arg], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode != 0 and key in r.stderr and 'Traceback' not in r.stderr, (arg, r.stderr[-2000:])
    r = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', 'train.py',
                        *TINY, f'--data_dir={data_dir}', '--dataset=tiny', f'--out_dir={tmp_path}'],
                       cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert r.returncode != 0 and 'gradient_accumulation_steps=1 must be a multiple of the 2 processes' in r.stderr
    assert 'train.py", line' not in r.stderr # torchrun prints its own traceback, but none comes from train.py
    r = subprocess.run([sys.executable, 'train.py', '--dataset=nope', f'--data_dir={tmp_path}'], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode != 0 and 'prepare.py nope' in r.stderr and 'Traceback' not in r.stderr


def config_globals(path):
    """ train.py's defaults, then the configurator on one config file: what train.py would run with """
    src = open(os.path.join(ROOT, 'train.py')).read()
    defaults = src[src.index('# default config values'):src.index("exec(open('configurator.py')")]
    ns = {'torch': torch, '__builtins__': __builtins__}
    exec(defaults, ns)
    argv, cwd = sys.argv, os.getcwd()
    try:
        sys.argv, _ = ['train.py', path], os.chdir(ROOT) # config files exec their parts relative to the repo
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
        assert ns['block_size'] == 4096 and ns['batch_size'] == micro
        assert ns['batch_size'] * ns['gradient_accumulation_steps'] == rows
        assert ns['eval_iters'] * ns['batch_size'] == 256 # the paper's 256 val documents
        assert ns['max_iters'] * ns['gradient_accumulation_steps'] * ns['batch_size'] * 4095 > 8e8
    assert model.get_num_params() > 0 and ns['out_dir'] != 'out'
