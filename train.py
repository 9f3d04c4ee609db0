"""
Train the byte U-Net, with its gater learned by REINFORCE with discounting (Dauncey & Wattenhofer 2026).

One process (a small model on the embedded pycode corpus, CPU is fine):
$ python train.py
A paper run on one node of 8 GPUs:
$ torchrun --standalone --nproc_per_node=8 train.py config/train_73m_random.py
Two nodes (run on both, the first one's address in --master_addr):
$ torchrun --nproc_per_node=8 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 train.py CONFIG
Any key below can be overridden: python train.py config/method_random.py --batch_size=4 --compile=False

The gater's training signal, inline in the loop below, departs from textbook REINFORCE in the paper's ways:
1. the reward of byte t is how much the full model beats the early-exit head on it, r_t = CE_early_t - CE_t;
2. the baseline is the mean reward at the same position t over the micro-batch's real rows (no learned critic);
3. the gate at t is credited with the discounted sum of later advantages, G_t = sum_k gamma^k A_{t+k} (gamma 0.99):
   a decision changes the predictions after it, and discounting keeps the credit local, which lowers the variance;
4. a rate loss holds the share of boundaries at its target (1/5).
"""

import os
import sys
import signal
_stage = 'starting' # what a Ctrl-C before the training loop stops, named in its one line (the loop's: on_signal)
signal.signal(signal.SIGINT, lambda *_: sys.exit(f"train.py: Ctrl-C while {_stage}: stopped before training"
                                                 if os.environ.get('RANK', '0') == '0' else 1)) # rank 0 speaks
if hasattr(sys.stdout, 'reconfigure'): # a file or a pipe (not a StringIO, in-process); each line as it comes, through
    sys.stdout.reconfigure(line_buffering=True, errors='surrogateescape') # a pipe too; argv's bytes that are not UTF-8
import json
import math
import time
from contextlib import nullcontext
from dataclasses import asdict, fields

import numpy as np
import torch
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model import (UNetConfig, ByteUNet, binomial_prior, boundary_counts, boundary_metrics, discounted_returns,
                   hnet_ratio_loss, next_byte_nll)
from common import (KEYS, bpe_gates, check_config, check_folder, gpu_peak_flops, hms, load_bpe_or_exit, lock,
                    make_pycode, open_corpus, read_checkpoint, restart_log, save_checkpoint, set_threads)

# -----------------------------------------------------------------------------
# default config values: the quick start, a small model on pycode that learns on a CPU in minutes (README, 'quick
# start'). NOT the paper's values: those are config/size_*.py + config/method_*.py (UNetConfig's defaults: tests)
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
data_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data') # the data/ folder next to train.py
gradient_accumulation_steps = 1 # micro-batches per step, over all processes: each runs this / world_size of them
batch_size = 8 # rows per micro-batch, the baseline's rows (processes that outnumber micro-batches split them)
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
word_rate = 0.0 # word_ends/word_onsets: the rule's own share of gated bytes; > 0 tops it up (or thins it) to rate
filter_size = 8
gate_scale = 1.0 # the quick start's; the paper's 1/16 (config/method_sequential.py) learns 16x slower
gate_softcap = 6.0
nawrot_temp = 0.5
# boundaries prescribed from outside the model ('' or 'bpe': a gate at the first byte of each tiktoken token)
prescribe = ''
bpe_encoding = 'gpt2' # a tiktoken encoding ('gpt2', 'o200k_base', ...) or a .tiktoken file of ranks (common.load_bpe)
# losses: (1-early_weight) CE + early_weight CE_early + pg_weight PG + rate_weight rate_loss
early_weight = 0.1 # lambda_e: the early-exit head's share of the byte loss
pg_weight = 0.1 # lambda_pi: the score-function (REINFORCE) loss of the gater (the paper's 0.01 in method_sequential.py)
gamma = 0.99 # discount of later rewards along the bytes
early_exit_reward = True # reward CE_early - CE; False: reward -CE
batch_baseline = True # subtract the batch mean reward at each position
rate_loss = 'ours' # 'ours': mean(logit) * sg(mean(p) - rate); 'hnet': H-Net's ratio loss; 'binomial': Nawrot's prior
rate_weight = 0.1 # lambda_c (the paper's 0.01 in config/method_sequential.py)
# two levers beyond the paper (off in its configs): the first gate_warmup steps on Bernoulli(rate) boundaries, the
gate_warmup = 0 # gater's losses off; each row read `draws` times, each draw's baseline the mean of the row's others
draws = 1
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
peak_flops = 0.0 # MFU's denominator in FLOP/s; 0: the GPU's bf16 dense peak from common.PEAK_FLOPS by its name
seed = 1337
threads = 0 # CPU intra-op threads; 0: the cores other processes leave idle, checked at the start and every eval
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configurator.py')).read()) # the overrides
check_config(globals(), 'train.py') # every key against its row of KEYS (imported for --help to print), the device too
config = {k: globals()[k] for k in config_keys} # will be useful for logging
model_keys = [f.name for f in fields(UNetConfig) if f.name != 'vocab_size']
from model import BOS # after the configurator, so it is not a config key
# fault injection for the tests, from the environment: NANOTOK_SIGNAL_AT_ITER=i (rank 0 sends itself NANOTOK_SIGNALS,
# default TERM, in iteration i), NANOTOK_NAN_AT_ITER=i, NANOTOK_NAN_ITERS=n (the last rank's loss is NaN in i..i+n-1)
signal_at_iter, nan_at_iter, nan_iters = (int(os.environ.get(f'NANOTOK_{k}', d)) for k, d in
                                          (('SIGNAL_AT_ITER', -1), ('NAN_AT_ITER', -1), ('NAN_ITERS', 1)))
check_folder(out_dir, 'out_dir', 'train.py') # one line now, not after the work, if it cannot be made or written
if prescribe and (draws > 1 or gate_warmup): # levers of a learned gater
    raise SystemExit(f"train.py: --draws={draws} and --gate_warmup={gate_warmup} are levers of a learned gater, not of "
                     f"--prescribe={prescribe}: drop them")
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
device_type = 'cuda' if 'cuda' in device else 'cpu'
def check_threads(): # on a CPU, the cores other processes leave idle: looked at again at every eval
    n = set_threads(device_type, threads, share=int(os.environ.get('LOCAL_WORLD_SIZE', 1)))
    if n and master_process:
        print(f"CPU threads: {n} (of {os.cpu_count()} cores; --threads=N fixes the number)")
check_threads()
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
# mixed precision on any device: on a CPU with avx512_bf16 or AMX, bfloat16 matmuls run 4-5x faster than float32
ctx = nullcontext() if dtype == 'float32' else torch.amp.autocast(device_type, getattr(torch, dtype))

# the run: from scratch into an out_dir without a checkpoint, or resumed from out_dir/ckpt.pt, never overwriting one
iter_num, best_val_loss, bytes_seen, bad_steps, off_target = 0, 1e9, 0, 0, 0
ckpt_path, log_path = os.path.join(out_dir, 'ckpt.pt'), os.path.join(out_dir, 'log.jsonl')
if init_from == 'auto': # a requeued job reruns the same command: resume if a checkpoint is there
    init_from = 'resume' if os.path.exists(ckpt_path) else 'scratch'
    if master_process and init_from == 'scratch':
        print(f"init_from='auto': from scratch, no {ckpt_path}")
if master_process:
    lock(out_dir, 'train.py', take=False) # another train.py writing into out_dir now: one line, before the checks below
if init_from == 'scratch' and os.path.exists(ckpt_path):
    raise SystemExit(f"train.py: {ckpt_path} exists; continue it with --init_from=resume (or auto), or start over "
                     f"with another --out_dir or after removing it")
if init_from == 'resume':
    _stage = f'loading {ckpt_path}'
    if not os.path.exists(ckpt_path):
        raise SystemExit(f"train.py: init_from='resume' but there is no {ckpt_path}")
    checkpoint = read_checkpoint(ckpt_path, 'train.py', "to start over, move it away (or use another --out_dir) and "
                                 "rerun with --init_from=scratch", ('optimizer', 'best_val_loss', 'bytes_seen'))
    saved = UNetConfig(**checkpoint['model_args']) # the architecture is the checkpoint's
    iter_num, best_val_loss, bytes_seen = checkpoint['iter_num'], checkpoint['best_val_loss'], checkpoint['bytes_seen']
    bad_steps, off_target = checkpoint.get('bad_steps', 0), checkpoint.get('off_target', 0)
    if iter_num > max_iters and not eval_only: # (it would evaluate, then save the checkpoint with this max_iters)
        raise SystemExit(f"train.py: {ckpt_path} is at iteration {iter_num}, past --max_iters={max_iters}: nothing to "
                         f"train, it stays as it is; raise --max_iters to go on, or evaluate it with --eval_only=True")
    clash = [k for k in model_keys if k in _overrides and globals()[k] != getattr(saved, k)]
    if clash: # model flags a resume would otherwise ignore: refused by name, not silently dropped
        raise SystemExit(f"train.py: resuming {ckpt_path}, whose model has "
                         + ', '.join(f"{k}={getattr(saved, k)}" for k in clash) + ": drop "
                         + ' '.join(f"--{k}={globals()[k]}" for k in clash) + " (a resumed run keeps its model), "
                         "or start a new run with another --out_dir")
    for k in model_keys: # what runs, and what the checkpoint's config records, is the checkpoint's model
        globals()[k] = config[k] = getattr(saved, k)
if master_process:
    print((f"resumed from iter {iter_num} of {ckpt_path}\n" if init_from == 'resume' else '')
          + f"{rows_per_iter} rows of up to {block_size} bytes per iteration ({ddp_world_size} processes)")

# data: documents as bytes, cut into rows; a row is BOS + a window of up to block_size-1 consecutive bytes of one
# document (a document of n bytes gives ceil(n/(block_size-1)) rows), the last one padded with a loss mask
_stage = f'preparing the data in {os.path.join(data_dir, dataset)}'
error = make_pycode(os.path.join(data_dir, dataset)) if dataset == 'pycode' and master_process else '' # if missing
if ddp:
    dist.barrier() # every rank, whatever its node holds: rank 0 may be making the data
try:
    data, row_start, row_len = open_corpus(data_dir, dataset, block_size) # each file checked, else one line
except SystemExit as e:
    error = error or str(e) # (prepare.py's line first, when it could not make pycode)
if ddp: # the outcome is agreed, so every rank stops here or none does (no rank waits alone in a collective)
    failed = torch.tensor(float(bool(error)), device=device)
    dist.all_reduce(failed, op=dist.ReduceOp.MAX)
    error = error or (f"train.py: rank {ddp_rank} stops: another node's data check failed" if failed.item() else '')
if error:
    raise SystemExit(error)
n_rows = {s: len(row_start[s]) for s in ('train', 'val')}
if master_process:
    print(f"rows of {block_size} bytes: {n_rows['train']:,} per epoch of train, {n_rows['val']:,} of val")

enc = load_bpe_or_exit(bpe_encoding, 'train.py') if prescribe == 'bpe' else None # a name, a file: or one line

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

_stage = 'building the model'
torch.manual_seed(seed) # the same initial weights on every rank
model = ByteUNet(UNetConfig(**{k: globals()[k] for k in model_keys})) # on resume, the checkpoint's model_args
if init_from == 'resume':
    try:
        model.load_state_dict(checkpoint['model'])
    except (KeyError, RuntimeError) as e:
        raise SystemExit(f"train.py: {ckpt_path} does not hold weights of its own model_args ({type(e).__name__}); "
                         f"to start over, move it away and rerun with --init_from=scratch")
model.to(device)
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if init_from == 'resume':
    optimizer.load_state_dict(checkpoint['optimizer'])
    if checkpoint.get('scaler'): # fp16 runs: the loss scale resumes where it was
        scaler.load_state_dict(checkpoint['scaler'])
    checkpoint = None # free up memory
if master_process: # the first write of the run, once every check has passed
    os.makedirs(out_dir, exist_ok=True)
    out_lock = lock(out_dir, 'train.py') # held until the process ends: a second train.py into out_dir is refused
    restart_log(log_path, iter_num) # without the rows a killed run wrote past its checkpoint: they come again
raw_model = model # unwrapped, for saving, evaluation and the MFU estimate
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
    """ the val metrics on val_rows(), the same rows every time, in eval mode (the sequential gater uncapped, as the
        paper's eval), in batches of about batch_size, batch k seeded with torch.manual_seed(seed + k) as in eval.py.
        Each rank takes the batches k = rank, rank+world, ... and the sums are reduced: alike for any process count """
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
    with open(log_path, 'a') as f:
        f.write(json.dumps(row) + '\n')
    if wandb_log:
        wandb.log({f"{row['split']}/{k}": v for k, v in row.items() if k != 'split'}, step=row['iter'])

def save(): # common.save_checkpoint: atomic, and a write that fails (a full disk) is one line
    save_checkpoint(dict(model=raw_model.state_dict(), optimizer=optimizer.state_dict(), config=config,
                         model_args=asdict(raw_model.config), iter_num=iter_num, best_val_loss=best_val_loss,
                         bytes_seen=bytes_seen, scaler=scaler.state_dict(), bad_steps=bad_steps, off_target=off_target),
                    ckpt_path, 'train.py')

if wandb_log and master_process:
    import wandb # (its import was checked by check_config)
    wandb.init(project=wandb_project, name=wandb_run_name, config=config)

stop_signal = 0 # SIGTERM (preemption), SIGUSR1 (SLURM's warning ahead of it) or Ctrl-C, read at the end of a step
def on_signal(signum, frame):
    global stop_signal
    if signum == signal.SIGINT and stop_signal: # a second Ctrl-C: out now, without this step's checkpoint
        last = f"the last checkpoint is {ckpt_path}" if os.path.exists(ckpt_path) else "no checkpoint was written"
        raise SystemExit(f"train.py: stopped by a second Ctrl-C in iteration {iter_num}, unsaved; {last}")
    if signum == signal.SIGINT and master_process: # written straight to the file: safe inside a print
        os.write(2, b"train.py: Ctrl-C: saving after this step, then exiting (Ctrl-C again: exit now, unsaved)\n")
    stop_signal = signum
for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
    signal.signal(sig, on_signal)

def fetch(it, micro_step):
    """ this process's rows of its micro-step micro_step of iteration it, on their way to the device -> X, M,
        prescribed, and micro, the micro-batch's place in the global batch """
    micro = micro_step * (ddp_world_size // share) + ddp_rank // share
    return *get_rows('train', np.split(train_rows(it, micro), share)[ddp_rank % share]), micro

# training loop
stop_flag = torch.zeros((), device=device) # made once: a step sets it with fill_ only when a signal came in
t0 = t_start = time.time()
stop, bad_run, first_iter, nxt = 0, 0, iter_num, None
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

    # evaluate on the val rows, log, and write checkpoints
    if iter_num % eval_interval == 0 or iter_num >= max_iters or eval_only:
        if iter_num > first_iter:
            check_threads() # other jobs may have started or ended since the last look
        val = estimate_val()
        if master_process:
            print(f"iter {iter_num}/{max_iters} val: bpb {val['bpb']:.4f}, rate {val['rate']:.3f}, "
                  f"word_boundary {val['word_boundary']:.3f}")
            log(dict(iter=iter_num, split='val', bytes=bytes_seen, **val))
            if learned and not eval_only and iter_num > 0: # (not the untrained gater's eval at 0, before step 1)
                # a collapse runs to no chunks or all: a calibrated target may sit ~0.05 off its rate on purpose
                off_target = off_target + 1 if not rate / 2 <= val['rate'] <= 2 * rate else 0
                if off_target >= 3:
                    print(f"warning: the val rate {val['rate']:.3f} has been under half or over twice its target "
                          f"{rate:.3f} for {off_target} evals: the gater may be collapsing")
            if val['loss'] < best_val_loss or always_save_checkpoint:
                best_val_loss = min(best_val_loss, val['loss'])
                if (iter_num > 0 or init_from == 'resume') and not eval_only: # eval_only leaves ckpt.pt as it is
                    save()
    if eval_only or iter_num >= max_iters:
        break

    # one optimizer step: a forward, the REINFORCE step and a backward per micro-batch; no host sync but the chunk
    # count of each forward (model.chunk_ends) and the flags at the end
    stats = torch.zeros(9, device=device)
    undecided = torch.zeros(2, device=device) # gate probabilities in (0.1, 0.9), real positions
    finite = torch.ones((), dtype=torch.bool, device=device)
    if iter_num == signal_at_iter and master_process: # fault injection (tests): rank 0 alone is preempted
        for sig in os.environ.get('NANOTOK_SIGNALS', 'TERM').split(','):
            os.kill(os.getpid(), getattr(signal, 'SIG' + sig))
    for micro_step in range(accum):
        X, M, prescribed, micro = nxt or fetch(iter_num, micro_step) # fetched during the last backward, if any
        torch.manual_seed(sample_seed(iter_num, micro) * share + ddp_rank % share) # the gates' draw
        if draws > 1: # each row `draws` times in a row: (B*draws, T)
            X, M = X.repeat_interleave(draws, 0), M.repeat_interleave(draws, 0)
        warm = iter_num < gate_warmup # the network learns on random boundaries; the gater waits
        prescribed = (torch.rand(X.shape, device=device) < rate).float() if warm else prescribed
        sync = nullcontext() if not ddp or micro_step == accum - 1 else model.no_sync() # all-reduce on the last
        with sync:
            with ctx:
                out = model(X, gates=prescribed)
            # --- the REINFORCE step (README, 'The REINFORCE step'; tests/test_reinforce.py runs it) ---
            Mf = M.float() # (B, T) 1 at real bytes; gate t is real if byte t is, prediction t if byte t+1 is
            m = Mf[:, 1:] # (B, T-1)
            nll, nll_early = next_byte_nll(out['logits'], X), next_byte_nll(out['early_logits'], X) # (B, T-1)
            lm_loss, early_loss = (nll * m).sum() / m.sum(), (nll_early * m).sum() / m.sum() # nats per byte
            # r_t: how much the full model beats the early exit on byte t+1 (or just -CE)
            reward = (nll_early - nll).detach() if early_exit_reward else -nll.detach() # (B, T-1)
            baseline = position_mean(reward, m, micro) if batch_baseline else 0.0 # (T-1,) over the micro-batch
            if draws > 1: # the row's other draws at the same position, which read the same bytes
                rr = reward.unflatten(0, (-1, draws)) # (B, draws, T-1)
                baseline = ((rr.sum(1, keepdim=True) - rr) / (draws - 1)).flatten(0, 1) # (B*draws, T-1)
            advantage = (reward - baseline) * m # (B, T-1) A_t, 0 at padding
            returns = F.pad(discounted_returns(advantage, gamma), (0, 1)) # (B, T) gate t: the predictions >= t
            # the gater's two losses train the gater and, through its input x, the down layers and the embedding
            gate_logits, gate_probs = out['gate_logits'].float(), out['gate_probs'].float() # (B, T)
            logp = -F.binary_cross_entropy_with_logits(gate_logits, out['gates'].float(), reduction='none') # log pi
            pg_loss = -(returns * logp).sum() / Mf.sum() # returns are 0 past a row's end
            mean_p = (gate_probs * Mf).sum() / Mf.sum() # the forced gates (p = 1) included, as the paper
            if rate_loss == 'ours': # a uniform push on every free logit, down when above the rate, up when below
                r_loss = (gate_logits * Mf).sum() / Mf.sum() * (mean_p - rate).detach()
            elif rate_loss == 'hnet': # H-Net's ratio loss, minimal when the realised rate and mean(p) are on target
                r_loss = hnet_ratio_loss(out['gates'].float(), gate_probs, rate, Mf)
            else: # Nawrot's prior -log Binomial(gates; bytes, rate) / bytes per row, on the straight-through gates
                r_loss = binomial_prior(out['gates'].float() + gate_probs - gate_probs.detach(), rate, Mf)
            pg_w, rate_w = (0.0, 0.0) if warm else (pg_weight, rate_weight)
            loss = (1 - early_weight) * lm_loss + early_weight * early_loss + pg_w * pg_loss + rate_w * r_loss
            # --- end of the REINFORCE step ---
            if nan_at_iter <= iter_num < nan_at_iter + nan_iters and ddp_rank == ddp_world_size - 1:
                loss = loss * math.nan # fault injection (tests): a loss spike gone non-finite on one rank
            finite &= torch.isfinite(loss)
            loss = loss / accum # the gradient is the mean over micro-steps (and DDP averages over processes)
            # the next micro-batch, read and copied while the device works on this one (as nanoGPT)
            last = micro_step == accum - 1
            nxt = fetch(iter_num + last, (micro_step + 1) % accum) if not last or iter_num + 1 < max_iters else None
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
    if stop_signal:
        stop_flag.fill_(stop_signal)
    flags = torch.stack([bad.float(), stop_flag])
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

    # timing and logging: a short line on the console, every metric in log.jsonl
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    if iter_num == first_iter:
        t_first = t1 # the first step carries the first eval and the warm-up: the time left is timed after it
    if iter_num % log_interval == 0 and master_process:
        more = [out['n_chunks'].sum(), undecided[0] / undecided[1].clamp(min=1), pg_loss, r_loss]
        s = torch.cat([stats, torch.stack([v.detach().float() for v in more])]).cpu() # one host sync
        n_chunks, und, pg, rl = s[9:].tolist()
        s = summarize(s[:9])
        bps = iter_bytes / dt
        peak = peak_flops or (gpu_peak_flops(torch.cuda.get_device_name(device)) if device_type == 'cuda' else None)
        mfu = raw_model.estimate_mfu(bps / ddp_world_size, n_chunks / X.numel(), peak) if peak else None # not on CPUs
        und = dict(undecided=und) if learned else {} # near 0: the gater no longer explores
        mem = dict(peak_mem_gb=torch.cuda.max_memory_allocated(device) / 1e9) if device_type == 'cuda' else {}
        left = (t1 - t_first) / (iter_num - first_iter) * (max_iters - iter_num - 1) if iter_num > first_iter else 0
        print(f"iter {iter_num}/{max_iters}: loss {s['loss']:.4f}, bpb {s['bpb']:.4f}, rate {s['rate']:.3f}, "
              f"word_boundary {s['word_boundary']:.3f}, {bps:,.0f} bytes/s, "
              + ''.join(f"{v:.1f}GB peak, " for v in mem.values()) + (f"{hms(left)} left" if left else '? left'))
        log(dict(iter=iter_num, split='train', bytes=bytes_seen, lr=lr, bytes_per_sec=bps, mfu=mfu, pg_loss=pg,
                 rate_loss=rl, **s, **und, **mem, bad_steps=bad_steps))
    if bad_run >= max_bad_steps: # every rank counts alike; the weights are still the last good ones
        last = f"the last good checkpoint is {ckpt_path}" if os.path.exists(ckpt_path) else "no checkpoint was written"
        raise SystemExit(f"train.py: {bad_run} non-finite steps in a row (to iteration {iter_num}, --max_bad_steps="
                         f"{max_bad_steps}): stopped; {last}; resume it with a lower --learning_rate"
                         if master_process else 1)
    iter_num += 1
    if stop: # preempted: the step is done, save it and leave together
        if master_process:
            save()
        break

if ddp:
    dist.barrier() # rank 0 may still be writing the checkpoint: leave together
    dist.destroy_process_group()
if stop and master_process:
    print(f"train.py: stopped by {signal.Signals(int(stop)).name} after iteration {iter_num - 1}, saved in "
          f"{ckpt_path}; to go on, rerun the same command with --init_from=resume (init_from='auto' does it by itself)")
elif master_process and not eval_only: # the closing summary
    print(f"done: {iter_num - first_iter} iterations in {hms(time.time() - t_start)}; val bpb {val['bpb']:.4f}, "
          + ', '.join(f"{k} {val[k]:.3f}" for k in ('rate', 'ws_boundary', 'word_boundary', 'boundary_precision')))
    print(f"checkpoint: {ckpt_path}" if os.path.exists(ckpt_path) else "no checkpoint written (max_iters=0)")
    print(f"next: python sample.py --out_dir={out_dir} --show_boundaries")
