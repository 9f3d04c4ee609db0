# 90M hnet: torchrun --standalone --nproc_per_node=8 train.py config/train_90m_hnet.py
exec(open('config/size_90m.py').read())
exec(open('config/method_hnet.py').read())
out_dir = 'out-90m-hnet'
wandb_run_name = '90m-hnet'
