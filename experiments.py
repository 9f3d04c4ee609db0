"""
The learning experiments, one command per table. Each table is train.py runs (3 seeds per setting, `jobs` at a time,
one thread each, stdout to the run's out_dir/train.txt), each measured by train.py's own val: the last val row of its
log.jsonl (--eval_iters=128: 1024 val rows spread over the split, the same rows for every run, and model.py's
boundary_metrics). Then mean ± std over the seeds of each setting: a markdown table, assets/<table>.json (every run),
assets/<table>_table.json (the rows) and assets/<table>.png (val bpb and word_boundary against bytes seen).
$ python experiments.py --table=levers     # rows per micro-batch, gate_scale, row length, at equal bytes
$ python experiments.py --table=controls   # prescribed boundaries at the same rate: random, word ends/onsets, BPE
$ python experiments.py --table=ablations  # the paper's ablations at the setting `ablate` (a lever's name)
$ python experiments.py --table=english    # learned, random and word ends on English (pydocs: docstrings)
$ python experiments.py --table=compare    # random, sequential, hnet, nawrot, whitespace, random with its early exit
$ python experiments.py --table=paper_run --paper_size=18m --device=cuda  # one GPU: random vs sequential, 18M
$ python experiments.py --figure=True      # assets/segmentation.png: one text cut by the learned gater, BPE, spaces
Runs already finished are skipped (--retrain=True trains them again); --runs=learned:1,rows32:2 runs a subset;
--tabulate_only=True tabulates what has finished so far. Run dirs: out_root/<table>/<setting>_s<seed>.
"""
import os
import re
import sys
import json
import time
import shutil
import signal
import subprocess

import numpy as np
import torch

# -----------------------------------------------------------------------------
table = '' # ladder, levers, controls, ablations, english, compare or paper_run
runs = '' # a subset, 'setting:seed,...' ('' : every setting of the table, every seed)
seeds = '1,2,3'
jobs = 2 # train.py processes at once, one thread each
retrain = False # True: train finished runs again
tabulate_only = False # True: train nothing, tabulate the runs finished so far
out_root = 'out-exp'
assets = 'assets' # where the JSON and the plots go
data_dir = 'data' # train.py's; the corpus is data_dir/pycode
iters = 0 # > 0: every run takes this many steps (a quick check of the machinery), evaluated at the start and end
eval_iters = 128 # val batches of 8 rows: 1024 val rows
device = '' # passed to train.py when set (else its default: CUDA if there is one)
ablate = 'learned' # ablations: the setting of `levers` the ablations change
rate_rows = 2048 # controls: train rows (spread over the split) that word_rate and the BPE's rate are measured on
bpe_rate = 0.2 # controls: the BPE's rate target, met by choosing its number of merges
bpe_pat = 'gpt2' # controls, figure, vocab: the BPE's pre-tokens, GPT-2's ('gpt2') or a whitespace run and the word
# after it ('words', which can reach rate 0.2 on code: common.WORDS_PAT)
bpe_max_merges = 50000 # controls: the BPE trainer stops here at the latest (GPT-2's count); on pycode the rate
# stays above ~0.24 at any count: BPE_PAT cuts code into ~0.23 pre-tokens per byte, and no merge crosses them
figure = False # True: draw assets/segmentation.png
vocab = False # True: assets/vocab.md, each --figure_run checkpoint's most frequent chunks beside word ends and the BPE
figure_run = '' # the learned checkpoints of the figure, comma-separated (default: out_root/levers/learned_s1)
paper_size = '' # paper_run: a paper size ('18m', ...): config/train_<size>_{random,sequential}.py on data_dir/sitepy
paper_path = '' # paper_run: the folder of .py files sitepy is made from (default: this Python's site-packages)
paper_flags = '' # paper_run: more train.py flags for both runs, e.g. '--max_iters=2000' to fit a time budget
rungs = '1,2,3' # ladder: the rungs to train and tabulate
ladder_methods = '' # ladder: a subset of its methods, e.g. 'learned,random' ('': all, and rung 1's levers)
rung3_skip = 'hnet,nawrot' # ladder: methods left out of rung 3 (all of the ladder did not fit 2 cores; '': none)
ladder_seeds = 3 # ladder: seeds 1..n of every method
learned_seeds = 6 # ladder: seeds 1..n of the learned gater and its levers (their spread is the largest)
ladder_compile = True # ladder: train.py --compile (about 1.3x at D=64 on a CPU once compiled, ~20 s to compile)
cal_seed = 1 # ladder: the seed of the calibration runs (the last one is that seed's run of the method)
cal_tol = 0.005 # ladder: a calibration ends once its val rate is within this of 0.2
cal_tries = 5 # ladder: at most this many calibration runs per method and rung (then the closest is taken)
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configurator.py')).read())
# -----------------------------------------------------------------------------
HERE = os.path.dirname(os.path.abspath(__file__)) # train.py runs here (it opens configurator.py by a relative path)
command = 'python experiments.py ' + ' '.join(sys.argv[1:])
sys.path.insert(0, HERE)
from model import UNetConfig, ByteUNet, BOS, boundary_counts, boundary_metrics
from common import bpe_gates, load_checkpoint

KEYS = ['bpb', 'rate', 'ws_boundary', 'word_boundary', 'boundary_precision'] # train.py's val row, model.py's metrics
TABLES = ('ladder', 'levers', 'controls', 'ablations', 'english', 'compare', 'paper_run')
EQUAL = lambda n, every: [f'--max_iters={n}', f'--lr_decay_iters={n}', f'--eval_interval={every}'] # 7 evals
LEVERS = { # the quick start (train.py's defaults) and one lever moved at a time, at equal bytes (4.9M)
    'learned': [],
    'rows32': ['--batch_size=32', *EQUAL(600, 100), '--warmup_iters=8', f'--eval_iters={max(1, eval_iters // 4)}'],
    'scale4': ['--gate_scale=4'], # the gate logits move 4x faster under Adam
    'scale025': ['--gate_scale=0.25'],
    'block512': ['--block_size=512', *EQUAL(1200, 200)], # (its val rows are 512 bytes: not the same rows)
}
ABLATIONS = {'gamma1': ['--gamma=1.0'], 'no_early_exit': ['--early_exit_reward=False'],
             'no_consistency': ['--rate_weight=0.0'], 'w1': ['--filter_size=1']}
COMPARE = {'random': ['config/method_random.py'], 'sequential': None, # None: the quick start, levers' `learned`
           'hnet': ['config/method_hnet.py'], 'nawrot': ['config/method_nawrot.py'],
           'whitespace': ['config/method_whitespace.py'],
           'random_early': ['config/method_random.py', '--early_weight=0.1']} # its early exit trained, as sequential's

# values the configurator cannot judge by their type: one line each, before any work starts
if table not in ('',) + TABLES or not (table or figure or vocab):
    raise SystemExit(f"experiments.py: --table={table!r}: use one of {', '.join(TABLES)} (or --figure=True, "
                     f"--vocab=True)")
if bpe_pat not in ('gpt2', 'words'):
    raise SystemExit(f"experiments.py: --bpe_pat={bpe_pat}: use 'gpt2' (GPT-2's pre-tokens) or 'words'")
if ablate not in LEVERS:
    raise SystemExit(f"experiments.py: --ablate={ablate}: use a setting of levers ({', '.join(LEVERS)})")
if not re.fullmatch(r'\d+(,\d+)*', seeds):
    raise SystemExit(f"experiments.py: --seeds={seeds}: use whole numbers separated by commas, e.g. --seeds=1,2,3")
for k in ('jobs', 'eval_iters', 'rate_rows', 'bpe_max_merges', 'ladder_seeds', 'learned_seeds', 'cal_tries',
          'cal_seed'):
    if globals()[k] <= 0:
        raise SystemExit(f"experiments.py: --{k}={globals()[k]} must be positive")
if iters < 0 or not 0 < bpe_rate < 1:
    raise SystemExit(f"experiments.py: --iters={iters} must be >= 0 and --bpe_rate={bpe_rate} in (0, 1)")
if not re.fullmatch(r'[123](,[123])*', rungs) or not 0 < cal_tol < 0.1:
    raise SystemExit(f"experiments.py: --rungs={rungs} must name rungs of 1,2,3 (e.g. --rungs=1,2) and --cal_tol="
                     f"{cal_tol} be in (0, 0.1)")
if table == 'paper_run' and not os.path.exists(os.path.join(HERE, f'config/train_{paper_size}_random.py')):
    raise SystemExit(f"experiments.py: --paper_size={paper_size!r}: there is no config/train_{paper_size}_random.py")
corpus = os.path.join(data_dir, 'pycode')
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)) # killed: the trainings this process started stop too
signal.signal(signal.SIGINT, lambda *_: sys.exit("experiments.py: interrupted; the runs save as they stop (rerun the "
                                                 "same command: the ladder's resume, another table's start over)"))

def rel(path):
    """ a path as train.py (run in HERE) reads it: relative to HERE when inside it, else absolute """
    path = os.path.abspath(path)
    return os.path.relpath(path, HERE) if path.startswith(HERE + os.sep) else path

# -----------------------------------------------------------------------------
# the corpus as train.py reads it, and the prescribed boundaries of the controls

def split_rows(split, T, n, corpus=corpus):
    """ n rows of a split, spread evenly over it, cut as train.py cuts them (BOS + a window of up to T-1 bytes of one
        document) -> X (n, T) long, M (n, T) bool real positions """
    path = os.path.join(corpus, split)
    if not os.path.exists(path + '_offsets.npy'):
        raise SystemExit(f"experiments.py: {path}_offsets.npy is missing: run `python prepare.py "
                         f"{os.path.basename(corpus)} --out_dir={corpus}`")
    data, off = np.memmap(path + '.bin', dtype=np.uint8, mode='r'), np.load(path + '_offsets.npy')
    start = np.concatenate([np.arange(a, b, T - 1) for a, b in zip(off[:-1], off[1:])]) # every window
    end = np.minimum(start + T - 1, np.repeat(off[1:], -(-np.diff(off) // (T - 1))))
    picked = np.unique(np.linspace(0, len(start) - 1, min(n, len(start))).round().astype(np.int64))
    X, M = torch.zeros(len(picked), T, dtype=torch.long), torch.zeros(len(picked), T, dtype=torch.bool)
    for i, r in enumerate(picked):
        n_i = end[r] - start[r]
        X[i, 0], X[i, 1:1 + n_i], M[i, :1 + n_i] = BOS, torch.from_numpy(data[start[r]:end[r]].astype(np.int64)), True
    return X, M

@torch.no_grad()
def rule_rate(gater, X, M):
    """ the share of positions a prescribed rule gater gates by itself (word_rate=0), counted by boundary_counts """
    model = ByteUNet(UNetConfig(block_size=X.size(1), gater=gater, word_rate=0.0)).eval()
    counts = sum(boundary_counts(X[k:k + 64], model(X[k:k + 64])['gates'], M[k:k + 64]) for k in range(0, len(X), 64))
    return boundary_metrics(counts)['rate']

def bpe_encoding(tokens, m):
    """ a tiktoken encoding of the 256 bytes and the first m learned tokens (ranks 256..), split as pretokens() """
    import tiktoken
    ranks = {**{bytes([i]): i for i in range(256)}, **{t: 256 + j for j, t in enumerate(tokens[:m])}}
    return tiktoken.Encoding(name=f'bpe{m}', pat_str=pretokens(), mergeable_ranks=ranks, special_tokens={})

def pretokens():
    """ bpe_pat's pre-tokenisation: GPT-2's BPE_PAT, or WORDS_PAT (a whitespace run and the word after it) """
    from common import BPE_PAT, WORDS_PAT
    return WORDS_PAT if bpe_pat == 'words' else BPE_PAT

def bpe_rate_of(enc, X, M):
    """ the rate of BPE guidance on rows X: gates where bpe_gates places them (as train.py --prescribe=bpe does) """
    G = torch.stack([bpe_gates(enc, bytes(x[1:n].tolist()), X.size(1)) for x, n in zip(X, M.sum(1).tolist())])
    return boundary_metrics(boundary_counts(X, G, M))['rate']

def train_bpe(docs, max_merges):
    """ a byte-level BPE as GPT-2's, trained by Hugging Face tokenizers: the documents (bytes) pre-tokenised by BPE_PAT,
        then the most frequent pair of adjacent tokens merged, max_merges times (fewer if the pairs run out) -> the new
        tokens in rank order (ranks 256, 257, ...). Invalid UTF-8 bytes are left out, as bpe_ends makes each a token
        of its own """
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    # by hand: GPT-2's byte <-> character table, in which tokenizers writes byte-level tokens but keeps to itself
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)] # the bytes that stand for themselves
    char = {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(sorted({*range(256)} - {*keep}))}}
    byte = {c: b for b, c in char.items()}
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pretokens()), 'isolated'),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=256 + max_merges, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    # by hand: a str handed to tokenizers cannot hold an invalid byte (U+DC80..U+DCFF here), so the text is cut there
    parts = (p for d in docs for p in re.split('[\udc80-\udcff]', d.decode('utf-8', errors='surrogateescape')))
    tok.train_from_iterator(parts, trainer)
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1]) # the 256 bytes, then one token per merge
    return [bytes(byte[c] for c in t) for t, _ in vocab[256:]]

def prescribed():
    """ the controls' rates, measured once and cached in assets/controls.json: word_rate of word_ends and word_onsets
        (each rule's own share of gated positions on train rows), and a BPE trained on the train split with the
        number of merges whose rate on those rows is closest to bpe_rate, written as a .tiktoken file """
    path, entry = os.path.join(assets, 'controls.json'), 'prescribed' + ('_words' if bpe_pat == 'words' else '')
    key = dict(data=os.path.abspath(corpus), block_size=256, rows=rate_rows, bpe_rate=bpe_rate)
    cached = json.load(open(path)).get(entry, {}) if os.path.exists(path) else {}
    if {k: cached.get(k) for k in key} == key and os.path.exists(cached['bpe']['path']):
        return cached
    X, M = split_rows('train', 256, rate_rows)
    res = dict(key, word_ends=rule_rate('word_ends', X, M), word_onsets=rule_rate('word_onsets', X, M))
    print(f"word_rate on {len(X)} train rows: word_ends {res['word_ends']:.4f}, word_onsets {res['word_onsets']:.4f}")
    t0 = time.time()
    text = np.fromfile(os.path.join(corpus, 'train.bin'), dtype=np.uint8).tobytes()
    off = np.load(os.path.join(corpus, 'train_offsets.npy'))
    tokens = train_bpe((text[i:j] for i, j in zip(off[:-1], off[1:])), bpe_max_merges) # document by document
    lo, hi, rates = 0, len(tokens), {} # the rate falls as merges are added: bisect for the crossing
    def rate_of(m):
        if m not in rates:
            rates[m] = bpe_rate_of(bpe_encoding(tokens, m), X, M)
        return rates[m]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if rate_of(mid) > bpe_rate else (lo, mid)
    m = min((lo, hi), key=lambda m: abs(rate_of(m) - bpe_rate))
    file = os.path.join(corpus, f"bpe_rate{bpe_rate}{'.words' if bpe_pat == 'words' else ''}.tiktoken") # (load_bpe)
    import base64
    with open(file + '.tmp', 'w') as f: # tiktoken's format, "base64(token) rank" per line (its writer needs blobfile)
        f.writelines(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate([bytes([i]) for i in range(256)]
                                                                                    + tokens[:m]))
    os.replace(file + '.tmp', file)
    res['bpe'] = dict(path=os.path.abspath(file), merges=m, rate=rates[m], trained_merges=len(tokens),
                      train_bytes=len(text), seconds=round(time.time() - t0))
    print(f"BPE on {len(text):,} train bytes: {m} merges give rate {rates[m]:.4f} (target {bpe_rate}) -> {file}")
    os.makedirs(assets, exist_ok=True)
    old = json.load(open(path)) if os.path.exists(path) else {}
    with open(path, 'w') as f:
        json.dump({**old, entry: res}, f, indent=1)
    return res

# -----------------------------------------------------------------------------
# the runs of a table: settings, commands, training, tabulating

def settings(name):
    """ table -> {setting: (train.py arguments on top of its defaults, the table whose folder holds its runs)} """
    if name == 'levers':
        return {k: (v, 'levers') for k, v in LEVERS.items()}
    if name == 'controls':
        p = prescribed()
        return {'learned': ([], 'levers'), 'random': (['--gater=uniform'], 'controls'),
                'word_ends': (['--gater=word_ends', f"--word_rate={p['word_ends']:.4f}"], 'controls'),
                'word_onsets': (['--gater=word_onsets', f"--word_rate={p['word_onsets']:.4f}"], 'controls'),
                'bpe': (['--prescribe=bpe', f"--bpe_encoding={rel(p['bpe']['path'])}", '--gater=uniform'], 'controls')}
    # (bpe: a gater without parameters, as config/method_bpe.py: a policy loss on prescribed gates would still train x)
    if name == 'english': # the quick start on English prose: does the gater find word edges more often there?
        rate = rule_rate('word_ends', *split_rows('train', 256, rate_rows, os.path.join(data_dir, 'pydocs')))
        d = ['--dataset=pydocs']
        return {'learned': (d, 'english'), 'random': (d + ['--gater=uniform'], 'english'),
                'word_ends': (d + ['--gater=word_ends', f'--word_rate={rate:.4f}'], 'english')}
    if name == 'ablations': # the chosen setting itself (levers' runs), then each ablation on top of it
        pre = '' if ablate == 'learned' else f'{ablate}_'
        return {ablate: (LEVERS[ablate], 'levers'),
                **{pre + k: (LEVERS[ablate] + v, 'ablations') for k, v in ABLATIONS.items()}}
    return {k: (v, 'compare') if v is not None else ([], 'levers') for k, v in COMPARE.items()}

def max_iters_of(cmd):
    """ the last step of a train.py command: train.py's default, then its config files, then its flags """
    n = None
    for a in [os.path.join(HERE, 'train.py')] + cmd[1:]:
        if a.startswith('--max_iters='):
            n = int(a.partition('=')[2])
        elif not a.startswith('--'):
            found = re.findall(r'^max_iters = (\d+)', open(os.path.join(HERE, a)).read(), re.M)
            n = int(found[-1]) if found else n
    return n

def read_log(out_dir):
    path = os.path.join(out_dir, 'log.jsonl')
    if not os.path.exists(path):
        return []
    return [r for r in (json.loads(line) for line in open(path) if line.endswith('\n')) if r['split'] == 'val']

def state(run):
    """ 'done' (the command's last val row is in its log), 'busy' (another process is training it now) or 'todo' """
    info = os.path.join(run['out_dir'], 'run.json')
    info = json.load(open(info)) if os.path.exists(info) else {}
    if info.get('command') == run['command']: # (a run of another command in its folder is trained again)
        val = read_log(run['out_dir'])
        if val and val[-1]['iter'] == max_iters_of(run['cmd']):
            return 'done'
    if info.get('pid') and 'returncode' not in info:
        try:
            os.kill(info['pid'], 0)
            return 'busy'
        except OSError:
            pass # it died without a word: train it again
    return 'todo'

def table_runs(name):
    """ the runs of a table (or of --runs), each a dict: setting, seed, cmd (train.py argv), command, out_dir """
    spec = settings(name)
    picked = [r.split(':') for r in runs.split(',')] if runs else [[s, k] for s in spec for k in seeds.split(',')]
    out = []
    for r in picked:
        if len(r) != 2 or r[0] not in spec or not r[1].isdigit():
            raise SystemExit(f"experiments.py: --runs: '{':'.join(r)}' is not setting:seed with a setting of {name} "
                             f"({', '.join(spec)}) and a whole seed")
        args, home = spec[r[0]]
        out_dir = os.path.join(out_root, home, f'{r[0]}_s{r[1]}')
        cfgs, flags = [a for a in args if not a.startswith('--')], [a for a in args if a.startswith('--')]
        extra = ([f'--data_dir={rel(data_dir)}'] if data_dir != 'data' else []) + \
            ([f'--device={device}'] if device else []) + (EQUAL(iters, iters) if iters else [])
        cmd = ['train.py', *cfgs, f'--eval_iters={eval_iters}', '--eval_interval=400', *flags, *extra,
               f'--seed={r[1]}', f'--out_dir={rel(out_dir)}']
        out.append(dict(setting=r[0], seed=int(r[1]), cmd=cmd, command='python ' + ' '.join(cmd), out_dir=out_dir))
    return out

def train(todo):
    """ train the runs, `jobs` at a time, one thread each; a run another process is training is waited for.
        -> the runs that failed """
    running, waiting, failed = {}, [], []
    def launch(run):
        shutil.rmtree(run['out_dir'], ignore_errors=True) # train.py will not start a fresh run over an old ckpt.pt
        os.makedirs(run['out_dir'])
        print(f"$ {run['command']} > {run['out_dir']}/train.txt", flush=True)
        log = open(os.path.join(run['out_dir'], 'train.txt'), 'w')
        p = subprocess.Popen([sys.executable, *run['cmd']], cwd=HERE, stdout=log, stderr=subprocess.STDOUT,
                             env={**os.environ, 'OMP_NUM_THREADS': '1'})
        with open(os.path.join(run['out_dir'], 'run.json'), 'w') as f:
            json.dump(dict(command=run['command'], pid=p.pid), f)
        running[p] = (run, time.time(), log)
    try:
        while todo or running or waiting:
            while todo and len(running) < jobs:
                run = todo.pop(0)
                if state(run) == 'busy': # (even with retrain: two trainings must not share a folder)
                    print(f"{run['out_dir']} is being trained by another process: waiting for it", flush=True)
                    waiting.append(run)
                else:
                    launch(run)
            time.sleep(2)
            waiting = [r for r in waiting if state(r) == 'busy']
            for p in [p for p in running if p.poll() is not None]:
                run, t0, log = running.pop(p)
                log.close()
                with open(os.path.join(run['out_dir'], 'run.json'), 'w') as f:
                    json.dump(dict(command=run['command'], returncode=p.returncode, wall_s=round(time.time() - t0)), f)
                if p.returncode:
                    failed.append(run)
                    tail = open(os.path.join(run['out_dir'], 'train.txt')).read().strip().splitlines()[-1:] or ['']
                    print(f"experiments.py: {run['setting']}:{run['seed']} failed (exit {p.returncode}): {tail[0]}",
                          flush=True)
                else:
                    val = read_log(run['out_dir'])[-1]
                    print(f"{run['setting']}:{run['seed']} done in {time.time() - t0:.0f} s: val " +
                          ', '.join(f"{k} {val[k]:.4f}" for k in KEYS), flush=True)
    finally: # interrupted: the trainings this process started stop with it
        for p in running:
            p.terminate()
    return failed

def tabulate(name, table_runs):
    """ mean ± std over the seeds of each setting, from the finished runs: printed, and written to the JSON files and
        the plot """
    results = []
    for run in table_runs:
        if state(run) != 'done':
            continue
        val = read_log(run['out_dir'])
        wall = json.load(open(os.path.join(run['out_dir'], 'run.json'))).get('wall_s')
        results.append(dict(setting=run['setting'], seed=run['seed'], command=run['command'],
                            out_dir=rel(run['out_dir']), bytes=val[-1]['bytes'], wall_s=wall, val=val[-1],
                            curve=[{k: r.get(k) for k in ['iter', 'bytes'] + KEYS} for r in val]))
    groups = {}
    for r in results:
        groups.setdefault(r['setting'], []).append(r)
    rows = []
    print(f"\n$ {command}\n{len(results)} of {len(table_runs)} runs finished; train.py's last val row, mean ± std "
          f"over seeds\n| setting | seeds | MB seen | " + ' | '.join(KEYS) + ' |\n|---|---|---|' + '---|' * len(KEYS))
    for setting, rs in groups.items():
        row = dict(setting=setting, seeds=[r['seed'] for r in rs], bytes=rs[0]['bytes'], command=rs[0]['command'])
        for k in KEYS:
            v = [r['val'][k] for r in rs]
            row[k], row[k + '_std'] = float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else None
        rows.append(row)
        cell = lambda k: f"{row[k]:.3f} ± {row[k + '_std']:.3f}" if len(rs) > 1 else f"{row[k]:.3f}"
        print(f"| {setting} | {len(rs)} | {row['bytes'] / 1e6:.1f} | " + ' | '.join(cell(k) for k in KEYS) + ' |')
    os.makedirs(assets, exist_ok=True)
    path = os.path.join(assets, f'{name}.json')
    old = json.load(open(path)) if os.path.exists(path) else {}
    with open(path, 'w') as f: # (controls keeps its cached prescribed rates)
        json.dump({**{k: v for k, v in old.items() if k == 'prescribed'}, 'command': command, 'runs': results}, f,
                  indent=1)
    with open(os.path.join(assets, f'{name}_table.json'), 'w') as f:
        json.dump(dict(command=command, rows=rows), f, indent=1)
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for setting, rs in groups.items(): # the mean over seeds at each eval (iter 0 left out: 8 bits per byte)
        n = min(len(r['curve']) for r in rs)
        x = [c['bytes'] / 1e6 for c in rs[0]['curve'][1:n]]
        for ax, k in zip(axes, ['bpb', 'word_boundary']):
            ax.plot(x, np.mean([[c[k] for c in r['curve'][1:n]] for r in rs], 0), marker='.',
                    label=f"{setting} ({len(rs)} seeds)")
    for ax, k in zip(axes, ['val bits per byte', 'word-edge recall (word_boundary)']):
        ax.set_xlabel('bytes seen (millions)'), ax.set_ylabel(k), ax.grid(alpha=0.3)
        if groups:
            ax.legend(fontsize=8)
    fig.suptitle(command, fontsize=9)
    plt.savefig(os.path.join(assets, f'{name}.png'), dpi=120, bbox_inches='tight')
    plt.close(fig)
    print(f"wrote {path}, {os.path.join(assets, name + '_table.json')} and {os.path.join(assets, name + '.png')}")
    return results

# -----------------------------------------------------------------------------
# the compute ladder: every method at equal compression (val rate 0.2 ± 0.01) on three rungs of compute. Each
# finished run is kept as assets/ladder/r<rung>/<run>.json (committed: a clone never trains it again); a run cut short
# resumes from its checkpoint (--init_from=auto) when its out_dir is still there

LADDER_RATE, LADDER_TOL = 0.2, 0.01 # every method's val rate at the end of its runs: 0.2 ± 0.01
RUNGS = { # rung -> train.py arguments on top of the quick start's (D=64, 8 rows of 256 bytes per step)
    1: EQUAL(2400, 400),                                   # the quick start: 4.9M bytes
    2: EQUAL(9600, 1600),                                  # 4x the bytes (19.7M of the 30M train bytes)
    3: ['--n_embd=128', '--n_head=4', *EQUAL(9600, 1600)], # 4x the bytes and ~4x the FLOPs per byte: ~16x rung 1
}
METHODS = {'learned': [], 'random': ['--gater=uniform'], 'word_ends': ['--gater=word_ends'],
           'hnet': ['config/method_hnet.py', '--rate_weight=0.1'], 'nawrot': ['config/method_nawrot.py']}
# (H-Net's ratio loss at 0.1, not its config's 0.03: at 0.03 seed 1's val rate moved 0.195-0.221 between targets
# 0.1637 and 0.1695, and seed 2 ended at 0.210 where seed 1 had 0.195: no target held every seed within 0.01)
CALIBRATE = {'hnet': 0.18, 'nawrot': 0.284} # first guesses of the rate targets that end at 0.2 at rung 1 (their
# configs' target 0.2 ends at 0.238 and 0.141): the straight-through gaters' hard rate is not what their loss holds
GATE_LEVERS = { # the learned gater's levers at rung 1, 6 seeds each: does one make its segmentation reliable?
    'warmup400': ['--gate_warmup=400'],      # random boundaries for the first 400 steps (where the basin was set)
    'scale05': ['--gate_scale=0.5'],         # between the quick start's 1 and the 1/4 that found edges late
    'draws4': ['--draws=4', '--batch_size=2'], # each row 4 times, its own draws as baseline: the same rows per step
}
LEVER_SEEDS = {'draws4': 3} # stopped at 3 seeds: a quarter of the bytes costs it 0.24 bpb, out of the target's reach

def rung_args(rung):
    """ a rung's arguments; with --iters a tiny ladder for tests (iters, 4*iters, 4*iters steps; rung 3 at D=32) """
    if not iters:
        return RUNGS[rung]
    n = iters * (1 if rung == 1 else 4)
    return [*EQUAL(n, n), *(['--n_embd=32', '--n_head=2'] if rung == 3 else [])]

_word_rate = {}
def method_args(method):
    if method in GATE_LEVERS:
        return GATE_LEVERS[method]
    if method == 'word_ends' and not _word_rate: # the rule's own share on train rows, topped up to 0.2 by train.py
        _word_rate['r'] = rule_rate('word_ends', *split_rows('train', 256, rate_rows))
    return METHODS[method] + ([f"--word_rate={_word_rate['r']:.4f}"] if method == 'word_ends' else [])

def ladder_run(rung, method, seed, target=None):
    """ one run of the ladder: its name, train.py argv (args: everything but out_dir), asset file and out_dir """
    name = f'{method}_t{target:.4f}' if target is not None else method
    cfgs = [a for a in method_args(method) if not a.startswith('--')]
    flags = [a for a in method_args(method) if a.startswith('--')]
    args = ['train.py', *cfgs, f'--eval_iters={eval_iters}', *rung_args(rung), *flags,
            *([f'--rate={target:.4f}'] if target is not None else []), '--threads=1', f'--compile={ladder_compile}',
            '--init_from=auto', *([f'--data_dir={rel(data_dir)}'] if data_dir != 'data' else []),
            *([f'--device={device}'] if device else []), f'--seed={seed}']
    out_dir = os.path.join(out_root, 'ladder', f'r{rung}', f'{name}_s{seed}')
    cmd = args + [f'--out_dir={rel(out_dir)}']
    return dict(rung=rung, method=method, seed=seed, target=target, name=f'r{rung}/{name}_s{seed}', args=args,
                cmd=cmd, command='python ' + ' '.join(cmd), out_dir=out_dir,
                asset=os.path.join(assets, 'ladder', f'r{rung}', f'{name}_s{seed}.json'))

def ladder_result(run):
    """ the finished run's record in assets/ if it was made by the same train.py arguments, else None """
    if os.path.exists(run['asset']):
        res = json.load(open(run['asset']))
        if res['args'] == run['args']:
            return res

def next_target(tried):
    """ the calibration's next rate target from the (target, val rate) pairs so far: a ratio step after the first
        run, then the secant through the last two, kept within a factor 2 of the last target """
    (t0, v0), (t1, v1) = ([(None, None)] + tried)[-2:]
    t = t1 * LADDER_RATE / v1 if t0 is None or v1 == v0 else t1 + (LADDER_RATE - v1) * (t1 - t0) / (v1 - v0)
    return round(min(max(t, t1 / 2, 0.01), t1 * 2, 0.9), 4)

def calibration(rung, method):
    """ the rate target of a calibrated method at a rung: seed cal_seed's runs, from the rung below's target (or
        CALIBRATE's guess at rung 1), stepped by next_target until the val rate is within cal_tol of 0.2 (or cal_tries
        runs: then the closest) -> (target, finished?, [(target, val rate)]), or None while the rung below is not
        calibrated yet """
    if rung == min(RUNGS):
        t = CALIBRATE[method]
    else:
        below = calibration(rung - 1, method)
        if below is None or not below[1]:
            return None
        t = below[0]
    tried = []
    for _ in range(cal_tries):
        res = ladder_result(ladder_run(rung, method, cal_seed, t))
        if res is None:
            return t, False, tried
        tried.append((t, res['val']['rate']))
        if abs(tried[-1][1] - LADDER_RATE) <= cal_tol:
            return t, True, tried
        t = next_target(tried)
        if t in [a for a, _ in tried]: # the rounding gives a target tried already: its neighbour can do no better
            break
    return min(tried, key=lambda tv: abs(tv[1] - LADDER_RATE))[0], True, tried

def ladder_plan():
    """ every run of the ladder that can be named now, in training order: rung by rung (rung 1's levers after its
        methods), each rung's calibration runs first, then the seeds round by round; the learned gater's seeds past
        `ladder_seeds` come after every rung's first ones (a ladder cut short is complete at 3) -> (runs, waiting) """
    plan, waiting = [], []
    for rung in [int(r) for r in rungs.split(',')]:
        methods = [m for m in (ladder_methods.split(',') if ladder_methods else METHODS)
                   if not (rung == 3 and m in rung3_skip.split(','))]
        levers = list(GATE_LEVERS) if rung == 1 and not ladder_methods else []
        first, rest = [], []
        for m in methods + levers:
            target = None
            if m in CALIBRATE:
                cal = calibration(rung, m)
                if cal is None or not cal[1]:
                    waiting.append(f'r{rung}/{m}')
                    first += [ladder_run(rung, m, cal_seed, cal[0])] if cal else []
                    continue
                target = cal[0]
            n = LEVER_SEEDS.get(m, learned_seeds) if m == 'learned' or m in GATE_LEVERS else ladder_seeds
            rest += [ladder_run(rung, m, s, target) for s in range(1, n + 1)]
        rest.sort(key=lambda r: (r['method'] in GATE_LEVERS, r['seed'])) # a round of seeds covers every method first
        plan += first + rest
    plan.sort(key=lambda r: r['seed'] > ladder_seeds) # (stable: rung order within each part)
    return plan, waiting

def ladder_state(run):
    """ 'done' (its record is in assets/), 'busy' (a live process is training it) or 'todo' """
    if ladder_result(run):
        return 'done'
    info = os.path.join(run['out_dir'], 'run.json')
    info = json.load(open(info)) if os.path.exists(info) else {}
    if info.get('pid') and 'returncode' not in info:
        try:
            os.kill(info['pid'], 0)
            return 'busy'
        except OSError:
            pass
    return 'todo'

def ladder_finish(run, wall):
    """ the record of a finished run, from its log: written to assets/ at once """
    val = read_log(run['out_dir'])
    res = dict(name=run['name'], rung=run['rung'], method=run['method'], seed=run['seed'], target=run['target'],
               args=run['args'], command=run['command'], bytes=val[-1]['bytes'], wall_s=wall, val=val[-1],
               curve=[{k: r.get(k) for k in ['iter', 'bytes'] + KEYS} for r in val])
    os.makedirs(os.path.dirname(run['asset']), exist_ok=True)
    with open(run['asset'] + '.tmp', 'w') as f:
        json.dump(res, f, indent=1)
    os.replace(run['asset'] + '.tmp', run['asset'])
    return res

def ladder_train():
    """ train the ladder's runs `jobs` at a time, one thread each, planning again as each ends (a calibration run's
        result names the next one); a run with a checkpoint of the same arguments resumes from it """
    running, failed, stopped = {}, set(), set()
    def launch(run):
        info = os.path.join(run['out_dir'], 'run.json')
        old = json.load(open(info)) if os.path.exists(info) else {}
        if old.get('args') != run['args']: # another command's folder: start over
            shutil.rmtree(run['out_dir'], ignore_errors=True)
        os.makedirs(run['out_dir'], exist_ok=True)
        resume = os.path.exists(os.path.join(run['out_dir'], 'ckpt.pt'))
        print(f"$ {run['command']} >> {run['out_dir']}/train.txt" + (' (resumes)' if resume else ''), flush=True)
        log = open(os.path.join(run['out_dir'], 'train.txt'), 'a')
        p = subprocess.Popen([sys.executable, *run['cmd']], cwd=HERE, stdout=log, stderr=subprocess.STDOUT,
                             env={**os.environ, 'OMP_NUM_THREADS': '1'})
        with open(info, 'w') as f:
            json.dump(dict(args=run['args'], pid=p.pid, wall_before=old.get('wall_before', 0) if resume else 0), f)
        running[p] = (run, time.time(), log)
    try:
        while True:
            plan, waiting = ladder_plan()
            busy = {r['name'] for r, _, _ in running.values()}
            todo = [r for r in plan if r['name'] not in busy | failed | stopped and ladder_state(r) == 'todo']
            while todo and len(running) < jobs:
                launch(todo.pop(0))
            if not running:
                break
            time.sleep(2)
            for p in [p for p in running if p.poll() is not None]:
                run, t0, log = running.pop(p)
                log.close()
                info = os.path.join(run['out_dir'], 'run.json')
                wall = json.load(open(info)).get('wall_before', 0) + round(time.time() - t0)
                with open(info, 'w') as f:
                    json.dump(dict(args=run['args'], returncode=p.returncode, wall_before=wall), f)
                if p.returncode:
                    failed.add(run['name'])
                    tail = open(os.path.join(run['out_dir'], 'train.txt')).read().strip().splitlines()[-1:] or ['']
                    print(f"experiments.py: {run['name']} failed (exit {p.returncode}): {tail[0]}", flush=True)
                elif read_log(run['out_dir'])[-1:] and read_log(run['out_dir'])[-1]['iter'] != max_iters_of(run['cmd']):
                    stopped.add(run['name']) # stopped from outside (SIGTERM saves and exits 0): resumed next time
                    print(f"experiments.py: {run['name']} stopped before its last step; it resumes when rerun")
                else:
                    val = ladder_finish(run, wall)['val']
                    print(f"{run['name']} done in {wall} s: val " + ', '.join(f"{k} {val[k]:.4f}" for k in KEYS),
                          flush=True)
    finally: # interrupted: the trainings stop with it (train.py saves a checkpoint on SIGTERM), their time kept
        for p in running:
            p.terminate()
        for p, (run, t0, log) in running.items():
            p.wait()
            info = os.path.join(run['out_dir'], 'run.json')
            wall = json.load(open(info)).get('wall_before', 0) + round(time.time() - t0)
            with open(info, 'w') as f:
                json.dump(dict(args=run['args'], returncode=p.returncode, wall_before=wall), f)
    return failed, stopped

def on_edges(val):
    """ a seed 'on word edges': recall (word_boundary) and precision both above 0.4 (chance: 0.35 and 0.38) """
    return val['word_boundary'] > 0.4 and val['boundary_precision'] > 0.4

def ladder_flops(rung):
    """ training FLOPs per byte of a rung's model at rate 0.2 (model.flops_per_byte: forward and backward) """
    a = dict(x[2:].split('=') for x in rung_args(rung) if x[2:].split('=')[0] in ('n_embd', 'n_head'))
    cfg = UNetConfig(block_size=256, n_embd=int(a.get('n_embd', 64)), n_head=int(a.get('n_head', 2)), n_down=1,
                     n_mid=4, n_up=1, window=8, rate=LADDER_RATE) # train.py's defaults, as its quick start
    return ByteUNet(cfg).flops_per_byte(LADDER_RATE)

def ladder_tabulate():
    """ the ladder's table and figure from the records in assets/ladder alone: each method (each calibrated one at its
        calibrated target) at each rung, mean ± std over its seeds; the levers of rung 1 beside the learned gater """
    plan, waiting = ladder_plan()
    rows, runs = [], {}
    for run in plan:
        res = ladder_result(run)
        if res and (run['target'] is None or run['target'] == (calibration(run['rung'], run['method']) or [0])[0]):
            runs.setdefault((run['rung'], run['method']), []).append(res)
    print(f"\n$ {command}\nthe ladder: every method's val rate at {LADDER_RATE} ± {LADDER_TOL} (equal compression); "
          f"train.py's last val row, mean ± std over seeds; 'edges': seeds on word edges (recall and precision > 0.4)")
    print('| rung | method | seeds | MB seen | FLOPs | bpb | rate | word_boundary | boundary_precision | edges |\n'
          '|---|---|---|---|---|---|---|---|---|---|')
    for (rung, method), rs in sorted(runs.items(), key=lambda kv: (kv[0][0], list(METHODS).index(kv[0][1])
                                                                    if kv[0][1] in METHODS else 99)):
        row = dict(rung=rung, method=method, seeds=[r['seed'] for r in rs], target=rs[0]['target'],
                   bytes=rs[0]['bytes'], command=rs[0]['command'], # (each draw of a row costs its bytes again)
                   flops=ladder_flops(rung) * rs[0]['bytes'] * int(dict(a[2:].split('=') for a in rs[0]['args'][1:]
                                                                        if a.startswith('--')).get('draws', 1)),
                   edges=sum(on_edges(r['val']) for r in rs), per_seed={k: [r['val'][k] for r in rs] for k in KEYS})
        for k in KEYS:
            v = row['per_seed'][k]
            row[k], row[k + '_std'] = float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else None
        row['equal_rate'] = all(abs(v - LADDER_RATE) <= LADDER_TOL for v in row['per_seed']['rate'])
        row['complete'] = len(rs) == (LEVER_SEEDS.get(method, learned_seeds) if method == 'learned' or method in
                                      GATE_LEVERS else ladder_seeds) # (every planned seed is in)
        rows.append(row)
        cell = lambda k: f"{row[k]:.3f} ± {row[k + '_std']:.3f}" if len(rs) > 1 else f"{row[k]:.3f}"
        print(f"| {rung} | {method}{'' if row['equal_rate'] else ' (rate off)'} | {len(rs)} | {row['bytes'] / 1e6:.1f}"
              f" | {row['flops']:.1e} | " + ' | '.join(cell(k) for k in KEYS[:1]) +
              f" | {row['rate']:.3f} | " + ' | '.join(cell(k) for k in KEYS[3:]) + f" | {row['edges']}/{len(rs)} |")
    for rung in sorted({r['rung'] for r in rows}): # the target of a reliable learned segmentation, per rung and lever
        rr = {r['method']: r for r in rows if r['rung'] == rung}
        if not ('random' in rr and 'word_ends' in rr):
            continue
        print(f"\nrung {rung}, the learned gater{' and its levers' if rung == 1 else ''}, per seed; target: on word "
              f"edges in >= 5 of 6 seeds, every seed below random's best ({min(rr['random']['per_seed']['bpb']):.3f}), "
              f"the mean at most word ends' ({rr['word_ends']['bpb']:.3f})\n| setting | bpb per seed | mean ± std | "
              f"recall/precision per seed | edges | below random | <= word ends |\n|---|---|---|---|---|---|---|")
        for m in [m for m in ['learned', *GATE_LEVERS] if m in rr]:
            r, ps = rr[m], rr[m]['per_seed']
            r['goal'] = dict(edges=r['edges'] >= 5 * len(ps['bpb']) / 6,
                             below_random=max(ps['bpb']) < min(rr['random']['per_seed']['bpb']),
                             below_word_ends=r['bpb'] <= rr['word_ends']['bpb'])
            print(f"| {m} | {', '.join(f'{v:.3f}' for v in ps['bpb'])} | {r['bpb']:.3f} ± {r['bpb_std'] or 0:.3f} | "
                  + ', '.join(f".{round(a * 1000):03d}/.{round(b * 1000):03d}" for a, b in
                              zip(ps['word_boundary'], ps['boundary_precision']))
                  + f" | {r['edges']}/{len(ps['bpb'])} | " + ' | '.join('yes' if v else 'no' for v in
                                                                       list(r['goal'].values())[1:]) + ' |')
    cal = {f'r{rung}/{m}': dict(zip(('target', 'finished', 'tried'), c)) for rung in map(int, rungs.split(','))
           for m in CALIBRATE if not (rung == 3 and m in rung3_skip.split(',')) and (c := calibration(rung, m))}
    for k, c in cal.items():
        print(f"calibration {k}: " + ', '.join(f"target {t:.4f} -> rate {v:.4f}" for t, v in c['tried'])
              + (f"; chosen {c['target']:.4f}" if c['finished'] else ' ...'))
    if waiting:
        print(f"not calibrated yet: {', '.join(waiting)}")
    os.makedirs(assets, exist_ok=True)
    path = os.path.join(assets, 'ladder_table.json')
    with open(path, 'w') as f:
        json.dump(dict(command=command, rate=LADDER_RATE, tol=LADDER_TOL, rows=rows, calibration=cal), f, indent=1)
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    rand = {r['rung']: r['bpb'] for r in rows if r['method'] == 'random'} # the right panel's zero, per rung
    for i, method in enumerate(METHODS): # (the levers: the table above)
        rs = [r for r in rows if r['method'] == method and len(r['seeds']) >= ladder_seeds]
        for a, zero in ((ax, lambda r: 0.0), (ax2, lambda r: rand[r['rung']])):
            rz = [r for r in rs if a is ax or r['rung'] in rand]
            if not rz:
                continue
            x, y = [r['flops'] for r in rz], [r['bpb'] - zero(r) for r in rz]
            lo = [min(r['per_seed']['bpb']) - zero(r) for r in rz]
            hi = [max(r['per_seed']['bpb']) - zero(r) for r in rz]
            a.plot(x, y, marker='o', label=method, color=f'C{i}') # (one color a method in both panels)
            a.fill_between(x, lo, hi, color=f'C{i}', alpha=0.15, lw=0) # the seeds' range
    ticks = {r['rung']: r['flops'] for r in rows if r['method'] in METHODS and len(r['seeds']) >= ladder_seeds}
    edges = {r['rung']: f"\nlearned: {r['edges']}/{len(r['seeds'])}\non word edges" for r in rows
             if r['method'] == 'learned' and len(r['seeds']) >= ladder_seeds} # per rung, under its tick
    for a in (ax, ax2):
        a.set_xscale('log'), a.set_xlabel('training FLOPs'), a.grid(alpha=0.3), a.margins(x=0.12)
        a.set_xticks(list(ticks.values()), [f"rung {k}\n{v:.1e}" + (edges.get(k, '') if a is ax else '')
                                            for k, v in ticks.items()], fontsize=8)
        a.minorticks_off()
    ax.set_ylabel('val bits per byte'), ax2.set_ylabel("val bpb minus random's mean at its rung")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.suptitle(f"pycode, every method at val rate {LADDER_RATE} ± {LADDER_TOL}: mean and range over seeds",
                 fontsize=10)
    if rows:
        ax.legend(fontsize=8)
    plt.savefig(os.path.join(assets, 'ladder.png'), dpi=120, bbox_inches='tight')
    plt.close(fig)
    print(f"wrote {path} and {os.path.join(assets, 'ladder.png')}")
    return rows

# -----------------------------------------------------------------------------
# the figure: one text, cut by a learned gater, by the BPE of the controls and by whitespace

@torch.no_grad()
def segment(name, text, run=None):
    """ a text -> the chunks one boundary method cuts it into (row [BOS] + text; a gate at a byte ends its chunk);
        'learned': the gater of the checkpoint in `run` """
    data = text.encode()
    X = torch.tensor([[BOS] + list(data)])
    if name == 'bpe':
        from common import load_bpe
        gates = bpe_gates(load_bpe(prescribed()['bpe']['path']), data, X.size(1))
    else: # the checkpoint's own gater in eval mode, or the word_ends rule alone
        model = load_checkpoint(run, 'cpu', 'experiments.py')[0] if name == 'learned' else \
            ByteUNet(UNetConfig(block_size=X.size(1), gater='word_ends', word_rate=0.0)).eval()
        torch.manual_seed(1) # (the sequential gater samples in eval mode too)
        gates = model(X)['gates'][0]
    ends = [i for i, g in enumerate(gates[1:].tolist()) if g] + [len(data) - 1] # data byte i is row position i + 1
    chunks, a = [], 0
    for e in sorted(set(ends)):
        chunks.append(data[a:e + 1].decode())
        a = e + 1
    return chunks

def figure_texts():
    """ a few lines of real Python from the val split (the first function of 4-6 short ASCII lines) and one English
        sentence of a docstring from it """
    val = np.fromfile(os.path.join(corpus, 'val.bin'), dtype=np.uint8).tobytes().decode('utf-8', errors='replace')
    code = (m.group(1).rstrip('\n') for m in re.finditer(r'\n((    )?def \w+\(.{0,50}\):\n(\2    .{1,60}\n){3,5})', val)
            if m.group(1).isascii() and len(m.group(1)) < 250) # a row of the model holds it
    sentence = (m.group(1) for m in re.finditer(r'\n\s*"""([A-Z][a-z]+ [a-z][a-z ,]{30,90}\.)', val))
    texts = [next(code, None), next(sentence, None)]
    if None in texts:
        raise SystemExit(f"experiments.py: found no short function or docstring sentence in {corpus}/val.bin")
    return texts

def draw_figure():
    texts = figure_texts()
    learned = (figure_run or os.path.join(out_root, 'levers', 'learned_s1')).split(',')
    methods = [('learned', f"learned ({rel(r)})", r) for r in learned] + \
        [('bpe', f"BPE ({os.path.basename(prescribed()['bpe']['path'])})", None),
         ('whitespace', 'whitespace (word_ends)', None)]
    rows = []
    for m, title, run in methods:
        chunks = [segment(m if m != 'whitespace' else 'word_ends', t, run) for t in texts]
        n = sum(len(t.encode()) for t in texts)
        rows.append(dict(method=m, title=title, chunks=chunks, bytes_per_chunk=n / sum(map(len, chunks))))
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    lines = sum(t.count('\n') + 1 for t in texts) + len(texts) - 1 # a blank line between the texts
    width = max(len(l) for t in texts for l in t.split('\n')) + 2
    fig, axes = plt.subplots(len(rows), 1, figsize=(width * 0.11 + 0.5, len(rows) * (lines * 0.22 + 0.5)))
    for ax, row in zip(axes, rows):
        ax.set_xlim(0, width), ax.set_ylim(lines, 0), ax.axis('off')
        ax.set_title(f"{row['title']}: {row['bytes_per_chunk']:.2f} bytes per chunk", fontsize=10, loc='left')
        y, k = 0, 0
        for chunks in row['chunks']:
            x = 0
            for chunk in chunks:
                for ch in chunk:
                    ax.add_patch(Rectangle((x, y + 0.08), 1, 0.84, color=('#9ecae1', '#fdd0a2')[k % 2], lw=0))
                    ax.text(x + 0.5, y + 0.5, '↵' if ch == '\n' else ch, ha='center', va='center', fontsize=8,
                            family='monospace')
                    x, y = (0, y + 1) if ch == '\n' else (x + 1, y)
                k += 1
            y += 2
    path = os.path.join(assets, 'segmentation.png')
    os.makedirs(assets, exist_ok=True)
    plt.savefig(path, dpi=130, bbox_inches='tight')
    plt.close(fig)
    with open(path.replace('.png', '.json'), 'w') as f:
        json.dump(dict(command=command, texts=texts, rows=rows), f, indent=1)
    for row in rows:
        print(f"{row['title']}, {row['bytes_per_chunk']:.2f} bytes per chunk: " + '|'.join(row['chunks'][1]))
    print(f"wrote {path} and {path.replace('.png', '.json')}")

# -----------------------------------------------------------------------------

if table == 'paper_run': # no download needed: real code and docstrings that any machine with PyTorch installed has
    import sysconfig
    src = paper_path or sysconfig.get_paths()['purelib']
    sitepy = os.path.join(data_dir, 'sitepy')
    if not os.path.exists(os.path.join(sitepy, 'val_offsets.npy')):
        print(f"$ python prepare.py files --path={src} --glob='**/*.py' --out_dir={sitepy}", flush=True)
        subprocess.run([sys.executable, 'prepare.py', 'files', f'--path={src}', '--glob=**/*.py',
                        f'--out_dir={os.path.abspath(sitepy)}'], cwd=HERE, check=True)
    res = {}
    for method in ('random', 'sequential'):
        out_dir = os.path.join(out_root, 'paper_run', f'{paper_size}_{method}')
        cmd = ['train.py', f'config/train_{paper_size}_{method}.py', '--dataset=sitepy', f'--data_dir={rel(data_dir)}',
               *([f'--device={device}'] if device else []), f'--out_dir={rel(out_dir)}', *paper_flags.split()]
        shutil.rmtree(out_dir, ignore_errors=True)
        print('$ python', ' '.join(cmd), flush=True)
        t0 = time.time()
        if subprocess.run([sys.executable, *cmd], cwd=HERE).returncode:
            raise SystemExit(f"experiments.py: `python {' '.join(cmd)}` failed")
        log = [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]
        train_rows = [r for r in log if r['split'] == 'train']
        res[method] = dict(command='python ' + ' '.join(cmd), wall_s=round(time.time() - t0),
                           bytes_per_sec=sorted(r['bytes_per_sec'] for r in train_rows)[len(train_rows) // 2],
                           val=[r for r in log if r['split'] == 'val'])
    print(f"\n$ {command}\n| bytes seen | method | " + ' | '.join(KEYS) + ' |\n|---|---|' + '---|' * len(KEYS))
    for rows in zip(*(t['val'] for t in res.values())): # the evals of both runs, side by side
        for method, r in zip(res, rows):
            print(f"| {r['bytes']:,} | {method} | " + ' | '.join(f"{r[k]:.4f}" for k in KEYS) + ' |')
    for method, t in res.items():
        print(f"{method}: {t['wall_s']} s, {t['bytes_per_sec']:,.0f} bytes/s (median)")
    path = os.path.join(assets, f'paper_run_{paper_size}.json')
    os.makedirs(assets, exist_ok=True)
    with open(path, 'w') as f:
        json.dump(dict(command=command, runs=res), f, indent=1)
    print(f"wrote {path}")
elif table == 'ladder':
    unknown = [m for m in ladder_methods.split(',') if ladder_methods and m not in {**METHODS, **GATE_LEVERS}]
    if unknown:
        raise SystemExit(f"experiments.py: --ladder_methods: {', '.join(unknown)} is not a method of the ladder "
                         f"({', '.join([*METHODS, *GATE_LEVERS])})")
    failed, stopped = (set(), set()) if tabulate_only else ladder_train()
    ladder_tabulate()
    if failed or stopped:
        raise SystemExit(f"experiments.py: {len(failed)} runs failed, {len(stopped)} stopped before their last step "
                         "(rerun the same command: they resume): " + ', '.join(
            f"{n} (see {os.path.join(out_root, 'ladder', n)}/train.txt)" for n in sorted(failed | stopped)))
elif table:
    pydocs = os.path.join(data_dir, 'pydocs')
    if table == 'english' and not os.path.exists(os.path.join(pydocs, 'val_offsets.npy')): # offline, ~30 s
        print(f"$ python prepare.py pydocs --out_dir={pydocs}", flush=True)
        if subprocess.run([sys.executable, 'prepare.py', 'pydocs', f'--out_dir={os.path.abspath(pydocs)}'],
                          cwd=HERE).returncode:
            raise SystemExit(f"experiments.py: `python prepare.py pydocs --out_dir={pydocs}` failed (its message above)")
    all_runs = table_runs(table)
    failed = []
    if not tabulate_only:
        todo = [r for r in all_runs if retrain or state(r) != 'done']
        print(f"{table}: {len(all_runs)} runs, {len(all_runs) - len(todo)} finished already, {len(todo)} to train "
              f"({jobs} at a time)", flush=True)
        failed = train(todo)
    tabulate(table, all_runs)
    if failed:
        raise SystemExit(f"experiments.py: {len(failed)} runs failed: " + ', '.join(
            f"{r['setting']}:{r['seed']} (see {r['out_dir']}/train.txt)" for r in failed))
if figure:
    draw_figure()
if vocab: # sample.py's vocabulary of each learned checkpoint, on the val split, beside the BPE of the controls
    lines = []
    for run in (figure_run or os.path.join(out_root, 'levers', 'learned_s1')).split(','):
        cmd = ['sample.py', f'--out_dir={rel(run)}', '--analyze=val', f"--compare={rel(prescribed()['bpe']['path'])}",
               '--vocab=15']
        res = subprocess.run([sys.executable, *cmd], cwd=HERE, capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(f"experiments.py: `python {' '.join(cmd)}` failed: {res.stderr.strip()[-300:]}")
        lines += [f"$ python {' '.join(cmd)}"] + [l for l in res.stdout.splitlines() if not l.startswith('Overriding')]
    os.makedirs(assets, exist_ok=True)
    with open(os.path.join(assets, 'vocab.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines) + f"\nwrote {os.path.join(assets, 'vocab.md')}")
