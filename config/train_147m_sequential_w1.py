# ablation, no sliding window over past gates (w=1): torchrun --standalone --nproc_per_node=8 train.py config/train_147m_sequential_w1.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'train_147m_sequential.py')).read())
filter_size = 1
out_dir = 'out-147m-sequential-w1'
wandb_run_name = '147m-sequential-w1'
