"""
What the scripts share that is not the network: the table of config keys, checkpoints, output folders, the corpus files,
BPE guidance, devices, CPU threads and GPU peak FLOPs. model.py holds the byte U-Net alone; train.py, sample.py, eval.py
and experiments.py import from here.
"""

import errno
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import fields
from itertools import accumulate

import numpy as np
import torch

from model import ByteUNet, UNetConfig, GATERS, DOWNSAMPLERS, UPSAMPLERS, PRESETS
from prepare import check_folder # an output folder: one line before the work if it cannot be made (torch-free)

try:
    import fcntl # the out_dir lock; Windows has none, and runs unlocked
except ImportError:
    fcntl = None

# -----------------------------------------------------------------------------
# every config key of train.py, sample.py, eval.py, bench.py and experiments.py, one row each: 'TYPE[, RULE]: why'. A RULE is `> N`,
# `>= N`, `in (a, b)` (brackets as in maths), `one of 'x', 'y'`, `a folder` (not empty, not a file), `a folder or ''`,
# `a path` ('~' expanded in these three), `a device` (one this machine has: check_device; `a device or ''` too), or
# `comma-separated[, each RULE]`, a list in a string whose items each hold to RULE (`each int > 0`, `each one of 'x'`).
# A key that means another thing in one script gets that script's own row, 'bench.py:iters': it holds the key there
# in place of the plain row 'iters', and nowhere else (rows_of). check_config holds a script's values to their rows
# after the configurator, before any folder or file is made, and the configurator's --help prints them.
one_of = lambda names: 'one of ' + ', '.join(f"'{n}'" for n in names)
KEYS = {
    'out_dir': "str, a folder: train.py writes ckpt.pt and log.jsonl there, sample.py and eval.py read its ckpt.pt",
    'eval_interval': "int > 0: iterations between evals on the val rows, each one saving a checkpoint",
    'log_interval': "int > 0: iterations between progress lines",
    'eval_iters': "int > 0: val batches per eval, eval_iters x batch_size rows",
    'eval_only': "bool: evaluate the model once and exit; ckpt.pt is never rewritten",
    'always_save_checkpoint': "bool: save at every eval, else only when the val loss improves",
    'init_from': f"str, {one_of(('scratch', 'resume', 'auto'))}: a new run, out_dir/ckpt.pt continued, or either",
    'max_bad_steps': "int > 0: non-finite steps in a row that stop the run",
    'wandb_log': "bool: log to Weights & Biases too (needs wandb)",
    'wandb_project': "str: the wandb project",
    'wandb_run_name': "str: the wandb run's name",
    'dataset': "str: data_dir/<dataset>/, made by prepare.py (eval.py: '' is the checkpoint's)",
    'data_dir': "str, a folder or '': the folder of the datasets (eval.py: '' is the checkpoint's)",
    'gradient_accumulation_steps': "int > 0: micro-batches per optimizer step, over all processes",
    'batch_size': "int > 0: rows per micro-batch, the batch baseline's rows (sample.py, eval.py: rows per forward)",
    'block_size': "int >= 2: bytes per row, BOS included",
    'n_embd': "int >= 2: the width of every level: n_head heads of an even size (RoPE)",
    'n_head': "int > 0: attention heads",
    'n_down': "int >= 0: byte layers before the gater",
    'n_mid': "int >= 0: chunk layers",
    'n_up': "int >= 0: byte layers after the upsampler",
    'window': "int >= 0: keys a byte layer attends to, the query included; 0: all of them",
    'attn_softcap': "float >= 0: attention scores s -> c tanh(s/c); 0: no cap",
    'gater': f"str, {one_of(GATERS)}: where chunks end",
    'downsampler': f"str, {one_of(DOWNSAMPLERS)}: a chunk's one vector",
    'upsampler': f"str, {one_of(UPSAMPLERS)}: what a byte reads of its chunk",
    'rate': "float in (0, 1): the share of bytes that end a chunk, the gater's prior and the rate loss's target",
    'word_rate': "float in [0, 1): word gaters: their rule's own share; > 0 tops it up (or thins it) to rate",
    'filter_size': "int > 0: w, the sequential gate sees the w-1 gates before it",
    'gate_scale': "float > 0: s, the scale of the sequential gate's logit",
    'gate_softcap': "float >= 0: the gate logit's cap in training; 0: no cap",
    'nawrot_temp': "float > 0: the nawrot gater's relaxed Bernoulli temperature",
    'prescribe': f"str, {one_of(('', 'bpe'))}: boundaries from outside the model: none, or BPE guidance",
    'bpe_encoding': "str: prescribe='bpe': a tiktoken encoding, or a .tiktoken file",
    'early_weight': "float in [0, 1]: lambda_e, the early-exit head's share of the byte loss",
    'pg_weight': "float >= 0: lambda_pi, the weight of the REINFORCE loss",
    'gamma': "float in [0, 1]: the discount of later rewards",
    'early_exit_reward': "bool: the reward is CE_early - CE, else -CE",
    'batch_baseline': "bool: subtract the batch mean reward at each position",
    'rate_loss': f"str, {one_of(('ours', 'hnet', 'binomial'))}: the rate loss: ours, H-Net's ratio, Nawrot's prior",
    'rate_weight': "float >= 0: lambda_c, the weight of the rate loss",
    'gate_warmup': "int >= 0: learned gaters: the first steps on random boundaries, the gater's losses off (a lever)",
    'draws': "int > 0: learned gaters: each row read draws times, each draw centred by its others (a lever)",
    'learning_rate': "float > 0: AdamW's peak learning rate",
    'max_iters': "int >= 0: the optimizer steps of the run",
    'weight_decay': "float >= 0: AdamW's, on the matrices and the embedding",
    'beta1': "float in [0, 1): AdamW's",
    'beta2': "float in [0, 1): AdamW's",
    'grad_clip': "float >= 0: the cap on the global gradient norm, once per optimizer step; 0: no clipping",
    'warmup_iters': "int >= 0: steps of linear warmup from 0.1 x learning_rate",
    'lr_decay_iters': "int >= 0: the step where the cosine reaches min_lr",
    'min_lr': "float >= 0: the learning rate after lr_decay_iters",
    'device': "str, a device: cpu, cuda, cuda:N or mps, one that this machine has",
    'dtype': f"str, {one_of(('float32', 'bfloat16', 'float16'))}: autocast's precision",
    'compile': "bool: torch.compile the model",
    'peak_flops': "float >= 0: MFU's denominator in FLOP/s; 0: the GPU's own, by its name",
    'seed': "int >= 0: the data order, the initial weights and the gate draws",
    'threads': "int >= 0: CPU threads; 0: the cores that other processes leave idle",
    # sample.py
    'start': "str: the prompt, or FILE:path for the bytes of a file",
    'num_samples': "int > 0: samples to draw",
    'max_new_tokens': "int >= 0: bytes generated per sample; num_samples x max_new_tokens <= 1e7 (memory)",
    'temperature': "float > 0: < 1 less random, > 1 more",
    'top_k': "int > 0: sample from the top_k most likely bytes",
    'show_boundaries': "bool: print a '|' after every byte that ends a chunk",
    'compare': "str: a tiktoken encoding whose tokens are shown under the chunks",
    'analyze': "str, a path: a file (or val, the checkpoint's val split) to measure the model on, no sampling",
    'vocab': "int >= 0: --analyze: the most frequent chunks shown beside word ends and the --compare BPE; 0: none",
    # eval.py
    'tasks': "str: comma-separated: bpb (the paper's test protocol on the checkpoint's data), lm-eval tasks",
    'split': "str: bpb: the split of the dataset (test; val for a dataset without one)",
    'limit': "int > 0: bpb: the first `limit` documents",
    'task_limit': "int >= 0: lm-eval tasks: the first task_limit samples of each; 0: all",
    'include_path': "str, a folder or '': a folder of your own task YAMLs",
    # bench.py, its own rows (device, block_size: the plain ones); the files a size or method needs, it checks itself
    'bench.py:table': f"str, {one_of(('sampler', 'forward', 'step', 'generate', 'gpu'))}: what to time; each table "
                      f"starts from its own values of the keys below (bench.py's TABLES)",
    'bench.py:sizes': f"str, comma-separated, each {one_of(('tiny', *PRESETS))}: model.PRESETS (config/size_NAME.py), "
                      f"or tiny: UNetConfig's",
    'bench.py:methods': "str, comma-separated: step, gpu: names of config/method_*.py, each one a train.py run",
    'bench.py:compiles': f"str, comma-separated, each {one_of(('False', 'True'))}: step, gpu: train.py --compile, each",
    'bench.py:dtypes': f"str, comma-separated, each {one_of(('float32', 'bfloat16', 'float16'))}: step, gpu: train.py "
                       f"--dtype, each",
    'bench.py:batch_size': "int > 0: rows per forward, or per step of train.py",
    'bench.py:iters': "int > 0: step, gpu: timed iterations of each train.py run (their median)",
    'bench.py:warmup': "int >= 0: step, gpu: untimed iterations before them (twice as many compiled)",
    'bench.py:data': "str: step, gpu: '' random bytes, every row full; or a dataset in data/ (e.g. pycode)",
    'bench.py:out_root': "str, a folder or '': step, gpu: the runs' out_dirs stay under it; '' a temporary folder",
    'bench.py:reps': "int > 0: sampler, forward: alternated rounds (their median); generate: rounds (the best)",
    'bench.py:gen_bytes': "int > 0: generate: bytes made from a 16-byte prompt",
    'bench.py:gen_points': "int >= 0: generate: > 0 times the re-run at this many row lengths, summed (not 1: the "
                           "first and the last byte)",
    'bench.py:threads': "int >= 0: torch threads of the tables timed in bench.py itself; 0: torch's default",
    'bench.py:seed': "int >= 0: the untrained weights, the random bytes and train.py's --seed",
    # experiments.py, its own rows (eval_iters, data_dir: the plain ones); the names of --runs, --ladder_methods and
    # --skip, and a paper size's config files, it checks itself
    'experiments.py:table': f"str, {one_of(('', 'ladder', 'levers', 'controls', 'ablations', 'english', 'paper_run'))}"
                            f": the table to train and tabulate ('': only --figure or --vocab)",
    'experiments.py:runs': "str: a subset of a table's runs, 'setting:seed,...'; '': every setting, every seed",
    'experiments.py:seeds': "str, comma-separated, each int >= 0: the seeds of every setting of a table",
    'experiments.py:jobs': "int > 0: train.py processes at once, one thread each",
    'experiments.py:retrain': "bool: train finished runs again, from scratch",
    'experiments.py:tabulate_only': "bool: train nothing; the tables from the records in assets/",
    'experiments.py:out_root': "str, a folder: the runs' out_dirs, out_root/<table>/<run>",
    'experiments.py:assets': "str, a folder: the records, the tables' JSON and the plots",
    'experiments.py:iters': "int >= 0: > 0: every run takes this many steps (a check of the machinery)",
    'experiments.py:device': "str, a device or '': train.py's --device, cpu, cuda, cuda:N or mps; '' its default",
    'experiments.py:ablate': f"str, {one_of(('learned', 'rows32', 'scale4', 'scale025', 'block512'))}: the setting "
                             f"of levers the ablations change",
    'experiments.py:rate_rows': "int > 0: controls: train rows the word rules' and the BPE's rates are measured on",
    'experiments.py:bpe_rate': "float in (0, 1): controls: the BPE's rate target, met by its number of merges",
    'experiments.py:bpe_pat': f"str, {one_of(('gpt2', 'words'))}: the BPE's pre-tokens: GPT-2's, or a whitespace run "
                              f"and the word after it",
    'experiments.py:bpe_max_merges': "int > 0: controls: the BPE trainer's merges at most",
    'experiments.py:figure': "bool: draw assets/segmentation.png",
    'experiments.py:vocab': "bool: write assets/vocab.md, the most frequent chunks of each --figure_run checkpoint",
    'experiments.py:figure_run': "str: the learned checkpoints of --figure and --vocab, comma-separated",
    'experiments.py:paper_size': "str: paper_run: a paper size, config/train_<size>_{random,sequential}.py",
    'experiments.py:paper_path': "str, a folder or '': paper_run: the .py files of its corpus ('': site-packages)",
    'experiments.py:paper_flags': "str: paper_run: more train.py flags for both runs",
    'experiments.py:rungs': f"str, comma-separated, each {one_of('1234')}: ladder: the rungs to train (the table: all)",
    'experiments.py:ladder_methods': "str: ladder: the methods to train, comma-separated ('': all, and the levers)",
    'experiments.py:skip': "str: ladder: runs left out, 'r<rung>/<method>,...'",
    'experiments.py:ladder_seeds': "int > 0: ladder: seeds 1..n of every method",
    'experiments.py:more_seeds': "int > 0: ladder: seeds 1..n of a method at the rungs experiments.MORE_SEEDS names",
    'experiments.py:ladder_compile': "bool: ladder: train.py --compile",
    'experiments.py:cal_seed': "int > 0: ladder: the seed a calibration target is tried on first",
    'experiments.py:cal_tol': "float in (0, 0.1): ladder: a target holds once its seeds' mean val rate is this close "
                              "to 0.2",
    'experiments.py:cal_tries': "int > 0: ladder: at most this many targets per method and rung",
    'experiments.py:predict': "bool: ladder: write the prediction of rung 4 from rungs 1-3 (once)",
    'experiments.py:boot': "int > 0: ladder: bootstrap refits of the prediction's intervals",
}


def key_rule(row):
    """ a row of KEYS -> its type, a test of a value, the rule's words and the reason: 'int > 0: rows' -> int, v > 0;
        'str, comma-separated, each int > 0: seeds' -> str, every item of v.split(',') an int > 0 """
    head, _, why = row.partition(': ')
    kind, _, rule = head.partition(' ')
    kind = {'int': int, 'float': float, 'bool': bool, 'str': str}[kind.rstrip(',')]
    finite = lambda v: kind is not float or math.isfinite(v) # 1e999 is inf
    if rule.startswith('comma-separated'): # each item as a row of its own: 'int > 0', 'str, one of ...', 'str'
        each = rule.partition(', each ')[2]
        item, item_ok = key_rule(each if each.startswith(('int ', 'float ')) else f"str, {each}".rstrip(', '))[:2]
        def ok(v):
            try:
                return all(item_ok(item(x)) for x in v.split(','))
            except ValueError: # not a number
                return False
    elif rule.startswith('one of '):
        ok = lambda v: v in re.findall(r"'([^']*)'", rule)
    elif m := re.fullmatch(r'in ([\[(])(\S+), (\S+)([\])])', rule):
        lo, hi = float(m[2]), float(m[3])
        ok = lambda v: finite(v) and (lo < v if m[1] == '(' else lo <= v) and (v < hi if m[4] == ')' else v <= hi)
    elif m := re.fullmatch(r'(>=?) (\S+)', rule):
        ok = lambda v: finite(v) and (v >= float(m[2]) if m[1] == '>=' else v > float(m[2]))
    else: # a folder is not a file; '' only where the rule says so (a path: none)
        ok = lambda v: ('folder' not in rule or not os.path.isfile(os.path.expanduser(v))) and \
            (v or rule not in ('a folder', 'a device'))
    return kind, ok, rule, why


def rows_of(script):
    """ the rows of KEYS that hold a script's keys, by key: its own ('bench.py:iters' as 'iters'), then the plain rows
        of the keys it has none of its own for. Another script's own rows are not among them """
    own = {k.partition(':')[2]: row for k, row in KEYS.items() if k.startswith(script + ':')}
    return {**own, **{k: row for k, row in KEYS.items() if ':' not in k and k not in own}}


def check_config(ns, script):
    """ the config keys of a script (ns: its globals after the configurator) against their rows of KEYS (rows_of): for
        the first that does not fit, one line naming the key, its value and what its row allows; '~' expanded in
        paths, in ns. A device must be on this machine, wandb there for wandb_log, and when all of UNetConfig's fields
        are keys (train.py), their combination must be a model """
    for k, row in rows_of(script).items():
        if k not in ns:
            continue
        kind, ok, rule, why = key_rule(row)
        if type(ns[k]) is not kind and not (kind is float and type(ns[k]) is int): # a config file's value too
            raise SystemExit(f"{script}: --{k}={ns[k]!r} is {type(ns[k]).__name__}, not {row}")
        if not ok(ns[k]):
            finite = kind is not float or math.isfinite(ns[k])
            raise SystemExit(f"{script}: --{k}={ns[k]} must be {'' if finite else 'finite and '}{rule}: {why}")
        if rule.startswith(('a folder', 'a path')):
            ns[k] = os.path.expanduser(ns[k])
        if rule.startswith('a device') and ns[k]:
            check_device(ns[k], script)
    if ns.get('wandb_log'): # its import, now: not after out_dir and log.jsonl are made
        try:
            import wandb
        except ImportError:
            raise SystemExit(f"{script}: --wandb_log=True needs wandb: pip install wandb, or drop it") from None
    model_keys = [f.name for f in fields(UNetConfig) if f.name != 'vocab_size']
    if all(k in ns for k in model_keys):
        try:
            UNetConfig(**{k: ns[k] for k in model_keys}) # n_embd and n_head together, and the variants' own checks
        except ValueError as e:
            raise SystemExit(f"{script}: {e}") from None


def lock(out_dir, script, take=True):
    """ a run's hold on out_dir: an exclusive flock on out_dir/lock, which holds the pid and which the kernel drops when
        the process ends, killed too (a stale lock file blocks nothing) -> the open file, kept while the run lasts. Held
        by another process: one line. take=False only looks, making nothing """
    path = os.path.join(out_dir, 'lock')
    if fcntl is None or not (take or os.path.exists(path)):
        return None
    f = open(path, 'a+')
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EACCES): # a file system without flock: unlocked, as on Windows
            return None
        f.seek(0)
        raise SystemExit(f"{script}: {out_dir} is in use by another train.py (pid {f.read().strip() or '?'}); wait for "
                         f"it to end, or stop it, or use another --out_dir") from None
    if not take:
        return f.close()
    f.truncate(0)
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def cpu_threads(share=1, window=0.2):
    """ intra-op threads for a CPU run: the cores that other processes left idle over the last `window` seconds (this
        process's own use subtracted), split among `share` processes of one job, at least 1. Threads that meet at every
        op's barrier stall whenever another process holds one of the cores: on 2 cores beside two busy processes, the
        quick start's steps took 8x their quiet time at 2 threads and 3x at 1 (dev/LOG.md, 2026-12-03) """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1
    def busy(): # CPU seconds used by every process (Linux's /proc/stat, all but idle and iowait), and by this one
        with open('/proc/stat') as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
        own = os.times()
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf('SC_CLK_TCK'), own.user + own.system
    try:
        (a, a_own), t0 = busy(), time.perf_counter()
        time.sleep(window)
        (b, b_own), t1 = busy(), time.perf_counter()
        others = max(0.0, (b - a) - (b_own - a_own)) / (t1 - t0)
    except (OSError, ValueError, AttributeError): # no /proc/stat (macOS, Windows): the load average, ours included
        others = os.getloadavg()[0] if hasattr(os, 'getloadavg') else 0.0
    return max(1, min(cores, round(cores - others)) // max(1, share))


def set_threads(device_type, threads=0, share=1):
    """ on a CPU, `threads` if set, else cpu_threads(share); OMP_NUM_THREADS without --threads is left as it is ->
        the new number of threads when it changed, else None """
    if device_type != 'cpu' or not (threads or 'OMP_NUM_THREADS' not in os.environ):
        return None
    n, was = threads or cpu_threads(share), torch.get_num_threads()
    torch.set_num_threads(n)
    return n if n != was else None


def check_device(device, script):
    """ --device -> its torch.device type ('cpu', 'cuda' or 'mps'), or one line ending `script` when this machine has
        no such device """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise SystemExit(f"{script}: --device={device} is not a device; use cpu, cuda, cuda:N or mps") from None
    n = torch.cuda.device_count() if dev.type == 'cuda' else 0
    if dev.type == 'cuda' and n == 0:
        raise SystemExit(f"{script}: --device={device} but this PyTorch sees no CUDA GPU; use --device=cpu")
    if dev.type == 'cuda' and (dev.index or 0) >= n:
        raise SystemExit(f"{script}: --device={device} but this PyTorch sees {n} CUDA GPU(s); use cuda:0..cuda:{n - 1}")
    if dev.type == 'mps' and not torch.backends.mps.is_available():
        raise SystemExit(f"{script}: --device={device} but MPS (Apple silicon) is not available; use --device=cpu")
    if dev.type not in ('cpu', 'cuda', 'mps'):
        raise SystemExit(f"{script}: --device={device}: {script} runs on cpu, cuda or mps")
    return dev.type


def read_checkpoint(path, script, fix, needs=()):
    """ train.py's ckpt.pt at path -> the checkpoint dict, on the CPU (a checkpoint from any device loads, and the
        device holds one copy, not two); a truncated or foreign file ends `script` with one line naming it and `fix`,
        never a traceback or torch's advice to unpickle it unsafely """
    try:
        checkpoint = torch.load(path, map_location='cpu', weights_only=True)
        UNetConfig(**checkpoint['model_args']) # a model this code can build
        [checkpoint[k] for k in ('model', 'config', 'iter_num', *needs)] # and the keys the caller reads
    except Exception as e: # cut short by a kill mid-copy, another program's file, a pickle of anything
        why = type(e).__name__ + ('' if 'weights_only' in str(e) else f": {str(e).partition(chr(10))[0][:150]}")
        raise SystemExit(f"{script}: {path} is truncated or not a nanotok checkpoint ({why}); {fix}") from None
    return checkpoint


def load_checkpoint(out_dir, device, script):
    """ out_dir/ckpt.pt (train.py's) -> the model, in eval mode on device, and the checkpoint dict; a missing or
        unreadable file ends `script` with one line naming it, not a traceback """
    path = os.path.join(out_dir, 'ckpt.pt')
    if not os.path.isfile(path):
        raise SystemExit(f"{script}: no checkpoint {path}; train one first: python train.py --out_dir={out_dir}")
    checkpoint = read_checkpoint(path, script, f"train one with python train.py --out_dir={out_dir}")
    try:
        model = ByteUNet(UNetConfig(**checkpoint['model_args']))
        model.load_state_dict(checkpoint['model']) # train.py saves the uncompiled raw_model's state_dict
        return model.eval().to(device), checkpoint
    except Exception as e: # weights of another shape, a device that is not there
        why = str(e).partition('\n')[0]
        raise SystemExit(f"{script}: cannot load {path}: {type(e).__name__}: {why}") from None


def save_checkpoint(checkpoint, path, script):
    """ written to a temporary name, then renamed: a crash mid-write never leaves a broken ckpt.pt. A write that fails
        (a full disk) ends `script` with one line, the last checkpoint left as it was """
    try:
        torch.save(checkpoint, path + '.tmp')
        os.replace(path + '.tmp', path)
    except (OSError, RuntimeError) as e: # torch's own writer fails with a RuntimeError
        if os.path.exists(path + '.tmp'):
            os.remove(path + '.tmp')
        last = "no checkpoint was saved" if not os.path.exists(path) else \
            "the last one is as it was: resume it with --init_from=resume when there is room"
        raise SystemExit(f"{script}: cannot write {path} ({getattr(e, 'strerror', None) or str(e)[:200]}); {last}")


# GPT-2's pre-tokenisation regex, as tiktoken's gpt2 uses it (its r50k_pat_str)
BPE_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
# a whitespace run with the non-whitespace run after it (as SentencePiece keeps a word's space): on code GPT-2's
# pre-tokens alone are ~0.25 per byte, so a BPE inside them cannot reach rate 0.2; inside these (~0.09) it can
WORDS_PAT = r"""\s*\S+|\s+"""


def load_bpe(name):
    """ a tiktoken encoding by name ('gpt2', 'o200k_base', ...) or, for a name ending in '.tiktoken', one built from
        that file (tiktoken's format: a line "base64(token) rank" per token) with GPT-2's pre-tokenisation BPE_PAT
        (WORDS_PAT for a name ending in '.words.tiktoken').
        Raises an exception whose message names the cause; the callers make it one line """
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        raise ImportError("tiktoken is not installed (BPE guidance needs it): pip install tiktoken") from None
    if not name.endswith('.tiktoken'):
        if name not in tiktoken.list_encoding_names():
            raise ValueError(f"unknown tiktoken encoding '{name}'; choose one of "
                             f"{', '.join(tiktoken.list_encoding_names())}, or a file NAME.tiktoken")
        return tiktoken.get_encoding(name)
    if not os.path.isfile(name):
        raise FileNotFoundError(f"no BPE file {name}")
    import hashlib
    with open(name, 'rb') as f: # tiktoken caches a file by its path: the hash makes an edited file be read again
        sha = hashlib.sha256(f.read()).hexdigest()
    ranks = load_tiktoken_bpe(name, expected_hash=sha)
    pat = WORDS_PAT if name.endswith('.words.tiktoken') else BPE_PAT
    return tiktoken.Encoding(name=os.path.basename(name)[:-len('.tiktoken')], pat_str=pat, mergeable_ranks=ranks,
                             special_tokens={})


def load_bpe_or_exit(name, script):
    """ load_bpe(name), or one line ending `script` that names the cause (no tiktoken, an unknown name, a bad file, a
        download that failed) """
    try:
        return load_bpe(name)
    except Exception as e:
        why = str(e).partition('\n')[0][:300]
        raise SystemExit(f"{script}: cannot load the BPE encoding '{name}': {why}") from None


def save_bpe(tokens, path):
    """ a BPE's learned tokens (ranks 256, 257, ... after the 256 bytes) -> path in tiktoken's format, "base64(token)
        rank" per line, as load_bpe reads it (tiktoken's own writer needs blobfile); written whole or not at all """
    import base64
    with open(path + '.tmp', 'w') as f:
        f.writelines(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate([bytes([i]) for i in range(256)]
                                                                                    + list(tokens)))
    os.replace(path + '.tmp', path)


def train_bpe(docs, max_merges, pat=BPE_PAT):
    """ a byte-level BPE as GPT-2's, trained by Hugging Face tokenizers: the documents (bytes) pre-tokenised by pat,
        then the most frequent pair of adjacent tokens merged, max_merges times (fewer if the pairs run out) -> the new
        tokens in rank order (ranks 256, 257, ...). Invalid UTF-8 bytes are left out, as bpe_ends makes each a token
        of its own. save_bpe writes them for load_bpe """
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    # by hand: GPT-2's byte <-> character table, in which tokenizers writes byte-level tokens but keeps to itself
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)] # the bytes that stand for themselves
    char = {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(sorted({*range(256)} - {*keep}))}}
    byte = {c: b for b, c in char.items()}
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pat), 'isolated'),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=256 + max_merges, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    # by hand: a str handed to tokenizers cannot hold an invalid byte (U+DC80..U+DCFF here), so the text is cut there
    parts = (p for d in docs for p in re.split('[\udc80-\udcff]', d.decode('utf-8', errors='surrogateescape')))
    tok.train_from_iterator(parts, trainer)
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1]) # the 256 bytes, then one token per merge
    return [bytes(byte[c] for c in t) for t, _ in vocab[256:]]


def bpe_ends(enc, data):
    """ bytes -> the positions where a token of the tiktoken encoding `enc` ends; an invalid UTF-8 byte is a token of
        its own: b'the cat' as 'the', ' c', 'at' -> {2, 4, 6}. BPE guidance in train.py and sample.py --compare """
    sizes = []
    for part in re.split('([\udc80-\udcff])', data.decode('utf-8', errors='surrogateescape')): # bad byte -> U+DCxx
        bad = '\udc80' <= part[:1] <= '\udcff' # one invalid byte
        sizes += [1] if bad else [len(b) for b in enc.decode_tokens_bytes(enc.encode_ordinary(part))]
    return {e - 1 for e in accumulate(sizes)}


def bpe_gates(enc, data, T):
    """ BPE guidance, as the paper's code: the row [BOS] + data gets a gate at the first byte of every token but the
        first, so a chunk ends where the next token begins -> (T,) floats. NOT causal: whether a token ends at byte t
        depends on the bytes after t, so this is an upper reference, not a tokenizer a model could learn.
        b'the cat' as 'the', ' c', 'at' -> row positions 4 and 6 (the ' ' and the 'a') """
    g = torch.zeros(T)
    g[[e + 2 for e in bpe_ends(enc, data) if e + 2 <= len(data)]] = 1.0 # data byte e+1 is row position e+2
    return g


PEAK_FLOPS = {'H100': 989e12, 'H200': 989e12, 'H800': 989e12, 'B200': 2250e12, 'A100': 312e12, 'A800': 312e12,
              'L40S': 362e12, 'L4': 121e12, 'A10': 125e12, 'RTX 4090': 165e12} # bf16 dense, the vendors' sheets


def gpu_peak_flops(name):
    """ bf16 dense peak of a GPU by its name ('NVIDIA H100 80GB HBM3' -> 989e12), None if it is not in PEAK_FLOPS;
        the first key in the name wins, so 'A100' is tried before 'A10' and 'L40S' before 'L4' """
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)

# -----------------------------------------------------------------------------
# the corpus files prepare.py writes: <split>.bin, the documents' bytes one after another, and <split>_offsets.npy,
# where each document starts (n_docs + 1 integers from 0 to the file's size)

def load_split(data_path, split, remake, script='train.py'):
    """ the bytes of a split and its document boundaries, checked: a broken file is one line, not a wrong run """
    path = os.path.join(data_path, f'{split}_offsets.npy')
    try:
        off = np.load(path)
    except Exception as e: # not an .npy file at all
        raise SystemExit(f"{script}: {path} is not a NumPy offsets file ({type(e).__name__}); {remake}")
    size = os.path.getsize(os.path.join(data_path, f'{split}.bin'))
    if off.ndim != 1 or off.dtype.kind not in 'iu' or len(off) < 2 or off[0] != 0 or np.any(np.diff(off) <= 0):
        raise SystemExit(f"{script}: {path} is not n_docs+1 increasing integers from 0 ({off.dtype} {off.shape}); "
                         f"{remake}")
    if off[-1] != size:
        raise SystemExit(f"{script}: {path} ends at byte {off[-1]:,} but {split}.bin has {size:,} bytes; {remake}")
    return np.memmap(os.path.join(data_path, f'{split}.bin'), dtype=np.uint8, mode='r'), off.astype(np.int64)


def row_index(off, w):
    """ document boundaries -> (start, length) of every row, each document cut into consecutive windows of w bytes,
        e.g. off=[0, 5, 7], w=2 -> start [0, 2, 4, 5], length [2, 2, 1, 2]; numpy only, O(rows) memory """
    k = -(-np.diff(off) // w) # rows per document, ceil(n / w)
    j = np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k) # window number inside its document
    start = np.repeat(off[:-1], k) + j * w
    return start, np.minimum(np.repeat(off[1:], k) - start, w)


def hms(s):
    """ seconds -> '3m05s', or '2h07m' from an hour on """
    return f"{s // 3600:.0f}h{s % 3600 // 60:02.0f}m" if s >= 3600 else f"{s // 60:.0f}m{s % 60:02.0f}s"


def make_pycode(data_path):
    """ data_path made by `python prepare.py pycode` (no network needed) when none of its files is there -> '', or
        prepare.py's one line when it could not (a data_dir it cannot write in). Stopped (train.py's Ctrl-C line),
        prepare.py stops too, by the terminal's Ctrl-C or by one passed on, and keeps nothing half-made """
    if any(os.path.exists(os.path.join(data_path, f'{s}{x}')) for s in ('train', 'val')
           for x in ('.bin', '_offsets.npy')):
        return ''
    print(f"{data_path} is missing: running `python prepare.py pycode --out_dir={data_path}` first")
    with subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'prepare.py'),
                           'pycode', f'--out_dir={data_path}'], stderr=subprocess.PIPE, text=True) as made:
        try:
            err = made.communicate()[1]
        except BaseException: # a Ctrl-C at the terminal reached prepare.py as well; one sent to train.py alone did not
            try:
                made.wait(1)
            except subprocess.TimeoutExpired:
                made.send_signal(signal.SIGINT)
            raise # (Popen waits for it to clean up)
    return err.strip() if made.returncode else ''


def restart_log(log_path, iter_num):
    """ train.py's log.jsonl for a run that starts at iteration iter_num (0: a fresh run): the rows before it kept, the
        ones a killed run wrote past its checkpoint dropped (they come again), with a line cut short by the kill """
    def before(line):
        try:
            return line.endswith('\n') and json.loads(line)['iter'] < iter_num
        except ValueError: # a line cut short by the kill
            return False
    rows = [line for line in open(log_path) if before(line)] if os.path.exists(log_path) else []
    with open(log_path + '.tmp', 'w') as f:
        f.writelines(rows)
    os.replace(log_path + '.tmp', log_path)


def open_corpus(data_dir, dataset, block_size, script='train.py'):
    """ data_dir/dataset -> data, row_start, row_len: per split (train, val) its bytes, and the start and length of
        every row, a row being BOS + a window of up to block_size-1 bytes of one document (a document of n bytes gives
        ceil(n/(block_size-1)) rows). Anything missing or broken is one line naming the file and the command that
        makes it, from `script` """
    data_path = os.path.join(data_dir, dataset)
    needed = [os.path.join(data_path, f'{s}{x}') for s in ('train', 'val') for x in ('.bin', '_offsets.npy')]
    named = dataset in ('pycode', 'pydocs', 'fineweb', 'codeparrot') # the corpora prepare.py makes by name
    remake = (f"make it with `python prepare.py {dataset} --out_dir={data_path}`" if named else
              f"make it from a folder of files with `python prepare.py files --path=DIR --out_dir={data_path}`")
    if not named and not any(map(os.path.exists, needed)): # a name prepare.py does not know: say what is there
        there = sorted(d for d in os.listdir(data_dir) if os.path.exists(os.path.join(data_dir, d, 'train.bin'))) \
            if os.path.isdir(data_dir) else []
        raise SystemExit(f"{script}: --dataset={dataset} is not in {data_dir} (it has: {', '.join(there) or 'none'});"
                         f" {remake}")
    for f in needed:
        if not os.path.exists(f):
            raise SystemExit(f"{script}: {f} is missing: {remake}")
    data, row_start, row_len = {}, {}, {}
    for split in ('train', 'val'):
        data[split], off = load_split(data_path, split, remake, script)
        row_start[split], row_len[split] = row_index(off, block_size - 1)
    return data, row_start, row_len
