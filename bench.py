"""
Two measurements, each printed with the command that made it.
$ python bench.py                 # forward + backward time of each method's model on one batch
$ python bench.py --compare=True  # train each method on pycode with equal bytes, then a table and a plot of val bpb
$ python bench.py --sweep=all     # the gater sweep: does sequential beat random, and find word edges? (SWEEP below)
Any key below can be overridden, e.g. --n_embd=128 --device=cuda --max_iters=1200.
"""
import os
import sys
import json
import time
import subprocess

import torch
import torch.nn.functional as F

from model import UNetConfig, ByteUNet, BOS

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
sweep = '' # 'all' or runs 'setting:method:seed,...' of SWEEP below: train, measure word edges, write sweep_json
sweep_json = 'assets/sweep_gater.json'
sweep_rows = 256 # val windows the sweep measures on, spread evenly over the val split
exec(open('configurator.py').read()) # overrides from command line or config file
# -----------------------------------------------------------------------------
METHODS = {'random': ('uniform', 'select', 'add'), 'sequential': ('sequential', 'select', 'add'),
           'linear': ('linear', 'select', 'deviation'), 'nawrot': ('nawrot', 'nawrot', 'nawrot'),
           'hnet': ('hnet', 'hnet', 'hnet'), 'whitespace': ('whitespace', 'select', 'add')}
command = 'python bench.py ' + ' '.join(sys.argv[1:])

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
            loss = F.cross_entropy(out['logits'][:, :-1].flatten(0, 1), X[:, 1:].flatten()) + out['aux_loss']
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

print(f"\n$ {command}\n| method | val bpb | rate | ws_boundary | bytes seen | bytes/s (median) |\n|---|---|---|---|---|---|")
for name, val, bps in rows:
    v = val[-1]
    print(f"| {name} | {v['bpb']:.3f} | {v['rate']:.3f} | {v['ws_boundary']:.3f} | {v['bytes']:,} | {bps:,.0f} |")
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
