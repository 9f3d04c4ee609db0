# the quick start (train.py's defaults): a small model on the embedded pycode corpus (the Python standard library's
# sources) that learns its boundaries in a few minutes on a laptop CPU
# $ python prepare.py pycode && python train.py config/train_tiny_pycode.py
# $ python sample.py --out_dir=out-tiny-pycode --show_boundaries
out_dir = 'out-tiny-pycode'
dataset = 'pycode'
device = 'cpu'
dtype = 'float32'
block_size = 256
batch_size = 8
gradient_accumulation_steps = 1
n_embd = 64
n_head = 2
n_down = 1
n_mid = 4 # deep enough at chunk level for the boundaries to matter
n_up = 1
window = 8 # the byte layers see 8 bytes; further back only through the chunks (as 64 of the paper's 4096)
learning_rate = 3e-3
max_iters = 2400 # 4.9M bytes
lr_decay_iters = 2400
warmup_iters = 30
eval_interval = 200
eval_iters = 8
log_interval = 10
# the paper's method; swap in any config/method_*.py after this file (config files exec their parts next to train.py)
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_sequential.py')).read())
# ... at the sizes of this model: the gate logits at scale 1 (the paper's 1/16 moves them 16x slower, too slow for a
# few thousand steps) and lambda_pi = lambda_c = 0.1 (raised together, so the rate holds)
gate_scale = 1.0
pg_weight = 0.1
rate_weight = 0.1
