"""
Measurements, each printed with the command that made it.
$ python bench.py                 # forward + backward time of each method's model on one batch
$ python bench.py --compare=True  # train each method on pycode with equal bytes, then a table and a plot of val bpb
$ python bench.py --table=cpu --base=/tmp/nanotok-base   # sampler vs loop, sequential vs uniform forward at 4096
                                  # bytes, the 18M training step against another checkout's model.py, alternated
$ python bench.py --table=gpu --device=cuda   # bytes/s, MFU, the sampler's share: 18M and 73M at 4096 bytes, bf16
$ python bench.py --generate=True # bytes/s of generate (KV cache) against re-running the row for every byte
$ python bench.py --generate=True --block_size=4096 --gen_points=9  # ... rows that grow to 2064 bytes, re-run timed
$ python bench.py --sweep=all     # the gater sweep: does sequential beat random, and find word edges? (SWEEP below)
Any key below can be overridden, e.g. --n_embd=128 --device=cuda --max_iters=1200.
"""
import os
import sys
import json
import time
import contextlib
import subprocess
import importlib.util

import torch
import torch.nn.functional as F

import model as model_py
from model import UNetConfig, ByteUNet, BOS, PRESETS, gpu_peak_flops

# -----------------------------------------------------------------------------
methods = 'random,sequential,hnet,nawrot,whitespace' # names of config/method_*.py
compare = False # False: time forward + backward; True: train every method with config/train_tiny_pycode.py
retrain = True # with compare: False reuses the logs already in out_root (to redraw the table and plot)
out_root = 'out-compare'
max_iters = 600 # training iterations per method when comparing (8 rows of 256 bytes each)
batch_size = 8
block_size = 256
n_embd = 64
n_head = 2
n_down = 1
n_mid = 2
n_up = 1
steps = 20 # timed steps, after 5 warmup steps (the first steps of a new shape are slow)
device = 'cpu'
seed = 1337
threads = 0 # torch threads; 0: torch's default (on a shared machine 1 keeps the ratios steadier)
table = '' # 'cpu' or 'gpu': the tables below instead of the per-method one
base = '' # table=cpu: a checkout whose model.py is the 'before' of the training step (e.g. a clone of feab0e2)
profile = False # table=cpu: also print a torch.profiler table of one step, before and after
parts = 'sampler,forward,step' # table=cpu: which of its three tables
step_compile = True # table=cpu: the step table also times the 'after' model under torch.compile (~3 min to compile)
reps = 3 # table=cpu: alternated repetitions of each measurement (median reported)
sizes = '18m,73m' # table=gpu: PRESETS names, or 'tiny' (the n_embd/n_head/n_down/n_mid/n_up above)
compiles = 'False,True' # table=gpu: torch.compile off, on
dtype = 'bfloat16' # table=gpu: autocast dtype ('float32' for none)
gpu_batch = 4 # table=gpu: rows per step
gpu_block = 4096 # table=gpu: bytes per row
generate = False # True: model.generate against the method before its KV cache, alternated, one thread on a CPU
gen_bytes = 2048 # bytes generated from a 16-byte prompt, untrained weights, at the width above and at 18m
gen_method = 'sequential'
gen_rounds = 2 # cached, re-run, cached, re-run, ...: the best of each
gen_slow_bytes = 0 # > 0: the re-run method makes only its first gen_slow_bytes (its bytes/s is flat once a row is full)
gen_points = 0 # > 0: the re-run's time for all gen_bytes from its per-byte forward timed at gen_points row lengths
sweep = '' # 'all' or runs 'setting:method:seed,...' of SWEEP below: train, measure word edges, write sweep_json
sweep_json = 'assets/sweep_gater.json'
sweep_rows = 256 # val windows the sweep measures on, spread evenly over the val split
exec(open('configurator.py').read()) # overrides from command line or config file
# -----------------------------------------------------------------------------
METHODS = {'random': ('uniform', 'select', 'add'), 'sequential': ('sequential', 'select', 'add'),
           'linear': ('linear', 'select', 'deviation'), 'nawrot': ('nawrot', 'nawrot', 'nawrot'),
           'hnet': ('hnet', 'hnet', 'hnet'), 'whitespace': ('whitespace', 'select', 'add')}
command = 'python bench.py ' + ' '.join(sys.argv[1:])
if threads:
    torch.set_num_threads(threads)



def sync():
    if device.startswith('cuda'):
        torch.cuda.synchronize()


def timed(fn):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def median(xs):
    return sorted(xs)[len(xs) // 2]


def train_step(M, model, opt, X, ctx):
    """ train.py's step at its defaults, on-policy: CE + early exit, REINFORCE with the batch baseline and discounted
        returns, the rate loss, backward, clip, AdamW; M is the model module (this or the base checkout) """
    with ctx:
        out = model(X)
    nll, nll_early = M.next_byte_nll(out['logits'], X), M.next_byte_nll(out['early_logits'], X)
    reward = (nll_early - nll).detach()
    returns = F.pad(M.discounted_returns(reward - reward.mean(0), 0.99), (0, 1))
    gate_logits, gates = out['gate_logits'].float(), out['gates'].float()
    logp = -F.binary_cross_entropy_with_logits(gate_logits, gates, reduction='none')
    r_loss = gate_logits.mean() * (out['gate_probs'].float().mean() - 0.2).detach()
    loss = 0.9 * nll.mean() + 0.1 * nll_early.mean() - 0.01 * (returns * logp).mean() + 0.01 * r_loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return out


def build(M, method, T, **dims):
    g, d, u = METHODS[method]
    torch.manual_seed(seed)
    return M.ByteUNet(M.UNetConfig(block_size=T, gater=g, downsampler=d, upsampler=u, **dims)).to(device)


def rows(B, T):
    X = torch.randint(0, 256, (B, T), device=device)
    X[:, 0] = BOS
    return X


tiny_dims = dict(n_embd=n_embd, n_head=n_head, n_down=n_down, n_mid=n_mid, n_up=n_up)
if table == 'cpu': # each pair alternated in one run, so a shared machine slows both alike
    print(f"$ {command}\n{device}, {torch.get_num_threads()} threads, medians of {reps} alternated runs")
    g = model_py.SequentialGater(UNetConfig(n_embd=64, filter_size=8)).train()
    u = torch.rand(8, 4096)
    with torch.no_grad():
        V = g.filter(torch.randn(8, 4096, 64)).float()
    t_par, t_loop = [], []
    for _ in range(reps if 'sampler' in parts else 0):
        t_par.append(timed(lambda: g.sample(V, u)))
        t_loop.append(timed(lambda: g.scan(V, u)))
    if 'sampler' in parts:
        print(f"\n| sampler, B=8 T=4096 w=8 | s |\n|---|---|\n| loop (scan) | {median(t_loop):.3f} |\n"
              f"| parallel (sample) | {median(t_par):.4f} |\n| speed-up | {median(t_loop) / median(t_par):.1f}x |")
    if 'forward' in parts:
        print("\n| forward, B=8 T=4096, train mode | uniform s | sequential s | sequential / uniform |"
              "\n|---|---|---|---|")
        for label, dims in (('tiny (D=64, 1/2/1)', tiny_dims), ('18m (D=384, 2/6/2)', PRESETS['18m'])):
            X = rows(8, 4096)
            models = {m: build(model_py, m, 4096, **dims) for m in ('random', 'sequential')}
            t = {m: [] for m in models}
            for _ in range(reps + 1): # the first round warms up
                for m, net in models.items():
                    t[m].append(timed(lambda: net(X)))
            tu, ts = median(t['random'][1:]), median(t['sequential'][1:])
            print(f"| {label} | {tu:.3f} | {ts:.3f} | {ts / tu:.3f} |")
    if base and 'step' in parts:
        spec = importlib.util.spec_from_file_location('model_base', os.path.join(base, 'model.py'))
        base_py = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(base_py)
        print(f"\n| 18M training step, 4 x 1024 float32 | before s/step ({base}) | after s/step | speed-up |"
              + (" after, compiled s/step | speed-up |" if step_compile else '') + "\n|---|---|---|---|"
              + ("---|---|" if step_compile else ''))
        for method in ('sequential', 'random'):
            X, nets = rows(4, 1024), {}
            for name, M in [('before', base_py), ('after', model_py)] + [('compiled', model_py)] * step_compile:
                net = build(M, method, 1024, **PRESETS['18m'])
                nets[name] = (M, torch.compile(net) if name == 'compiled' else net,
                              torch.optim.AdamW(net.parameters(), lr=1e-4))
            t = {name: [] for name in nets}
            for i in range(3 + steps): # 3 warmup steps: compiling, and the recompile a new mid-level length may need
                for name, (M, net, opt) in nets.items():
                    torch.manual_seed(i)
                    t[name].append(timed(lambda: train_step(M, net, opt, X, contextlib.nullcontext())))
            tb, ta = median(t['before'][3:]), median(t['after'][3:])
            tc = f" {median(t['compiled'][3:]):.3f} | {tb / median(t['compiled'][3:]):.2f}x |" if step_compile else ''
            print(f"| {method} | {tb:.3f} | {ta:.3f} | {tb / ta:.2f}x |{tc}", flush=True)
            if profile:
                for name, (M, net, opt) in nets.items():
                    with torch.profiler.profile() as prof:
                        train_step(M, net, opt, X, contextlib.nullcontext())
                    print(f"\nprofile of one {method} step, {name}:")
                    print(prof.key_averages().table(sort_by='self_cpu_time_total', row_limit=12))
    sys.exit(0)

if table == 'gpu': # the prepared GPU measurement: one line per size x method x compile
    on_cuda = device.startswith('cuda')
    peak = gpu_peak_flops(torch.cuda.get_device_name(device)) if on_cuda else None
    ctx = torch.autocast(device.split(':')[0], dtype=getattr(torch, dtype)) if dtype != 'float32' \
        else contextlib.nullcontext()
    print(f"$ {command}\n{torch.cuda.get_device_name(device) if on_cuda else device}, {gpu_batch} x {gpu_block} "
          f"bytes, {dtype}, peak {peak or 0:.3g} FLOP/s, median of {steps} steps after 5 (compile: 10) warmup")
    print("| size | method | compile | ms/step | bytes/s | MFU | sampler share |\n|---|---|---|---|---|---|---|")
    for size in sizes.split(','):
        dims = tiny_dims if size == 'tiny' else PRESETS[size]
        for method in ('sequential', 'random'):
            for comp in (c == 'True' for c in compiles.split(',')):
                net = build(model_py, method, gpu_block, **dims)
                opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=on_cuda)
                run = torch.compile(net) if comp else net
                X, t = rows(gpu_batch, gpu_block), []
                for i in range(steps + (10 if comp else 5)):
                    t.append(timed(lambda: train_step(model_py, run, opt, X, ctx)))
                dt = median(t[-steps:])
                with torch.no_grad(), ctx:
                    out = net(X)
                rate = out['n_chunks'].sum().item() / X.numel()
                mfu = f"{net.estimate_mfu(X.numel() / dt, rate, peak) * 100:.1f}%" if peak else '-'
                share = '-'
                if method == 'sequential':
                    V = torch.randn(gpu_batch, gpu_block, net.config.filter_size, device=device)
                    u = torch.rand(gpu_batch, gpu_block, device=device)
                    share = f"{median([timed(lambda: net.gater.sample(V, u)) for _ in range(5)]) / dt * 100:.1f}%"
                print(f"| {size} | {method} | {comp} | {dt * 1000:.1f} | {X.numel() / dt:,.0f} | {mfu} | {share} |",
                      flush=True)
    sys.exit(0)


def generate_rerun(model, idx, n):
    """ generation before the KV cache: the last block_size-1 bytes and a placeholder re-run for every new byte """
    pad = torch.full_like(idx[:, :1], BOS)
    for _ in range(n):
        logits = model(torch.cat([idx[:, -(model.config.block_size - 1):], pad], 1))['logits'][:, -2, :256]
        idx = torch.cat([idx, torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)], dim=1)
    return idx


if generate:
    if device == 'cpu':
        torch.set_num_threads(1)
    if gen_points == 1:
        raise SystemExit("bench.py: --gen_points=1: the sum needs at least the first and the last byte, 2 points")
    n_slow = gen_slow_bytes or gen_bytes
    how = f"{gen_points} row lengths timed, integrated" if gen_points else f"{n_slow} bytes"
    print(f"$ {command}\n{gen_bytes} bytes from a 16-byte prompt, {gen_method}, block_size {block_size}, batch 1, "
          f"{device}, {torch.get_num_threads()} thread(s); re-run: {how}")
    print("| width | params | generate (cache) bytes/s | re-run bytes/s | speed-up |\n|---|---|---|---|---|")
    g, d, u = METHODS[gen_method]
    for width, kw in (('tiny', dict(n_embd=n_embd, n_head=n_head, n_down=n_down, n_mid=n_mid, n_up=n_up)),
                      ('18m', PRESETS['18m'])):
        torch.manual_seed(seed)
        model = ByteUNet(UNetConfig(block_size=block_size, gater=g, downsampler=d, upsampler=u, **kw)).to(device).eval()
        idx = torch.randint(0, 256, (1, 16), device=device)
        idx[:, 0] = BOS
        best = [float('inf'), float('inf')]
        fns = [lambda: model.generate(idx, gen_bytes), lambda: generate_rerun(model, idx, n_slow)]
        with torch.no_grad():
            for r in range(gen_rounds):
                for i, fn in enumerate(fns[:1] if gen_points else fns):
                    t0 = time.perf_counter()
                    fn()
                    sync()
                    best[i] = min(best[i], time.perf_counter() - t0)
            if gen_points: # re-running costs one forward of the row so far per byte: sum it over the row lengths
                k = [round(i * (gen_bytes - 1) / (gen_points - 1)) for i in range(gen_points)] # byte k: 16+k bytes
                t = [min(timed(lambda: generate_rerun(model, rows(1, min(16 + j, block_size - 1)), 1)) for _ in
                         range(2)) for j in k]
                best[1] = sum((t[i] + t[i + 1]) / 2 * (k[i + 1] - k[i]) for i in range(gen_points - 1))
                best[1] += (t[0] + t[-1]) / 2 # the trapezoid rule counts the two end bytes half
        fast, slow = gen_bytes / best[0], (gen_bytes if gen_points else n_slow) / best[1]
        print(f"| {width} (D={model.config.n_embd}, {model.config.n_down}/{model.config.n_mid}/{model.config.n_up}) | "
              f"{model.get_num_params():,} | {fast:,.0f} | {slow:,.1f} | {fast / slow:.1f}x |", flush=True)
    sys.exit(0)

# the gater sweep: the tiny model at small changes (data, batch, loss weights, depth), each run measured afterwards on
# the same sweep_rows val windows for val bpb and the word-edge metrics; every run's numbers and command go to sweep_json
SWEEP_BASE = ['config/train_tiny_pycode.py', '--eval_interval=150'] # 600 steps of 8 x 256 bytes: ~10 min on a shared core
SWEEP = { # setting -> (corpus made by prepare.py, block_size, train.py flags)
    'pydocs': ('pydocs', 256, []), # the tiny config on English: the paper's loss weights and gate scale
    'pydocs_x10': ('pydocs', 256, ['--pg_weight=0.1', '--rate_weight=0.1']), # lambda_pi and lambda_c x10 together
    # gate_scale 1/16 (the paper's): Adam moves each filter weight by about lr a step, so the gate logits move 16x
    # slower than at scale 1, too slow to leave logit(rate) in 600 steps
    'pydocs_x10_scale1': ('pydocs', 256, ['--pg_weight=0.1', '--rate_weight=0.1', '--gate_scale=1.0']),
    # the paper's ablation directions, at pydocs_x10_scale1
    'pydocs_x10_scale1_gamma1': ('pydocs', 256, ['--pg_weight=0.1', '--rate_weight=0.1', '--gate_scale=1.0',
                                                 '--gamma=1.0']),
    'pydocs_x10_scale1_no_consistency': ('pydocs', 256, ['--pg_weight=0.1', '--rate_weight=0.0', '--gate_scale=1.0']),
    'pydocs_x10_scale1_no_early_exit': ('pydocs', 256, ['--pg_weight=0.1', '--rate_weight=0.1', '--gate_scale=1.0',
                                                        '--early_exit_reward=False']),
}
SWEEP_RUNS = ['pydocs:random:1', 'pydocs_x10:sequential:1', 'pydocs_x10_scale1:sequential:1', 'pydocs:random:2',
              'pydocs_x10_scale1:sequential:2', 'pydocs:random:3', 'pydocs_x10_scale1:sequential:3',
              'pydocs_x10_scale1_gamma1:sequential:1', 'pydocs_x10_scale1_no_early_exit:sequential:1',
              'pydocs_x10_scale1_no_consistency:sequential:1'] # what --sweep=all runs, in the order they were run

def windows(name, block):
    """ data/<name>_w<block>: each document of data/<name> cut into pieces of block-1 bytes, one row each (the rows
        train.py reads from consecutive windows; as separate documents they work with any train.py) """
    src, dst = os.path.join('data', name), os.path.join('data', f'{name}_w{block}')
    if not os.path.exists(os.path.join(src, 'val_offsets.npy')):
        subprocess.run([sys.executable, 'prepare.py', name, f'--out_dir={src}'], check=True)
    os.makedirs(dst, exist_ok=True)
    for split in ('train', 'val'):
        off = np.load(os.path.join(src, f'{split}_offsets.npy'))
        cuts = np.unique(np.concatenate([np.arange(a, b, block - 1) for a, b in zip(off[:-1], off[1:])] + [off[-1:]]))
        shutil.copyfile(os.path.join(src, f'{split}.bin'), os.path.join(dst, f'{split}.bin'))
        np.save(os.path.join(dst, f'{split}_offsets.npy'), cuts.astype(np.int64))
    return os.path.basename(dst)

@torch.no_grad()
def word_edges(out_dir, dataset, n_rows, batch=32):
    """ a checkpoint's val bpb and boundaries on n_rows val windows spread over the split (the same for every run):
        rate, ws_boundary (share of whitespace bytes that end a chunk), word_boundary (share of whitespace bytes at
        which or just before which a chunk ends: the word's end or its space) and boundary_precision (share of chunk
        ends on such a word edge); the forced ends of a row (BOS, last byte) are not counted """
    ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), map_location='cpu', weights_only=True)
    model = ByteUNet(UNetConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    model.eval()
    T = ckpt['model_args']['block_size']
    data = np.fromfile(os.path.join('data', dataset, 'val.bin'), dtype=np.uint8)
    off = np.load(os.path.join('data', dataset, 'val_offsets.npy'))
    docs = np.unique(np.linspace(0, len(off) - 2, n_rows).round().astype(int))
    s = dict.fromkeys(['nll', 'targets', 'gates', 'bytes', 'ws', 'ws_hit', 'ws_word', 'on_edge', 'edges'], 0.0)
    for k in range(0, len(docs), batch):
        X = torch.zeros(len(docs[k:k + batch]), T, dtype=torch.long)
        M = torch.zeros_like(X, dtype=torch.bool)
        for i, d in enumerate(docs[k:k + batch]):
            row = torch.from_numpy(data[off[d]:off[d + 1]][:T - 1].astype(np.int64))
            X[i, 0], X[i, 1:1 + len(row)], M[i, :1 + len(row)] = BOS, row, True
        torch.manual_seed(seed + k) # stochastic gaters sample alike for every checkpoint
        out = model(X)
        m = M[:, 1:].float()
        s['nll'] += (next_byte_nll(out['logits'], X) * m).sum().item()
        s['targets'] += m.sum().item()
        g = out['gates'].bool() & M
        free = M.clone()
        free[:, [0, -1]] = False # the forced gates
        ws = torch.isin(X, torch.tensor(WHITESPACE)) & M
        before = F.pad(ws[:, 1:], (0, 1), value=False) # the byte just before a whitespace byte
        edge = ws | before
        prev_g = F.pad(g[:, :-1], (1, 0), value=False) & F.pad(free[:, :-1], (1, 0), value=False)
        s['gates'] += (g & free).sum().item()
        s['bytes'] += free.sum().item()
        s['ws'] += (ws & free).sum().item()
        s['ws_hit'] += (g & ws & free).sum().item()
        s['ws_word'] += ((g & free | prev_g) & ws & free).sum().item()
        s['on_edge'] += (g & edge & free).sum().item()
        s['edges'] += (edge & free).sum().item()
    rate = s['gates'] / s['bytes']
    return dict(bpb=s['nll'] / s['targets'] / math.log(2), rate=rate, ws_boundary=s['ws_hit'] / s['ws'],
                word_boundary=s['ws_word'] / s['ws'], boundary_precision=s['on_edge'] / max(s['gates'], 1),
                chance_word_boundary=1 - (1 - rate) ** 2, chance_precision=s['edges'] / s['bytes'],
                val_rows=len(docs))

if sweep:
    import math, shutil
    import numpy as np
    from model import WHITESPACE, next_byte_nll
    results = json.load(open(sweep_json)) if os.path.exists(sweep_json) else {}
    for run in (SWEEP_RUNS if sweep == 'all' else sweep.split(',')):
        setting, method, run_seed = run.split(':')
        if setting not in SWEEP or not os.path.exists(f'config/method_{method}.py'):
            sys.exit(f"bench.py: --sweep={sweep}: '{run}' needs a setting of SWEEP ({', '.join(SWEEP)}) and a "
                     f"config/method_<method>.py")
        corpus, block, flags = SWEEP[setting]
        dataset = windows(corpus, block)
        out_dir = os.path.join(out_root, 'sweep', run.replace(':', '_'))
        cmd = ['train.py', *SWEEP_BASE, f'config/method_{method}.py', *flags, f'--dataset={dataset}',
               f'--block_size={block}', f'--seed={run_seed}', f'--out_dir={out_dir}']
        print('$', 'python', ' '.join(cmd), flush=True)
        t0 = time.time()
        if retrain or not os.path.exists(os.path.join(out_dir, 'ckpt.pt')): # --retrain=False measures it again
            if os.path.exists(os.path.join(out_dir, 'log.jsonl')):
                os.remove(os.path.join(out_dir, 'log.jsonl')) # a fresh log for a fresh run
            subprocess.run([sys.executable, *cmd], check=True, stdout=subprocess.DEVNULL)
        wall = time.time() - t0 if retrain else results.get(run, {}).get('wall_s', 0)
        log = [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]
        val = [r for r in log if r['split'] == 'val']
        res = word_edges(out_dir, dataset, sweep_rows)
        results[run] = dict(setting=setting, method=method, seed=int(run_seed), command='python ' + ' '.join(cmd),
                            bytes=val[-1]['bytes'], wall_s=round(wall), **res,
                            curve=[dict(bytes=r['bytes'], bpb=r['bpb'], rate=r['rate'],
                                        ws_boundary=r['ws_boundary']) for r in val])
        print(f"{run}: " + ', '.join(f"{k} {v:.4f}" for k, v in res.items() if isinstance(v, float)), flush=True)
        os.makedirs(os.path.dirname(sweep_json) or '.', exist_ok=True)
        with open(sweep_json, 'w') as f:
            json.dump(results, f, indent=1)
    keys = ['bpb', 'rate', 'ws_boundary', 'word_boundary', 'boundary_precision']
    print(f"\n$ {command}\n| setting | method | seeds | " + ' | '.join(keys) + ' |\n|---|---|---|' + '---|' * len(keys))
    for group in dict.fromkeys((r['setting'], r['method']) for r in results.values()):
        rs = [r for r in results.values() if (r['setting'], r['method']) == group]
        cell = lambda k: f"{np.mean([r[k] for r in rs]):.4f} ± {np.std([r[k] for r in rs], ddof=1):.4f}" if len(rs) > 1 \
            else f"{rs[0][k]:.4f}"
        print(f"| {group[0]} | {group[1]} | {len(rs)} | " + ' | '.join(cell(k) for k in keys) + ' |')
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for group in dict.fromkeys((r['setting'], r['method']) for r in results.values()):
        rs = [r for r in results.values() if (r['setting'], r['method']) == group]
        if len(rs) < 2: # the seeded comparison only, the mean over its seeds (train.py's val rows, 64 windows)
            continue
        x = [c['bytes'] / 1e6 for c in rs[0]['curve']][1:]
        for ax, k in zip(axes, ['bpb', 'ws_boundary']):
            ax.plot(x, np.mean([[c[k] for c in r['curve']][1:] for r in rs], 0), label=f"{group[1]} ({group[0]})")
    for ax, k in zip(axes, ['val bits per byte', 'share of whitespace bytes that end a chunk']):
        ax.set_xlabel('bytes seen (millions)'), ax.set_ylabel(k), ax.grid(alpha=0.3), ax.legend()
    plt.savefig(sweep_json.replace('.json', '.png'), dpi=120, bbox_inches='tight')
    sys.exit(0)

if not compare:
    print(f"$ {command}\nforward + backward of {batch_size} x {block_size} bytes, D={n_embd}, "
          f"{n_down}/{n_mid}/{n_up} layers, {device}, {torch.get_num_threads()} threads")
    print("| method | gater / downsampler / upsampler | params | ms per step | bytes/s |\n|---|---|---|---|---|")
    for name in methods.split(','):
        g, d, u = METHODS[name]
        torch.manual_seed(seed)
        model = ByteUNet(UNetConfig(n_embd=n_embd, n_head=n_head, n_down=n_down, n_mid=n_mid, n_up=n_up,
                                    block_size=block_size, gater=g, downsampler=d, upsampler=u)).to(device)
        X = torch.randint(0, 256, (batch_size, block_size), device=device)
        X[:, 0] = BOS
        times = []
        for i in range(steps + 5):
            t0 = time.perf_counter()
            out = model(X)
            loss = F.cross_entropy(out['logits'][:, :-1].flatten(0, 1), X[:, 1:].flatten())
            loss.backward()
            if device.startswith('cuda'):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        dt = sorted(times[5:])[len(times[5:]) // 2] # the median step
        print(f"| {name} | {g} / {d} / {u} | {model.get_num_params():,} | {dt * 1000:.1f} | "
              f"{batch_size * block_size / dt:,.0f} |")
    sys.exit(0)

# the comparison: the same model, data, bytes and seed for every method; only config/method_*.py changes
rows = []
for name in methods.split(','):
    out_dir = os.path.join(out_root, name)
    cmd = [sys.executable, 'train.py', 'config/train_tiny_pycode.py', f'config/method_{name}.py',
           f'--out_dir={out_dir}', f'--max_iters={max_iters}', f'--lr_decay_iters={max_iters}', f'--seed={seed}']
    if retrain or not os.path.exists(os.path.join(out_dir, 'log.jsonl')):
        print('$', ' '.join(cmd[1:]), flush=True)
        if os.path.exists(os.path.join(out_dir, 'log.jsonl')):
            os.remove(os.path.join(out_dir, 'log.jsonl')) # a fresh log for a fresh run
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    log = [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]
    val = [r for r in log if r['split'] == 'val']
    if val[-1]['iter'] != max_iters:
        sys.exit(f"bench.py: {out_dir}/log.jsonl ends at step {val[-1]['iter']}, not --max_iters={max_iters}: "
                 f"rerun with --retrain=True")
    train = [r for r in log if r['split'] == 'train']
    bps = sorted(r['bytes_per_sec'] for r in train)[len(train) // 2]
    rows.append((name, val, bps))

print(f"\n$ {command}\n| method | val bpb | rate | ws_boundary | word_boundary | boundary_precision | bytes seen | "
      f"bytes/s (median) |\n|---|---|---|---|---|---|---|---|")
for name, val, bps in rows:
    v = {'word_boundary': float('nan'), 'boundary_precision': float('nan'), **val[-1]} # nan: a log from before them
    print(f"| {name} | {v['bpb']:.3f} | {v['rate']:.3f} | {v['ws_boundary']:.3f} | {v['word_boundary']:.3f} | "
          f"{v['boundary_precision']:.3f} | {v['bytes']:,} | {bps:,.0f} |")
try:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("matplotlib is not installed: no plot (pip install matplotlib)")
plt.figure(figsize=(6, 4))
for name, val, _ in rows:
    plt.plot([r['bytes'] / 1e6 for r in val], [r['bpb'] for r in val], label=name)
plt.xlabel('bytes seen (millions)')
plt.ylabel('val bits per byte')
plt.ylim(top=min(8.0, 1.5 * max(val[-1]['bpb'] for _, val, _ in rows))) # the later curves, not the first drop
plt.title('pycode, rate 0.2, tiny model on a CPU')
plt.legend()
plt.grid(alpha=0.3)
os.makedirs('assets', exist_ok=True)
plt.savefig('assets/compare_pycode.png', dpi=120, bbox_inches='tight')
print("wrote assets/compare_pycode.png")
