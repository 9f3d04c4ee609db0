# 18M hnet: torchrun --standalone --nproc_per_node=8 train.py config/train_18m_hnet.py
exec(open('config/size_18m.py').read())
exec(open('config/method_hnet.py').read())
out_dir = 'out-18m-hnet'
wandb_run_name = '18m-hnet'
