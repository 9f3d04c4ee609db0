# 18M random: torchrun --standalone --nproc_per_node=8 train.py config/train_18m_random.py
exec(open('config/size_18m.py').read())
exec(open('config/method_random.py').read())
out_dir = 'out-18m-random'
wandb_run_name = '18m-random'
