# ablation, no early-exit relative rewards: r = -CE (the early head is still trained): torchrun --standalone --nproc_per_node=8 train.py config/train_147m_sequential_no_early_exit.py
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'train_147m_sequential.py')).read())
early_exit_reward = False
out_dir = 'out-147m-sequential-no_early_exit'
wandb_run_name = '147m-sequential-no_early_exit'
