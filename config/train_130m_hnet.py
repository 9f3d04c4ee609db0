# 130M hnet: torchrun --standalone --nproc_per_node=2 train.py config/train_130m_hnet.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_130m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_hnet.py')).read())
out_dir = 'out-130m-hnet'
wandb_run_name = '130m-hnet'
