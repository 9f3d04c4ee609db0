"""
Train the byte U-Net, with its gater learned by REINFORCE with discounting (Dauncey & Wattenhofer 2026).

One process (a small model on the embedded pycode corpus, CPU is fine):
$ python train.py
A paper run on one node of 8 GPUs:
$ torchrun --standalone --nproc_per_node=8 train.py config/train_73m_random.py
Two nodes (run on both, the first one's address in --master_addr):
$ torchrun --nproc_per_node=8 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 train.py CONFIG
Any key below can be overridden: python train.py config/x.py --batch_size=4 --compile=False

The gater's training signal, inline in the loop below, departs from textbook REINFORCE in the paper's ways:
1. the reward of byte t is how much the full model beats the early-exit head on it, r_t = CE_early_t - CE_t;
2. the baseline is the batch mean of the reward at the same position t (no learned critic);
3. the gate at t is credited with the discounted sum of later advantages, G_t = sum_k gamma^k A_{t+k} (gamma 0.99):
   a decision changes the predictions after it, and discounting keeps the credit local, which lowers the variance;
4. a rate loss holds the share of boundaries at its target (1/5).
"""

import os
import sys
import json
import math
import time
import signal
import subprocess
from contextlib import nullcontext
from dataclasses import asdict, fields

import numpy as np
import torch
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model import (UNetConfig, ByteUNet, binomial_prior, boundary_counts, boundary_metrics, bpe_gates,
                   discounted_returns, gpu_peak_flops, hnet_ratio_loss, next_byte_nll)

# -----------------------------------------------------------------------------
# default config values: the quick start, a small model on the embedded pycode corpus that trains on a CPU in a few
# minutes and learns its boundaries (README, 'a comparison measured here'); the paper's values are in config/
# I/O
out_dir = 'out'
eval_interval = 200
log_interval = 10
eval_iters = 8 # val batches per eval; the val rows are the same every time
eval_only = False
always_save_checkpoint = True # else only when val loss improves
init_from = 'scratch' # 'scratch', 'resume' (from out_dir/ckpt.pt), or 'auto': resume if there is one (requeued jobs)
max_bad_steps = 5 # stop after this many non-finite steps in a row (each one is skipped on every rank)
# wandb logging
wandb_log = False
wandb_project = 'nanotok'
wandb_run_name = 'run'
# data
dataset = 'pycode' # data/<dataset>/{train,val}.bin and {train,val}_offsets.npy, written by prepare.py
data_dir = 'data'
gradient_accumulation_steps = 1 # over all processes: each one runs this / world_size micro-steps
batch_size = 8 # rows per micro-step and process
block_size = 256 # bytes per row, BOS included: a row is BOS + a window of block_size-1 bytes of a document
# model (the fields of UNetConfig, same names)
n_embd = 64
n_head = 2
n_down = 1
n_mid = 4 # the quick start's: 4 mid layers (the paper's sizes set their own)
n_up = 1
window = 8 # the quick start's: byte layers see 8 bytes, further back only through chunks (paper: 64)
attn_softcap = 50.0
gater = 'sequential'
downsampler = 'select'
upsampler = 'add'
rate = 0.2 # share of bytes that end a chunk: the gater's prior and the rate loss's target
filter_size = 8
gate_scale = 1.0 # the quick start's; the paper's 1/16 (config/method_sequential.py) learns 16x slower
gate_softcap = 6.0
nawrot_temp = 0.5
# boundaries prescribed from outside the model ('' or 'bpe': a gate at the first byte of each tiktoken token)
prescribe = ''
bpe_encoding = 'gpt2'
# losses: (1-early_weight) CE + early_weight CE_early + pg_weight PG + rate_weight rate_loss
early_weight = 0.1 # lambda_e: the early-exit head's share of the byte loss
pg_weight = 0.1 # lambda_pi: the score-function (REINFORCE) loss of the gater (the paper's 0.01 in method_sequential.py)
gamma = 0.99 # discount of later rewards along the bytes
early_exit_reward = True # reward CE_early - CE; False: reward -CE
batch_baseline = True # subtract the batch mean reward at each position
rate_loss = 'ours' # 'ours': mean(logit) * sg(mean(p) - rate); 'hnet': H-Net's ratio loss; 'binomial': Nawrot's prior
rate_weight = 0.1 # lambda_c (the paper's 0.01 in config/method_sequential.py)
# adamw optimizer and schedule: linear warmup from 0.1*lr, then cosine to min_lr at lr_decay_iters
learning_rate = 3e-3
max_iters = 2400
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.999
grad_clip = 1.0 # clip the global gradient norm once per optimizer step; 0 disables
warmup_iters = 30
lr_decay_iters = 2400
min_lr = 0.0
# system
device = 'cuda' if torch.cuda.is_available() else 'cpu' # 'cpu', 'cuda', 'cuda:1', 'mps'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'
compile = False # torch.compile the model (one graph for every chunk count: the mid level's length is dynamic)
peak_flops = 0.0 # MFU's denominator in FLOP/s; 0: the GPU's bf16 dense peak from model.PEAK_FLOPS by its name
seed = 1337
# fault injection, for tests/test_train.py only (-1: off)
signal_at_iter = -1 # rank 0 sends itself SIGTERM during this iteration: a preemption at a known step
nan_at_iter = -1 # the last rank's loss is NaN in this iteration and the next nan_iters-1
nan_iters = 1
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
exec(open('configurator.py').read()) # overrides from the command line or a config file
config = {k: globals()[k] for k in config_keys} # will be useful for logging
model_keys = [f.name for f in fields(UNetConfig) if f.name != 'vocab_size']
from model import BOS # after the configurator, so it is not a config key
# values the configurator cannot judge by their type: one line each, before any work starts
for k in ('batch_size', 'gradient_accumulation_steps', 'block_size', 'eval_iters', 'eval_interval', 'log_interval',
          'max_bad_steps'):
    if config[k] <= 0:
        raise SystemExit(f"train.py: --{k}={config[k]} must be positive")
if rate_loss not in ('ours', 'hnet', 'binomial'):
    raise SystemExit(f"train.py: --rate_loss={rate_loss}: use 'ours', 'hnet' or 'binomial'")
if dtype not in ('float32', 'bfloat16', 'float16'):
    raise SystemExit(f"train.py: --dtype={dtype}: use float32, bfloat16 or float16")
if device.startswith('cuda') and not torch.cuda.is_available():
    raise SystemExit(f"train.py: --device={device} but this PyTorch sees no CUDA GPU; use --device=cpu --dtype=float32")
try:
    torch.device(device)
except RuntimeError as e:
    raise SystemExit(f"train.py: --device={device}: {e}")
try:
    UNetConfig(**{k: config[k] for k in model_keys}) # checks the variant names and their combination
except ValueError as e:
    raise SystemExit(f"train.py: {e}")
# -----------------------------------------------------------------------------

ddp = int(os.environ.get('RANK', -1)) != -1 # is this a torchrun run?
if ddp:
    dist.init_process_group(backend='nccl' if device.startswith('cuda') else 'gloo')
    ddp_rank, ddp_local_rank, ddp_world_size = dist.get_rank(), int(os.environ['LOCAL_RANK']), dist.get_world_size()
    if device.startswith('cuda'):
        device = f'cuda:{ddp_local_rank}'
        torch.cuda.set_device(device)
else:
    ddp_rank, ddp_world_size = 0, 1
master_process = ddp_rank == 0 # this process logs, evaluates the totals and writes checkpoints
# the global batch is fixed: the processes split its micro-batches, or with more processes than micro-batches (the
# defaults under torchrun) `share` processes split each micro-batch's rows and all-reduce its baseline
share = max(1, ddp_world_size // gradient_accumulation_steps) # processes per micro-batch
if gradient_accumulation_steps % ddp_world_size and (ddp_world_size % gradient_accumulation_steps
                                                     or batch_size % share):
    raise SystemExit(f"train.py: {ddp_world_size} processes cannot split --gradient_accumulation_steps="
                     f"{gradient_accumulation_steps} micro-batches of --batch_size={batch_size} rows: use a multiple "
                     f"of {ddp_world_size}, or a divisor of {ddp_world_size} and a batch_size that its share divides")
accum = max(1, gradient_accumulation_steps // ddp_world_size) # micro-steps of this process
rows_per_iter = gradient_accumulation_steps * batch_size # over all processes
if master_process:
    os.makedirs(out_dir, exist_ok=True)
    print(f"{rows_per_iter} rows of up to {block_size} bytes per iteration ({ddp_world_size} processes)")
device_type = 'cuda' if 'cuda' in device else 'cpu'
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
# mixed precision on any device: on a CPU with avx512_bf16 or AMX, bfloat16 matmuls run 4-5x faster than float32
ctx = nullcontext() if dtype == 'float32' else torch.amp.autocast(device_type, getattr(torch, dtype))

# data: documents as bytes, cut into rows; a row is BOS + a window of up to block_size-1 consecutive bytes of one
# document (a document of n bytes gives ceil(n/(block_size-1)) rows), the last one padded with a loss mask
data_path = os.path.join(data_dir, dataset)
needed = [os.path.join(data_path, f'{s}{x}') for s in ('train', 'val') for x in ('.bin', '_offsets.npy')]
if not any(map(os.path.exists, needed)):
    if dataset == 'pycode' and master_process: # the embedded corpus needs no network: make it now
        print(f"{data_path} is missing: running `python prepare.py pycode --out_dir={data_path}` first")
        subprocess.run([sys.executable, 'prepare.py', 'pycode', f'--out_dir={data_path}'], check=True)
    if ddp:
        dist.barrier()
remake = f"run `python prepare.py {dataset} --out_dir={data_path}` to make it again"
for f in needed:
    if not os.path.exists(f):
        raise SystemExit(f"train.py: {f} is missing: {remake}")

def load_split(split):
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

data, row_start, row_len = {}, {}, {}
for split in ('train', 'val'):
    data[split], off = load_split(split)
    row_start[split], row_len[split] = row_index(off, block_size - 1)
n_rows = {s: len(row_start[s]) for s in ('train', 'val')}
if master_process:
    print(f"rows of {block_size} bytes: {n_rows['train']:,} per epoch of train, {n_rows['val']:,} of val")

if prescribe == 'bpe':
    import tiktoken
    try:
        enc = tiktoken.get_encoding(bpe_encoding)
    except Exception as e: # a download that failed, or an unknown name
        why = str(e).partition('\n')[0][:200]
        raise SystemExit(f"train.py: cannot load tiktoken encoding '{bpe_encoding}' ({type(e).__name__}: {why}); "
                         f"no network? set TIKTOKEN_CACHE_DIR to a folder with a cached copy")

def get_rows(split, rows):
    """ rows (array of row indices) -> X (B, T) long, M (B, T) bool real positions, prescribed gates or None """
    X = np.zeros((len(rows), block_size), dtype=np.int64) # right padding with byte 0, masked out
    M = np.zeros((len(rows), block_size), dtype=bool)
    for i, r in enumerate(rows):
        start, n = row_start[split][r], 1 + row_len[split][r] # BOS + bytes
        X[i, 0], X[i, 1:n], M[i, :n] = BOS, data[split][start:start + n - 1], True
    prescribed = None # BPE guidance: the tiktoken tokens of each row's bytes, looked up ahead of the model (bpe_gates)
    if prescribe == 'bpe':
        prescribed = torch.stack([bpe_gates(enc, x[1:m.sum()].astype(np.uint8).tobytes(), block_size)
                                  for x, m in zip(X, M)])
    pin = lambda t: t.pin_memory().to(device, non_blocking=True) if device_type == 'cuda' else t.to(device) # async
    return [pin(t) if t is not None else None for t in (torch.from_numpy(X), torch.from_numpy(M), prescribed)]

_perm = {} # epoch -> its shuffled row order, for the epochs still being read
def train_rows(it, micro):
    """ the rows of micro-batch `micro` (0..gradient_accumulation_steps-1) of iteration `it`: a pure function of
        (seed, it, micro), so resuming continues the same stream, and rank r reads the micro-batches r, r+world, ...:
        a disjoint share of a global batch that does not depend on the process count. Each epoch is a seeded
        permutation of all the rows of train, so every byte is read once per epoch """
    first = (it * gradient_accumulation_steps + micro) * batch_size # index into the endless stream of rows
    epoch, pos = divmod(np.arange(first, first + batch_size), n_rows['train'])
    for e in set(epoch.tolist()) - set(_perm):
        _perm[e] = np.random.default_rng([seed, e]).permutation(n_rows['train'])
    for e in [e for e in _perm if e < epoch[0]]: # epochs behind this micro-batch are never read again
        del _perm[e]
    return np.array([_perm[e][p] for e, p in zip(epoch, pos)])

def val_rows():
    """ the eval_iters*batch_size val rows, spread evenly over the whole split (all of it when it has fewer) """
    return np.linspace(0, n_rows['val'] - 1, min(n_rows['val'], eval_iters * batch_size)).round().astype(np.int64)

def sample_seed(it, micro):
    """ gate sampling is seeded per micro-batch as the rows are, so a resumed or re-sharded run samples alike """
    return seed * 1_000_003 + it * 4099 + micro

# model
iter_num, best_val_loss, bytes_seen, bad_steps, off_target = 0, 1e9, 0, 0, 0
model_args = {k: globals()[k] for k in model_keys}
ckpt_path = os.path.join(out_dir, 'ckpt.pt')
if init_from == 'auto': # a requeued job reruns the same command: resume if a checkpoint is there
    init_from = 'resume' if os.path.exists(ckpt_path) else 'scratch'
    if master_process:
        print(f"init_from='auto': " + ('resuming from ' if init_from == 'resume' else 'from scratch, no ') + ckpt_path)
if init_from == 'resume':
    if not os.path.exists(ckpt_path):
        raise SystemExit(f"train.py: init_from='resume' but there is no {ckpt_path}")
    try: # a file cut short by a kill mid-copy, or another program's ckpt.pt: one line, not a traceback
        checkpoint = torch.load(ckpt_path, map_location=device, weights_only=True)
        model_args = checkpoint['model_args'] # the architecture is the checkpoint's, whatever the flags say
        iter_num, best_val_loss = checkpoint['iter_num'], checkpoint['best_val_loss']
        bytes_seen = checkpoint['bytes_seen']
        bad_steps, off_target = checkpoint.get('bad_steps', 0), checkpoint.get('off_target', 0)
        UNetConfig(**model_args)
    except Exception as e:
        why = f"{type(e).__name__}: {str(e).partition(chr(10))[0][:150]}"
        raise SystemExit(f"train.py: {ckpt_path} is truncated or not a nanotok checkpoint ({why}); move it away and "
                         f"rerun with --init_from=scratch to remake it")
elif init_from != 'scratch':
    raise SystemExit(f"train.py: init_from must be 'scratch', 'resume' or 'auto', not '{init_from}'")
torch.manual_seed(seed) # the same initial weights on every rank
model = ByteUNet(UNetConfig(**model_args))
if init_from == 'resume':
    try:
        model.load_state_dict(checkpoint['model'])
    except (KeyError, RuntimeError) as e:
        raise SystemExit(f"train.py: {ckpt_path} does not hold weights of its own model_args ({type(e).__name__}); "
                         f"move it away and rerun with --init_from=scratch to remake it")
model.to(device)
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if init_from == 'resume':
    optimizer.load_state_dict(checkpoint['optimizer'])
    if checkpoint.get('scaler'): # fp16 runs: the loss scale resumes where it was
        scaler.load_state_dict(checkpoint['scaler'])
    checkpoint = None # free up memory
    log_path = os.path.join(out_dir, 'log.jsonl')
    if master_process and os.path.exists(log_path): # rows a killed run wrote past its checkpoint come again: drop them
        def before(line):
            try:
                return line.endswith('\n') and json.loads(line)['iter'] < iter_num
            except ValueError: # a line cut short by the kill
                return False
        rows = [line for line in open(log_path) if before(line)]
        with open(log_path + '.tmp', 'w') as f:
            f.writelines(rows)
        os.replace(log_path + '.tmp', log_path)
raw_model = model # unwrapped, for saving, evaluation and the MFU estimate
rate = raw_model.config.rate # the rate loss's target is the model's own rate (on resume, the checkpoint's)
learned = not prescribe and any(True for _ in raw_model.gater.parameters()) # a gater that can collapse
if master_process:
    print(f"model: {raw_model.get_num_params() / 1e6:.2f}M parameters, gater={raw_model.config.gater}, "
          f"downsampler={raw_model.config.downsampler}, upsampler={raw_model.config.upsampler}")
if compile:
    print("compiling the model... (takes a ~minute)")
    model = torch.compile(model)
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None)

def batch_stats(X, M, gates, nll, nll_early):
    """ sums over the real positions of a batch: nll, targets, early nll, then model.py's six boundary_counts """
    m = M[:, 1:].float() # a target is real if its byte is
    return torch.cat([torch.stack([(nll * m).sum(), m.sum(), (nll_early * m).sum()]),
                      boundary_counts(X, gates, M).float()]).detach() # float32 counts: exact up to 2^24

def summarize(s):
    """ summed stats -> loss (nats per byte), bpb, early_loss, and rate, ws_boundary, word_boundary,
        boundary_precision (defined in model.py's boundary_metrics) """
    s = s.cpu() # one host sync
    loss = s[0].item() / max(s[1].item(), 1)
    return dict(loss=loss, bpb=loss / math.log(2), early_loss=s[2].item() / max(s[1].item(), 1),
                **boundary_metrics(s[3:]))

@torch.no_grad()
def estimate_val():
    """ the val metrics on val_rows(), the same rows every time, in batches of about batch_size: batch k is seeded
        with torch.manual_seed(seed + k) (eval.py follows the same rule). Each rank takes the batches k = rank,
        rank+world, ... and the sums are reduced, so the result does not depend on the process count """
    model.eval()
    picked = val_rows()
    sums = torch.zeros(9, device=device)
    for k, rows in enumerate(np.array_split(picked, max(1, len(picked) // batch_size))):
        if k % ddp_world_size != ddp_rank:
            continue
        X, M, prescribed = get_rows('val', rows)
        torch.manual_seed(seed + k) # stochastic gaters sample the same way at every eval
        with ctx:
            out = raw_model(X, gates=prescribed)
        sums += batch_stats(X, M, out['gates'], next_byte_nll(out['logits'], X), next_byte_nll(out['early_logits'], X))
    if ddp:
        dist.all_reduce(sums)
    model.train()
    return summarize(sums)

def position_mean(r, m, micro):
    """ the batch baseline: the mean of r (B, T-1) over the real rows (m) at each position -> (T-1,), over all the rows
        of micro-batch `micro` when `share` processes split them (their sums are all-reduced) """
    sums = torch.stack([(r * m).sum(0), m.sum(0)]) # (2, T-1) sum and count
    if share > 1:
        slots = torch.zeros(gradient_accumulation_steps, *sums.shape, device=device) # one per micro-batch
        slots[micro] = sums
        dist.all_reduce(slots)
        sums = slots[micro]
    return sums[0] / sums[1].clamp(min=1)

def get_lr(it):
    """ linear warmup from 0.1*lr (as the paper), then cosine down to min_lr """
    if it < warmup_iters:
        return learning_rate * (0.1 + 0.9 * it / warmup_iters)
    if it > lr_decay_iters:
        return min_lr
    coeff = 0.5 * (1.0 + math.cos(math.pi * (it - warmup_iters) / max(1, lr_decay_iters - warmup_iters)))
    return min_lr + coeff * (learning_rate - min_lr)

def log(row):
    """ one JSON object per line in out_dir/log.jsonl (and wandb when asked) """
    with open(os.path.join(out_dir, 'log.jsonl'), 'a') as f:
        f.write(json.dumps(row) + '\n')
    if wandb_log:
        wandb.log({f"{row['split']}/{k}": v for k, v in row.items() if k != 'split'}, step=row['iter'])

def save_checkpoint():
    """ written to a temporary name, then renamed: a crash mid-write never leaves a broken ckpt.pt """
    ckpt = dict(model=raw_model.state_dict(), optimizer=optimizer.state_dict(), model_args=asdict(raw_model.config),
                config=config, iter_num=iter_num, best_val_loss=best_val_loss, bytes_seen=bytes_seen,
                scaler=scaler.state_dict(), bad_steps=bad_steps, off_target=off_target)
    path = os.path.join(out_dir, 'ckpt.pt')
    torch.save(ckpt, path + '.tmp')
    os.replace(path + '.tmp', path)

if wandb_log and master_process:
    import wandb
    wandb.init(project=wandb_project, name=wandb_run_name, config=config)

stop_signal = 0 # set by SIGTERM (preemption) or SIGUSR1 (SLURM's warning ahead of it); read at the end of a step
def on_signal(signum, frame):
    global stop_signal
    stop_signal = signum
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGUSR1, on_signal)

# training loop
t0 = time.time()
stop, bad_run = 0, 0
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

    # evaluate on the val rows, log, and write checkpoints
    if iter_num % eval_interval == 0 or iter_num == max_iters:
        val = estimate_val()
        if master_process:
            print(f"step {iter_num}: val loss {val['loss']:.4f}, bpb {val['bpb']:.4f}, rate {val['rate']:.3f}, "
                  f"ws_boundary {val['ws_boundary']:.3f}, word_boundary {val['word_boundary']:.3f}, "
                  f"boundary_precision {val['boundary_precision']:.3f}")
            log(dict(iter=iter_num, split='val', bytes=bytes_seen, **val))
            if learned and not eval_only: # a rate that drifts off target is the first sign of a collapsing gater
                off_target = off_target + 1 if abs(val['rate'] - rate) > 0.05 else 0
                if off_target >= 3:
                    print(f"warning: the val rate {val['rate']:.3f} has been more than 0.05 from its target "
                          f"{rate:.3f} for {off_target} evals: the gater may be collapsing")
            if val['loss'] < best_val_loss or always_save_checkpoint:
                best_val_loss = min(best_val_loss, val['loss'])
                if iter_num > 0 or init_from == 'resume':
                    print(f"saving checkpoint to {out_dir}")
                    save_checkpoint()
    if iter_num == 0 and eval_only or iter_num >= max_iters:
        break

    # one optimizer step: a forward, the REINFORCE step and a backward per micro-batch
    stats = torch.zeros(9, device=device)
    undecided = torch.zeros(2, device=device) # gate probabilities in (0.1, 0.9), real positions
    finite = torch.ones((), dtype=torch.bool, device=device)
    if iter_num == signal_at_iter and master_process:
        os.kill(os.getpid(), signal.SIGTERM) # fault injection (tests): rank 0 alone is preempted
    for micro_step in range(accum):
        micro = micro_step * (ddp_world_size // share) + ddp_rank // share # its place in the global batch
        X, M, prescribed = get_rows('train', np.split(train_rows(iter_num, micro), share)[ddp_rank % share])
        torch.manual_seed(sample_seed(iter_num, micro) * share + ddp_rank % share) # the gates' draw
        sync = nullcontext() if not ddp or micro_step == accum - 1 else model.no_sync() # all-reduce on the last
        with sync:
            with ctx:
                out = model(X, gates=prescribed)
            # --- the REINFORCE step (README.md, "The reward" to "The loss"; tests/test_reinforce.py runs it) ---
            Mf = M.float() # (B, T) 1 at real bytes; gate t is real if byte t is, prediction t if byte t+1 is
            m = Mf[:, 1:] # (B, T-1)
            nll, nll_early = next_byte_nll(out['logits'], X), next_byte_nll(out['early_logits'], X) # (B, T-1)
            lm_loss, early_loss = (nll * m).sum() / m.sum(), (nll_early * m).sum() / m.sum() # nats per byte
            # r_t: how much the full model beats the early exit on byte t+1 (or just -CE)
            reward = (nll_early - nll).detach() if early_exit_reward else -nll.detach() # (B, T-1)
            baseline = position_mean(reward, m, micro) if batch_baseline else 0.0 # (T-1,) over the micro-batch
            advantage = (reward - baseline) * m # (B, T-1) A_t, 0 at padding
            returns = F.pad(discounted_returns(advantage, gamma), (0, 1)) # (B, T) gate t: the predictions >= t
            gate_logits, gate_probs = out['gate_logits'].float(), out['gate_probs'].float() # (B, T)
            logp = -F.binary_cross_entropy_with_logits(gate_logits, out['gates'].float(), reduction='none') # log pi
            pg_loss = -(returns * logp).sum() / Mf.sum() # returns are 0 past a row's end
            mean_p = (gate_probs * Mf).sum() / Mf.sum()
            if rate_loss == 'ours': # a uniform push on every free logit, down when above the rate, up when below
                r_loss = (gate_logits * Mf).sum() / Mf.sum() * (mean_p - rate).detach()
            elif rate_loss == 'hnet': # H-Net's ratio loss, minimal when the realised rate and mean(p) are on target
                r_loss = hnet_ratio_loss(out['gates'].float(), gate_probs, rate, Mf)
            else: # Nawrot's prior -log Binomial(gates; bytes, rate) / bytes per row, on the straight-through gates
                r_loss = binomial_prior(out['gates'].float() + gate_probs - gate_probs.detach(), rate, Mf)
            loss = ((1 - early_weight) * lm_loss + early_weight * early_loss + pg_weight * pg_loss
                    + rate_weight * r_loss)
            # --- end of the REINFORCE step ---
            if nan_at_iter <= iter_num < nan_at_iter + nan_iters and ddp_rank == ddp_world_size - 1:
                loss = loss * math.nan # fault injection (tests): a loss spike gone non-finite on one rank
            finite &= torch.isfinite(loss)
            loss = loss / accum # the gradient is the mean over micro-steps (and DDP averages over processes)
            scaler.scale(loss).backward()
        stats += batch_stats(X, M, out['gates'], nll, nll_early)
        if learned:
            undecided += torch.stack([(((gate_probs > 0.1) & (gate_probs < 0.9)) * Mf).sum(), Mf.sum()]).detach()
    # the bytes read by all processes (BOS and padding excluded), counted on the host from the offsets: no sync
    iter_bytes = sum(int(row_len['train'][train_rows(iter_num, k)].sum()) for k in range(gradient_accumulation_steps))
    bytes_seen += iter_bytes
    scaler.unscale_(optimizer) # (float16 only) the true gradients, for their norm
    # clip the global norm once per optimizer step, after the gradients of all micro-steps are summed (0: no clip)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip != 0.0 else math.inf)
    # a non-finite loss or norm on any rank skips the step on every rank (float16 overflows are the scaler's own)
    bad = ~finite if scaler.is_enabled() else ~(finite & torch.isfinite(norm))
    flags = torch.stack([bad.float(), torch.tensor(float(stop_signal), device=device)])
    if ddp:
        dist.all_reduce(flags, op=dist.ReduceOp.MAX) # one tiny all-reduce a step: every rank decides alike
    bad, stop = flags.tolist() # a host sync every step, the price of deciding before the update
    if bad:
        bad_steps, bad_run = bad_steps + 1, bad_run + 1
        if master_process:
            print(f"iter {iter_num}: non-finite loss or gradient norm, step skipped ({bad_run} in a row)")
    else:
        scaler.step(optimizer)
        bad_run = 0
    scaler.update()
    optimizer.zero_grad(set_to_none=True)

    # timing and logging
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    if iter_num % log_interval == 0 and master_process:
        s = summarize(stats) # this process's micro-batches; the one host sync of the step
        bps = iter_bytes / dt
        peak = peak_flops or (gpu_peak_flops(torch.cuda.get_device_name(device)) if device_type == 'cuda' else None)
        chunk_rate = out['n_chunks'].sum().item() / X.numel() # realised: the mid level's compute follows the chunks
        mfu = raw_model.estimate_mfu(bps / ddp_world_size, chunk_rate, peak) if peak else None # none on a CPU
        und = dict(undecided=(undecided[0] / undecided[1].clamp(min=1)).item()) if learned else {} # near 0: collapse
        print(f"iter {iter_num}: loss {s['loss']:.4f}, bpb {s['bpb']:.4f}, rate {s['rate']:.3f}, "
              f"ws_boundary {s['ws_boundary']:.3f}, word_boundary {s['word_boundary']:.3f}, "
              f"boundary_precision {s['boundary_precision']:.3f}, "
              + ''.join(f"undecided {v:.3f}, " for v in und.values())
              + f"lr {lr:.2e}, pg {pg_loss.item():+.4f}, {bps:,.0f} bytes/s, "
              + (f"mfu {mfu * 100:.2f}%, " if mfu is not None else '') + f"{dt * 1000:.0f}ms")
        log(dict(iter=iter_num, split='train', bytes=bytes_seen, lr=lr, bytes_per_sec=bps, mfu=mfu,
                 pg_loss=pg_loss.item(), rate_loss=r_loss.item(), **s, **und, bad_steps=bad_steps))
    if bad_run >= max_bad_steps: # every rank counts alike; the weights are still the last good ones
        last = f"the last good checkpoint is {ckpt_path}" if os.path.exists(ckpt_path) else "no checkpoint was written"
        raise SystemExit(f"train.py: {bad_run} non-finite steps in a row (to iteration {iter_num}, --max_bad_steps="
                         f"{max_bad_steps}): stopped; {last}; resume it with a lower --learning_rate"
                         if master_process else 1)
    iter_num += 1
    if stop: # preempted: the step is done, save it and leave together
        if master_process:
            print(f"saving checkpoint to {out_dir}")
            save_checkpoint()
        break

if ddp:
    dist.barrier() # rank 0 may still be writing the checkpoint: leave together
    dist.destroy_process_group()
if stop and master_process:
    print(f"train.py: stopped by {signal.Signals(int(stop)).name} after iteration {iter_num - 1}, saved in "
          f"{ckpt_path}; to go on, rerun the same command with --init_from=resume (init_from='auto' does it by itself)")
