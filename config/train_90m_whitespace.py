# 90M whitespace: torchrun --standalone --nproc_per_node=8 train.py config/train_90m_whitespace.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_90m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_whitespace.py')).read())
out_dir = 'out-90m-whitespace'
wandb_run_name = '90m-whitespace'
