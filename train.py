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
import subprocess
from contextlib import nullcontext
from dataclasses import asdict, fields

import numpy as np
import torch
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model import UNetConfig, ByteUNet, bpe_gates, discounted_returns, hnet_ratio_loss, next_byte_nll

# -----------------------------------------------------------------------------
# default config values: a small model on the embedded pycode corpus that trains on a CPU in a few minutes
# I/O
out_dir = 'out'
eval_interval = 100
log_interval = 10
eval_iters = 8 # val batches per eval; the val rows are the same every time
eval_only = False
always_save_checkpoint = True # else only when val loss improves
init_from = 'scratch' # 'scratch' or 'resume' (from out_dir/ckpt.pt)
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
n_mid = 2
n_up = 1
window = 64
attn_softcap = 50.0
gater = 'sequential'
downsampler = 'select'
upsampler = 'add'
rate = 0.2
filter_size = 8
gate_scale = 1 / 16
gate_softcap = 6.0
nawrot_temp = 0.5
# boundaries prescribed from outside the model ('' or 'bpe': a gate at the first byte of each tiktoken token)
prescribe = ''
bpe_encoding = 'gpt2'
# losses: (1-early_weight) CE + early_weight CE_early + pg_weight PG + rate_weight rate_loss + aux_weight aux_loss
early_weight = 0.1 # lambda_e: the early-exit head's share of the byte loss
pg_weight = 0.01 # lambda_pi: the score-function (REINFORCE) loss of the gater; 0 for fixed and straight-through gaters
gamma = 0.99 # discount of later rewards along the bytes
early_exit_reward = True # reward CE_early - CE; False: reward -CE
batch_baseline = True # subtract the batch mean reward at each position
rate_loss = 'ours' # 'ours': mean(logit) * sg(mean(p) - target); 'hnet': H-Net's ratio loss
rate_weight = 0.01 # lambda_c
rate_target = 0.2 # share of bytes that end a chunk
rate_start = 0.2 # the target moves linearly from rate_start to rate_target over rate_warmup_iters
rate_warmup_iters = 0
aux_weight = 1.0 # weight of the model's own aux_loss (H-Net ratio loss, Nawrot's binomial prior)
warm_start_iters = 0 # off-policy warm start: gates ~ Bernoulli(warm_start_rate), importance-weighted
warm_start_rate = 0.2
# adamw optimizer and schedule: linear warmup from 0.1*lr, then cosine to min_lr at lr_decay_iters
learning_rate = 3e-3
max_iters = 600
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.999
grad_clip = 1.0 # clip the global gradient norm once per optimizer step; 0 disables
warmup_iters = 30
lr_decay_iters = 600
min_lr = 0.0
# system
device = 'cuda' if torch.cuda.is_available() else 'cpu' # 'cpu', 'cuda', 'cuda:1', 'mps'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'
compile = False # torch.compile the model (the chunk count changes shape every step: expect recompiles)
seed = 1337
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
exec(open('configurator.py').read()) # overrides from the command line or a config file
config = {k: globals()[k] for k in config_keys} # will be useful for logging
model_keys = [f.name for f in fields(UNetConfig) if f.name != 'vocab_size']
from model import BOS, WHITESPACE # after the configurator, so they are not config keys
# values the configurator cannot judge by their type: one line each, before any work starts
for k in ('batch_size', 'gradient_accumulation_steps', 'block_size', 'eval_iters', 'eval_interval', 'log_interval'):
    if config[k] <= 0:
        raise SystemExit(f"train.py: --{k}={config[k]} must be positive")
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
if gradient_accumulation_steps % ddp_world_size: # the global batch is fixed; the processes split its micro-steps
    raise SystemExit(f"train.py: --gradient_accumulation_steps={gradient_accumulation_steps} must be a multiple of "
                     f"the {ddp_world_size} processes (it counts micro-steps over all of them)")
accum = gradient_accumulation_steps // ddp_world_size # micro-steps of this process
rows_per_iter = gradient_accumulation_steps * batch_size # over all processes
if master_process:
    os.makedirs(out_dir, exist_ok=True)
    print(f"{rows_per_iter} rows of up to {block_size} bytes per iteration ({ddp_world_size} processes)")
device_type = 'cuda' if 'cuda' in device else 'cpu'
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

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
    G = None # BPE guidance: the tiktoken tokens of each row's bytes, looked up ahead of the model (see bpe_gates)
    if prescribe == 'bpe':
        G = torch.stack([bpe_gates(enc, x[1:m.sum()].astype(np.uint8).tobytes(), block_size) for x, m in zip(X, M)])
    X, M = torch.from_numpy(X), torch.from_numpy(M)
    if device_type == 'cuda': # pin arrays, which allows us to move them to GPU asynchronously (non_blocking=True)
        return [t.pin_memory().to(device, non_blocking=True) if t is not None else None for t in (X, M, G)]
    return [t.to(device) if t is not None else None for t in (X, M, G)]

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

def doc_bytes(split, rows):
    """ bytes read in these rows (BOS and padding excluded) """
    return int(row_len[split][rows].sum())

def val_rows():
    """ the eval_iters*batch_size val rows, spread evenly over the whole split (all of it when it has fewer) """
    return np.linspace(0, n_rows['val'] - 1, min(n_rows['val'], eval_iters * batch_size)).round().astype(np.int64)

def sample_seed(it, micro):
    """ gate sampling is seeded per micro-batch as the rows are, so a resumed or re-sharded run samples alike """
    return seed * 1_000_003 + it * 4099 + micro

# model
iter_num, best_val_loss, bytes_seen = 0, 1e9, 0
model_args = {k: globals()[k] for k in model_keys}
if init_from == 'resume':
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    if not os.path.exists(ckpt_path):
        raise SystemExit(f"train.py: init_from='resume' but there is no {ckpt_path}")
    checkpoint = torch.load(ckpt_path, map_location=device, weights_only=True)
    model_args = checkpoint['model_args'] # the architecture is the checkpoint's, whatever the flags say
    iter_num, best_val_loss, bytes_seen = checkpoint['iter_num'], checkpoint['best_val_loss'], checkpoint['bytes_seen']
elif init_from != 'scratch':
    raise SystemExit(f"train.py: init_from must be 'scratch' or 'resume', not '{init_from}'")
torch.manual_seed(seed) # the same initial weights on every rank
model = ByteUNet(UNetConfig(**model_args))
if init_from == 'resume':
    model.load_state_dict(checkpoint['model'])
model.to(device)
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if init_from == 'resume':
    optimizer.load_state_dict(checkpoint['optimizer'])
    if checkpoint.get('scaler'): # fp16 runs: the loss scale resumes where it was
        scaler.load_state_dict(checkpoint['scaler'])
    checkpoint = None # free up memory
raw_model = model # unwrapped, for saving, evaluation and the MFU estimate
if master_process:
    print(f"model: {raw_model.get_num_params() / 1e6:.2f}M parameters, gater={raw_model.config.gater}, "
          f"downsampler={raw_model.config.downsampler}, upsampler={raw_model.config.upsampler}")
if compile:
    print("compiling the model... (takes a ~minute)")
    model = torch.compile(model)
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None)

def batch_stats(X, M, gates, nll, nll_early):
    """ sums over the real positions of a batch: the numbers train.py logs and sample.py --analyze prints """
    m = M[:, 1:].float() # a target is real if its byte is
    g, Mf = gates.float(), M.float()
    ws = torch.isin(X, torch.tensor(WHITESPACE, device=X.device)).float() * Mf
    return torch.stack([(nll * m).sum(), m.sum(), (g * Mf).sum(), Mf.sum(), (g * ws).sum(), ws.sum(),
                        (nll_early * m).sum()]).detach()

def summarize(s):
    """ summed stats -> loss (nats per byte), bpb, rate, ws_boundary, early_loss """
    s = s.tolist()
    loss = s[0] / max(s[1], 1)
    return dict(loss=loss, bpb=loss / math.log(2), rate=s[2] / max(s[3], 1), ws_boundary=s[4] / max(s[5], 1),
                early_loss=s[6] / max(s[1], 1))

@torch.no_grad()
def estimate_val():
    """ the val metrics on val_rows(), the same rows every time, in batches of about batch_size: batch k is seeded
        with torch.manual_seed(seed + k) (eval.py follows the same rule). Each rank takes the batches k = rank,
        rank+world, ... and the sums are reduced, so the result does not depend on the process count """
    model.eval()
    picked = val_rows()
    sums = torch.zeros(7, device=device)
    for k, rows in enumerate(np.array_split(picked, max(1, len(picked) // batch_size))):
        if k % ddp_world_size != ddp_rank:
            continue
        X, M, G = get_rows('val', rows)
        torch.manual_seed(seed + k) # stochastic gaters sample the same way at every eval
        with ctx:
            out = raw_model(X, gates=G)
        sums += batch_stats(X, M, out['gates'], next_byte_nll(out['logits'], X), next_byte_nll(out['early_logits'], X))
    if ddp:
        dist.all_reduce(sums)
    model.train()
    return summarize(sums)

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
                scaler=scaler.state_dict())
    path = os.path.join(out_dir, 'ckpt.pt')
    torch.save(ckpt, path + '.tmp')
    os.replace(path + '.tmp', path)

if wandb_log and master_process:
    import wandb
    wandb.init(project=wandb_project, name=wandb_run_name, config=config)

# training loop
t0 = time.time()
forced = None
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

    # evaluate on the val rows, log, and write checkpoints
    if iter_num % eval_interval == 0 or iter_num == max_iters:
        val = estimate_val()
        if master_process:
            print(f"step {iter_num}: val loss {val['loss']:.4f}, bpb {val['bpb']:.4f}, rate {val['rate']:.3f}, "
                  f"ws_boundary {val['ws_boundary']:.3f}")
            log(dict(iter=iter_num, split='val', bytes=bytes_seen, **val))
            if val['loss'] < best_val_loss or always_save_checkpoint:
                best_val_loss = min(best_val_loss, val['loss'])
                if iter_num > 0 or init_from == 'resume':
                    print(f"saving checkpoint to {out_dir}")
                    save_checkpoint()
    if iter_num == 0 and eval_only or iter_num >= max_iters:
        break

    # the REINFORCE-with-discounting step, once per micro-batch
    target = rate_target + (rate_start - rate_target) * max(0.0, 1 - iter_num / rate_warmup_iters) \
        if rate_warmup_iters else rate_target
    stats = torch.zeros(7, device=device)
    for micro_step in range(accum):
        micro = micro_step * ddp_world_size + ddp_rank # this micro-batch's place in the global batch
        X, M, G = get_rows('train', train_rows(iter_num, micro))
        torch.manual_seed(sample_seed(iter_num, micro))
        behaviour = None # on-policy: the gates are sampled from the policy itself
        if iter_num < warm_start_iters: # off-policy warm start: gates from Bernoulli(warm_start_rate)
            G = torch.bernoulli(torch.full(X.shape, warm_start_rate, device=device))
            behaviour = torch.full(X.shape, warm_start_rate, device=device)
        sync = nullcontext() if not ddp or micro_step == accum - 1 else model.no_sync() # all-reduce on the last
        with sync:
            with ctx:
                out = model(X, gates=G)
            m = M[:, 1:].float() # (B, T-1): 1 where the target byte is real; padding never enters a sum below
            nll, nll_early = next_byte_nll(out['logits'], X), next_byte_nll(out['early_logits'], X) # (B, T-1)
            n_targets = m.sum()
            lm_loss = (nll * m).sum() / n_targets # nats per byte, final head
            early_loss = (nll_early * m).sum() / n_targets
            # reward of byte t+1's prediction: how much the full model beats the early exit on it (or just -CE)
            reward = (nll_early - nll).detach() if early_exit_reward else -nll.detach() # (B, T-1)
            if batch_baseline: # per position, over this process's micro-batch (the paper's choice; not all ranks)
                reward = reward - (reward * m).sum(0) / m.sum(0).clamp(min=1)
            returns = discounted_returns(reward * m, gamma) # (B, T-1), G_t = A_t + gamma G_{t+1}
            returns = F.pad(returns, (0, 1)) # (B, T): the gate at t gets the returns of the predictions at >= t
            gate_logits, gate_probs, gates = out['gate_logits'].float(), out['gate_probs'].float(), out['gates']
            logp = -F.binary_cross_entropy_with_logits(gate_logits, gates.float(), reduction='none') # log pi(g_t)
            q = gate_probs.detach() if behaviour is None else behaviour # the probabilities the gates were drawn with
            # per-decision importance ratio, 1 on-policy; off-policy it is a heuristic, exact only for
            # independent gates with local rewards (tests/test_reinforce.py); the whole sequence's ratio would be exact
            ratio = torch.where(gates > 0, gate_probs / q, (1 - gate_probs) / (1 - q)).detach()
            ratio = torch.where(M, ratio, 0.0) # padding (and its 0/0) drops out
            Mf = M.float()
            pg_loss = -(ratio * returns * logp).sum() / Mf.sum() # on-policy, gamma=1: E[grad] = grad E[sum CE]
            mean_p = (gate_probs * Mf).sum() / Mf.sum()
            if rate_loss == 'ours': # a uniform push on every free logit, down when above target, up when below
                r_loss = (gate_logits * Mf).sum() / Mf.sum() * (mean_p - target).detach()
            else: # H-Net's ratio loss, minimal when both the realised rate and the mean probability are on target
                r_loss = hnet_ratio_loss(gates.float(), gate_probs, target, Mf)
            loss = ((1 - early_weight) * lm_loss + early_weight * early_loss + pg_weight * pg_loss
                    + rate_weight * r_loss + aux_weight * out['aux_loss'])
            loss = loss / accum # the gradient is the mean over micro-steps (and DDP averages over processes)
            scaler.scale(loss).backward()
        stats += batch_stats(X, M, gates, nll, nll_early)
    iter_bytes = sum(doc_bytes('train', train_rows(iter_num, k)) for k in range(gradient_accumulation_steps))
    bytes_seen += iter_bytes # all processes, counted on the host from the offsets: no sync
    if grad_clip != 0.0: # once per optimizer step, after the gradients of all micro-steps are summed
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)

    # timing and logging
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    if iter_num % log_interval == 0 and master_process:
        s = summarize(stats) # this process's micro-batches; the one host sync of the step
        bps = iter_bytes / dt
        mfu = raw_model.estimate_mfu(bps / ddp_world_size)
        mfu_str = f"mfu {mfu * 100:.2f}%, " if device_type == 'cuda' else '' # against a GPU's peak: none on a CPU
        print(f"iter {iter_num}: loss {s['loss']:.4f}, bpb {s['bpb']:.4f}, rate {s['rate']:.3f}, lr {lr:.2e}, "
              f"pg {pg_loss.item():+.4f}, {bps:,.0f} bytes/s, {mfu_str}{dt * 1000:.0f}ms")
        log(dict(iter=iter_num, split='train', bytes=bytes_seen, lr=lr, bytes_per_sec=bps, mfu=mfu,
                 pg_loss=pg_loss.item(), rate_loss=r_loss.item(), aux_loss=out['aux_loss'].detach().item(), **s))
    iter_num += 1

if ddp:
    dist.barrier() # rank 0 may still be writing the checkpoint: leave together
    dist.destroy_process_group()
