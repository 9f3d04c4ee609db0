# 90M bpe: torchrun --standalone --nproc_per_node=8 train.py config/train_90m_bpe.py
exec(open('config/size_90m.py').read())
exec(open('config/method_bpe.py').read())
out_dir = 'out-90m-bpe'
wandb_run_name = '90m-bpe'
