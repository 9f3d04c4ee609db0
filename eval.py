"""
Evaluate a checkpoint as the paper reports it: bits-per-byte on the test split of its dataset (the paper's FineWeb
protocol) and the gold answer's bits-per-byte on PIQA, HellaSwag, ARC-Easy and LAMBADA through lm-evaluation-harness.
$ python eval.py --out_dir=out --tasks=fineweb,piqa,hellaswag,arc_easy,lambada # a table, and out_dir/eval.json
$ python eval.py --out_dir=out --tasks=fineweb --split=val --limit=500         # a dataset without a test split
$ python eval.py --out_dir=out --tasks=my_piqa --include_path=my_tasks/        # a task YAML of your own (local data)
fineweb: the first `limit` documents of the split, each row BOS + the document's first block_size-1 bytes; bpb is the
mean of per-document bpb (the paper's headline), corpus_bpb the byte-weighted one. The other tasks: zero-shot through
the harness with the ByteLM adapter below; bpb there is the bits of the gold choice's continuation over its bytes.
Stochastic gaters draw one gate sample per row, seeded torch.manual_seed(seed + k) for batch k.
"""
import difflib
import json
import math
import os
import sys
from contextlib import nullcontext

import numpy as np
import torch
from lm_eval.api.model import LM

from model import boundary_counts, boundary_metrics, bpe_gates, load_checkpoint, next_byte_nll
from model import BOS as _BOS # '_': a constant, not a config key for the configurator

PAPER_TASKS = {'piqa': 'piqa', 'hellaswag': 'hellaswag', 'arc_easy': 'arc_easy', 'lambada': 'lambada_openai'}
BOUNDARY = ('rate', 'ws_boundary', 'word_boundary', 'boundary_precision') # fineweb: model.boundary_metrics
STOCHASTIC = ('uniform', 'bernoulli', 'linear', 'sequential', 'nawrot') # gaters that sample their gates


@torch.no_grad()
def score(model, rows, seed, ctx, enc=None, width=None):
    """ rows (lists of ids, BOS first, each <= block_size), right-padded with byte 0 to `width` (default: the longest)
        -> nll (B, W-1) nats of each next byte, greedy (B, W-1) the argmax byte at each position, gates (B, W), on the
        CPU. torch.manual_seed(seed) first, so a stochastic gater draws the same gates every run """
    dev, W = model.lm_head.weight.device, width or max(map(len, rows))
    X = torch.tensor([r + [0] * (W - len(r)) for r in rows], device=dev) # padding: causally after every real byte
    G = torch.stack([bpe_gates(enc, bytes(r[1:]), W) for r in rows]).to(dev) if enc else None # BPE-guided models
    torch.manual_seed(seed)
    with ctx:
        out = model(X, gates=G)
    return next_byte_nll(out['logits'], X).cpu(), out['logits'][:, :-1, :256].argmax(-1).cpu(), out['gates'].cpu()


def split_rows(model, docs, batch_size, seed, ctx, enc=None):
    """ the paper's test protocol on documents (bytes): row BOS + the first block_size-1 bytes, padded to block_size,
        batches of the documents in order as train.py's estimate_val (np.array_split, seed + k for batch k) ->
        per-document nll (nats) and byte counts (n,), and the summed boundary_counts of the rows """
    T = model.config.block_size
    nll, nbytes, counts = [], [], torch.zeros(6, dtype=torch.long)
    for k, idx in enumerate(np.array_split(np.arange(len(docs)), max(1, len(docs) // batch_size))):
        rows = [[_BOS, *bytes(docs[i][:T - 1])] for i in idx]
        l, _, g = score(model, rows, seed + k, ctx, enc, width=T)
        M = torch.arange(T) < torch.tensor([len(r) for r in rows])[:, None] # (B, T) real: BOS and the bytes
        X = torch.tensor([r + [0] * (T - len(r)) for r in rows])
        nll += (l * M[:, 1:]).sum(1).tolist()
        nbytes += [len(r) - 1 for r in rows]
        counts += boundary_counts(X, g, M)
    return np.array(nll), np.array(nbytes), counts


def fineweb_metrics(nll, nbytes, counts):
    """ per-document bpb -> the paper's mean, its standard error (population std / sqrt(n), as the paper's script),
        the byte-weighted corpus bpb, and model.boundary_metrics over the real positions (rate, ws_boundary, ...) """
    keep = nbytes > 0 # an empty document has no bpb
    bpb = nll[keep] / nbytes[keep] / math.log(2)
    return dict(bpb=bpb.mean(), bpb_se=bpb.std() / math.sqrt(len(bpb)), n=int(keep.sum()),
                corpus_bpb=nll.sum() / nbytes.sum() / math.log(2), bytes=int(nbytes.sum()), **boundary_metrics(counts))


class ByteLM(LM):
    """ lm-evaluation-harness's model interface for a ByteUNet. A request's text is its UTF-8 bytes; a row is BOS +
        the last block_size-1 bytes of context + continuation (left-truncated, BOS kept in front as in training).
        Requests are scored in batches of similar length; batch k draws its gates with seed + k. """

    def __init__(self, model, batch_size=8, seed=1337, ctx=nullcontext(), enc=None):
        super().__init__()
        self.model, self.batch_size, self.seed, self.ctx, self.enc = model, batch_size, seed, ctx, enc
        self.T = model.config.block_size

    def _batches(self, rows):
        """ rows -> nll and greedy bytes of each (1-D, as long as the row minus one), longest rows first """
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        res = [None] * len(rows)
        for k in range(0, len(order), self.batch_size):
            part = order[k:k + self.batch_size]
            nll, greedy, _ = score(self.model, [rows[i] for i in part], self.seed + k // self.batch_size, self.ctx,
                                   self.enc)
            for j, i in enumerate(part):
                res[i] = nll[j, :len(rows[i]) - 1], greedy[j, :len(rows[i]) - 1]
        return res

    def loglikelihood(self, requests):
        """ (context, continuation) -> (log p(continuation bytes | BOS + context bytes), is the continuation greedy) """
        rows, n = [], []
        for r in requests:
            context, continuation = (s.encode('utf-8') for s in r.args)
            if len(continuation) > self.T - 1:
                raise SystemExit(f"eval.py: a continuation of {len(continuation)} bytes does not fit the model's "
                                 f"block_size={self.T}: evaluate a model with a longer block_size")
            rows.append([_BOS, *(context + continuation)[-(self.T - 1):]]) # left-truncated, BOS kept
            n.append(len(continuation))
        res = []
        for row, m, (nll, greedy) in zip(rows, n, self._batches(rows)):
            L = len(row) # the continuation is row[L-m:], predicted at positions L-m-1 .. L-2
            res.append((-nll[L - 1 - m:].sum().item(), bool((greedy[L - 1 - m:] == torch.tensor(row[L - m:])).all())))
        return res

    def loglikelihood_rolling(self, requests):
        """ (text,) -> log p(text bytes): rows BOS + consecutive block_size-1 byte windows (train.py's rows),
            every byte scored once, each window from a fresh BOS as in training """
        rows, owner = [], []
        for i, r in enumerate(requests):
            data = r.args[0].encode('utf-8')
            for s in range(0, len(data), self.T - 1):
                rows.append([_BOS, *data[s:s + self.T - 1]])
                owner.append(i)
        res = [0.0] * len(requests)
        for i, (nll, _) in zip(owner, self._batches(rows)):
            res[i] -= nll.sum().item()
        return res

    def generate_until(self, requests):
        raise NotImplementedError("eval.py: ByteLM scores text (loglikelihood tasks) and does not generate; "
                                  "use a multiple-choice or loglikelihood task")


def gold_bpb(samples):
    """ the harness's logged samples of one task -> the gold continuation's bpb of each: for a multiple-choice task the
        choice at index `target`, for a loglikelihood task (LAMBADA) its one continuation; bits / UTF-8 bytes """
    out = []
    for s in samples:
        conts = [a[1] for a in s['arguments']]
        t = s['target']
        if len(conts) == 1: # loglikelihood task: the target is the continuation itself
            t = 0
        elif isinstance(t, str): # a task whose target is the choice's text
            t = [c.strip() for c in conts].index(t.strip())
        ll = s['filtered_resps'][t][0] # (log-likelihood, is_greedy) of request t
        out.append(-ll / len(conts[t].encode('utf-8')) / math.log(2))
    return np.array(out)


def is_offline_error(e):
    """ an exception (or one it came from) that says the hub could not be reached """
    while e is not None:
        name, text = type(e).__name__, str(e).lower()
        if isinstance(e, ConnectionError) or 'Offline' in name or 'Connect' in name or 'offline' in text \
                or "couldn't reach" in text or 'resolve' in text:
            return True
        e = e.__cause__ or e.__context__
    return False


def load_tasks(names, include_path=''):
    """ harness task names -> {name: Task} with their data loaded, and the TaskManager; a local YAML folder is searched first and the harness's
        own index only for names not found there (building it takes ~20 s). One-line errors: unknown task, no data """
    from lm_eval.tasks import TaskManager
    tm = TaskManager(include_path=include_path, include_defaults=False) if include_path else None
    if tm is None or not set(names) <= set(tm.all_tasks):
        tm = TaskManager(include_path=include_path or None)
    for name in names:
        if name not in tm.all_tasks:
            near = difflib.get_close_matches(name, tm.all_tasks, n=3)
            raise SystemExit(f"eval.py: unknown task '{name}' in --tasks; use fineweb, {', '.join(PAPER_TASKS)}, any "
                             f"lm-eval task{' (close: ' + ', '.join(near) + ')' if near else ''}, or a YAML in --include_path")
    tasks = {}
    for name in names:
        try:
            tasks.update(tm.load([name])['tasks']) # builds the task, which downloads its data
        except Exception as e:
            why = str(e).partition('\n')[0][:200]
            if is_offline_error(e):
                raise SystemExit(f"eval.py: cannot fetch the data of task '{name}' from the Hugging Face hub: no network "
                                 f"({type(e).__name__}: {why}); to run offline, point a task at a local copy: a YAML with "
                                 f"dataset_path: json and dataset_kwargs: {{data_files: {{validation: FILE.jsonl}}}}, "
                                 f"passed with --include_path=DIR (README: reproducing the paper's table)")
            raise SystemExit(f"eval.py: cannot load task '{name}': {type(e).__name__}: {why}")
    return tasks, tm


def harness_task(lm, task, tm, limit=None):
    """ one task through the harness (zero-shot) -> acc / acc_norm where the task has them, and the gold bpb """
    import lm_eval
    r = lm_eval.simple_evaluate(model=lm, tasks=[task], task_manager=tm, limit=limit, log_samples=True,
                                bootstrap_iters=0)
    name = task.task_name
    res, bpb = r['results'][name], gold_bpb(r['samples'][name])
    row = dict(bpb=bpb.mean(), bpb_se=bpb.std(ddof=1) / math.sqrt(len(bpb)) if len(bpb) > 1 else None, n=len(bpb))
    for m in ('acc', 'acc_norm'):
        if f'{m},none' in res:
            row[m] = res[f'{m},none']
    return row


if __name__ == '__main__': # the script; the functions above can be imported by the tests
    # -----------------------------------------------------------------------------
    out_dir = 'out' # reads out_dir/ckpt.pt, writes out_dir/eval.json
    tasks = 'fineweb,piqa,hellaswag,arc_easy,lambada' # fineweb: the test split protocol; others: lm-eval task names
    split = 'test' # fineweb: the split of the checkpoint's dataset ('val' for a dataset without a test split)
    limit = 4000 # fineweb: the first `limit` documents (the paper: 4000 of FineWeb's 32,768 test documents)
    task_limit = 0 # harness tasks: only the first task_limit samples of each (0: all; for a quick look)
    include_path = '' # a folder of task YAMLs (e.g. tasks with local data, for a machine without network)
    data_dir = '' # default: the checkpoint's data_dir
    dataset = '' # default: the checkpoint's dataset
    batch_size = 8 # rows per forward
    seed = 1337 # gate sampling: batch k is seeded seed + k
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'
    exec(open('configurator.py').read()) # overrides from command line or config file
    # -----------------------------------------------------------------------------
    ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}.get(dtype)
    if ptdtype is None:
        raise SystemExit(f"eval.py: --dtype={dtype}: use float32, bfloat16 or float16")
    for k in ('batch_size', 'limit'):
        if globals()[k] <= 0:
            raise SystemExit(f"eval.py: --{k}={globals()[k]} must be positive")
    if device.startswith('cuda') and not torch.cuda.is_available():
        raise SystemExit(f"eval.py: --device={device} but this PyTorch sees no CUDA GPU; use --device=cpu")
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    ctx = nullcontext() if dtype == 'float32' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    names = [t.strip() for t in tasks.split(',') if t.strip()]
    if not names:
        raise SystemExit("eval.py: --tasks is empty; e.g. --tasks=fineweb,piqa,hellaswag,arc_easy,lambada")

    model, checkpoint = load_checkpoint(out_dir, device, 'eval.py')
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    cfg = checkpoint['config']
    enc = None
    if cfg.get('prescribe') == 'bpe': # trained on BPE boundaries: evaluated on them (they look ahead, see model.py)
        import tiktoken
        try:
            enc = tiktoken.get_encoding(cfg['bpe_encoding'])
        except Exception as e:
            raise SystemExit(f"eval.py: cannot load tiktoken encoding '{cfg['bpe_encoding']}' of this BPE-guided "
                             f"model ({type(e).__name__}); no network? set TIKTOKEN_CACHE_DIR to a cached copy")
    gater = 'bpe (prescribed)' if enc else model.config.gater
    gates_note = (f"gates: {gater} samples them, one sample per row, batch k seeded {seed} + k" if gater in STOCHASTIC
                  else f"gates: {gater}, deterministic")

    if 'fineweb' in names: # its data first: a missing split fails before the slow harness index is built
        path = os.path.join(data_dir or cfg.get('data_dir', 'data'), dataset or cfg['dataset'])
        if not os.path.exists(os.path.join(path, f'{split}_offsets.npy')):
            name = dataset or cfg['dataset']
            raise SystemExit(f"eval.py: no {split} split in {path} ({split}_offsets.npy); make it with `python "
                             f"prepare.py {name}` (fineweb and codeparrot have one), or pass --split=val")
        data = np.memmap(os.path.join(path, f'{split}.bin'), dtype=np.uint8, mode='r')
        offsets = np.load(os.path.join(path, f'{split}_offsets.npy'))
    lm_names = [PAPER_TASKS.get(t, t) for t in names if t != 'fineweb']
    harness, tm = load_tasks(lm_names, include_path) if lm_names else ({}, None)

    print(f"{ckpt_path}: iter {checkpoint['iter_num']}, {model.get_num_params() / 1e6:.2f}M parameters; {gates_note}")
    results = {}
    if 'fineweb' in names:
        n = min(limit, len(offsets) - 1)
        docs = [data[offsets[i]:offsets[i + 1]] for i in range(n)]
        r = fineweb_metrics(*split_rows(model, docs, batch_size, seed, ctx, enc))
        results['fineweb'] = dict(r, dataset=path, split=split)
    lm = ByteLM(model, batch_size, seed, ctx, enc)
    for t, name in zip([t for t in names if t != 'fineweb'], lm_names):
        results[t] = harness_task(lm, harness[name], tm, task_limit or None)

    print(f"{'task':<12}{'n':>7}{'bpb':>9}{'± se':>9}{'acc':>8}{'acc_norm':>10}   other")
    show = lambda v, w, f: f"{v:>{w}{f}}" if v is not None else f"{'-':>{w}}"
    for t, r in results.items():
        other = ', '.join(f"{k} {v:.4f}" for k, v in r.items() if k in BOUNDARY or k == 'corpus_bpb')
        other += f" ({r['dataset']} {r['split']})" if t == 'fineweb' else ''
        print(f"{t:<12}{r['n']:>7}{show(r['bpb'], 9, '.4f')}{show(r['bpb_se'], 9, '.4f')}{show(r.get('acc'), 8, '.4f')}"
              f"{show(r.get('acc_norm'), 10, '.4f')}   {other}")
    nan_to_none = lambda v: None if isinstance(v, float) and math.isnan(v) else v # JSON has no NaN
    results = {t: {k: nan_to_none(v) for k, v in r.items()} for t, r in results.items()}
    out = dict(command=' '.join([os.path.basename(sys.executable), *sys.argv]), checkpoint=ckpt_path,
               iter_num=checkpoint['iter_num'], gate_seed=seed, gates=gates_note, tasks=results)
    with open(os.path.join(out_dir, 'eval.json'), 'w') as f:
        json.dump(out, f, indent=1, default=float)
    print(f"wrote {os.path.join(out_dir, 'eval.json')}")
