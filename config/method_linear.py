# independent learned gates trained by REINFORCE (the paper's 'linear' run, with its default weights)
gater = 'linear'
downsampler = 'select'
upsampler = 'deviation'
pg_weight = 1.0
rate_weight = 2.0
early_weight = 0.0 # as the paper's run: the early head is not trained, yet it is the reward's baseline
