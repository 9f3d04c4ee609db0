# 18M linear: python train.py config/train_18m_linear.py (one GPU: 32 rows per micro-step make the batch)
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_18m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_linear.py')).read())
out_dir = 'out-18m-linear'
wandb_run_name = '18m-linear'
