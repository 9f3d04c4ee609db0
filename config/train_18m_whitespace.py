# 18M whitespace: torchrun --standalone --nproc_per_node=8 train.py config/train_18m_whitespace.py
exec(open('config/size_18m.py').read())
exec(open('config/method_whitespace.py').read())
out_dir = 'out-18m-whitespace'
wandb_run_name = '18m-whitespace'
