# 18M sequential: torchrun --standalone --nproc_per_node=8 train.py config/train_18m_sequential.py
exec(open('config/size_18m.py').read())
exec(open('config/method_sequential.py').read())
out_dir = 'out-18m-sequential'
wandb_run_name = '18m-sequential'
