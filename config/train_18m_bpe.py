# 18M bpe: torchrun --standalone --nproc_per_node=8 train.py config/train_18m_bpe.py
exec(open('config/size_18m.py').read())
exec(open('config/method_bpe.py').read())
out_dir = 'out-18m-bpe'
wandb_run_name = '18m-bpe'
