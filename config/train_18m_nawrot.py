# 18M nawrot: python train.py config/train_18m_nawrot.py (one GPU: 32 rows per micro-step make the batch)
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_18m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_nawrot.py')).read())
out_dir = 'out-18m-nawrot'
wandb_run_name = '18m-nawrot'
