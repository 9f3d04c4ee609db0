# a small model on the embedded pycode corpus (the Python standard library's sources): minutes on a laptop CPU
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
n_mid = 2
n_up = 1
learning_rate = 3e-3
max_iters = 600
lr_decay_iters = 600
warmup_iters = 30
eval_interval = 100
eval_iters = 8
log_interval = 10
exec(open('config/method_sequential.py').read()) # the paper's method; swap in any config/method_*.py after this file
