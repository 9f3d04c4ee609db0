"""
The learning experiments, one command per table, all trained by one runner. A table is train.py runs, settings x
seeds, `jobs` at a time with one thread each. A run trains in out_root/<table>/<run>/ (its stdout in train.txt) and,
as it ends, becomes one record, assets/<table>/<run>.json: its train.py arguments, command, bytes, wall time, train.py's
own last val row (--eval_iters=128: the same 1024 val rows for every run, model.py's boundary_metrics) and val curve.
A run is done when its record was made by the same arguments, so a clone trains nothing again, and a run cut short
resumes from its checkpoint (--init_from=auto) while its out_dir is there. Each table is rebuilt from the records
alone (--tabulate_only=True): mean ± std over seeds, as markdown, assets/<table>_table.json and assets/<table>.png.
$ python experiments.py --table=ladder     # every method at equal compression on four rungs of compute
$ python experiments.py --table=ladder --predict=True  # rungs 1-3 fitted: rung 4 predicted, before it may run
$ python experiments.py --table=levers     # rows per micro-batch, gate_scale, row length, at equal bytes
$ python experiments.py --table=controls   # prescribed boundaries at the same rate: random, word ends/onsets, BPE
$ python experiments.py --table=ablations  # the paper's ablations at the setting `ablate` (a lever's name)
$ python experiments.py --table=english    # learned, random and word ends on English (pydocs: docstrings)
$ python experiments.py --table=paper_run --paper_size=18m --device=cuda  # one GPU: random vs sequential, 18M
$ python experiments.py --figure=True      # assets/segmentation.png: one text cut by the learned gater, BPE, spaces
--runs=learned:1,rows32:2 trains a subset of a table (not the ladder: --rungs, --ladder_methods); --retrain=True
trains finished runs again, from scratch.
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
table = '' # ladder, levers, controls, ablations, english or paper_run
runs = '' # a subset, 'setting:seed,...' ('' : every setting of the table, every seed)
seeds = '1,2,3'
jobs = 2 # train.py processes at once, one thread each (paper_run: one)
retrain = False # True: train finished runs again, from scratch
tabulate_only = False # True: train nothing, tabulate the records in assets/
out_root = 'out-exp'
assets = 'assets' # where the records, the tables' JSON and the plots go
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
rungs = '1,2,3,4' # ladder: the rungs to train (rung 4 once its prediction is written); the table shows every rung
ladder_methods = '' # ladder: a subset of its methods to train, e.g. 'learned,random' ('': all, and the levers)
skip = '' # ladder: runs left out, 'r<rung>/<method>,...' (e.g. 'r4/nawrot')
ladder_seeds = 3 # ladder: seeds 1..n of every method
more_seeds = 6 # ladder: seeds 1..n where MORE_SEEDS says (elsewhere ladder_seeds)
ladder_compile = True # ladder: train.py --compile (about 1.3x at D=64 on a CPU once compiled, ~20 s to compile)
cal_seed = 1 # ladder: the seed every calibration target is tried on first
cal_tol = 0.005 # ladder: a target holds once its mean val rate over seeds 1..ladder_seeds is within this of 0.2
cal_tries = 5 # ladder: at most this many targets per method and rung (then the closest is taken)
predict = False # ladder: True writes the prediction of rung 4 from rungs 1-3 (once: it stands as committed)
boot = 2000 # ladder: bootstrap refits of the prediction's intervals
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import KEYS, check_config # the table of keys, experiments.py's own rows among them: --help prints them
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configurator.py')).read())
check_config(globals(), 'experiments.py') # every key against its row: one line, nothing made
# -----------------------------------------------------------------------------
HERE = os.path.dirname(os.path.abspath(__file__)) # train.py runs here (it opens configurator.py by a relative path)
command = 'python experiments.py ' + ' '.join(sys.argv[1:])
from model import UNetConfig, ByteUNet, BOS, boundary_counts, boundary_metrics
from common import BPE_PAT, WORDS_PAT, bpe_gates, load_checkpoint, open_corpus, save_bpe, train_bpe

VAL_KEYS = ['bpb', 'rate', 'ws_boundary', 'word_boundary', 'boundary_precision'] # train.py's val row, model.py's
TABLES = ('ladder', 'levers', 'controls', 'ablations', 'english', 'paper_run')
EQUAL = lambda n, every: [f'--max_iters={n}', f'--lr_decay_iters={n}', f'--eval_interval={every}'] # 7 evals
LEVERS = { # the quick start (train.py's defaults) and one lever moved at a time, at equal bytes (4.9M)
    'learned': [],
    'rows32': ['--batch_size=32', *EQUAL(600, 100), '--warmup_iters=8', f'--eval_iters={max(1, eval_iters // 4)}'],
    'scale4': ['--gate_scale=4'], # the gate logits move 4x faster under Adam
    'scale025': ['--gate_scale=0.25'],
    'block512': ['--block_size=512', *EQUAL(1200, 200)], # (its val rows are 512 bytes: not the same rows)
}
ABLATIONS = {'gamma1': ['--gamma=1.0'], 'no_early_exit': ['--early_exit_reward=False'],
             'no_rate_loss': ['--rate_weight=0.0'], 'w1': ['--filter_size=1']}

# what a row of common.KEYS cannot say: one line each, before any work starts
if not (table or figure or vocab):
    raise SystemExit("experiments.py: name a --table (ladder, levers, controls, ablations, english or paper_run), or "
                     "--figure=True or --vocab=True")
if not re.fullmatch(r'(r[1-4]/\w+(,r[1-4]/\w+)*)?', skip):
    raise SystemExit(f"experiments.py: --skip={skip}: name runs as r<rung>/<method>, e.g. --skip=r4/nawrot")
if table == 'paper_run' and not os.path.exists(os.path.join(HERE, f'config/train_{paper_size}_random.py')):
    raise SystemExit(f"experiments.py: --paper_size={paper_size!r}: there is no config/train_{paper_size}_random.py")
corpus = os.path.join(data_dir, 'pycode')
PAT = WORDS_PAT if bpe_pat == 'words' else BPE_PAT # the BPE's pre-tokens: GPT-2's, or a whitespace run and a word
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)) # killed: the trainings this process started stop too
signal.signal(signal.SIGINT, lambda *_: sys.exit("experiments.py: interrupted; the runs saved as they stopped (the "
                                                 "same command resumes them)"))

def rel(path):
    """ a path as train.py (run in HERE) reads it: relative to HERE when inside it, else absolute """
    path = os.path.abspath(path)
    return os.path.relpath(path, HERE) if path.startswith(HERE + os.sep) else path

# -----------------------------------------------------------------------------
# the corpus as train.py reads it, and the prescribed boundaries of the controls

def split_rows(split, T, n, corpus=corpus):
    """ n rows of a split, spread evenly over it, cut as train.py cuts them (common.open_corpus: BOS + a window of up
        to T-1 bytes of one document, each file checked) -> X (n, T) long, M (n, T) bool real positions """
    data, start, length = (d[split] for d in open_corpus(*os.path.split(corpus), T, 'experiments.py'))
    picked = np.unique(np.linspace(0, len(start) - 1, min(n, len(start))).round().astype(np.int64))
    X, M = torch.zeros(len(picked), T, dtype=torch.long), torch.zeros(len(picked), T, dtype=torch.bool)
    for i, (a, n_i) in enumerate(zip(start[picked], length[picked])):
        X[i, 0], X[i, 1:1 + n_i], M[i, :1 + n_i] = BOS, torch.from_numpy(data[a:a + n_i].astype(np.int64)), True
    return X, M

@torch.no_grad()
def rule_rate(gater, X, M):
    """ the share of positions a prescribed rule gater gates by itself (word_rate=0), counted by boundary_counts """
    model = ByteUNet(UNetConfig(block_size=X.size(1), gater=gater, word_rate=0.0)).eval()
    counts = sum(boundary_counts(X[k:k + 64], model(X[k:k + 64])['gates'], M[k:k + 64]) for k in range(0, len(X), 64))
    return boundary_metrics(counts)['rate']

def bpe_encoding(tokens, m):
    """ a tiktoken encoding of the 256 bytes and the first m learned tokens (ranks 256..), split as PAT """
    import tiktoken
    ranks = {**{bytes([i]): i for i in range(256)}, **{t: 256 + j for j, t in enumerate(tokens[:m])}}
    return tiktoken.Encoding(name=f'bpe{m}', pat_str=PAT, mergeable_ranks=ranks, special_tokens={})

def bpe_rate_of(enc, X, M):
    """ the rate of BPE guidance on rows X: gates where bpe_gates places them (as train.py --prescribe=bpe does) """
    G = torch.stack([bpe_gates(enc, bytes(x[1:n].tolist()), X.size(1)) for x, n in zip(X, M.sum(1).tolist())])
    return boundary_metrics(boundary_counts(X, G, M))['rate']

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
    tokens = train_bpe((text[i:j] for i, j in zip(off[:-1], off[1:])), bpe_max_merges, PAT) # doc by doc
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
    save_bpe(tokens[:m], file)
    res['bpe'] = dict(path=os.path.abspath(file), merges=m, rate=rates[m], trained_merges=len(tokens),
                      train_bytes=len(text), seconds=round(time.time() - t0))
    print(f"BPE on {len(text):,} train bytes: {m} merges give rate {rates[m]:.4f} (target {bpe_rate}) -> {file}")
    os.makedirs(assets, exist_ok=True)
    old = json.load(open(path)) if os.path.exists(path) else {}
    with open(path, 'w') as f:
        json.dump({**old, entry: res}, f, indent=1)
    return res

# -----------------------------------------------------------------------------
# the runner: every table's runs, each a train.py command whose record lands in assets/ as it ends

def make_run(home, name, args, **meta):
    """ a run: its name, train.py argv (args: everything but --out_dir, which is what makes the run what it is), out_dir
        out_root/<home>/<name>, its record assets/<home>/<name>.json, and the fields its record names it by (meta) """
    out_dir = os.path.join(out_root, home, name)
    cmd = args + [f'--out_dir={rel(out_dir)}']
    return dict(name=name, meta=meta, args=args, cmd=cmd, command='python ' + ' '.join(cmd), out_dir=out_dir,
                asset=os.path.join(assets, home, f'{name}.json'))

def same_run(a, b):
    """ two train.py argvs train the same run: equal but for --init_from (a resume trains the run it resumes) """
    drop = lambda args: [x for x in args if not x.startswith('--init_from=')]
    return drop(a) == drop(b)

def result(run):
    """ the run's record in assets/ if the same train.py arguments made it, else None """
    if os.path.exists(run['asset']):
        res = json.load(open(run['asset']))
        if same_run(res['args'], run['args']):
            return res

def state(run):
    """ 'done' (its record is in assets/), 'busy' (a live process is training it) or 'todo' """
    if result(run):
        return 'done'
    info = os.path.join(run['out_dir'], 'run.json')
    info = json.load(open(info)) if os.path.exists(info) else {}
    if info.get('pid') and 'returncode' not in info:
        try:
            os.kill(info['pid'], 0)
            return 'busy'
        except OSError:
            pass # it died without a word: train it again
    return 'todo'

def at_last_step(run):
    """ whether train.txt's last val line is at the run's last step ("iter 9600/9600 val: ..."): a run stopped from
        outside (SIGTERM saves and exits 0) ends before it """
    evals = re.findall(r'^iter (\d+)/(\d+) val:', open(os.path.join(run['out_dir'], 'train.txt')).read(), re.M)
    return bool(evals) and evals[-1][0] == evals[-1][1]

def finish(run, wall):
    """ the record of a finished run, from its log.jsonl: written to assets/ at once (atomically) """
    log = [json.loads(line) for line in open(os.path.join(run['out_dir'], 'log.jsonl')) if line.endswith('\n')]
    val, speed = [r for r in log if r['split'] == 'val'], [r['bytes_per_sec'] for r in log if r['split'] == 'train']
    res = dict(name=run['name'], **run['meta'], args=run['args'], command=run['command'], bytes=val[-1]['bytes'],
               wall_s=wall, bytes_per_sec=sorted(speed)[len(speed) // 2] if speed else None, val=val[-1],
               curve=[{k: r.get(k) for k in ['iter', 'bytes'] + VAL_KEYS} for r in val])
    os.makedirs(os.path.dirname(run['asset']), exist_ok=True)
    with open(run['asset'] + '.tmp', 'w') as f:
        json.dump(res, f, indent=1)
    os.replace(run['asset'] + '.tmp', run['asset'])
    return res

def train(plan):
    """ train the runs that plan() names and assets/ lacks, `jobs` at a time, one thread each, asking plan() again as
        each ends (a calibration run's result names the next one); a run with a checkpoint of the same arguments
        resumes from it -> (failed, stopped): the names of the runs that failed, and of those stopped from outside """
    running, failed, stopped, ended = {}, set(), set(), set()
    first = plan()
    done = sum(state(r) == 'done' for r in first) # (the ladder's calibrations name more runs as they end)
    print(f"{table}: {len(first)} runs, {done} finished already, {len(first) - done} to train ({jobs} at a time)",
          flush=True)
    def write_info(run, **info):
        with open(os.path.join(run['out_dir'], 'run.json'), 'w') as f:
            json.dump(dict(args=run['args'], **info), f)
    def launch(run):
        info = os.path.join(run['out_dir'], 'run.json')
        old = json.load(open(info)) if os.path.exists(info) else {}
        if retrain or not same_run(old.get('args', []), run['args']): # another command's folder: start over
            shutil.rmtree(run['out_dir'], ignore_errors=True)
        os.makedirs(run['out_dir'], exist_ok=True)
        resume = os.path.exists(os.path.join(run['out_dir'], 'ckpt.pt'))
        print(f"$ {run['command']} >> {run['out_dir']}/train.txt" + (' (resumes)' if resume else ''), flush=True)
        log = open(os.path.join(run['out_dir'], 'train.txt'), 'a')
        p = subprocess.Popen([sys.executable, *run['cmd']], cwd=HERE, stdout=log, stderr=subprocess.STDOUT,
                             env={**os.environ, 'OMP_NUM_THREADS': '1'})
        write_info(run, pid=p.pid, wall_before=old.get('wall_before', 0) if resume else 0)
        running[p] = (run, time.time(), log)
    def wall_of(run, t0): # the run's seconds over all its resumes
        return json.load(open(os.path.join(run['out_dir'], 'run.json'))).get('wall_before', 0) + round(time.time() - t0)
    try:
        while True:
            busy = {r['name'] for r, _, _ in running.values()} | failed | stopped | ended
            again = ('todo', 'done') if retrain else ('todo',)
            todo = [r for r in plan() if r['name'] not in busy and state(r) in again]
            while todo and len(running) < jobs:
                launch(todo.pop(0))
            if not running:
                break
            time.sleep(2)
            for p in [p for p in running if p.poll() is not None]:
                run, t0, log = running.pop(p)
                log.close()
                wall = wall_of(run, t0)
                write_info(run, returncode=p.returncode, wall_before=wall)
                ended.add(run['name'])
                if p.returncode:
                    failed.add(run['name'])
                    tail = open(os.path.join(run['out_dir'], 'train.txt')).read().strip().splitlines()[-1:] or ['']
                    print(f"experiments.py: {run['name']} failed (exit {p.returncode}): {tail[0]}", flush=True)
                elif not at_last_step(run):
                    stopped.add(run['name']) # stopped from outside (SIGTERM saves and exits 0): resumed next time
                    print(f"experiments.py: {run['name']} stopped before its last step; it resumes when rerun")
                else:
                    val = finish(run, wall)['val']
                    print(f"{run['name']} done in {wall} s: val " + ', '.join(f"{k} {val[k]:.4f}" for k in VAL_KEYS),
                          flush=True)
    finally: # interrupted: the trainings stop with it (train.py saves a checkpoint on SIGTERM), their time kept
        for p in running:
            p.terminate()
        for p, (run, t0, log) in running.items():
            p.wait()
            write_info(run, returncode=p.returncode, wall_before=wall_of(run, t0))
    return failed, stopped

def summarize(rs, **fields):
    """ the records of one setting's seeds -> its row: fields, the seeds, each val key seed by seed (per_seed), and
        its mean and std over seeds (ddof 1; None for one seed) """
    row = dict(fields, seeds=[r['seed'] for r in rs], bytes=rs[0]['bytes'], command=rs[0]['command'],
               per_seed={k: [r['val'][k] for r in rs] for k in VAL_KEYS})
    for k, v in row['per_seed'].items():
        row[k], row[k + '_std'] = float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else None
    return row

def cell(row, k):
    """ a val key of a row, as a table shows it: mean ± std over seeds, or the one seed's value """
    return f"{row[k]:.3f} ± {row[k + '_std']:.3f}" if len(row['seeds']) > 1 else f"{row[k]:.3f}"

# -----------------------------------------------------------------------------
# the tables of settings: levers, controls, ablations, english, paper_run

def homes(name):
    """ table -> {setting: the table whose folder holds its runs} (levers' learned gater serves the controls; the
        ablations train their own, on the machine of the ablations: a seed's basin can differ between CPUs) """
    if name == 'controls':
        return {'learned': 'levers', **{k: 'controls' for k in ('random', 'word_ends', 'word_onsets', 'bpe')}}
    if name == 'ablations':
        return {ablate: name, **{('' if ablate == 'learned' else f'{ablate}_') + k: name for k in ABLATIONS}}
    if name == 'paper_run':
        return {f'{paper_size}_{m}': 'paper_run' for m in ('random', 'sequential')}
    return {k: name for k in (LEVERS if name == 'levers' else ('learned', 'random', 'word_ends'))}

def settings(name):
    """ table -> {setting: train.py arguments on top of its defaults} (the controls' and english's measure a corpus) """
    if name == 'levers':
        return LEVERS
    if name == 'controls':
        p = prescribed()
        return {'learned': [], 'random': ['--gater=uniform'],
                'word_ends': ['--gater=word_ends', f"--word_rate={p['word_ends']:.4f}"],
                'word_onsets': ['--gater=word_onsets', f"--word_rate={p['word_onsets']:.4f}"],
                'bpe': ['--prescribe=bpe', f"--bpe_encoding={rel(p['bpe']['path'])}", '--gater=uniform']}
    # (bpe: a gater without parameters, as config/method_bpe.py: a policy loss on prescribed gates would still train x)
    if name == 'english': # the quick start on English prose: does the gater find word edges more often there?
        rate = rule_rate('word_ends', *split_rows('train', 256, rate_rows, os.path.join(data_dir, 'pydocs')))
        d = ['--dataset=pydocs']
        return {'learned': d, 'random': d + ['--gater=uniform'], 'word_ends': d + ['--gater=word_ends',
                                                                                     f'--word_rate={rate:.4f}']}
    if name == 'ablations': # the chosen setting itself (levers' runs), then each ablation on top of it
        return dict(zip(homes(name), [LEVERS[ablate], *(LEVERS[ablate] + v for v in ABLATIONS.values())]))
    return {s: [f'config/train_{s}.py', '--dataset=sitepy', *paper_flags.split()] for s in homes(name)} # paper_run

def picked(name):
    """ the (setting, seed) pairs of a table, or of --runs """
    home = homes(name)
    out = [r.split(':') for r in runs.split(',')] if runs else [[s, k] for s in home for k in seeds.split(',')]
    for r in out:
        if len(r) != 2 or r[0] not in home or not r[1].isdigit():
            raise SystemExit(f"experiments.py: --runs: '{':'.join(r)}' is not setting:seed with a setting of {name} "
                             f"({', '.join(home)}) and a whole seed")
    return [(s, int(k)) for s, k in out]

def table_plan(name):
    """ the runs of a table (or of --runs), each a train.py command on top of its defaults """
    home, spec, out = homes(name), settings(name), []
    evals = [] if name == 'paper_run' else [f'--eval_iters={eval_iters}', '--eval_interval=400']
    for setting, seed in picked(name):
        cfgs = [a for a in spec[setting] if not a.startswith('--')]
        flags = [a for a in spec[setting] if a.startswith('--')]
        extra = ([f'--data_dir={rel(data_dir)}'] if data_dir != 'data' else []) + \
            ([f'--device={device}'] if device else []) + (EQUAL(iters, iters) if iters else [])
        args = ['train.py', *cfgs, *evals, *flags, *extra, f'--seed={seed}', '--init_from=auto']
        out.append(make_run(home[setting], f'{setting}_s{seed}', args, setting=setting, seed=seed))
    return out

def tabulate(name):
    """ mean ± std over the seeds of each setting, from the records in assets/ alone: printed, and written to
        assets/<name>_table.json and assets/<name>.png (val bpb and word-edge recall against bytes seen) """
    home, pairs = homes(name), picked(name)
    paths = [os.path.join(assets, home[s], f'{s}_s{k}.json') for s, k in pairs]
    recs = [json.load(open(p)) for p in paths if os.path.exists(p)]
    groups = {s: [r for r in recs if r['setting'] == s] for s in dict.fromkeys(r['setting'] for r in recs)}
    rows = []
    print(f"\n$ {command}\n{len(recs)} of {len(pairs)} runs finished; train.py's last val row, mean ± std over seeds\n"
          f"| setting | seeds | MB seen | bytes/s | " + ' | '.join(VAL_KEYS) + ' |\n|---|---|---|---|' +
          '---|' * len(VAL_KEYS))
    for setting, rs in groups.items():
        rows.append(row := summarize(rs, setting=setting, bytes_per_sec=rs[0].get('bytes_per_sec')))
        print(f"| {setting} | {len(rs)} | {row['bytes'] / 1e6:.1f} | {row['bytes_per_sec'] or 0:,.0f} | " +
              ' | '.join(cell(row, k) for k in VAL_KEYS) + ' |')
    os.makedirs(assets, exist_ok=True)
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
    print(f"wrote {os.path.join(assets, name + '_table.json')} and {os.path.join(assets, name + '.png')}")
    return rows

# -----------------------------------------------------------------------------
# the compute ladder: every method at equal compression (val rate 0.2 ± 0.01) on four rungs of compute. Rungs 1-3 are
# fitted, and rung 4 predicted (PREDICTION, in assets/) before rung 4 may train

LADDER_RATE, LADDER_TOL = 0.2, 0.01 # every method's val rate at the end of its runs: 0.2 ± 0.01
RUNGS = { # rung -> train.py arguments on top of the quick start's (D=64, 8 rows of 256 bytes per step, lr 3e-3)
    1: EQUAL(2400, 400),                                   # the quick start: 4.9M bytes
    2: EQUAL(9600, 1600),                                  # 4x the bytes (19.7M of the 30M train bytes)
    3: ['--n_embd=128', '--n_head=4', *EQUAL(9600, 1600)], # twice as wide: 3.4x rung 2's FLOPs
    4: ['--n_embd=256', '--n_head=8', *EQUAL(9600, 1600)], # twice as wide again: 3.6x rung 3's (head size 32 at 2-4)
}
METHODS = {'learned': [], 'random': ['--gater=uniform'], 'word_ends': ['--gater=word_ends'],
           'hnet': ['config/method_hnet.py', '--rate_weight=0.1'], 'nawrot': ['config/method_nawrot.py']}
# (H-Net's ratio loss at 0.1, not its config's 0.03: at 0.03 seed 1's val rate moved 0.195-0.221 between targets
# 0.1637 and 0.1695, and seed 2 ended at 0.210 where seed 1 had 0.195: no target held every seed within 0.01)
CALIBRATE = { # method -> {the first rung its rate target is calibrated at: the first guess there}; above, each rung
    # starts from the target of the rung below. The straight-through gaters' hard rate is not what their loss holds:
    'hnet': {1: 0.18}, 'nawrot': {1: 0.284}, # (their configs' target 0.2 ends at 0.238 and 0.141 at rung 1)
    'learned': {4: 0.2}} # rungs 1-3 end at 0.2 ± 0.01 uncalibrated, rung 4 at 0.207 on the mean of seeds 1-3
PLAIN = {'learned': 0.2} # a target that is train.py's own --rate: its runs are the plain ones, r<rung>/<method>_s<seed>
GATE_LEVERS = { # the learned gater's levers: does one make its segmentation reliable, or its seeds less spread?
    'warmup400': ['--gate_warmup=400'],      # random boundaries for the first 400 steps (where the basin was set)
    'scale05': ['--gate_scale=0.5'],         # between the quick start's 1 and the 1/4 that found edges late
    'draws4': ['--draws=4', '--batch_size=2'], # each row 4 times, its own draws as baseline: the same rows per step
}
LEVER_SEEDS = {'warmup400': {1: 6}, 'scale05': {1: 6, 2: 3}, 'draws4': {1: 3}} # lever -> {rung: seeds}; draws4
# stopped at 3: a quarter of the bytes costs it 0.24 bpb; scale05, the one that moved the edges at rung 1, at rung 2
MORE_SEEDS = {'learned': (1, 2, 3), 'hnet': (3,), 'nawrot': (3,)} # method -> rungs with more_seeds seeds: the
# learned gater spreads the most, and the crossing at rung 3 rests on H-Net's and Nawrot's spread too (their seeds 4-6
# came after the prediction, which their seeds 1-3 made)
LAST = {(4, 'nawrot')} # trained after every other run: Nawrot at rung 4 if the machine's time allows
PREDICTION = 'ladder_prediction.json' # in assets/: rungs 1-3 fitted, written before rung 4 trains

def rung_args(rung):
    """ a rung's arguments; with --iters a tiny ladder for tests (iters, then 4*iters steps; rungs 3, 4 at D=32, 64) """
    if not iters:
        return RUNGS[rung]
    n = iters * (1 if rung == 1 else 4)
    return [*EQUAL(n, n), *{3: ['--n_embd=32', '--n_head=2'], 4: ['--n_embd=64', '--n_head=2']}.get(rung, [])]

_word_rate = {}
def method_args(method):
    if method in GATE_LEVERS:
        return GATE_LEVERS[method]
    if method == 'word_ends' and not _word_rate: # the rule's own share on train rows, topped up to 0.2 by train.py
        _word_rate['r'] = rule_rate('word_ends', *split_rows('train', 256, rate_rows))
    return METHODS[method] + ([f"--word_rate={_word_rate['r']:.4f}"] if method == 'word_ends' else [])

def ladder_run(rung, method, seed, target=None):
    """ one run of the ladder, r<rung>/<method>[_t<target>]_s<seed> """
    if target is not None and target == PLAIN.get(method): # train.py's default: the plain run, without --rate
        target = None
    name = f'{method}_t{target:.4f}' if target is not None else method
    cfgs = [a for a in method_args(method) if not a.startswith('--')]
    flags = [a for a in method_args(method) if a.startswith('--')]
    args = ['train.py', *cfgs, f'--eval_iters={eval_iters}', *rung_args(rung), *flags,
            *([f'--rate={target:.4f}'] if target is not None else []), '--threads=1', f'--compile={ladder_compile}',
            '--init_from=auto', *([f'--data_dir={rel(data_dir)}'] if data_dir != 'data' else []),
            *([f'--device={device}'] if device else []), f'--seed={seed}']
    return make_run('ladder', f'r{rung}/{name}_s{seed}', args, rung=rung, method=method, seed=seed, target=target)

def n_seeds(rung, method):
    """ the seeds a method runs at a rung """
    if method in GATE_LEVERS:
        return LEVER_SEEDS[method].get(rung, 0)
    return more_seeds if rung in MORE_SEEDS.get(method, ()) else ladder_seeds

def next_target(tried):
    """ the calibration's next rate target from the (target, val rate) pairs so far: a ratio step after the first
        run, then the secant through the last two, kept within a factor 2 of the last target """
    (t0, v0), (t1, v1) = ([(None, None)] + tried)[-2:]
    t = t1 * LADDER_RATE / v1 if t0 is None or v1 == v0 else t1 + (LADDER_RATE - v1) * (t1 - t0) / (v1 - v0)
    return round(min(max(t, t1 / 2, 0.01), t1 * 2, 0.9), 4)

def cal_seeds():
    """ the seeds a calibration target runs on: cal_seed first, then the others of 1..ladder_seeds """
    return [cal_seed] + [s for s in range(1, ladder_seeds + 1) if s != cal_seed]

def calibrated(rung, method):
    """ is the method's rate target calibrated at this rung (CALIBRATE), or is train.py's own --rate taken? """
    return method in CALIBRATE and rung >= min(CALIBRATE[method])

def calibration(rung, method):
    """ the rate target of a calibrated method at a rung -> (target, finished?, tried: [(target, mean val rate,
        seeds)]), or None while the rung below is not calibrated (or this one is not, by CALIBRATE). From the rung
        below's target (CALIBRATE's guess at the first rung), a target is run on cal_seed, and stepped by next_target
        while that is off 0.2 by more than cal_tol; once it is within, the target runs on seeds 1..ladder_seeds too,
        and holds if their mean val rate is within cal_tol (a target set on one seed can miss on the others). At most
        cal_tries targets, then the closest """
    if not calibrated(rung, method):
        return None
    if rung == min(CALIBRATE[method]):
        t = CALIBRATE[method][rung]
    else:
        below = calibration(rung - 1, method)
        if below is None or not below[1]:
            return None
        t = below[0]
    tried, every = [], cal_seeds()
    for _ in range(cal_tries):
        res = [result(ladder_run(rung, method, cal_seed, t))]
        if res[0] is None:
            return t, False, tried
        if abs(res[0]['val']['rate'] - LADDER_RATE) <= cal_tol: # within on cal_seed: the other seeds too
            res += [result(ladder_run(rung, method, s, t)) for s in every[1:]]
            if None in res:
                return t, False, tried
        tried.append((t, float(np.mean([r['val']['rate'] for r in res])), len(res)))
        if len(res) == len(every) and abs(tried[-1][1] - LADDER_RATE) <= cal_tol:
            return t, True, tried
        t = next_target([tv[:2] for tv in tried])
        if t in [tv[0] for tv in tried]: # the rounding gives a target tried already: its neighbour can do no better
            break
    return min(tried, key=lambda tv: abs(tv[1] - LADDER_RATE))[0], True, tried

def ladder_plan(every=False):
    """ every run of the ladder that can be named now, in training order -> (runs, waiting). Rung by rung, each rung's
        calibration runs first, then its seeds round by round; then the seeds past `ladder_seeds` (MORE_SEEDS), then
        the levers, then rung 4 (once the prediction is written), then LAST. Those --rungs and --ladder_methods pick,
        or with every=True all of them (the table's view) """
    plan, waiting, skipped = [], [], skip.split(',')
    picked = '' if every else ladder_methods
    for rung in sorted(RUNGS) if every else [int(r) for r in rungs.split(',')]:
        if rung == 4 and not os.path.exists(os.path.join(assets, PREDICTION)):
            waiting.append('r4 (after the prediction: python experiments.py --table=ladder --predict=True)')
            continue
        methods = [m for m in (picked.split(',') if picked else [*METHODS, *GATE_LEVERS])
                   if f'r{rung}/{m}' not in skipped and n_seeds(rung, m)]
        first, rest = [], []
        for m in methods:
            target = None
            if calibrated(rung, m):
                cal = calibration(rung, m)
                if cal is None or not cal[1]:
                    waiting.append(f'r{rung}/{m}')
                    at = [ladder_run(rung, m, s, cal[0]) for s in cal_seeds()] if cal else []
                    first += at[:1] if at and result(at[0]) is None else at # cal_seed's, then all (train skips done)
                    continue
                target = cal[0]
            rest += [ladder_run(rung, m, s, target) for s in range(1, n_seeds(rung, m) + 1)]
        rest.sort(key=lambda r: (r['meta']['method'] in GATE_LEVERS, r['meta']['seed'])) # a round of seeds at a time
        plan += first + rest
    order = lambda r: ((r['meta']['rung'], r['meta']['method']) in LAST, r['meta']['rung'] == 4,
                       r['meta']['method'] in GATE_LEVERS, r['meta']['seed'] > ladder_seeds)
    return sorted(plan, key=order), waiting # (stable: rung order within each part)

def on_edges(val):
    """ a seed 'on word edges': recall (word_boundary) and precision both above 0.4 (chance: 0.35 and 0.38) """
    return val['word_boundary'] > 0.4 and val['boundary_precision'] > 0.4

def ladder_flops(rung):
    """ training FLOPs per byte of a rung's model at rate 0.2 (model.flops_per_byte: forward and backward) """
    a = dict(x[2:].split('=') for x in rung_args(rung) if x[2:].split('=')[0] in ('n_embd', 'n_head'))
    cfg = UNetConfig(block_size=256, n_embd=int(a.get('n_embd', 64)), n_head=int(a.get('n_head', 2)), n_down=1,
                     n_mid=4, n_up=1, window=8, rate=LADDER_RATE) # train.py's defaults, as its quick start
    return ByteUNet(cfg).flops_per_byte(LADDER_RATE)

def ladder_rows():
    """ the ladder's rows from the records in assets/ladder alone: each method (each calibrated one at its target) at
        each rung, its seeds' val keys, mean ± std, FLOPs and seeds on word edges -> rows. Every rung and method,
        whatever --rungs and --ladder_methods train: a run of one rung rewrites the whole table """
    rows, recs = [], {}
    for run in ladder_plan(every=True)[0]:
        res = result(run) # (the plan names a calibrated method's runs at its current target alone)
        if res:
            recs.setdefault((run['meta']['rung'], run['meta']['method']), []).append(res)
    for (rung, method), rs in sorted(recs.items(), key=lambda kv: (kv[0][0], [*METHODS, *GATE_LEVERS].index(kv[0][1]))):
        draws = int(dict(a[2:].split('=') for a in rs[0]['args'][1:] if a.startswith('--')).get('draws', 1))
        row = summarize(rs, rung=rung, method=method, target=rs[0]['target'], edges=sum(on_edges(r['val']) for r in rs),
                        flops=ladder_flops(rung) * rs[0]['bytes'] * draws) # (each draw of a row costs its bytes again)
        row['bpb_range'] = max(row['per_seed']['bpb']) - min(row['per_seed']['bpb'])
        row['equal_rate'] = all(abs(v - LADDER_RATE) <= LADDER_TOL for v in row['per_seed']['rate'])
        rows.append(row)
    return rows

# --- the fit: each method's val bpb against log10 training FLOPs, a straight line through the rung means

def line_fits(x, Y):
    """ least squares lines through the points (x, Y[i]) of each row of Y -> intercepts, slopes """
    slope, intercept = np.polyfit(np.asarray(x, float), np.asarray(Y, float).T, 1)
    return intercept, slope

def ladder_fit(rows, rung4_flops):
    """ rungs 1-3 of each method fitted as bpb = a + b log10(FLOPs) through the rung means, and the learned gater's gap
        to each other method (learned minus it: below 0, learned ahead) the same way; each fit's value at rung 4's
        FLOPs with a 95% interval from `boot` refits, each rung's seeds drawn with replacement (a seeded generator:
        the same records give the same numbers). A gap's crossing: the FLOPs where its line meets 0 """
    rng, x4 = np.random.default_rng(0), float(np.log10(rung4_flops))
    by = {(r['rung'], r['method']): r for r in rows if r['rung'] <= 3 and r['method'] in METHODS}
    fitted = [m for m in METHODS if all((k, m) in by for k in (1, 2, 3))]
    x = [float(np.log10(by[k, fitted[0]]['flops'])) for k in (1, 2, 3)]
    draw = {m: np.stack([rng.choice(by[k, m]['per_seed']['bpb'], (boot, len(by[k, m]['seeds']))).mean(1)
                         for k in (1, 2, 3)], 1) for m in fitted} # (boot, 3): resampled rung means
    def fit(means, boots):
        (a,), (b,) = line_fits(x, [means])
        ab, bb = line_fits(x, boots)
        lo, hi = np.percentile(ab + bb * x4, [2.5, 97.5])
        return dict(intercept=float(a), slope=float(b), at_rung4=float(a + b * x4), lo=float(lo), hi=float(hi),
                    points=[float(v) for v in means]), ab + bb * x4
    out = dict(x=x, x4=x4, rung4_flops=rung4_flops, methods={}, gaps={})
    for m in fitted:
        out['methods'][m] = fit([by[k, m]['bpb'] for k in (1, 2, 3)], draw[m])[0]
        out['methods'][m].update(seeds=[len(by[k, m]['seeds']) for k in (1, 2, 3)],
                                 std=[by[k, m]['bpb_std'] for k in (1, 2, 3)])
    for m in [m for m in fitted if m != 'learned' and 'learned' in fitted]:
        gap, at4 = fit([by[k, 'learned']['bpb'] - by[k, m]['bpb'] for k in (1, 2, 3)], draw['learned'] - draw[m])
        gap['ahead'] = float(np.mean(at4 < 0)) # the share of refits with the learned gater ahead at rung 4
        zero = -gap['intercept'] / gap['slope'] if abs(gap['slope']) > 1e-9 else np.inf # log10 FLOPs (parallel: none)
        gap['crossing_flops'] = float(10 ** zero) if 0 < zero < 30 else None
        out['gaps'][m] = gap
    return out

def ladder_predict(rows):
    """ the prediction of rung 4 (PREDICTION, in assets/): the fit of rungs 1-3, written once, before rung 4 trains
        (committed, it stands: a later --predict refuses to overwrite it) """
    path = os.path.join(assets, PREDICTION)
    if os.path.exists(path):
        raise SystemExit(f"experiments.py: {path} holds the prediction already; it stands as committed (delete it by "
                         "hand to predict again)")
    have = {(r['rung'], r['method']): len(r['seeds']) for r in rows}
    lacking = [f"r{k}/{m} ({have.get((k, m), 0)} of {n_seeds(k, m)} seeds)" for k in (1, 2, 3) for m in
               (ladder_methods.split(',') if ladder_methods else METHODS) if f'r{k}/{m}' not in skip.split(',')
               and have.get((k, m), 0) < n_seeds(k, m)]
    if lacking:
        raise SystemExit(f"experiments.py: rung 4 is predicted from rungs 1-3 whole; missing: {', '.join(lacking)}")
    r3 = [r for r in rows if r['rung'] == 3][0]
    steps = lambda rung: int(dict(a[2:].split('=') for a in rung_args(rung))['max_iters'])
    fit = ladder_fit(rows, ladder_flops(4) * r3['bytes'] * steps(4) / steps(3))
    res = dict(command=command, made=time.strftime('%Y-%m-%d %H:%M'), rung4=rung_args(4),
               fit='val bpb = intercept + slope * log10(training FLOPs), least squares through the means of rungs '
                   '1-3; gaps: learned minus the method, the same way',
               interval=f'2.5 and 97.5 percentiles of {boot} refits, each rung\'s seeds drawn with replacement',
               records=sorted(f"r{r['rung']}/{r['method']}: " + ', '.join(f'{v:.4f}' for v in r['per_seed']['bpb'])
                              for r in rows if r['rung'] <= 3 and r['method'] in METHODS), **fit)
    os.makedirs(assets, exist_ok=True)
    with open(path, 'w') as f:
        json.dump(res, f, indent=1)
    print(f"wrote {path}")

def ladder_tabulate():
    """ the ladder's table, the learned gater's seeds, the prediction beside rung 4, and the figure, from the records
        in assets/ alone """
    rows, waiting = ladder_rows(), ladder_plan()[1] # (what this command's --rungs and --ladder_methods wait on)
    print(f"\n$ {command}\nthe ladder: every method's val rate at {LADDER_RATE} ± {LADDER_TOL} (equal compression); "
          f"train.py's last val row, mean ± std and range over seeds; 'edges': seeds on word edges (recall and "
          f"precision > 0.4)\n| rung | method | seeds | MB seen | FLOPs | bpb | range | rate | word_boundary | "
          f"boundary_precision | edges |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['rung']} | {row['method']}{'' if row['equal_rate'] else ' (rate off)'} | {len(row['seeds'])} | "
              f"{row['bytes'] / 1e6:.1f} | {row['flops']:.1e} | {cell(row, 'bpb')} | {row['bpb_range']:.3f} | "
              f"{row['rate']:.3f} | {cell(row, 'word_boundary')} | {cell(row, 'boundary_precision')} | "
              f"{row['edges']}/{len(row['seeds'])} |")
    for rung in sorted({r['rung'] for r in rows}): # word edges: a reported metric, seed by seed
        for r in [r for r in rows if r['rung'] == rung and (r['method'] == 'learned' or r['method'] in GATE_LEVERS)]:
            ps = r['per_seed']
            print(f"rung {rung}, {r['method']} per seed: bpb " + ', '.join(f'{v:.3f}' for v in ps['bpb']) +
                  '; recall/precision ' + ', '.join(f".{round(a * 1000):03d}/.{round(b * 1000):03d}" for a, b in
                                                    zip(ps['word_boundary'], ps['boundary_precision'])))
    cal = {f'r{rung}/{m}': dict(zip(('target', 'finished', 'tried'), c)) for rung in sorted(RUNGS)
           for m in CALIBRATE if f'r{rung}/{m}' not in skip.split(',') and (c := calibration(rung, m)) and c[2]}
    for k, c in cal.items():
        print(f"calibration {k}: " + ', '.join(f"target {t:.4f} -> rate {v:.4f} ({n} seed{'s' * (n > 1)})"
                                               for t, v, n in c['tried'])
              + (f"; chosen {c['target']:.4f}" if c['finished'] else ' ...'))
    if waiting:
        print(f"waiting: {', '.join(waiting)}")
    pred_path = os.path.join(assets, PREDICTION)
    pred = json.load(open(pred_path)) if os.path.exists(pred_path) else None
    held = {}
    r4 = {r['method']: r for r in rows if r['rung'] == 4}
    if pred: # the prediction, and beside it what rung 4 measured
        print(f"\nrung 4 ({pred['rung4_flops']:.2e} FLOPs), predicted from rungs 1-3 ({pred['made']}: {pred['fit']}; "
              f"interval: {pred['interval']}), beside what it measured:\n| | predicted [95%] | learned ahead in | "
              f"the gap's line meets 0 at | measured | held |\n|---|---|---|---|---|---|")
    for m, f in [*pred['methods'].items(), *((f'learned - {m}', g) for m, g in pred['gaps'].items())] if pred else []:
        a, b = m.split(' - ') if ' - ' in m else (m, None)
        if a in r4 and (b is None or b in r4):
            v = r4[a]['bpb'] - (r4[b]['bpb'] if b else 0)
            held[m] = dict(measured=v, seeds=len(r4[a]['seeds']), held=f['lo'] <= v <= f['hi'])
        cross = f"{f['crossing_flops']:.2e} FLOPs" if f.get('crossing_flops') else 'none'
        print(f"| {m} | {f['at_rung4']:.3f} [{f['lo']:.3f}, {f['hi']:.3f}] | " +
              (f"{f['ahead']:.0%} of refits | {cross} | " if b else '| | ') + (f"{held[m]['measured']:.3f} | "
              f"{'yes' if held[m]['held'] else 'no'} |" if m in held else '| |'))
    os.makedirs(assets, exist_ok=True)
    path = os.path.join(assets, 'ladder_table.json')
    with open(path, 'w') as f:
        json.dump(dict(command=command, rate=LADDER_RATE, tol=LADDER_TOL, rows=rows, calibration=cal,
                       prediction_held=held), f, indent=1)
    ladder_figure(rows, pred)
    print(f"wrote {path} and {os.path.join(assets, 'ladder.png')}")
    return rows

def ladder_figure(rows, pred):
    """ assets/ladder.png: left, val bpb against FLOPs, each method's mean and seeds' range, the fits of rungs 1-3
        and their rung-4 prediction beside what rung 4 measured; right, the learned gater's gap to each method """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    color = {m: f'C{i}' for i, m in enumerate(METHODS)} # one color a method in both panels
    full = [r for r in rows if r['method'] in METHODS and len(r['seeds']) >= ladder_seeds] # (the levers: the table)
    by = {(r['rung'], r['method']): r for r in full}
    for m in METHODS:
        rs = [r for r in full if r['method'] == m]
        if rs:
            ax.plot([r['flops'] for r in rs], [r['bpb'] for r in rs], marker='o', color=color[m], label=m, lw=1)
            ax.fill_between([r['flops'] for r in rs], [min(r['per_seed']['bpb']) for r in rs],
                            [max(r['per_seed']['bpb']) for r in rs], color=color[m], alpha=0.15, lw=0)
        rg = [k for k in sorted({r['rung'] for r in full}) if (k, m) in by and (k, 'learned') in by]
        se = lambda r: (r['bpb_std'] or 0) ** 2 / len(r['seeds']) # a mean's squared standard error over its seeds
        if m != 'learned' and rg: # the gap, ± its standard error
            ax2.errorbar([by[k, m]['flops'] for k in rg], [by[k, 'learned']['bpb'] - by[k, m]['bpb'] for k in rg],
                         yerr=[(se(by[k, 'learned']) + se(by[k, m])) ** 0.5 for k in rg], marker='o', color=color[m],
                         label=f'learned - {m}', lw=1, capsize=3)
    if pred: # the fits as committed, from rung 1 to rung 4, and the predicted interval at rung 4
        xs = np.array([pred['x'][0], pred['x4']])
        for a, fits, tag in ((ax, pred['methods'], ''), (ax2, pred['gaps'], 'learned - ')):
            for m, f in fits.items():
                a.plot(10 ** xs, f['intercept'] + f['slope'] * xs, ls='--', color=color[m], lw=0.8)
                a.errorbar([10 ** pred['x4'] * 1.12], [f['at_rung4']], yerr=[[f['at_rung4'] - f['lo']],
                                                                                [f['hi'] - f['at_rung4']]],
                           marker='D', mfc='none', color=color[m], capsize=3, lw=1)
        ax.plot([], [], ls='--', marker='D', mfc='none', color='gray', label='fit of rungs 1-3; predicted (95%)')
    ax2.axhline(0, color='k', lw=0.6)
    ticks = {r['rung']: r['flops'] for r in full}
    edges = {r['rung']: f"\nlearned: {r['edges']}/{len(r['seeds'])}\non word edges" for r in full
             if r['method'] == 'learned'} # per rung, under its tick
    for a in (ax, ax2):
        a.set_xscale('log'), a.set_xlabel('training FLOPs'), a.grid(alpha=0.3), a.margins(x=0.12)
        a.set_xticks(list(ticks.values()), [f"rung {k}\n{v:.1e}" + (edges.get(k, '') if a is ax else '')
                                            for k, v in ticks.items()], fontsize=8)
        a.minorticks_off()
        if a.get_legend_handles_labels()[0]: # (no gaps without the learned gater's row)
            a.legend(fontsize=7)
    ax.set_ylabel('val bits per byte'), ax2.set_ylabel('learned minus the method (below 0: learned ahead)')
    ax.set_title(f"pycode, val rate {LADDER_RATE} ± {LADDER_TOL}: mean and range over seeds", fontsize=9)
    ax2.set_title("the learned gater's gap, ± its standard error over seeds", fontsize=9)
    fig.tight_layout()
    plt.savefig(os.path.join(assets, 'ladder.png'), dpi=120, bbox_inches='tight')
    plt.close(fig)

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
# the command (tests/test_ladder.py runs the definitions above without it)

if table == 'ladder':
    unknown = [m for m in ladder_methods.split(',') if ladder_methods and m not in {**METHODS, **GATE_LEVERS}]
    if unknown or runs:
        raise SystemExit(f"experiments.py: --ladder_methods: {', '.join(unknown)} is not a method of the ladder "
                         f"({', '.join([*METHODS, *GATE_LEVERS])})" if unknown else "experiments.py: --runs picks "
                         "runs of the other tables; the ladder's are picked by --rungs and --ladder_methods")
    failed, stopped = (set(), set()) if tabulate_only or predict else train(lambda: ladder_plan()[0])
    if predict:
        ladder_predict(ladder_rows())
    ladder_tabulate()
    if failed or stopped:
        raise SystemExit(f"experiments.py: {len(failed)} runs failed, {len(stopped)} stopped before their last step "
                         "(rerun the same command: they resume): " + ', '.join(
            f"{n} (see {os.path.join(out_root, 'ladder', n)}/train.txt)" for n in sorted(failed | stopped)))
elif table:
    picked(table) # (--runs: checked before any work)
    corpus_of = {'english': 'pydocs', 'paper_run': 'sitepy'} # made here, offline: real docstrings and code
    folder = os.path.abspath(os.path.join(data_dir, corpus_of.get(table, 'pycode')))
    if table in corpus_of and not tabulate_only and not os.path.exists(os.path.join(folder, 'val_offsets.npy')):
        import sysconfig
        cmd = ['prepare.py', *(['pydocs'] if table == 'english' else ['files', '--glob=**/*.py', '--path=' + (
            paper_path or sysconfig.get_paths()['purelib'])]), f'--out_dir={folder}']
        print(f"$ python {' '.join(cmd)}", flush=True)
        if subprocess.run([sys.executable, *cmd], cwd=HERE).returncode:
            raise SystemExit(f"experiments.py: `python {' '.join(cmd)}` failed (its message above)")
    jobs = 1 if table == 'paper_run' else jobs # one GPU
    failed = set() if tabulate_only else set.union(*train(lambda: table_plan(table)))
    tabulate(table)
    if failed:
        raise SystemExit(f"experiments.py: {len(failed)} runs failed or stopped (rerun the same command: they resume): "
                         + ', '.join(f"{n} (see {os.path.join(out_root, n)}/train.txt)" for n in sorted(failed)))
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
