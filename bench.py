"""
Measurements, each printed with the command that made it.
$ python bench.py                 # forward + backward time of each method's model on one batch
$ python bench.py --compare=True  # each method at the sweep's setting COMPARE, 3 seeds: a table, JSON and plots
$ python bench.py --table=cpu --base=/tmp/nanotok-base   # sampler vs loop, sequential vs uniform forward at 4096
                                  # bytes, the 18M training step against another checkout's model.py, alternated
$ python bench.py --table=gpu --device=cuda   # bytes/s, MFU, the sampler's share: 18M and 73M at 4096 bytes, bf16
$ python bench.py --generate=True # bytes/s of generate (KV cache) against re-running the row for every byte
$ python bench.py --generate=True --block_size=4096 --gen_points=9  # ... rows that grow to 2064 bytes, re-run timed
$ python bench.py --sweep=all     # the gater sweep: does sequential beat random, and find word edges? (SWEEP below)
$ python bench.py --paper_run=18m --device=cuda  # one GPU, no network: random vs sequential at the paper's 18M size on
                                  # the Python packages installed there, val bpb and word edges against bytes seen
Any key below can be overridden, e.g. --n_embd=128 --device=cuda --steps=50.
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
from torch.nn.attention.flex_attention import flex_attention, create_block_mask

import model as model_py
from model import UNetConfig, ByteUNet, BOS, PRESETS, gpu_peak_flops

# -----------------------------------------------------------------------------
methods = 'random,sequential,hnet,nawrot,whitespace' # names of config/method_*.py
compare = False # True: train every method of `methods` at the setting COMPARE below, 3 seeds each: compare_json
retrain = True # with compare or sweep: False reuses the checkpoints already in out_root (to measure and plot again)
out_root = 'out-compare'
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
parts = 'sampler,forward,step' # table=cpu: which of its tables (and 'gemm': float32 and bfloat16 matmul rates)
step_compile = True # table=cpu: the step table also times the 'after' model under torch.compile (~3 min to compile)
step_bf16 = True # table=cpu: ... and under bfloat16 autocast (train.py --dtype=bfloat16), compiled if step_compile
step_size = '18m' # table=cpu: the step table's model, a PRESETS name or 'tiny'
reps = 3 # table=cpu: alternated repetitions of each measurement (median reported)
sizes = '18m,73m' # table=gpu: PRESETS names, or 'tiny' (the n_embd/n_head/n_down/n_mid/n_up above)
compiles = 'False,True' # table=gpu: torch.compile off, on
dtype = 'bfloat16' # table=gpu: autocast dtype ('float32' for none)
gpu_batch = 4 # table=gpu: rows per step
gpu_block = 4096 # table=gpu: bytes per row
attns = 'model' # table=gpu: the steps' attention, 'model' (model.attention) and/or 'flex' (the candidate below; CUDA)
generate = False # True: model.generate against the method before its KV cache, alternated, one thread on a CPU
gen_bytes = 2048 # bytes generated from a 16-byte prompt, untrained weights, at the width above and at 18m
gen_method = 'sequential'
gen_rounds = 2 # cached, re-run, cached, re-run, ...: the best of each
gen_slow_bytes = 0 # > 0: the re-run method makes only its first gen_slow_bytes (its bytes/s is flat once a row is full)
gen_points = 0 # > 0: the re-run's time for all gen_bytes from its per-byte forward timed at gen_points row lengths
sweep = '' # 'all' or runs 'setting:method:seed,...' of SWEEP below: train, measure word edges, write sweep_json
sweep_json = 'assets/sweep_gater.json'
compare_json = 'assets/compare.json'
compare_extra = 'pycode_w8_m4_early_2400:random' # with compare: these 'setting:method' too, 3 seeds each (random's control)
sweep_jobs = 2 # trainings at once in a sweep or comparison, one thread each
sweep_iters = 0 # > 0: every run of a sweep or comparison takes this many steps instead (a quick check)
data_dir = 'data' # where a sweep or comparison finds data/pydocs (made by prepare.py if it is missing)
paper_run = '' # a paper size ('18m', ...): train config/train_<size>_{random,sequential}.py on data_dir/sitepy
paper_path = '' # the folder of .py files sitepy is made from (default: this Python's site-packages)
paper_flags = '' # more train.py flags for both paper runs, e.g. '--max_iters=2000' to fit a time budget
paper_json = '' # where the paper run's table goes (default: assets/paper_run_<size>.json)
sweep_rows = 1024 # val rows a sweep or comparison measures each run on, spread evenly over the val split
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


FLEX = torch.compile(flex_attention) # FlexAttention is one fused kernel only when compiled


def flex_attention_candidate(q, k, v, window, softcap):
    """ model.attention as one FlexAttention kernel, the candidate for CUDA without flash-attn (it moves into model.py
        if it beats model.attention there): causal, the last `window` keys if window, scores c*tanh(s/c); q, k, v
        (B, T, H, d). A CPU runs it forward only (FlexAttention has no CPU backward in torch 2.13) """
    T = q.size(1)
    allowed = (lambda b, h, i, j: (j <= i) & (i - j < window)) if window else (lambda b, h, i, j: j <= i)
    mask = create_block_mask(allowed, None, None, T, T, device=q.device)
    cap = (lambda s, b, h, i, j: softcap * torch.tanh(s / softcap)) if softcap else None
    q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v)) # (B, H, T, d); without contiguous(), inductor's
    return FLEX(q, k, v, score_mod=cap, block_mask=mask).transpose(1, 2) # CPU kernel misread a fused RoPE's output


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
    print(f"$ {command}\n{device}, {torch.get_num_threads()} threads, medians of {reps} alternated runs, malloc: "
          f"{os.environ.get('LD_PRELOAD') or 'the C library (see the README on tcmalloc)'}")
    g = model_py.SequentialGater(UNetConfig(n_embd=64, filter_size=8)).train()
    u = torch.rand(8, 4096)
    with torch.no_grad():
        V = g.filter(torch.randn(8, 4096, 64)).float()
    t_par, t_loop = [], []
    for _ in range(reps if 'sampler' in parts else 0):
        t_par.append(timed(lambda: g.sample(V, u)))
        t_loop.append(timed(lambda: g.scan(V, u)))
    if 'sampler' in parts:
        up = median([a / b for a, b in zip(t_loop, t_par)]) # per round, as the step table: both timed back to back
        print(f"\n| sampler, B=8 T=4096 w=8 | s |\n|---|---|\n| loop (scan) | {median(t_loop):.3f} |\n"
              f"| parallel (sample) | {median(t_par):.4f} |\n| speed-up | {up:.1f}x |")
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
            ratio = median([b / a for a, b in zip(t['random'][1:], t['sequential'][1:])]) # per round
            print(f"| {label} | {median(t['random'][1:]):.3f} | {median(t['sequential'][1:]):.3f} | {ratio:.3f} |")
    if 'gemm' in parts: # the byte layers' widest product, (4096 x 384) by (384 x 1152), each library alternated
        a, b = torch.randn(4096, 384), torch.randn(1152, 384)
        ah, bh = a.bfloat16(), b.bfloat16()
        ways = {'float32, F.linear (MKL)': lambda: F.linear(a, b),
                'bfloat16, F.linear (oneDNN)': lambda: F.linear(ah, bh)}
        if torch.backends.mkldnn.is_available(): # PyTorch's float32 path does not use it: for comparison
            am, bm = a.to_mkldnn(), b.to_mkldnn()
            ways['float32, oneDNN (mkldnn_linear)'] = lambda: torch._C._nn.mkldnn_linear(am, bm, None)
        t = {k: [] for k in ways}
        for _ in range(reps + 1): # the first round warms up
            for k, fn in ways.items():
                t[k].append(median([timed(fn) for _ in range(5)]))
        print("\n| (4096 x 384) @ (384 x 1152) | GFLOP/s |\n|---|---|")
        for k in ways:
            print(f"| {k} | {2 * 4096 * 384 * 1152 / median(t[k][1:]) / 1e9:.0f} |")
    if base and 'step' in parts:
        spec = importlib.util.spec_from_file_location('model_base', os.path.join(base, 'model.py'))
        base_py = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(base_py)
        variants = [('before', base_py, False, None), ('after', model_py, False, None)] \
            + [('compiled', model_py, True, None)] * step_compile \
            + [('bf16', model_py, step_compile, torch.autocast('cpu', dtype=torch.bfloat16))] * step_bf16
        print(f"\n| {step_size} training step, 4 x 1024 | before s/step ({base}), float32 | after, float32 s/step"
              + " | speed-up |"
              + " after, compiled s/step | speed-up |" * step_compile
              + f" after,{' compiled,' * step_compile} bfloat16 autocast s/step | speed-up |" * step_bf16
              + "\n|---|---|---|---|" + "---|---|" * (step_compile + step_bf16))
        for method in ('sequential', 'random'):
            X, nets = rows(4, 1024), {}
            for name, M, comp, ctx in variants: # each version's own optimizer (configure_optimizers: fused or not)
                net = build(M, method, 1024, **(tiny_dims if step_size == 'tiny' else PRESETS[step_size]))
                nets[name] = (M, torch.compile(net) if comp else net,
                              M.ByteUNet.configure_optimizers(net, 0.1, 1e-4, (0.9, 0.95), 'cpu'),
                              ctx or contextlib.nullcontext())
            t = {name: [] for name in nets}
            for i in range(3 + steps): # 3 warmup steps: compiling, and the first steps of each new shape
                for name, (M, net, opt, ctx) in nets.items():
                    torch.manual_seed(i)
                    t[name].append(timed(lambda: train_step(M, net, opt, X, ctx)))
            # the speed-up per round, both sides timed back to back: a machine slowing down slows them alike
            up = {name: median([b / a for b, a in zip(t['before'][3:], t[name][3:])]) for name in nets}
            print(f"| {method} | {median(t['before'][3:]):.3f} |"
                  + ''.join(f" {median(t[name][3:]):.3f} | {up[name]:.2f}x |" for name in nets if name != 'before'),
                  flush=True)
            if profile:
                for name, (M, net, opt, ctx) in nets.items():
                    train_step(M, net, opt, X, ctx) # its own warm step: the others' steps evict its caches
                    with torch.profiler.profile() as prof:
                        train_step(M, net, opt, X, ctx)
                    print(f"\nprofile of one {method} step, {name}:")
                    print(prof.key_averages().table(sort_by='self_cpu_time_total', row_limit=12))
    sys.exit(0)

if table == 'gpu': # the prepared GPU measurement: attention alone, then one line per size x method x compile x attns
    on_cuda = device.startswith('cuda')
    peak = gpu_peak_flops(torch.cuda.get_device_name(device)) if on_cuda else None
    ctx = torch.autocast(device.split(':')[0], dtype=getattr(torch, dtype)) if dtype != 'float32' \
        else contextlib.nullcontext()
    print(f"$ {command}\n{torch.cuda.get_device_name(device) if on_cuda else device}, {gpu_batch} x {gpu_block} "
          f"bytes, {dtype}, peak {peak or 0:.3g} FLOP/s, median of {steps} steps after 5 (compile: 10) warmup")
    reference_attention = model_py.attention
    if 'flex' in attns.split(',') and not on_cuda:
        raise SystemExit("bench.py: --attns=flex needs CUDA: FlexAttention has no backward on a CPU")
    # one attention call each way, forward and backward (forward only on a CPU), against model.attention in float32
    last = sizes.split(',')[-1]
    H = (tiny_dims if last == 'tiny' else PRESETS[last])['n_head']
    print(f"| attention, {gpu_batch} rows, {H} heads of 64 | impl | ms | output rel. error | grad rel. error |"
          "\n|---|---|---|---|---|")
    for label, T, window in ((f'byte layer, {gpu_block} bytes, window 64', gpu_block, 64),
                             (f'mid layer, {gpu_block // 5} chunks, causal', gpu_block // 5, 0)):
        qkv = [torch.randn(gpu_batch, T, H, 64, device=device) for _ in range(3)]
        dy = torch.randn_like(qkv[0])
        def attend(fn, x): # -> the output and, on CUDA, the gradients of q, k, v
            y = fn(*x, window, 50.0)
            return [y, *torch.autograd.grad(y, x, dy.to(y.dtype))] if on_cuda else [y]
        ref = attend(reference_attention, [t.requires_grad_(on_cuda) for t in qkv])
        for name, fn in (('model', reference_attention), ('flex', flex_attention_candidate)):
            x = [t.detach().to(getattr(torch, dtype)).requires_grad_(on_cuda) for t in qkv]
            out = attend(fn, x)
            ms = median([timed(lambda: attend(fn, x)) for _ in range(5 + steps)][5:]) * 1000 # 5 warmup (compiling)
            e = [((a.float() - b).norm() / b.norm()).item() for a, b in zip(out, ref)]
            print(f"| {label} | {name} | {ms:.2f}{'' if on_cuda else ' (forward)'} | {e[0]:.1e} | "
                  f"{f'{max(e[1:]):.1e}' if on_cuda else '-'} |", flush=True)
    # the candidate inside a compiled model, where inductor fuses the ops before it into its inputs: float32 logits
    torch.manual_seed(seed)
    net = build(model_py, 'sequential', 512, **tiny_dims).eval()
    X, g = rows(gpu_batch, 512), (torch.rand(gpu_batch, 512, device=device) < 0.2).float()
    with torch.no_grad():
        ref = net(X, gates=g)['logits']
        model_py.attention = flex_attention_candidate
        diff = (torch.compile(net)(X, gates=g)['logits'] - ref).abs().max().item()
    model_py.attention = reference_attention
    print(f"tiny model, {gpu_batch} x 512 bytes, compiled with flex: max |logits - model.attention's| {diff:.1e}")
    print("| size | method | compile | attention | ms/step | bytes/s | MFU | sampler share |"
          "\n|---|---|---|---|---|---|---|---|")
    for size in sizes.split(','):
        dims = tiny_dims if size == 'tiny' else PRESETS[size]
        for method in ('sequential', 'random'):
            for comp, attn in ((c == 'True', a) for c in compiles.split(',') for a in attns.split(',')):
                model_py.attention = flex_attention_candidate if attn == 'flex' else reference_attention
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
                print(f"| {size} | {method} | {comp} | {attn} | {dt * 1000:.1f} | {X.numel() / dt:,.0f} | {mfu} | "
                      f"{share} |", flush=True)
    model_py.attention = reference_attention
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

# the gater sweep and the comparison: runs 'setting:method:seed' of the tiny model on pydocs (train.py with SWEEP_BASE,
# config/method_<method>.py and the setting's flags), sweep_jobs at a time on one thread each; then every checkpoint is
# measured on the same sweep_rows val windows, and each run's numbers, val curve and command go to the JSON file
SWEEP_BASE = ['config/train_tiny_pycode.py', '--dataset=pydocs', '--eval_interval=200', '--window=64',
              '--n_mid=2'] # the tiny model as it was before the sweep: window and depth pinned, the settings change them
ITERS = lambda n: [f'--max_iters={n}', f'--lr_decay_iters={n}'] # steps of 8 rows of 256 bytes, cosine over all of them
X10 = ['--pg_weight=0.1', '--rate_weight=0.1'] # lambda_pi and lambda_c x10 together (one alone moves the rate)
W8 = [*ITERS(1200), '--window=8'] # the byte layers see 8 bytes: what lies further back comes through the chunks
SWEEP = { # setting -> train.py flags
    # 600 steps (1.1M bytes), the tiny model as it is: its byte layers see 64 bytes, and chunks matter little
    'w64': ITERS(600),
    'w64_x10': [*ITERS(600), *X10], # the paper's gate_scale 1/16: Adam moves the gate logits 16x slower than at 1
    'w64_x10_scale1': [*ITERS(600), *X10, '--gate_scale=1.0'],
    # 1200 steps (2.3M bytes), the byte layers' window and the mid layers' depth
    'w64_1200': ITERS(1200),
    'w16': [*ITERS(1200), '--window=16'],
    'w16_m4': [*ITERS(1200), '--window=16', '--n_mid=4'],
    'w8': W8,
    'w8_m4': [*W8, '--n_mid=4'],
    'w8_x10_scale1': [*W8, *X10, '--gate_scale=1.0'],
    'w8_m4_x10_scale1': [*W8, '--n_mid=4', *X10, '--gate_scale=1.0'],
    'w8_scale1': [*W8, '--gate_scale=1.0'], # the paper's weights, the gate logits at scale 1
    'w8_m4_scale1': [*W8, '--n_mid=4', '--gate_scale=1.0'],
    # controls for random at w8: the early-exit head trained as sequential's is (lambda_e 0.1); evenly spaced gates
    'w8_early': [*W8, '--early_weight=0.1'],
    'w8_equidistant': [*W8, '--gater=equidistant'],
    'w8_m4_early': [*W8, '--n_mid=4', '--early_weight=0.1'],
    # the paper's ablation directions, at w8_scale1 and at w8_m4_x10_scale1
    'w8_scale1_gamma1': [*W8, '--gate_scale=1.0', '--gamma=1.0'],
    'w8_scale1_no_consistency': [*W8, '--gate_scale=1.0', '--rate_weight=0.0'],
    'w8_scale1_no_early_exit': [*W8, '--gate_scale=1.0', '--early_exit_reward=False'],
    'w8_m4_x10_scale1_gamma1': [*W8, '--n_mid=4', *X10, '--gate_scale=1.0', '--gamma=1.0'],
    'w8_m4_x10_scale1_no_consistency': [*W8, '--n_mid=4', *X10, '--gate_scale=1.0', '--rate_weight=0.0'],
    'w8_m4_x10_scale1_no_early_exit': [*W8, '--n_mid=4', *X10, '--gate_scale=1.0', '--early_exit_reward=False'],
    # the compared setting on code (pycode, the standard library's sources): the quick start's corpus
    'pycode_w8_m4': [*W8, '--n_mid=4', '--dataset=pycode'],
    'pycode_w8_m4_x10_scale1': [*W8, '--n_mid=4', *X10, '--gate_scale=1.0', '--dataset=pycode'],
    'pycode_w8_m4_early': [*W8, '--n_mid=4', '--early_weight=0.1', '--dataset=pycode'],
    # twice the bytes (2400 steps, 4.7M bytes): does every seed find the word edges?
    'pycode_w8_m4_2400': [*ITERS(2400), '--window=8', '--n_mid=4', '--dataset=pycode'],
    'pycode_w8_m4_x10_scale1_2400': [*ITERS(2400), '--window=8', '--n_mid=4', *X10, '--gate_scale=1.0',
                                     '--dataset=pycode'],
    'pycode_w8_m4_early_2400': [*ITERS(2400), '--window=8', '--n_mid=4', '--early_weight=0.1', '--dataset=pycode'],
    # the paper's ablation directions at the compared setting
    'pycode_w8_m4_x10_scale1_2400_gamma1': [*ITERS(2400), '--window=8', '--n_mid=4', *X10, '--gate_scale=1.0',
                                            '--dataset=pycode', '--gamma=1.0'],
    'pycode_w8_m4_x10_scale1_2400_no_consistency': [*ITERS(2400), '--window=8', '--n_mid=4', *X10, '--gate_scale=1.0',
                                                    '--dataset=pycode', '--rate_weight=0.0'],
    'pycode_w8_m4_x10_scale1_2400_no_early_exit': [*ITERS(2400), '--window=8', '--n_mid=4', *X10, '--gate_scale=1.0',
                                                   '--dataset=pycode', '--early_exit_reward=False'],
    'pycode_w8_m4_x10_scale1_gamma1': [*W8, '--n_mid=4', *X10, '--gate_scale=1.0', '--dataset=pycode', '--gamma=1.0'],
    'pycode_w8_m4_x10_scale1_no_consistency': [*W8, '--n_mid=4', *X10, '--gate_scale=1.0', '--dataset=pycode',
                                               '--rate_weight=0.0'],
    'pycode_w8_m4_x10_scale1_no_early_exit': [*W8, '--n_mid=4', *X10, '--gate_scale=1.0', '--dataset=pycode',
                                              '--early_exit_reward=False'],
}
SEEDS = lambda run, n=3: [f'{run}:{s}' for s in range(1, n + 1)]
SWEEP_RUNS = [*SEEDS('w64:random'), *SEEDS('w64_x10_scale1:sequential'), 'w64:whitespace:1', 'w64_x10:sequential:1',
              'w64_1200:random:1', 'w64_1200:whitespace:1', 'w16:random:1', 'w16:whitespace:1', 'w16_m4:random:1',
              'w16_m4:whitespace:1', *SEEDS('w8:random'), *SEEDS('w8:whitespace'), *SEEDS('w8:sequential'),
              *SEEDS('w8_x10_scale1:sequential'), *SEEDS('w8_scale1:sequential'), *SEEDS('w8_early:random', 2),
              *SEEDS('w8_equidistant:random', 2), 'w8_scale1_gamma1:sequential:1',
              'w8_scale1_no_consistency:sequential:1', 'w8_scale1_no_early_exit:sequential:1',
              *SEEDS('w8_m4:random'), *SEEDS('w8_m4:whitespace'), *SEEDS('w8_m4_early:random'),
              *SEEDS('w8_m4_x10_scale1:sequential'),
              'w8_m4_x10_scale1_gamma1:sequential:1', 'w8_m4_x10_scale1_no_consistency:sequential:1',
              'w8_m4_x10_scale1_no_early_exit:sequential:1', *SEEDS('w8_m4_scale1:sequential'),
              *SEEDS('pycode_w8_m4:random'), *SEEDS('pycode_w8_m4_early:random'),
              *SEEDS('pycode_w8_m4_x10_scale1:sequential'), 'pycode_w8_m4_x10_scale1_gamma1:sequential:1',
              'pycode_w8_m4_x10_scale1_no_consistency:sequential:1',
              'pycode_w8_m4_x10_scale1_no_early_exit:sequential:1', *SEEDS('pycode_w8_m4_2400:random'),
              *SEEDS('pycode_w8_m4_x10_scale1_2400:sequential'), 'pycode_w8_m4_x10_scale1_2400_gamma1:sequential:2',
              'pycode_w8_m4_x10_scale1_2400_no_consistency:sequential:2',
              'pycode_w8_m4_x10_scale1_2400_no_early_exit:sequential:2'] # --sweep=all
COMPARE = 'pycode_w8_m4_2400' # --compare=True: every method of `methods` here, 3 seeds (sequential at COMPARE_SEQ)
COMPARE_SEQ = 'pycode_w8_m4_x10_scale1_2400'


@torch.no_grad()
def word_edges(out_dir, dataset, n_rows, batch=32):
    """ a checkpoint's val bpb and boundaries on n_rows val rows spread evenly over the split (train.py's rows: windows
        of T-1 bytes of each document, picked as its val_rows picks them, the same for every run): rate, ws_boundary
        (share of whitespace bytes that end a chunk), word_boundary (share of whitespace bytes at which or just before
        which a chunk ends: the word's end or its space) and boundary_precision (share of chunk ends on such a word
        edge); the forced ends of a row (BOS, last byte) are not counted """
    ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), map_location='cpu', weights_only=True)
    model = ByteUNet(UNetConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    model.eval()
    T = ckpt['model_args']['block_size']
    data = np.fromfile(os.path.join(data_dir, dataset, 'val.bin'), dtype=np.uint8)
    off = np.load(os.path.join(data_dir, dataset, 'val_offsets.npy'))
    starts = np.concatenate([np.arange(a, b, T - 1) for a, b in zip(off[:-1], off[1:])]) # every window's start
    ends = np.minimum(starts + T - 1, np.repeat(off[1:], -(-np.diff(off) // (T - 1))))
    picked = np.unique(np.linspace(0, len(starts) - 1, n_rows).round().astype(int)) # the rows measured
    s = dict.fromkeys(['nll', 'targets', 'gates', 'bytes', 'ws', 'ws_hit', 'ws_word', 'on_edge', 'edges'], 0.0)
    for k in range(0, len(picked), batch):
        X = torch.zeros(len(picked[k:k + batch]), T, dtype=torch.long)
        M = torch.zeros_like(X, dtype=torch.bool)
        for i, d in enumerate(picked[k:k + batch]):
            row = torch.from_numpy(data[starts[d]:ends[d]].astype(np.int64))
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
                val_rows=len(picked))


@torch.no_grad()
def excerpt(out_dir, text, width=100):
    """ the text with a '|' after every byte a checkpoint's gater ends a chunk at (eval mode, the first row) """
    ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), map_location='cpu', weights_only=True)
    model = ByteUNet(UNetConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    torch.manual_seed(seed)
    X = torch.tensor([[BOS] + list(text.encode())[:model.config.block_size - 1]])
    gates = model.eval()(X)['gates'][0, 1:]
    return ''.join(chr(b) + '|' * int(g) for b, g in zip(X[0, 1:].tolist(), gates.tolist()))[:width]


def train_runs(runs, json_path):
    """ train every run 'setting:method:seed' (sweep_jobs at a time, one thread each), then measure each checkpoint
        with word_edges; each run's numbers, command and val curve go to json_path as they come -> that dict """
    results = json.load(open(json_path)) if os.path.exists(json_path) else {}
    jobs = {}
    for run in runs:
        setting, method, run_seed = (run.split(':') + ['', '', ''])[:3] if run.count(':') == 2 else ('?', '?', '?')
        if setting not in SWEEP or not os.path.exists(f'config/method_{method}.py') or not run_seed.isdigit():
            sys.exit(f"bench.py: '{run}' is not setting:method:seed with a setting of SWEEP ({', '.join(SWEEP)}), a "
                     f"config/method_<method>.py and a whole seed")
        flags = SWEEP[setting]
        out_dir = os.path.join(out_root, 'sweep', run.replace(':', '_'))
        extra = (ITERS(sweep_iters) if sweep_iters else []) + ([f'--data_dir={data_dir}'] if data_dir != 'data' else [])
        cmd = ['train.py', *SWEEP_BASE, f'config/method_{method}.py', *flags, *extra, f'--seed={run_seed}',
               f'--out_dir={out_dir}']
        dataset = [f for f in cmd if f.startswith('--dataset=')][-1].partition('=')[2] # the setting's, or pydocs
        jobs[run] = (setting, method, int(run_seed), cmd, out_dir, dataset)
    for dataset in {job[5] for job in jobs.values()}: # the embedded corpora are made here, if missing
        if not os.path.exists(os.path.join(data_dir, dataset, 'val_offsets.npy')):
            subprocess.run([sys.executable, 'prepare.py', dataset, f'--out_dir={data_dir}/{dataset}'], check=True)
    def finished(cmd, out_dir): # its log reached the run's last step (a killed run leaves a ckpt.pt of an earlier eval)
        iters = int([f for f in cmd if f.startswith('--max_iters=')][-1].partition('=')[2])
        log = os.path.join(out_dir, 'log.jsonl')
        return os.path.exists(log) and any(json.loads(line)['iter'] == iters for line in open(log) if '"val"' in line)
    todo = [r for r in runs if retrain or not finished(jobs[r][3], jobs[r][4])]
    running, started = {}, {}
    while todo or running: # at most sweep_jobs trainings at once
        while todo and len(running) < sweep_jobs:
            run = todo.pop(0)
            cmd, out_dir = jobs[run][3], jobs[run][4]
            if os.path.exists(os.path.join(out_dir, 'log.jsonl')):
                os.remove(os.path.join(out_dir, 'log.jsonl')) # a fresh log for a fresh run
            print('$', 'python', ' '.join(cmd), flush=True)
            started[run] = time.time()
            running[run] = subprocess.Popen([sys.executable, *cmd], stdout=subprocess.DEVNULL,
                                            env={**os.environ, 'OMP_NUM_THREADS': '1'})
        time.sleep(1)
        for run, p in list(running.items()):
            if p.poll() is not None:
                del running[run]
                if p.returncode:
                    sys.exit(f"bench.py: {run} failed (exit {p.returncode}): rerun `python {' '.join(jobs[run][3])}`")
                results.setdefault(run, {})['wall_s'] = round(time.time() - started[run])
    for run in runs:
        setting, method, run_seed, cmd, out_dir, dataset = jobs[run]
        val = [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]
        val = [r for r in val if r['split'] == 'val']
        res = word_edges(out_dir, dataset, sweep_rows)
        results[run] = dict(setting=setting, method=method, seed=run_seed, command='python ' + ' '.join(cmd),
                            bytes=val[-1]['bytes'], wall_s=results.get(run, {}).get('wall_s', 0), **res,
                            curve=[{k: r[k] for k in ('bytes', 'bpb', 'rate', 'ws_boundary', 'word_boundary')}
                                   for r in val])
        print(f"{run}: " + ', '.join(f"{k} {v:.4f}" for k, v in res.items() if isinstance(v, float)), flush=True)
        os.makedirs(os.path.dirname(json_path) or '.', exist_ok=True)
        with open(json_path, 'w') as f:
            json.dump(results, f, indent=1)
    return results


def summary(results, runs, json_path):
    """ mean ± std over the seeds of each (setting, method) of these runs: printed as a table, written beside
        json_path as <name>_table.json, and the mean val curves of bpb and word-edge recall plotted as <name>.png """
    keys = ['bpb', 'rate', 'ws_boundary', 'word_boundary', 'boundary_precision']
    groups = {}
    for run in runs:
        r = results[run]
        groups.setdefault((r['setting'], r['method']), []).append(r)
    table = []
    print(f"\n$ {command}\n| setting | method | seeds | " + ' | '.join(keys) + ' |\n|---|---|---|' + '---|' * len(keys))
    for (setting, method), rs in groups.items():
        row = dict(setting=setting, method=method, seeds=len(rs), bytes=rs[0]['bytes'])
        for k in keys:
            v = [r[k] for r in rs]
            row[k], row[k + '_std'] = float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else None
        table.append(row)
        cell = lambda k: f"{row[k]:.3f} ± {row[k + '_std']:.3f}" if row['seeds'] > 1 else f"{row[k]:.3f}"
        print(f"| {setting} | {method} | {len(rs)} | " + ' | '.join(cell(k) for k in keys) + ' |')
    with open(json_path.replace('.json', '_table.json'), 'w') as f:
        json.dump(dict(command=command, rows=table), f, indent=1)
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for (setting, method), rs in groups.items():
        if len(rs) < 2: # the seeded groups only, the mean over their seeds (train.py's val rows)
            continue
        x = [c['bytes'] / 1e6 for c in rs[0]['curve']][1:]
        for ax, k in zip(axes, ['bpb', 'word_boundary']):
            ax.plot(x, np.mean([[c[k] for c in r['curve']][1:] for r in rs], 0), label=f"{method} ({setting})")
    for ax, k in zip(axes, ['val bits per byte', 'word-edge recall (word_boundary)']):
        ax.set_xlabel('bytes seen (millions)'), ax.set_ylabel(k), ax.grid(alpha=0.3), ax.legend(fontsize=8)
    plt.savefig(json_path.replace('.json', '.png'), dpi=120, bbox_inches='tight')
    print(f"wrote {json_path}, {json_path.replace('.json', '_table.json')} and {json_path.replace('.json', '.png')}")


if paper_run: # no download needed: real code and docstrings that any machine with PyTorch installed has
    import sysconfig
    src = paper_path or sysconfig.get_paths()['purelib']
    if not os.path.exists(os.path.join(data_dir, 'sitepy', 'val_offsets.npy')):
        print(f"$ python prepare.py files --path={src} --glob='**/*.py' --out_dir={data_dir}/sitepy", flush=True)
        subprocess.run([sys.executable, 'prepare.py', 'files', f'--path={src}', '--glob=**/*.py',
                        f'--out_dir={data_dir}/sitepy'], check=True)
    table = {}
    for method in ('random', 'sequential'):
        out_dir = os.path.join(out_root, f'paper_{paper_run}_{method}')
        cmd = ['train.py', f'config/train_{paper_run}_{method}.py', '--dataset=sitepy', f'--data_dir={data_dir}',
               f'--device={device}', f'--out_dir={out_dir}', *paper_flags.split()]
        if not os.path.exists(cmd[1]):
            sys.exit(f"bench.py: --paper_run={paper_run}: there is no {cmd[1]}")
        print('$ python', ' '.join(cmd), flush=True)
        t0 = time.time()
        subprocess.run([sys.executable, *cmd], check=True)
        log = [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]
        train = [r for r in log if r['split'] == 'train']
        table[method] = dict(command='python ' + ' '.join(cmd), wall_s=round(time.time() - t0),
                             bytes_per_sec=sorted(r['bytes_per_sec'] for r in train)[len(train) // 2],
                             val=[r for r in log if r['split'] == 'val'])
    keys = ['bpb', 'rate', 'ws_boundary', 'word_boundary', 'boundary_precision']
    print(f"\n$ {command}\n| bytes seen | method | " + ' | '.join(keys) + ' |\n|---|---|' + '---|' * len(keys))
    for rows in zip(*(t['val'] for t in table.values())): # the evals of both runs, side by side
        for method, r in zip(table, rows):
            print(f"| {r['bytes']:,} | {method} | " + ' | '.join(f"{r[k]:.4f}" for k in keys) + ' |')
    for method, t in table.items():
        print(f"{method}: {t['wall_s']} s, {t['bytes_per_sec']:,.0f} bytes/s (median)")
    paper_json = paper_json or f'assets/paper_run_{paper_run}.json'
    os.makedirs(os.path.dirname(paper_json) or '.', exist_ok=True)
    with open(paper_json, 'w') as f:
        json.dump(dict(command=command, runs=table), f, indent=1)
    print(f"wrote {paper_json}")
    sys.exit(0)

if sweep or compare:
    import math
    import numpy as np
    from model import WHITESPACE, next_byte_nll
    if compare: # the README's comparison: 3 seeds of each method at COMPARE (sequential at COMPARE_SEQ)
        runs = [f"{COMPARE_SEQ if m == 'sequential' else COMPARE}:{m}:{s}" for m in methods.split(',') for s in (1, 2, 3)]
        runs += [f'{run}:{s}' for run in compare_extra.split(',') if run for s in (1, 2, 3)]
        json_path = compare_json
    else:
        runs, json_path = SWEEP_RUNS if sweep == 'all' else sweep.split(','), sweep_json
    results = train_runs(runs, json_path)
    summary(results, runs, json_path)
    if compare:
        text = "Return the number of bytes in the file, or raise an error if the file does not exist."
        seq = f"{out_root}/sweep/{COMPARE_SEQ}_sequential_1"
        if os.path.exists(os.path.join(seq, 'ckpt.pt')):
            print(f"sequential, seed 1 ('|' = chunk end): {excerpt(seq, text)}")
    sys.exit(0)

# the default: forward + backward time of each method
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
