# 18M whitespace: python train.py config/train_18m_whitespace.py (one GPU: 32 rows per micro-step make the batch)
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'size_18m.py')).read())
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_whitespace.py')).read())
out_dir = 'out-18m-whitespace'
wandb_run_name = '18m-whitespace'
