# 147M nawrot: torchrun --standalone --nproc_per_node=8 train.py config/train_147m_nawrot.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_147m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_nawrot.py')).read())
out_dir = 'out-147m-nawrot'
wandb_run_name = '147m-nawrot'
