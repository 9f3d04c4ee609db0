# ablation, no time discounting: torchrun --standalone --nproc_per_node=8 train.py config/train_147m_sequential_discount1.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'train_147m_sequential.py')).read())
gamma = 1.0
out_dir = 'out-147m-sequential-discount1'
wandb_run_name = '147m-sequential-discount1'
