"""
Speed only, each table printed with the command that made it (the learning experiments are in experiments.py).
$ python bench.py --table=sampler   # SequentialGater.sample against its reference loop .scan: same draws, 8 x 4096, w=8
$ python bench.py --table=forward   # forward of the sequential gater's model against the uniform one's, 8 x 4096 bytes
$ python bench.py --table=step      # train.py's own step: train.py runs a few iterations, bytes/s from its log.jsonl
$ python bench.py --table=generate  # generate (KV caches) against re-running the row for every new byte
$ python bench.py --table=gpu       # the step on a GPU: bfloat16, compile off and on, 18M and 73M at 4 x 4096 bytes:
                                    # ms/step, bytes/s, MFU, peak memory, the sampler's share of the step
Any key below can be overridden, e.g. --table=step --sizes=tiny,18m --methods=random,sequential,hnet --dtypes=bfloat16
"""
import os
import sys
import json
import time
import signal
import itertools
import tempfile
import subprocess
if __name__ == '__main__': # Ctrl-C: one line, not a traceback (the rows so far are printed)
    signal.signal(signal.SIGINT, lambda *_: sys.exit("bench.py: interrupted (Ctrl-C)"))

import numpy as np
import torch
import torch.nn.functional as F

from model import UNetConfig, ByteUNet, SequentialGater, PRESETS
from common import KEYS, check_config # the table of keys, bench.py's own rows among them: --help prints them

# -----------------------------------------------------------------------------
table = 'step' # sampler, forward, step, generate or gpu; each starts from its own values of the keys below (TABLES)
device = 'cpu'
sizes = '18m' # names of model.PRESETS (train.py: config/size_<name>.py) or 'tiny' (UNetConfig's, train.py's defaults)
methods = 'sequential,random' # step, gpu: names of config/method_*.py
compiles = 'False' # step, gpu: train.py --compile, each
dtypes = 'float32' # step, gpu: train.py --dtype, each
batch_size = 4 # rows
block_size = 1024 # bytes per row, BOS included
iters = 10 # step, gpu: timed iterations of each train.py run (the median), after
warmup = 5 # ... this many untimed ones (twice as many when compiled): compiling, the first steps of a new shape
data = '' # step, gpu: '' random bytes, every row a full window; or a dataset train.py finds in data/ (e.g. pycode)
out_root = '' # step, gpu: the runs' out_dirs go under it and stay; '' a temporary folder, removed after
reps = 3 # sampler, forward: alternated rounds (the median); generate: rounds (the best)
gen_bytes = 2048 # generate: bytes made from a 16-byte prompt, untrained weights, one row
gen_points = 0 # generate: > 0 times the re-run's forward at this many row lengths and sums it (long rows take hours)
threads = 0 # torch threads of the tables run in this process; 0: torch's default (train.py sets its own)
seed = 1337
TABLES = {'sampler': dict(batch_size=8, block_size=4096), 'step': {},
          'forward': dict(sizes='tiny,18m', batch_size=8, block_size=4096),
          'generate': dict(sizes='tiny,18m', batch_size=1, block_size=256),
          'gpu': dict(device='cuda', sizes='18m,73m', compiles='False,True', dtypes='bfloat16', block_size=4096)}
table = ([a[len('--table='):] for a in sys.argv[1:] if a.startswith('--table=')] or [table])[-1]
globals().update(TABLES.get(table, {})) # the table's defaults, before the overrides (another name: check_config's line)
exec(open('configurator.py').read()) # overrides from command line or config file
check_config(globals(), 'bench.py') # every key against its row of common.KEYS, the device too: one line, nothing made
from model import BOS # after the configurator, so it is not a config key
# -----------------------------------------------------------------------------
command = 'python bench.py ' + ' '.join(sys.argv[1:])
MEM = 'peak_mem_gb' # train.py's log key of its peak CUDA memory (GB)
runs = table in ('step', 'gpu') # the tables of train.py runs: a config file for each size and method (the disk's)
need = {'sizes': [f'config/size_{s}.py' for s in sizes.split(',') if s != 'tiny'],
        'methods': [f'config/method_{m}.py' for m in methods.split(',')]}
for key, paths in need.items():
    if runs and (missing := [p for p in paths if not os.path.exists(p)]):
        sys.exit(f"bench.py: --{key}={globals()[key]}: there is no {missing[0]} for train.py to run")
if gen_points == 1:
    sys.exit("bench.py: --gen_points=1 must be 0 or >= 2 (the first and the last byte)")
if data and not os.path.exists(os.path.join('data', data, 'train.bin')):
    sys.exit(f"bench.py: --data={data}: there is no data/{data}/train.bin; run `python prepare.py {data}` first")
if threads:
    torch.set_num_threads(threads)
on_cuda = device.startswith('cuda')
where = torch.cuda.get_device_name(device) if on_cuda else device
where += '' if runs or on_cuda else f", {torch.get_num_threads()} threads" # train.py sets its own
dims = lambda size: {} if size == 'tiny' else PRESETS[size] # UNetConfig's defaults are the tiny model


def sync():
    if on_cuda:
        torch.cuda.synchronize()


def timed(fn):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def median(xs):
    return sorted(xs)[len(xs) // 2] # the upper median of an even count


def build(gater, size, T):
    """ an untrained model of this size with this gater (select/add), on the device, seeded """
    torch.manual_seed(seed)
    return ByteUNet(UNetConfig(block_size=T, gater=gater, **dims(size))).to(device)


def rows(B, T):
    X = torch.randint(0, 256, (B, T), device=device)
    X[:, 0] = BOS
    return X


if table == 'sampler': # the paper's gater draws its gates in parallel; its loop is the reference it must equal
    g = SequentialGater(UNetConfig()).to(device).train()
    B, T, u = batch_size, block_size, torch.rand(batch_size, block_size, device=device)
    with torch.no_grad():
        V = g.filter(torch.randn(B, T, g.filter.in_features, device=device)).float() # (B, T, w)
    if not torch.equal(g.sample(V, u), g.scan(V, u)[0]):
        sys.exit("bench.py: SequentialGater.sample and .scan drew different gates from the same draws (model.py)")
    t_par, t_loop = [], []
    for _ in range(reps): # alternated, so a shared machine slows both alike
        t_par.append(timed(lambda: g.sample(V, u)))
        t_loop.append(timed(lambda: g.scan(V, u)))
    up = median([a / b for a, b in zip(t_loop, t_par)]) # per round: both timed back to back
    print(f"$ {command}\n{where}, medians of {reps} alternated rounds; sample and scan drew the same gates\n"
          f"| sampler, B={B} T={T} w={g.w} | s |\n|---|---|\n| loop (scan) | {median(t_loop):.4f} |\n"
          f"| parallel (sample) | {median(t_par):.4f} |\n| speed-up | {up:.1f}x |")

if table == 'forward': # the price of the sequential gater in a forward, against uniform random boundaries
    print(f"$ {command}\n{where}, medians of {reps} alternated rounds after one, train mode\n| forward, "
          f"B={batch_size} T={block_size} | uniform ms | sequential ms | sequential / uniform |\n|---|---|---|---|")
    X = rows(batch_size, block_size)
    for size in sizes.split(','):
        models = {g: build(g, size, block_size).train() for g in ('uniform', 'sequential')}
        t = {g: [] for g in models}
        for _ in range(reps + 1): # the first round warms up
            for g, net in models.items():
                t[g].append(timed(lambda: net(X)))
        ratio = median([b / a for a, b in zip(t['uniform'][1:], t['sequential'][1:])]) # per round
        cfg, ms = models['uniform'].config, {g: median(t[g][1:]) * 1000 for g in t}
        print(f"| {size} (D={cfg.n_embd}, {cfg.n_down}/{cfg.n_mid}/{cfg.n_up}) | {ms['uniform']:.1f} | "
              f"{ms['sequential']:.1f} | {ratio:.3f} |", flush=True)


def random_data(root):
    """ random bytes, one document per split, so that every row is a full window of block_size-1 bytes -> flags """
    path = os.path.join(root, 'data', 'random')
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, n in (('train', batch_size * (iters + 2 * warmup)), ('val', batch_size)):
        rng.integers(0, 256, n * (block_size - 1), dtype=np.uint8).tofile(os.path.join(path, f'{split}.bin'))
        np.save(os.path.join(path, f'{split}_offsets.npy'), np.array([0, n * (block_size - 1)]))
    return [f"--data_dir={os.path.join(root, 'data')}", '--dataset=random']


def train_run(size, method, comp, dtype, root, data_flags):
    """ train.py for a few iterations at this row's flags, one val batch at its start and end -> its command, and
        seconds and bytes/s of each iteration after the warmup, from its log.jsonl """
    n = iters + warmup * (2 if comp == 'True' else 1)
    out_dir = os.path.join(root, f"{size}_{method}_{'compiled' if comp == 'True' else 'eager'}_{dtype}")
    cmd = ['train.py', *([f'config/size_{size}.py'] if size != 'tiny' else []), f'config/method_{method}.py',
           f'--batch_size={batch_size}', f'--block_size={block_size}', '--gradient_accumulation_steps=1',
           f'--max_iters={n}', '--log_interval=1', f'--eval_interval={n + 1}', '--eval_iters=1', f'--device={device}',
           f'--dtype={dtype}', f'--compile={comp}', '--wandb_log=False', f'--seed={seed}', f'--out_dir={out_dir}',
           *data_flags]
    res = subprocess.run([sys.executable, *cmd], capture_output=True, text=True)
    if res.returncode:
        why = (res.stderr.strip().splitlines() or ['no message'])[-1]
        sys.exit(f"bench.py: `python {' '.join(cmd)}` failed (exit {res.returncode}): {why}")
    log = [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]
    log = [r for r in log if r['split'] == 'train']
    seen = {-1: 0, **{r['iter']: r['bytes'] for r in log}} # bytes read by the end of each iteration
    for r in log: # the log keeps bytes/s; an iteration's time is its bytes over that
        r['dt'] = (r['bytes'] - seen[r['iter'] - 1]) / r['bytes_per_sec']
    return 'python ' + ' '.join(cmd), [r for r in log if r['iter'] >= n - iters]


if runs: # the step as train.py takes it, with its data loading, logging and host syncs
    print(f"$ {command}\n{where}, {batch_size} x {block_size} bytes of {data or 'random bytes'}, the median of {iters} "
          f"iterations of train.py after {warmup} (compiled: {2 * warmup})\n| size | method | compile | dtype | "
          "ms/step | bytes/s | MFU | peak GB | sampler share |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    cmds = []
    with tempfile.TemporaryDirectory() as tmp:
        root = out_root or tmp
        data_flags = [f'--dataset={data}'] if data else random_data(root)
        for size, method, comp, dtype in itertools.product(*(s.split(',') for s in (sizes, methods, compiles, dtypes))):
            cmd, log = train_run(size, method, comp, dtype, root, data_flags)
            cmds.append(cmd)
            dt, bps = median([r['dt'] for r in log]), median([r['bytes_per_sec'] for r in log])
            mfu = [r['mfu'] for r in log if r.get('mfu') is not None] # CUDA only
            mem = [r[MEM] for r in log if r.get(MEM) is not None]
            share = '-'
            if method == 'sequential': # the gater's sample on this step's shapes, over the step
                g = SequentialGater(UNetConfig()).to(device).train()
                V = torch.randn(batch_size, block_size, g.w, device=device)
                u = torch.rand(batch_size, block_size, device=device)
                share = f"{median([timed(lambda: g.sample(V, u)) for _ in range(4)][1:]) / dt * 100:.1f}%" # 1 warm
            print(f"| {size} | {method} | {comp} | {dtype} | {dt * 1000:.1f} | {bps:,.0f} | "
                  f"{f'{median(mfu) * 100:.1f}%' if mfu else '-'} | {f'{max(mem):.2f}' if mem else '-'} | {share} |",
                  flush=True)
    print('\n'.join(f"row {i + 1}: {c}" for i, c in enumerate(cmds)))


def generate_rerun(model, idx, n):
    """ generation without a cache: the last block_size-1 bytes and a placeholder re-run for every new byte """
    pad = torch.full_like(idx[:, :1], BOS)
    for _ in range(n):
        logits = model(torch.cat([idx[:, -(model.config.block_size - 1):], pad], 1))['logits'][:, -2, :256]
        idx = torch.cat([idx, torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)], dim=1)
    return idx


if table == 'generate': # generate prefills the prompt once, then steps through KV caches
    how = f"its forward timed at {gen_points} row lengths, summed" if gen_points else "timed"
    print(f"$ {command}\n{where}, {gen_bytes} bytes from a 16-byte prompt, sequential, block_size {block_size}, one "
          f"row, the best of {reps} rounds; re-run: {how}\n| size | params | generate (cache) bytes/s | re-run bytes/s "
          "| speed-up |\n|---|---|---|---|---|")
    for size in sizes.split(','):
        net = build('sequential', size, block_size).eval()
        idx = rows(1, 16)
        with torch.no_grad():
            fast = min(timed(lambda: net.generate(idx, gen_bytes)) for _ in range(reps))
            if gen_points: # re-running costs one forward of the row so far per byte: summed over the row lengths
                k = [round(i * (gen_bytes - 1) / (gen_points - 1)) for i in range(gen_points)] # byte k: 16+k bytes
                t = [min(timed(lambda: generate_rerun(net, rows(1, min(16 + j, block_size - 1)), 1))
                         for _ in range(reps)) for j in k]
                slow = sum((t[i] + t[i + 1]) / 2 * (k[i + 1] - k[i]) for i in range(gen_points - 1))
                slow += (t[0] + t[-1]) / 2 # the trapezoid rule counts the two end bytes half
            else:
                slow = min(timed(lambda: generate_rerun(net, idx, gen_bytes)) for _ in range(reps))
        cfg = net.config
        print(f"| {size} (D={cfg.n_embd}, {cfg.n_down}/{cfg.n_mid}/{cfg.n_up}) | {net.get_num_params():,} | "
              f"{gen_bytes / fast:,.0f} | {gen_bytes / slow:,.1f} | {slow / fast:.1f}x |", flush=True)
