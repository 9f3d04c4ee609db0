"""
Sample from a trained byte U-Net and look at the chunk boundaries it learned, after nanoGPT's sample.py.
$ python sample.py --out_dir=out --start="def main():" --show_boundaries # '|' where a chunk ends (colours on a tty)
$ python sample.py --out_dir=out --compare=gpt2       # ... and gpt2's BPE tokens of the same bytes underneath
$ python sample.py --out_dir=out --analyze=notes.txt  # no sampling: bpb, rate and the word-boundary metrics on a file
Boundaries live on byte positions: gate g_t = 1 means byte t ENDS a chunk, so '|' goes after byte t.
Needs only torch and numpy; --compare imports tiktoken (through common.load_bpe: a tiktoken name or a .tiktoken file).
"""
import codecs
import math
import os
import signal
import sys
from collections import Counter
from contextlib import nullcontext
if __name__ == '__main__': # Ctrl-C: one line, not a traceback (sample.py writes no file)
    signal.signal(signal.SIGINT, lambda *_: sys.exit("sample.py: interrupted (Ctrl-C)"))

import torch

from model import ByteUNet, UNetConfig, boundary_counts, boundary_metrics, decode, next_byte_nll
from common import KEYS, bpe_ends, bpe_gates, check_config, check_device, load_checkpoint, set_threads
from model import BOS as _BOS # '_': a constant, not a config key for the configurator

_COLOURS, _RESET = ('\033[48;5;24m', '\033[48;5;58m'), '\033[0m' # two backgrounds, alternating chunk by chunk


def render(data, gates, colour=False):
    r""" bytes and their gates -> text with one '|' per gate after the character holding it (a gate inside a
        multi-byte character, or an invalid sequence, goes after it); a literal '\' or '|' is escaped as '\\' or
        '\|', so the markers come out exactly. On a terminal, alternating backgrounds instead of markers:
        b'ab c|', gates 0 1 1 0 1 -> 'ab| |c\||' """
    dec = codecs.getincrementaldecoder('utf-8')(errors='replace') # byte by byte, the same text as decode()
    out, n, k, last = [], 0, 0, -1 # n gates not yet shown, k chunks so far, last chunk coloured
    for t, (b, g) in enumerate(zip(data, gates)):
        s, n = dec.decode(bytes([b]), final=t == len(data) - 1), n + int(g)
        if s and colour:
            out.append((_COLOURS[k % 2] if k != last else '') + s) # switch colour where a chunk starts
            last, k, n = k, k + n, 0
        elif s:
            out.append(s.replace('\\', '\\\\').replace('|', '\\|') + '|' * n)
            n = 0
    return ''.join(out) + (_RESET if colour and out else '')


def precision_recall(pred, ref):
    """ boundary sets (byte positions where a chunk/token ends) -> |pred & ref| / |pred|, |pred & ref| / |ref|, nan if
        empty: pred {1, 3, 4}, ref {3, 4, 7, 9} -> 2/3, 2/4 (learned against BPE; against words: boundary_metrics) """
    hit = len(pred & ref)
    return hit / len(pred) if pred else math.nan, hit / len(ref) if ref else math.nan


def chunks_of(data, ends):
    """ bytes and the positions of the bytes that end a chunk -> the chunks, the last one running to the end:
        b'ab cd', {1, 2} -> [b'ab', b' ', b'cd'] """
    cuts = [0] + sorted(e + 1 for e in ends if e < len(data) - 1) + [len(data)]
    return [data[a:b] for a, b in zip(cuts, cuts[1:])]


def show_chunk(c):
    """ a chunk as one visible cell: '␣' for a space, '↵' for a newline, '⇥' for a tab """
    return c.decode('utf-8', errors='replace').replace(' ', '␣').replace('\n', '↵').replace('\t', '⇥')


@torch.no_grad()
def analyze_bytes(model, data, batch_size, seed, ctx, enc=None):
    """ the model on rows [BOS] + consecutive block_size-1 byte windows of data (the last one right-padded and
        masked), as train.py's eval -> loss (nats/byte), bpb, bytes/chunk and model.py's boundary_metrics (rate,
        ws_boundary, word_boundary, boundary_precision) over real positions, and `chunks`: how often each chunk was
        cut (a Counter of bytes; each row cut apart, BOS left out); with a tiktoken encoding, on BPE-prescribed gates
        (a model trained with prescribe='bpe') """
    T, dev = model.config.block_size, model.lm_head.weight.device
    rows = [data[i:i + T - 1] for i in range(0, len(data), T - 1)]
    s, counts = torch.zeros(2, dtype=torch.float64), torch.zeros(6, dtype=torch.long) # nll, targets; boundary_counts
    chunks = Counter()
    for k in range(0, len(rows), batch_size):
        batch = rows[k:k + batch_size]
        X = torch.tensor([[_BOS, *r] + [0] * (T - 1 - len(r)) for r in batch], device=dev) # (B, T), 0 pads
        M = torch.arange(T, device=dev) <= torch.tensor([len(r) for r in batch], device=dev)[:, None] # real: BOS, bytes
        torch.manual_seed(seed + k // batch_size) # stochastic gaters: the same gates every run
        G = torch.stack([bpe_gates(enc, r, T) for r in batch]).to(dev) if enc else None
        with ctx:
            out = model(X, gates=G)
        nll = next_byte_nll(out['logits'], X) # (B, T-1)
        s += torch.stack([nll[M[:, 1:]].sum(), M[:, 1:].sum()]).cpu()
        counts += boundary_counts(X, out['gates'], M).cpu()
        for r, g in zip(batch, out['gates'][:, 1:].cpu().tolist()): # row position t + 1 holds data byte t
            chunks.update(chunks_of(r, {t for t in range(len(r)) if g[t]}))
    loss, b = (s[0] / s[1]).item(), boundary_metrics(counts)
    return dict(loss=loss, bpb=loss / math.log(2), bytes_per_chunk=1 / b['rate'], **b, chunks=chunks)


def vocabulary(columns, n):
    """ {name: Counter of chunks} -> the n most frequent chunks of each, side by side: rank, then per column the
        chunk, its count and its share of all that column's chunks """
    top = {k: c.most_common(n) for k, c in columns.items()}
    total = {k: sum(c.values()) for k, c in columns.items()}
    lines = ['| rank | ' + ' | '.join(f'{k} | count | share' for k in columns) + ' |',
             '|---|' + '---|---|---|' * len(columns)]
    for i in range(n):
        cells = [f"`{show_chunk(t[i][0])}` | {t[i][1]:,} | {t[i][1] / total[k]:.1%}" if i < len(t) else ' | | '
                 for k, t in top.items()]
        lines.append(f'| {i + 1} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def load_encoding(name):
    """ common.load_bpe(name): a tiktoken encoding (gpt2, ...) or a .tiktoken file. One line and exit when it cannot be
        (no tiktoken, an unknown name, a bad file); None and a line on stderr when only its download failed (no
        network): the learned boundaries still print """
    from common import load_bpe
    try:
        return load_bpe(name)
    except ImportError as e:
        raise SystemExit(f"sample.py: --compare={name}: {e}") from None # (the message says: pip install tiktoken)
    except Exception as e:
        why, c = str(e).partition('\n')[0], e
        while c is not None and not any(s in type(c).__name__ for s in ('Connection', 'Timeout', 'MaxRetry')):
            c = c.__cause__ or c.__context__ # a download that failed, here or in what it came from?
        if c is None:
            raise SystemExit(f"sample.py: --compare={name}: {why}") from None
        print(f"sample.py: cannot load tiktoken encoding '{name}' ({type(c).__name__}): no network and no cached file? "
              f"set TIKTOKEN_CACHE_DIR to a folder with a cached copy", file=sys.stderr)



def read_bytes(path):
    try:
        return open(path, 'rb').read()
    except OSError as e:
        raise SystemExit(f"sample.py: cannot read {path} ({e.strerror})") from None


if __name__ == '__main__': # the script; the functions above can be imported by the tests
    if hasattr(sys.stdout, 'reconfigure'): # (not a StringIO, in-process) each sample reaches a pipe when it is printed,
        sys.stdout.reconfigure(line_buffering=True, errors='surrogateescape') # and argv's bytes that are not UTF-8
    # -----------------------------------------------------------------------------
    out_dir = 'out' # reads out_dir/ckpt.pt
    start = "\n" # or "" (BOS alone), or "FILE:prompt.txt" (the file's bytes)
    num_samples = 3 # number of samples to draw
    max_new_tokens = 500 # bytes generated in each sample
    temperature = 0.8 # 1.0 = no change, < 1.0 = less random, > 1.0 = more random
    top_k = 256 # keep only the top_k most likely bytes; 256 keeps them all
    seed = 1337
    device = 'cuda' if torch.cuda.is_available() else 'cpu' # or 'cpu', 'cuda:0', 'cuda:1', ...
    dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'
    show_boundaries = False # print the learned chunks: '|' after each (alternating colours on a terminal)
    compare = '' # a tiktoken encoding (gpt2, cl100k_base, ...): its tokens under the chunks, precision and recall
    analyze = '' # a file, or 'val' (the checkpoint's val split): no sampling, print bpb, rate, bytes/chunk and the
    # word-boundary metrics of the model on it, and its vocabulary: the most frequent chunks, beside word ends at the
    # same rate and the --compare BPE's tokens
    vocab = 20 # --analyze: the number of most frequent chunks shown (0: none)
    batch_size = 8 # --analyze: rows per forward
    threads = 0 # CPU threads; 0: the cores other processes leave idle (common.set_threads, as train.py)
    exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configurator.py')).read()) # from any dir
    # -----------------------------------------------------------------------------
    check_config(globals(), 'sample.py') # every key against its row of common.KEYS (--help prints them)
    if num_samples * max_new_tokens > 10 ** 7: # generate keeps ~30 bytes of draws and ids per byte: 10 GB at 1e9
        raise SystemExit(f"sample.py: --num_samples={num_samples} x --max_new_tokens={max_new_tokens} must be at "
                         f"most 10,000,000 bytes (memory: generate holds about 30 bytes for each one)")
    device_type = check_device(device, 'sample.py')
    set_threads(device_type, threads) # a busy machine: fewer threads
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    ctx = nullcontext() if dtype == 'float32' else torch.amp.autocast(device_type, getattr(torch, dtype))

    model, checkpoint = load_checkpoint(out_dir, device, 'sample.py')
    block_size = model.config.block_size
    bpe_model = checkpoint['config'].get('prescribe') == 'bpe' # trained on BPE boundaries: evaluated on them too
    if bpe_model and not analyze:
        raise SystemExit(f"sample.py: {os.path.join(out_dir, 'ckpt.pt')} was trained on BPE boundaries "
                         f"(prescribe='bpe'), which look ahead in the text, so it cannot generate; use --analyze=FILE")
    compare = checkpoint['config']['bpe_encoding'] if bpe_model else compare # loaded below, as for --compare

    enc = load_encoding(compare) if compare else None # before sampling, so a typo fails fast
    if bpe_model and enc is None:
        raise SystemExit(f"sample.py: --analyze of a BPE-guided model needs the encoding '{compare}'")
    if analyze:
        cfg = checkpoint['config']
        if analyze == 'val': # the split train.py evaluates on
            analyze = os.path.join(cfg.get('data_dir', 'data'), cfg.get('dataset', 'pycode'), 'val.bin')
        if not (data := read_bytes(analyze)):
            raise SystemExit(f"sample.py: --analyze file {analyze} is empty")
        r = analyze_bytes(model, data, batch_size, seed, ctx, enc if bpe_model else None)
        keys = ('loss', 'bpb', 'rate', 'bytes_per_chunk', 'ws_boundary', 'word_boundary', 'boundary_precision')
        print(f"{analyze}: {len(data)} bytes, {math.ceil(len(data) / (block_size - 1))} rows of {block_size}: "
              + ', '.join(f"{k.replace('_per_', '/')} {r[k]:.4f}" for k in keys))
        if vocab: # the chunks side by side: word ends topped up to the model's rate (its own share measured first)
            rule = lambda w, rate: ByteUNet(UNetConfig(block_size=block_size, n_embd=8, n_head=1, gater='word_ends',
                                                       word_rate=w, rate=rate)).eval()
            own = analyze_bytes(rule(0.0, 0.5), data, 64, seed, nullcontext())['rate']
            ends = analyze_bytes(rule(own, r['rate']), data, 64, seed, nullcontext())
            cols = {f"learned ({r['rate']:.3f})": r['chunks'], f"word ends ({ends['rate']:.3f})": ends['chunks']}
            if enc and not bpe_model: # its tokens, each row cut as the model's rows
                toks = Counter(t for i in range(0, len(data), block_size - 1) for t in
                               chunks_of(data[i:i + block_size - 1], bpe_ends(enc, data[i:i + block_size - 1])))
                cols[f"{os.path.basename(compare)} ({sum(toks.values()) / len(data):.3f})"] = toks
            print(f"\nthe {vocab} most frequent chunks (rate in brackets; share: of all the column's chunks)\n"
                  + vocabulary(cols, vocab))
        sys.exit(0)

    prompt = read_bytes(start[5:]) if start.startswith('FILE:') else start.encode('utf-8', 'surrogateescape') # as given
    ids = [_BOS] + list(prompt) # an empty prompt is BOS alone
    if len(ids) > block_size - 1: # a row is at most block_size - 1 bytes, BOS included (see ByteUNet.generate)
        print(f"sample.py: the prompt is {len(prompt)} bytes and the model reads {block_size - 2} after BOS; "
              f"keeping its last {block_size - 2} bytes", file=sys.stderr)
        ids = [_BOS] + ids[-(block_size - 2):]
    x = torch.tensor(ids, dtype=torch.long, device=device)[None, ...].repeat(num_samples, 1) # (B, T0)

    torch.manual_seed(seed) # here, after the model is built: the same seed gives the same samples (CUDA's too)
    with ctx:
        y, gates = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k) # (B, N), (B, T0 + N)
    colour = sys.stdout.isatty()
    for i in range(num_samples):
        full = x[i].tolist() + y[i].tolist()
        if not (show_boundaries or compare): # --compare shows them too
            print(decode(full) + '\n---------------')
            continue
        data, g = bytes(full[1:]), gates[i, 1:].tolist() # BOS is a chunk of its own, not printed; the gates each
        n, learned = len(data), {t for t in range(len(data)) if g[t]} # byte was generated with: t ends a chunk
        row = torch.tensor([full]) # (1, T0 + N): the whole row, BOS at 0, as boundary_counts counts it (C1)
        b = boundary_metrics(boundary_counts(row, gates[i:i + 1].cpu(), torch.ones_like(row, dtype=torch.bool)))
        print(render(data, g, colour))
        print(f"--- learned: {n} bytes in {len(learned)} chunks, {n / max(len(learned), 1):.2f} bytes/chunk; "
              f"ws_boundary {b['ws_boundary']:.3f}, word_boundary {b['word_boundary']:.3f}, "
              f"boundary_precision {b['boundary_precision']:.3f}")
        if enc:
            bpe = bpe_ends(enc, data) # BPE boundaries: a token ends at byte t
            print(render(data, [t in bpe for t in range(n)], colour))
            p, r = precision_recall(learned, bpe)
            print(f"--- {compare}: {n} bytes in {len(bpe)} tokens, {n / max(len(bpe), 1):.2f} bytes/token; "
                  f"learned vs {compare}: precision {p:.3f} recall {r:.3f}")
        print('---------------')
