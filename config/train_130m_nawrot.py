# 130M nawrot: torchrun --standalone --nproc_per_node=2 train.py config/train_130m_nawrot.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_130m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_nawrot.py')).read())
out_dir = 'out-130m-nawrot'
wandb_run_name = '130m-nawrot'
