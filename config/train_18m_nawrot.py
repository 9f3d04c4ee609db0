# 18M nawrot: torchrun --standalone --nproc_per_node=8 train.py config/train_18m_nawrot.py
exec(open('config/size_18m.py').read())
exec(open('config/method_nawrot.py').read())
out_dir = 'out-18m-nawrot'
wandb_run_name = '18m-nawrot'
