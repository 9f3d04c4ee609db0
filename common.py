"""
What the scripts share that is not the network: checkpoints, the corpus files, BPE guidance, devices, CPU threads and
GPU peak FLOPs. model.py holds the byte U-Net alone; train.py, sample.py, eval.py and experiments.py import from here.
"""

import os
import re
import time
from itertools import accumulate

import numpy as np
import torch

from model import ByteUNet, UNetConfig

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


def load_checkpoint(out_dir, device, script):
    """ out_dir/ckpt.pt (train.py's) -> the model, in eval mode on device, and the checkpoint dict; a missing or
        unreadable file ends `script` with one line naming it, not a traceback """
    path = os.path.join(out_dir, 'ckpt.pt')
    if not os.path.exists(path):
        raise SystemExit(f"{script}: no checkpoint {path}; train one first: python train.py --out_dir={out_dir}")
    try: # on the CPU first: a checkpoint from any device loads, and the device holds one copy, not two
        checkpoint = torch.load(path, map_location='cpu', weights_only=True)
        model = ByteUNet(UNetConfig(**checkpoint['model_args']))
        model.load_state_dict(checkpoint['model']) # train.py saves the uncompiled raw_model's state_dict
        model = model.eval().to(device)
    except Exception as e: # a truncated file, another format, a device that is not there
        why = str(e).partition('\n')[0]
        raise SystemExit(f"{script}: cannot load {path}: {type(e).__name__}: {why}")
    return model, checkpoint


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

def load_split(data_path, split, remake):
    """ the bytes of a split and its document boundaries, checked: a broken file is one line, not a wrong run """
    path = os.path.join(data_path, f'{split}_offsets.npy')
    try:
        off = np.load(path)
    except Exception as e: # not an .npy file at all
        raise SystemExit(f"train.py: {path} is not a NumPy offsets file ({type(e).__name__}); {remake}")
    size = os.path.getsize(os.path.join(data_path, f'{split}.bin'))
    if off.ndim != 1 or off.dtype.kind not in 'iu' or len(off) < 2 or off[0] != 0 or np.any(np.diff(off) <= 0):
        raise SystemExit(f"train.py: {path} is not n_docs+1 increasing integers from 0 ({off.dtype} {off.shape}); "
                         f"{remake}")
    if off[-1] != size:
        raise SystemExit(f"train.py: {path} ends at byte {off[-1]:,} but {split}.bin has {size:,} bytes; {remake}")
    return np.memmap(os.path.join(data_path, f'{split}.bin'), dtype=np.uint8, mode='r'), off.astype(np.int64)


def row_index(off, w):
    """ document boundaries -> (start, length) of every row, each document cut into consecutive windows of w bytes,
        e.g. off=[0, 5, 7], w=2 -> start [0, 2, 4, 5], length [2, 2, 1, 2]; numpy only, O(rows) memory """
    k = -(-np.diff(off) // w) # rows per document, ceil(n / w)
    j = np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k) # window number inside its document
    start = np.repeat(off[:-1], k) + j * w
    return start, np.minimum(np.repeat(off[1:], k) - start, w)


def open_corpus(data_dir, dataset, block_size):
    """ data_dir/dataset -> data, row_start, row_len: per split (train, val) its bytes, and the start and length of
        every row, a row being BOS + a window of up to block_size-1 bytes of one document (a document of n bytes gives
        ceil(n/(block_size-1)) rows). Anything missing or broken is one line naming the file and the command that
        makes it """
    data_path = os.path.join(data_dir, dataset)
    needed = [os.path.join(data_path, f'{s}{x}') for s in ('train', 'val') for x in ('.bin', '_offsets.npy')]
    named = dataset in ('pycode', 'pydocs', 'fineweb', 'codeparrot') # the corpora prepare.py makes by name
    remake = (f"make it with `python prepare.py {dataset} --out_dir={data_path}`" if named else
              f"make it from a folder of files with `python prepare.py files --path=DIR --out_dir={data_path}`")
    if not named and not any(map(os.path.exists, needed)): # a name prepare.py does not know: say what is there
        there = sorted(d for d in os.listdir(data_dir) if os.path.exists(os.path.join(data_dir, d, 'train.bin'))) \
            if os.path.isdir(data_dir) else []
        raise SystemExit(f"train.py: --dataset={dataset} is not in {data_dir} (it has: {', '.join(there) or 'none'});"
                         f" {remake}")
    for f in needed:
        if not os.path.exists(f):
            raise SystemExit(f"train.py: {f} is missing: {remake}")
    data, row_start, row_len = {}, {}, {}
    for split in ('train', 'val'):
        data[split], off = load_split(data_path, split, remake)
        row_start[split], row_len[split] = row_index(off, block_size - 1)
    return data, row_start, row_len
