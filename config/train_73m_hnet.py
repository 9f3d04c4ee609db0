# 73M hnet: torchrun --standalone --nproc_per_node=8 train.py config/train_73m_hnet.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_73m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_hnet.py')).read())
out_dir = 'out-73m-hnet'
wandb_run_name = '73m-hnet'
