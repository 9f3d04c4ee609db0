"""
Two measurements, each printed with the command that made it.
$ python bench.py                 # forward + backward time of each method's model on one batch
$ python bench.py --compare=True  # train each method on pycode with equal bytes, then a table and a plot of val bpb
$ python bench.py --generate=True # bytes/s of generate (KV cache) against re-running the row for every byte
Any key below can be overridden, e.g. --n_embd=128 --device=cuda --max_iters=1200.
"""
import os
import sys
import json
import time
import subprocess

import torch
import torch.nn.functional as F

from model import UNetConfig, ByteUNet, BOS, PRESETS

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
generate = False # True: model.generate against the method before its KV cache, alternated, one thread on a CPU
gen_bytes = 2048 # bytes generated from a 16-byte prompt, untrained weights, at the width above and at 18m
gen_method = 'sequential'
gen_rounds = 2 # cached, re-run, cached, re-run, ...: the best of each
gen_slow_bytes = 0 # > 0: the re-run method makes only its first gen_slow_bytes (its bytes/s is flat once a row is full)
exec(open('configurator.py').read()) # overrides from command line or config file
# -----------------------------------------------------------------------------
METHODS = {'random': ('uniform', 'select', 'add'), 'sequential': ('sequential', 'select', 'add'),
           'linear': ('linear', 'select', 'deviation'), 'nawrot': ('nawrot', 'nawrot', 'nawrot'),
           'hnet': ('hnet', 'hnet', 'hnet'), 'whitespace': ('whitespace', 'select', 'add')}
command = 'python bench.py ' + ' '.join(sys.argv[1:])


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
    n_slow = gen_slow_bytes or gen_bytes
    print(f"$ {command}\n{gen_bytes} bytes from a 16-byte prompt, {gen_method}, block_size {block_size}, batch 1, "
          f"{device}, {torch.get_num_threads()} thread(s); re-run: {n_slow} bytes")
    print("| width | params | generate (cache) bytes/s | re-run bytes/s | speed-up |\n|---|---|---|---|---|")
    g, d, u = METHODS[gen_method]
    for width, kw in (('tiny', dict(n_embd=n_embd, n_head=n_head, n_down=n_down, n_mid=n_mid, n_up=n_up)),
                      ('18m', PRESETS['18m'])):
        torch.manual_seed(seed)
        model = ByteUNet(UNetConfig(block_size=block_size, gater=g, downsampler=d, upsampler=u, **kw)).to(device).eval()
        idx = torch.randint(0, 256, (1, 16), device=device)
        idx[:, 0] = BOS
        best = [float('inf'), float('inf')]
        with torch.no_grad():
            for r in range(gen_rounds):
                for i, fn in enumerate((lambda: model.generate(idx, gen_bytes), lambda: generate_rerun(model, idx, n_slow))):
                    t0 = time.perf_counter()
                    fn()
                    if device.startswith('cuda'):
                        torch.cuda.synchronize()
                    best[i] = min(best[i], time.perf_counter() - t0)
        fast, slow = gen_bytes / best[0], n_slow / best[1]
        print(f"| {width} (D={model.config.n_embd}, {model.config.n_down}/{model.config.n_mid}/{model.config.n_up}) | "
              f"{model.get_num_params():,} | {fast:,.0f} | {slow:,.1f} | {fast / slow:.1f}x |", flush=True)
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
