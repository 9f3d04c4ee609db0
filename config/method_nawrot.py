# Dynamic Token Pooling (Nawrot et al. 2023): Gumbel-sigmoid boundaries trained straight through the pooling
gater = 'nawrot'
downsampler = 'nawrot'
upsampler = 'nawrot'
nawrot_temp = 1.0 # the paper's run; Nawrot et al.'s own code uses 0.5
pg_weight = 0.0
rate_weight = 2.0 # the paper's run held the rate with the 'ours' rate loss at weight 2 ...
# ... not with Nawrot's binomial prior on the count: --rate_loss=binomial --rate_weight=1 for that
early_weight = 0.0
