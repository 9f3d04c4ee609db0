# 18M linear: torchrun --standalone --nproc_per_node=8 train.py config/train_18m_linear.py
exec(open('config/size_18m.py').read())
exec(open('config/method_linear.py').read())
out_dir = 'out-18m-linear'
wandb_run_name = '18m-linear'
