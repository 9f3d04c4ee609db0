# 346M random: torchrun --standalone --nproc_per_node=8 train.py config/train_346m_random.py
exec(open('config/size_346m.py').read())
exec(open('config/method_random.py').read())
out_dir = 'out-346m-random'
wandb_run_name = '346m-random'
