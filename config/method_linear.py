# independent learned gates trained by REINFORCE: the `linear` run of the paper's code, which the paper does not report
# (its weights, the code's defaults)
gater = 'linear'
downsampler = 'select'
upsampler = 'deviation'
pg_weight = 1.0
rate_weight = 2.0
early_weight = 0.0 # as that run: the early head is not trained, yet it is the reward's baseline
