# ablation, no batch-relative advantages: torchrun --standalone --nproc_per_node=8 train.py config/train_147m_sequential_no_baseline.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'train_147m_sequential.py')).read())
batch_baseline = False
out_dir = 'out-147m-sequential-no_baseline'
wandb_run_name = '147m-sequential-no_baseline'
