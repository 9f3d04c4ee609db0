# 90M hnet: torchrun --standalone --nproc_per_node=8 train.py config/train_90m_hnet.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_90m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_hnet.py')).read())
out_dir = 'out-90m-hnet'
wandb_run_name = '90m-hnet'
