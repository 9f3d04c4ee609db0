"""
experiments.py run as a user runs it, at a tiny size: a corpus of a few standard-library files, 2 steps per run, one
seed, one job. Each table trains its runs with train.py, skips the finished ones, and keeps each as a record in
assets/<table>/ (train.py's own last val row), from which the table is made; the controls' BPE (Hugging Face
tokenizers' trainer) merges the most frequent pair first, writes a file that common.load_bpe reads back, and reports the rate that bpe_gates gives; the figure is drawn.
Slow (about 1.5 minutes): python -m pytest -q -m slow tests/test_experiments.py
"""
import base64
import json
import os
import re
import subprocess
import sys
import sysconfig
from collections import Counter

import numpy as np
import pytest
import torch

from conftest import ROOT
from model import BOS, boundary_counts, boundary_metrics
from common import bpe_gates

pytestmark = pytest.mark.slow # every test here trains runs through experiments.py and train.py
STDLIB = sysconfig.get_paths()['stdlib']
TRAIN = ['textwrap.py', 'shlex.py', 'fnmatch.py', 'colorsys.py', 'bisect.py', 'getopt.py', 'glob.py', 'heapq.py']
VAL = ['calendar.py', 'string.py']


def write_split(folder, split, names):
    docs = [open(os.path.join(STDLIB, n), 'rb').read() for n in names]
    np.frombuffer(b''.join(docs), dtype=np.uint8).tofile(folder / f'{split}.bin')
    np.save(folder / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]).astype(np.int64))
    return docs


@pytest.fixture(scope='module')
def exp(tmp_path_factory):
    """ a tiny pycode in data/, and a function running experiments.py with out_root and assets in the same folder """
    root = tmp_path_factory.mktemp('exp')
    (root / 'data' / 'pycode').mkdir(parents=True)
    train = write_split(root / 'data' / 'pycode', 'train', TRAIN)
    write_split(root / 'data' / 'pycode', 'val', VAL)

    def run(*args, check=True):
        cmd = [sys.executable, os.path.join(ROOT, 'experiments.py'), f'--out_root={root}/out',
               f'--assets={root}/assets', f'--data_dir={root}/data', '--iters=2', '--eval_iters=1', '--jobs=1', *args]
        res = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=1800,
                             env={**os.environ, 'OMP_NUM_THREADS': '1'})
        assert not check or res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        return res
    run.root, run.train = root, b''.join(train)
    run.levers = run('--table=levers', '--runs=learned:1') # the learned run the other tables reuse
    return run


def val_rows(out_dir):
    return [r for r in map(json.loads, open(os.path.join(out_dir, 'log.jsonl'))) if r['split'] == 'val']


def check_table(exp, name, homes):
    """ every run of the table is a record in assets/<its home table>/<setting>_s1.json: train.py's last val row, with
        its arguments, command, bytes, wall time and val curve; the table's rows are the records' """
    runs = {}
    for setting, home in homes.items():
        r = json.load(open(exp.root / 'assets' / home / f'{setting}_s1.json'))
        out_dir = exp.root / 'out' / home / f'{setting}_s1'
        val = val_rows(out_dir)
        assert r['val'] == val[-1] and r['bytes'] == val[-1]['bytes'] > 0 and r['wall_s'] >= 0
        assert [c['iter'] for c in r['curve']] == [0, 2] and r['curve'][-1]['bpb'] == val[-1]['bpb']
        assert r['command'] == 'python ' + ' '.join(r['args']) + f' --out_dir={out_dir}'
        assert r['args'][0] == 'train.py' and '--eval_iters=1' in r['args'] and '--seed=1' in r['args']
        assert (r['setting'], r['seed'], r['name']) == (setting, 1, f'{setting}_s1') and r['bytes_per_sec'] > 0
        assert os.path.getsize(out_dir / 'train.txt') > 0 # its stdout
        runs[setting] = r
    rows = json.load(open(exp.root / 'assets' / f'{name}_table.json'))['rows']
    assert [r['setting'] for r in rows] == [s for s in runs] # in the table's order
    for row in rows:
        assert row['seeds'] == [1] and row['bpb'] == runs[row['setting']]['val']['bpb']
        assert row['bpb_std'] is None # one seed: no spread
    assert os.path.getsize(exp.root / 'assets' / f'{name}.png') > 0
    return runs


def test_levers_trains_and_tabulates(exp):
    runs = check_table(exp, 'levers', {'learned': 'levers'})
    assert runs['learned']['command'].startswith('python train.py --eval_iters=1 --eval_interval=400 --data_dir=')
    assert '1 runs, 0 finished already, 1 to train' in exp.levers.stdout and '| learned | 1 |' in exp.levers.stdout


def test_controls_reuse_learned_and_prescribe_word_rules_and_bpe(exp):
    log = exp.root / 'out' / 'levers' / 'learned_s1' / 'log.jsonl'
    mtime = os.path.getmtime(log)
    res = exp('--table=controls', '--runs=learned:1,word_ends:1,bpe:1')
    assert '3 runs, 1 finished already, 2 to train' in res.stdout and os.path.getmtime(log) == mtime # levers' run
    runs = check_table(exp, 'controls', {'learned': 'levers', 'word_ends': 'controls', 'bpe': 'controls'})
    p = json.load(open(exp.root / 'assets' / 'controls.json'))['prescribed']
    assert 0 < p['word_ends'] < 0.5 and 0 < p['word_onsets'] < 0.5
    assert f"--gater=word_ends --word_rate={p['word_ends']:.4f}" in runs['word_ends']['command']
    assert f"--prescribe=bpe --bpe_encoding={p['bpe']['path']}" in runs['bpe']['command']
    assert abs(runs['bpe']['val']['rate'] - p['bpe']['rate']) < 0.1 # val rows, not train rows: near, not equal


def test_bpe_trainer_merges_the_most_frequent_pair_and_round_trips(exp):
    import regex
    from common import BPE_PAT, load_bpe
    if not os.path.exists(exp.root / 'assets' / 'controls.json'): # (made by the controls test when it ran first)
        res = exp('--table=controls', '--runs=learned:1', '--tabulate_only=True')
        assert '1 of 1 runs finished' in res.stdout and not os.path.exists(exp.root / 'assets' / 'controls.json')
        exp('--table=controls', '--runs=random:1')
    p = json.load(open(exp.root / 'assets' / 'controls.json'))['prescribed']['bpe']
    lines = [l.split() for l in open(p['path']).read().splitlines()]
    ranks = {base64.b64decode(t): int(r) for t, r in lines}
    assert sorted(ranks.values()) == list(range(256 + p['merges'])) and p['merges'] > 10
    assert all(ranks[bytes([i])] == i for i in range(256)) and all(len(t) > 1 for t, r in ranks.items() if r >= 256)
    words = Counter(regex.findall(BPE_PAT, exp.train.decode()))
    pairs = Counter()
    for w, n in words.items():
        b = w.encode()
        for a, c in zip(b, b[1:]):
            pairs[bytes([a, c])] += n
    first = [t for t, r in ranks.items() if r == 256][0]
    assert pairs[first] == max(pairs.values()) # the first merge is the most frequent pair
    enc = load_bpe(p['path'])
    text = exp.train[:3000].decode()
    assert enc.decode(enc.encode_ordinary(text)) == text and enc._mergeable_ranks == ranks
    # the rate reported is bpe_gates' on the train rows (every one: the corpus has fewer than rate_rows)
    off = np.load(exp.root / 'data' / 'pycode' / 'train_offsets.npy')
    counts = torch.zeros(6, dtype=torch.long)
    for a, b in zip(off[:-1], off[1:]):
        for s in range(a, b, 255):
            data = exp.train[s:min(s + 255, b)]
            X = torch.zeros(1, 256, dtype=torch.long)
            X[0, 0], X[0, 1:1 + len(data)] = BOS, torch.tensor(list(data))
            M = torch.zeros(1, 256, dtype=torch.bool)
            M[0, :1 + len(data)] = True
            counts += boundary_counts(X, bpe_gates(enc, data, 256)[None], M)
    assert boundary_metrics(counts)['rate'] == pytest.approx(p['rate'], abs=1e-9)
    assert p['rate'] < 0.4 # (code's pre-tokens alone are ~0.23 per byte: 0.2 is out of reach)


def test_ablations_run_on_top_of_their_setting_and_train_it_themselves(exp):
    res = exp('--table=ablations', '--runs=learned:1,w1:1') # not levers' learned run: its own, on its machine
    assert '2 runs, 0 finished already, 2 to train' in res.stdout
    runs = check_table(exp, 'ablations', {'learned': 'ablations', 'w1': 'ablations'})
    assert [a for a in runs['w1']['args'] if a != '--filter_size=1'] == runs['learned']['args']
    assert '--filter_size=1' in runs['w1']['args']
    res = exp('--table=ablations', '--runs=learned:1,w1:1') # done: nothing trains again
    assert '2 runs, 2 finished already, 0 to train' in res.stdout and '$ python train.py' not in res.stdout


def test_english_runs_on_pydocs_with_its_own_word_rate(exp):
    (exp.root / 'data' / 'pydocs').mkdir()
    write_split(exp.root / 'data' / 'pydocs', 'train', VAL + TRAIN[:2]) # another corpus than pycode's
    write_split(exp.root / 'data' / 'pydocs', 'val', TRAIN[2:4])
    res = exp('--table=english', '--runs=learned:1,word_ends:1')
    assert '2 runs, 0 finished already, 2 to train' in res.stdout # not levers' run: another corpus
    runs = check_table(exp, 'english', {'learned': 'english', 'word_ends': 'english'})
    rate = float(runs['word_ends']['command'].split('--word_rate=')[1].split()[0])
    assert 0 < rate < 0.5
    controls = exp.root / 'assets' / 'controls.json' # (written by the controls test, when it ran first)
    if controls.exists(): # measured on pydocs' train rows, not pycode's
        assert rate != round(json.load(open(controls))['prescribed']['word_ends'], 4)
    for r in runs.values():
        assert '--dataset=pydocs' in r['args']


def test_figure_segments_one_text_three_ways(exp):
    res = exp('--figure=True')
    assert os.path.getsize(exp.root / 'assets' / 'segmentation.png') > 0
    fig = json.load(open(exp.root / 'assets' / 'segmentation.json'))
    assert [r['method'] for r in fig['rows']] == ['learned', 'bpe', 'whitespace'] and len(fig['texts']) == 2
    assert '\n' in fig['texts'][0] and fig['texts'][1].endswith('.')
    n = sum(len(t.encode()) for t in fig['texts'])
    for r in fig['rows']:
        assert [''.join(c) for c in r['chunks']] == fig['texts'] # the chunks cut the text, nothing lost
        assert r['bytes_per_chunk'] == pytest.approx(n / sum(map(len, r['chunks'])))
    for chunks in fig['rows'][2]['chunks']: # word_ends: a chunk ends on the space after a word
        assert all(c[-1].isspace() and not c[-2].isspace() for c in chunks[:-1] if len(c) > 1)
    assert 'bytes per chunk' in res.stdout


def test_vocab_beside_a_words_bpe(exp):
    """ --vocab: sample.py's vocabulary of the learned run in assets/vocab.md; --bpe_pat=words trains the BPE inside
        whitespace-run + word pre-tokens into a .words.tiktoken file, which load_bpe reads with that pattern """
    from common import WORDS_PAT, load_bpe
    run = exp.root / 'out' / 'levers' / 'learned_s1'
    res = exp('--vocab=True', '--bpe_pat=words', f'--figure_run={run}')
    p = json.load(open(exp.root / 'assets' / 'controls.json'))['prescribed_words']['bpe']
    assert p['path'].endswith('bpe_rate0.2.words.tiktoken') and load_bpe(p['path'])._pat_str == WORDS_PAT
    text = open(exp.root / 'assets' / 'vocab.md').read()
    assert text.startswith(f"$ python sample.py --out_dir={run} --analyze=val --compare=") and '--vocab=15' in text
    assert '| rank | learned (' in text and '| bpe_rate0.2.words.tiktoken (' in text and text in res.stdout
    assert len([l for l in text.splitlines() if re.match(r'\| \d+ \|', l)]) == 15


def test_bad_input_is_one_line_and_writes_nothing(exp, tmp_path):
    for args, msg in ((['--table=nope'], "--table=nope must be one of"), (['--table=levers', '--runs=learned'], "'learned'")):
        res = exp(*args, f'--assets={tmp_path}/assets', f'--out_root={tmp_path}/out', check=False)
        assert res.returncode == 1 and msg in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not os.path.exists(tmp_path / 'assets') and not os.path.exists(tmp_path / 'out')


def test_a_missing_corpus_file_is_one_line_naming_experiments_py(exp, tmp_path):
    """ experiments.py reads rows through train.py's own checked reader (common.open_corpus): a corpus without one
        of its files stops with one line that names the file, the command that remakes it, and experiments.py """
    import shutil
    shutil.copytree(exp.root / 'data' / 'pycode', tmp_path / 'data' / 'pycode')
    os.remove(tmp_path / 'data' / 'pycode' / 'train_offsets.npy')
    res = exp('--table=ladder', '--tabulate_only=True', '--ladder_methods=word_ends', f'--data_dir={tmp_path}/data',
              f'--assets={tmp_path}/assets', check=False) # the word ends' rate is measured on train rows
    line = f"experiments.py: {tmp_path}/data/pycode/train_offsets.npy is missing: make it with `python prepare.py " \
           f"pycode --out_dir={tmp_path}/data/pycode`"
    assert res.returncode == 1 and res.stderr.strip() == line, res.stderr
    assert not os.path.exists(tmp_path / 'assets')


def test_paper_run_trains_random_and_sequential_on_sitepy(exp):
    """ the one-GPU paper run, shrunk to a CPU: prepare.py makes sitepy from a folder of .py files, then both configs
        train with the flags given, and the JSON holds each run's val rows from train.py's log """
    flags = ('--n_embd=64 --n_head=2 --n_down=1 --n_mid=1 --n_up=1 --window=8 --block_size=256 --batch_size=2 '
             '--max_iters=2 --lr_decay_iters=2 --warmup_iters=1 --eval_interval=2 --eval_iters=1 --dtype=float32')
    res = exp('--table=paper_run', '--paper_size=18m', '--device=cpu', f'--paper_path={STDLIB}/email',
              f'--paper_flags={flags}')
    for method in ('random', 'sequential'):
        r = json.load(open(exp.root / 'assets' / 'paper_run' / f'18m_{method}_s1.json'))
        assert r['command'].startswith(f'python train.py config/train_18m_{method}.py --dataset=sitepy')
        val = val_rows(exp.root / 'out' / 'paper_run' / f'18m_{method}_s1')
        assert [c['iter'] for c in r['curve']] == [0, 2] and r['val'] == val[-1] and r['bytes_per_sec'] > 0
    assert [r['setting'] for r in json.load(open(exp.root / 'assets' / 'paper_run_table.json'))['rows']] == \
        ['18m_random', '18m_sequential'] and '| 18m_sequential |' in res.stdout
    assert os.path.exists(exp.root / 'data' / 'sitepy' / 'val_offsets.npy')
