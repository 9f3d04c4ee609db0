# the paper's 32M model (33.0M parameters) and its budget; combined with a method_*.py file
dataset = 'fineweb'
block_size = 4096 # BOS + a 4095-byte window; prepare.py cuts documents to 4095 bytes: one row each, as the paper
n_embd = 512
n_head = 8
n_down = 2
n_mid = 6
n_up = 2
window = 64 # the byte layers' sliding window
# the micro-batch is part of the method: the batch baseline averages the reward over its rows, a GPU's rows in one
# micro-step (when GPUs outnumber micro-batches, the GPUs that split one average over all its rows together)
batch_size = 32 # rows per micro-batch, as the paper's job (2 GPUs x 32 rows)
gradient_accumulation_steps = 2 # over all GPUs: 64 rows of 4096 bytes per step, e.g. 2 GPUs x 32 rows x 1
learning_rate = 0.003
max_iters = 5722 # 1.5e+09 bytes / (64 * 4096)
lr_decay_iters = 5722
warmup_iters = 420 # 1.1e+08 bytes
eval_interval = 100
eval_iters = 8 # the 256 val documents
