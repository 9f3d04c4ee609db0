# 346M whitespace: torchrun --standalone --nproc_per_node=8 train.py config/train_346m_whitespace.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_346m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_whitespace.py')).read())
out_dir = 'out-346m-whitespace'
wandb_run_name = '346m-whitespace'
