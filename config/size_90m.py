# the paper's 90M model (90.4M parameters) and its budget; combined with a method_*.py file
dataset = 'codeparrot'  # the paper's code model
block_size = 4096 # BOS + a 4095-byte window; prepare.py cuts documents to 4095 bytes: one row each, as the paper
n_embd = 768
n_head = 12
n_down = 4
n_mid = 6
n_up = 4
window = 64 # the byte layers' sliding window
# the micro-batch is part of the method: the batch baseline averages the reward over its rows, a GPU's rows in one
# micro-step (when GPUs outnumber micro-batches, the GPUs that split one average over all its rows together)
batch_size = 8 # rows per micro-batch, as the paper's jobs (4 GPUs x 8 rows)
gradient_accumulation_steps = 16 # over all GPUs: 128 rows of 4096 bytes per step, e.g. 8 GPUs x 8 rows x 2
learning_rate = 0.002
max_iters = 6485 # 3.4e+09 bytes / (128 * 4096)
lr_decay_iters = 6485
warmup_iters = 477 # 2.5e+08 bytes
eval_interval = 100
eval_iters = 32 # the 256 val documents
