# 32M linear: torchrun --standalone --nproc_per_node=2 train.py config/train_32m_linear.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_32m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_linear.py')).read())
out_dir = 'out-32m-linear'
wandb_run_name = '32m-linear'
