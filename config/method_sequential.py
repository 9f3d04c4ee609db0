# the paper's method: the sequential gater trained by REINFORCE with discounting, at the paper's run's values (with a
# config/size_*.py, a paper run). NOT train.py's defaults, the quick start's (gate_scale 1, weights 0.1)
gater = 'sequential'
downsampler = 'select'
upsampler = 'add'
filter_size = 8 # w: the gate sees the 7 previous gates
gate_scale = 1 / 16
pg_weight = 0.01 # lambda_pi
gamma = 0.99
early_exit_reward = True # r = CE_early - CE
batch_baseline = True
rate_loss = 'ours'
rate_weight = 0.01 # lambda_c
early_weight = 0.1 # lambda_e
