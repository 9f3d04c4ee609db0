# 32M nawrot: torchrun --standalone --nproc_per_node=2 train.py config/train_32m_nawrot.py
exec(open('config/size_32m.py').read())
exec(open('config/method_nawrot.py').read())
out_dir = 'out-32m-nawrot'
wandb_run_name = '32m-nawrot'
