# the paper's 346M model (366M parameters) and its budget; combined with a method_*.py file
dataset = 'fineweb'
block_size = 4096 # BOS + a 4095-byte window; prepare.py cuts documents to 4095 bytes: one row each, as the paper
n_embd = 1024
n_head = 16
n_down = 2
n_mid = 20
n_up = 2
window = 64 # the byte layers' sliding window
# the micro-batch is part of the method: the batch baseline averages the reward over its rows, a GPU's rows in one
# micro-step (when GPUs outnumber micro-batches, the GPUs that split one average over all its rows together)
batch_size = 8 # rows per micro-batch; no job of the paper's at this size is stored: 8 as at 73M-147M
gradient_accumulation_steps = 32 # over all GPUs: 256 rows of 4096 bytes per step, e.g. 8 GPUs x 8 rows x 4
learning_rate = 0.0015
max_iters = 15259 # 1.6e+10 bytes / (256 * 4096)
lr_decay_iters = 15259
warmup_iters = 1144 # 1.2e+09 bytes
eval_interval = 100
eval_iters = 32 # the 256 val documents
