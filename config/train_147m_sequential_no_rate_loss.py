# ablation, no rate loss: the rate runs to 1: torchrun --standalone --nproc_per_node=8 train.py config/train_147m_sequential_no_rate_loss.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'train_147m_sequential.py')).read())
rate_weight = 0.0
out_dir = 'out-147m-sequential-no_rate_loss'
wandb_run_name = '147m-sequential-no_rate_loss'
