# the paper's 18M model (18.7M parameters) and its budget; combined with a method_*.py file
dataset = 'fineweb'
block_size = 4096 # BOS + a 4095-byte window; prepare.py cuts documents to 4095 bytes: one row each, as the paper
n_embd = 384
n_head = 6
n_down = 2
n_mid = 6
n_up = 2
window = 64 # the byte layers' sliding window
# the micro-batch is part of the method: the batch baseline averages the reward over its rows, a GPU's rows in one
# micro-step (when GPUs outnumber micro-batches, the GPUs that split one average over all its rows together)
batch_size = 32 # rows per micro-batch, as the paper's job (1 GPU x 32 rows)
gradient_accumulation_steps = 1 # over all GPUs: 32 rows of 4096 bytes per step, so one GPU
learning_rate = 0.0036
max_iters = 6332 # 8.3e+08 bytes / (32 * 4096)
lr_decay_iters = 6332
warmup_iters = 473 # 6.2e+07 bytes
eval_interval = 100
eval_iters = 8 # the 256 val documents
