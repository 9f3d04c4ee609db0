"""
Evaluate a checkpoint as the paper reports it: bits-per-byte on the test split of its dataset (the paper's FineWeb
protocol) and the gold answer's bits-per-byte on PIQA, HellaSwag, ARC-Easy and LAMBADA through lm-evaluation-harness.
$ python eval.py --out_dir=out --tasks=bpb,piqa,hellaswag,arc_easy,lambada # a table, out_dir/eval.json and eval.jsonl
$ python eval.py --out_dir=out --tasks=bpb --split=val --limit=500         # a dataset without a test split
$ python eval.py --out_dir=out --tasks=my_piqa --include_path=my_tasks/    # a task YAML of your own (local data)
$ python eval.py --out_dir=out --tasks=ai2_arc                             # a group or tag: one row per task
bpb (also named fineweb, the paper's data): the paper's test protocol on the checkpoint's dataset, whichever it is: the
first `limit` documents of the split, each row BOS + the document's first block_size-1 bytes; bpb is the mean of
per-document bpb (the paper's headline), corpus_bpb the byte-weighted one. train.py's val bpb is another measure of
the same model: byte-weighted, over eval_iters x batch_size rows spread over all of val (the later windows of long
documents too), so the two differ; the gates are drawn alike (eval mode, uncapped; seed + k for batch k). The other
tasks: zero-shot through the harness with the ByteLM adapter below; bpb there is the bits of the gold choice's
continuation over its bytes. Stochastic gaters draw one gate sample per row, seeded torch.manual_seed(seed + k) for
batch k. bpb needs only torch and numpy; lm_eval (and datasets) are imported only for the other tasks. When the hub
cannot be reached, they run offline (HF_HUB_OFFLINE=1): cached and local data only, and one line for the rest.
Each run's results go to out_dir/eval.json and, one line per run, to out_dir/eval.jsonl, which keeps the earlier ones.
"""
import difflib
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import urllib.parse
import urllib.request
from contextlib import nullcontext
from pathlib import Path
if __name__ == '__main__': # Ctrl-C: one line, not a traceback; the results are written at the end, whole
    signal.signal(signal.SIGINT, lambda *_: sys.exit("eval.py: interrupted (Ctrl-C); nothing was written"))

import numpy as np
import torch

from model import boundary_counts, boundary_metrics, next_byte_nll
from common import KEYS, bpe_gates, check_config, check_device, check_folder, load_bpe_or_exit, load_checkpoint, \
    set_threads
from model import BOS as _BOS # '_': a constant, not a config key for the configurator

PAPER_TASKS = {'piqa': 'piqa', 'hellaswag': 'hellaswag', 'arc_easy': 'arc_easy', 'lambada': 'lambada_openai'}
BPB = ('bpb', 'fineweb') # the paper's test protocol, on any dataset; 'fineweb', the paper's name for it, is kept
BOUNDARY = ('rate', 'ws_boundary', 'word_boundary', 'boundary_precision') # bpb: model.boundary_metrics
STOCHASTIC = ('uniform', 'bernoulli', 'linear', 'sequential', 'nawrot') # gaters that sample their gates
TEST_SPLIT = ('fineweb', 'codeparrot') # the datasets prepare.py gives a test split; pycode and files never have one
SCORED = ('multiple_choice', 'loglikelihood', 'loglikelihood_rolling') # the output types ByteLM can run


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


def bpb_metrics(nll, nbytes, counts):
    """ per-document bpb -> the paper's mean, its standard error (population std / sqrt(n), as the paper's script),
        the byte-weighted corpus bpb, and model.boundary_metrics over the real positions (rate, ws_boundary, ...) """
    keep = nbytes > 0 # an empty document has no bpb
    bpb = nll[keep] / nbytes[keep] / math.log(2)
    return dict(bpb=bpb.mean(), bpb_se=bpb.std() / math.sqrt(len(bpb)), n=int(keep.sum()),
                corpus_bpb=nll.sum() / nbytes.sum() / math.log(2), bytes=int(nbytes.sum()), **boundary_metrics(counts))


class ByteLM:
    """ lm-evaluation-harness's model interface for a ByteUNet (harness_lm makes it an lm_eval LM). A request's text
        is its UTF-8 bytes; a row is BOS + the last block_size-1 bytes of context + continuation (left-truncated, BOS
        kept in front as in training). Requests are scored in batches of similar length; batch k draws its gates with
        seed + k. """

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


def harness_lm(*args):
    """ ByteLM as an lm_eval LM (simple_evaluate checks isinstance), lm_eval imported only here """
    from lm_eval.api.model import LM

    class HarnessByteLM(ByteLM, LM):
        pass
    return HarnessByteLM(*args)



def hub_reachable(timeout=3.0):
    """ does a TCP connection to the hub (HF_ENDPOINT, or the https proxy in between) open within `timeout` seconds?
        In a thread, since a DNS lookup ignores socket timeouts """
    url = urllib.request.getproxies().get('https') or os.environ.get('HF_ENDPOINT') or 'https://huggingface.co'
    u, ok = urllib.parse.urlsplit(url if '//' in url else '//' + url), []

    def connect():
        try:
            socket.create_connection((u.hostname, u.port or (80 if u.scheme == 'http' else 443)), timeout).close()
            ok.append(True)
        except Exception: # no route, no DNS, a bad port: unreachable
            pass
    t = threading.Thread(target=connect, daemon=True)
    t.start()
    t.join(timeout)
    return bool(ok)


_DECL = re.compile(r'^["\']?(task|group|tag)["\']?:[ \t]*([^\n#]*)((?:\n[ \t]*-[^\n#]*)*)', re.M) # a name, or a list


def scan_tasks(roots):
    """ [(folder, whole)] -> {name: folders}: every task, group and tag name declared at the top of a task YAML
        (`task: x`, `"group": "x"`, `tag: [x, y]` or a list), and the tags of the templates they include (files with
        no extension, like _template_yaml), by a text scan of a few seconds (the harness's own index parses its ~14k
        YAMLs with their includes: 20-135 s). A folder is the first level under the root (lm-eval's tasks/arc,
        tasks/mmlu) or, when `whole`, the root itself (an --include_path) """
    found = {}
    for root, whole in roots:
        for p in sorted(p for p in Path(root).rglob('*') if p.suffix in ('.yaml', '') and p.is_file()):
            folder = str(root) if whole else str(root / p.relative_to(root).parts[0])
            for key, value, items in _DECL.findall(p.read_text(errors='replace')):
                value = value.strip()
                if key != 'tag' and (value.startswith('[') or p.suffix != '.yaml'): # a group's members; a template
                    continue
                for name in re.split(r'[\[\],]', value) + (items.split('\n') if key == 'tag' else []):
                    if name := name.strip(' \t-\'"'):
                        found.setdefault(name, set()).add(folder)
    return found


def check_tasks(names, include_path=''):
    """ harness names -> {name: folders} from scan_tasks, or one line, in seconds: lm_eval is missing, the
        --include_path is not a folder, or a name is unknown (with the closest ones) """
    try:
        import lm_eval # the package alone is light; its TaskManager imports datasets, after the offline check
    except ImportError as e:
        raise SystemExit(f"eval.py: --tasks={','.join(names)} needs lm-evaluation-harness ({e}): pip install lm-eval; "
                         f"--tasks=bpb runs without it") from None
    if include_path and not os.path.isdir(include_path):
        raise SystemExit(f"eval.py: --include_path={include_path} is not a folder; pass a folder of task YAMLs")
    roots = [(Path(lm_eval.__file__).parent / 'tasks', False)] + ([(Path(include_path), True)] if include_path else [])
    known = scan_tasks(roots)
    for name in names:
        if name not in known:
            head = sorted((k for k in known if name.startswith(k + '_')), key=len)[-1:] # piqa_typo: piqa first
            near = head + difflib.get_close_matches(name, [*known, *BPB, *PAPER_TASKS], n=4)
            near = list(dict.fromkeys(near))[:4] # (piqa is both a task and a paper name)
            close = f" (closest: {', '.join(near)})" if near else ''
            raise SystemExit(f"eval.py: unknown task '{name}' in --tasks{close}; use bpb, "
                             f"{', '.join(PAPER_TASKS)}, any lm-eval task, group or tag, or one in --include_path")
    return known


def is_offline_error(e):
    """ an exception (or one it came from) that says the hub could not be reached """
    while e is not None:
        name, text = type(e).__name__, str(e).lower()
        if isinstance(e, ConnectionError) or 'Offline' in name or 'Connect' in name or 'offline' in text \
                or "couldn't reach" in text or 'resolve' in text:
            return True
        e = e.__cause__ or e.__context__
    return False


def reached(tm, names):
    """ the names and every name their groups list as members, through nested groups (tm None: the names) """
    seen, todo = set(), list(names)
    while todo:
        if (n := todo.pop()) in seen:
            continue
        seen.add(n)
        e = tm.task_index.get(n) if tm else None
        members = e.cfg.get('task') if e is not None and e.kind.name == 'GROUP' else None
        for m in members if isinstance(members, list) else []:
            todo += [m] if isinstance(m, str) else [m[k] for k in ('task', 'group') if isinstance(m.get(k), str)]
    return seen


def load_tasks(names, known, include_path=''):
    """ harness task, group or tag names (all in `known`, scan_tasks's) -> {name: [Task, ...]} with their data loaded,
        and the TaskManager. The harness indexes only the folders that declare the names and their groups' members
        (seconds, not the 20-135 s of its whole index), an --include_path last, so that it overrides. A group or tag
        is its tasks, or one line when some of them generate text. One-line errors: no network, no data """
    from lm_eval.tasks import TaskManager
    inc = str(Path(include_path)) if include_path else None
    dirs, tm = set(), None
    while not (need := set().union(*(known.get(n, set()) for n in reached(tm, names)))) <= dirs:
        dirs |= need # a group's members may live in other folders: index those too, until nothing new is reached
        tm = TaskManager(include_path=sorted(dirs - {inc}) + ([inc] if inc else []), include_defaults=False)
    jobs = {}
    for name in names:
        e = tm.task_index.get(name)
        if e is not None and e.kind.name == 'TASK' and (e.cfg or {}).get('output_type', SCORED[0]) not in SCORED:
            raise SystemExit(f"eval.py: task '{name}' generates text ({e.cfg['output_type']}), which a likelihood "
                             f"scorer cannot run; use a multiple-choice or loglikelihood task") # before its data
        try:
            jobs[name] = list(tm.load([name])['tasks'].values()) # builds the tasks, which downloads their data
        except Exception as e:
            why = str(e).partition('\n')[0][:200]
            if is_offline_error(e):
                raise SystemExit(f"eval.py: cannot fetch the data of task '{name}' from the Hugging Face hub: no "
                                 f"network ({type(e).__name__}: {why}); to run offline, point a task at a local copy: "
                                 f"a YAML with dataset_path: json and dataset_kwargs: {{data_files: {{validation: "
                                 f"FILE.jsonl}}}}, passed with --include_path=DIR (README: reproducing the paper's "
                                 f"table)")
            raise SystemExit(f"eval.py: cannot load task '{name}': {type(e).__name__}: {why}")
        if not jobs[name]:
            raise SystemExit(f"eval.py: '{name}' in --tasks holds no tasks; name its tasks instead")
        gen = [t.task_name for t in jobs[name] if getattr(t, 'OUTPUT_TYPE', None) not in SCORED]
        if gen and tm.task_index[name].kind.name in ('TASK', 'PY_TASK'):
            raise SystemExit(f"eval.py: task '{name}' generates text ({jobs[name][0].OUTPUT_TYPE}), which a "
                             f"likelihood scorer cannot run; use a multiple-choice or loglikelihood task")
        if gen:
            kind, have = tm.task_index[name].kind.name.lower(), sorted(t.task_name for t in jobs[name])
            rest = sorted(set(have) - set(gen))
            raise SystemExit(f"eval.py: {kind} '{name}' holds {len(have)} tasks ({', '.join(have)}), of which "
                             f"{', '.join(sorted(gen))} generate{'s' * (len(gen) == 1)} text, which a likelihood "
                             f"scorer cannot run; "
                             + (f"pass the others: --tasks={','.join(rest)}" if rest else "none can run here"))
    return jobs, tm


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


def read_meta(path):
    """ data/NAME/meta.json, prepare.py's record of the data (source, revision, args, splits), or None without one """
    f = os.path.join(path, 'meta.json')
    if not os.path.exists(f):
        return None
    try:
        meta = json.load(open(f))
    except (OSError, ValueError) as e:
        raise SystemExit(f"eval.py: cannot read {f} ({type(e).__name__}: {str(e)[:100]}); rerun prepare.py to write "
                         f"it again, or remove it") from None
    if not isinstance(meta, dict):
        raise SystemExit(f"eval.py: {f} is not prepare.py's meta.json (not a JSON object); rerun prepare.py, or "
                         f"remove it")
    return meta


def split_error(path, name, split):
    """ the one line for a missing split: pycode and files datasets never have a test split, so say --split=val """
    have = sorted(f[:-len('_offsets.npy')] for f in os.listdir(path) if f.endswith('_offsets.npy')) \
        if os.path.isdir(path) else []
    if split == 'test' and name not in TEST_SPLIT:
        return (f"eval.py: {name} has no test split (prepare.py makes one for {' and '.join(TEST_SPLIT)} only); "
                f"pass --split=val" + ('' if have else f", after `python prepare.py {name}` has made {path}"))
    if not have:
        return f"eval.py: no dataset in {path}; make it with `python prepare.py {name}`"
    fix = f"make it with `python prepare.py {name}`, or " if split == 'test' else ''
    return f"eval.py: no {split} split in {path} (it has {', '.join(have)}); {fix}pass --split={have[-1]}"


if __name__ == '__main__': # the script; the functions above can be imported by the tests
    if hasattr(sys.stdout, 'reconfigure'): # (not a StringIO, in-process) progress reaches a pipe at once, and argv's
        sys.stdout.reconfigure(line_buffering=True, errors='surrogateescape') # bytes that are not UTF-8 print as given
    # -----------------------------------------------------------------------------
    out_dir = 'out' # reads out_dir/ckpt.pt, writes out_dir/eval.json and adds a line to out_dir/eval.jsonl
    tasks = 'bpb,piqa,hellaswag,arc_easy,lambada' # bpb: the paper's test protocol (or fineweb); others: lm-eval names
    split = 'test' # bpb: the split of the checkpoint's dataset ('val' for a dataset without a test split)
    limit = 4000 # bpb: the first `limit` documents (the paper: 4000 of FineWeb's 32,768 test documents)
    task_limit = 0 # harness tasks: only the first task_limit samples of each (0: all; for a quick look)
    include_path = '' # a folder of task YAMLs (e.g. tasks with local data, for a machine without network)
    data_dir = '' # default: the checkpoint's data_dir
    dataset = '' # default: the checkpoint's dataset
    batch_size = 8 # rows per forward
    seed = 1337 # gate sampling: batch k is seeded seed + k
    threads = 0 # CPU threads; 0: the cores other processes leave idle (common.set_threads, as train.py)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'
    exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configurator.py')).read()) # from any dir
    # -----------------------------------------------------------------------------
    check_config(globals(), 'eval.py') # every key against its row of common.KEYS (--help prints them)
    check_folder(out_dir, 'out_dir', 'eval.py') # eval.json is written there: one line now, not after the work
    ptdtype = getattr(torch, dtype)
    device_type = check_device(device, 'eval.py')
    set_threads(device_type, threads) # a busy machine: fewer threads
    ctx = nullcontext() if dtype == 'float32' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    names = [t.strip() for t in tasks.split(',') if t.strip()]
    if not names:
        raise SystemExit("eval.py: --tasks is empty; e.g. --tasks=bpb,piqa,hellaswag,arc_easy,lambada")
    lm_names = [PAPER_TASKS.get(t, t) for t in names if t not in BPB]
    known = check_tasks(lm_names, include_path) if lm_names else {} # an unknown name fails in seconds

    model, checkpoint = load_checkpoint(out_dir, device, 'eval.py')
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    cfg = checkpoint['config']
    path = os.path.join(data_dir or cfg.get('data_dir', 'data'), dataset or cfg['dataset'])
    meta = read_meta(path) # prepare.py's record of the data, shown under the table and kept in eval.json
    enc = None
    if cfg.get('prescribe') == 'bpe': # trained on BPE boundaries: evaluated on them (they look ahead, see model.py)
        enc = load_bpe_or_exit(cfg['bpe_encoding'], 'eval.py') # a tiktoken name or a .tiktoken file
    gater = 'bpe (prescribed)' if enc else model.config.gater
    drawn = gater in STOCHASTIC or gater.startswith('word_') and model.config.word_rate > 0 # (topped up at random)
    gates_note = (f"gates: {gater} samples them, one sample per row, batch k seeded {seed} + k" if drawn
                  else f"gates: {gater}, deterministic")

    if set(BPB) & set(names): # its data first: a missing split fails before the harness loads anything
        if not os.path.exists(os.path.join(path, f'{split}_offsets.npy')):
            raise SystemExit(split_error(path, dataset or cfg['dataset'], split))
        data = np.memmap(os.path.join(path, f'{split}.bin'), dtype=np.uint8, mode='r')
        offsets = np.load(os.path.join(path, f'{split}_offsets.npy'))
    if lm_names and not any(os.environ.get(k, '').lower() in ('1', 'true', 'yes', 'on')
                            for k in ('HF_HUB_OFFLINE', 'HF_DATASETS_OFFLINE')) and not hub_reachable():
        os.environ['HF_HUB_OFFLINE'] = os.environ['HF_DATASETS_OFFLINE'] = '1' # before datasets is imported: no retries
    harness, tm = load_tasks(lm_names, known, include_path) if lm_names else ({}, None)

    print(f"{ckpt_path}: iter {checkpoint['iter_num']}, {model.get_num_params() / 1e6:.2f}M parameters; {gates_note}")
    results = {}
    for t in [t for t in names if t in BPB][:1]: # under the name it was asked by
        n = min(limit, len(offsets) - 1)
        docs = [data[offsets[i]:offsets[i + 1]] for i in range(n)]
        r = bpb_metrics(*split_rows(model, docs, batch_size, seed, ctx, enc))
        results[t] = dict(r, dataset=path, split=split)
    lm = harness_lm(model, batch_size, seed, ctx, enc) if lm_names else None
    for t, name in zip([t for t in names if t not in BPB], lm_names):
        if len(harness[name]) > 1 or harness[name][0].task_name != name: # a group or tag: one row per task
            print(f"{t}: a {tm.task_index[name].kind.name.lower()} of {len(harness[name])} tasks: "
                  + ', '.join(task.task_name for task in harness[name]))
        for task in harness[name]:
            results[t if task.task_name == name else task.task_name] = harness_task(lm, task, tm, task_limit or None)

    w = max(12, *(len(t) + 2 for t in results))
    print(f"{'task':<{w}}{'n':>7}{'bpb':>9}{'± se':>9}{'acc':>8}{'acc_norm':>10}   other")
    show = lambda v, w, f: f"{v:>{w}{f}}" if v is not None else f"{'-':>{w}}"
    for t, r in results.items():
        other = ', '.join(f"{k} {v:.4f}" for k, v in r.items() if k in BOUNDARY or k == 'corpus_bpb')
        other += f" ({r['dataset']} {r['split']})" if t in BPB else ''
        print(f"{t:<{w}}{r['n']:>7}{show(r['bpb'], 9, '.4f')}{show(r['bpb_se'], 9, '.4f')}"
              f"{show(r.get('acc'), 8, '.4f')}{show(r.get('acc_norm'), 10, '.4f')}   {other}")
    if meta is not None: # where the data came from: prepare.py's meta.json
        args = meta.get('args')
        args = ' '.join(f"--{k}={v}" for k, v in args.items()) if isinstance(args, dict) else args
        print(f"data {path}: source {meta.get('source')}, revision {meta.get('revision') or 'not pinned'}, "
              f"prepare.py {args}")
    for t in [t for t in results if t in BPB]: # the question every reader asks
        print(f"{t}: the mean over {results[t]['n']} documents of {split} of each one's bits per byte, on its first "
              f"{model.config.block_size - 1} bytes (the paper's protocol, on this dataset); train.py's val bpb is "
              f"byte-weighted over eval_iters x batch_size rows spread over all of val, so the two differ")
    nan_to_none = lambda v: None if isinstance(v, float) and math.isnan(v) else v # JSON has no NaN
    results = {t: {k: nan_to_none(v) for k, v in r.items()} for t, r in results.items()}
    out = dict(command=' '.join([os.path.basename(sys.executable), *sys.argv]), checkpoint=ckpt_path,
               iter_num=checkpoint['iter_num'], gate_seed=seed, gates=gates_note, tasks=results, dataset=path,
               data=meta)
    signal.signal(signal.SIGINT, signal.SIG_IGN) # the results are in: a Ctrl-C now cannot cut the files short
    with open(os.path.join(out_dir, 'eval.json'), 'w') as f: # this run
        json.dump(out, f, indent=1, default=float)
    with open(os.path.join(out_dir, 'eval.jsonl'), 'a') as f: # and every run, one line each: nothing is lost
        f.write(json.dumps(out, default=float) + '\n')
    print(f"wrote {os.path.join(out_dir, 'eval.json')}, and added it to eval.jsonl")
