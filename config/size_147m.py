# the paper's 147M model (147.1M parameters) and its budget; combined with a method_*.py file
dataset = 'fineweb'
block_size = 4096 # BOS + a 4095-byte window; prepare.py cuts documents to 4095 bytes: one row each, as the paper
n_embd = 768
n_head = 12
n_down = 4
n_mid = 12
n_up = 4
window = 64 # the byte layers' sliding window
# the micro-batch is part of the method: the batch baseline averages the reward over its rows, a GPU's rows in one
# micro-step (when GPUs outnumber micro-batches, the GPUs that split one average over all its rows together)
batch_size = 8 # rows per micro-batch, as the paper's jobs (4 GPUs x 8 rows)
gradient_accumulation_steps = 16 # over all GPUs: 128 rows of 4096 bytes per step, e.g. 8 GPUs x 8 rows x 2
learning_rate = 0.0015
max_iters = 11444 # 6e+09 bytes / (128 * 4096)
lr_decay_iters = 11444
warmup_iters = 858 # 4.5e+08 bytes
eval_interval = 100
eval_iters = 32 # the 256 val documents
