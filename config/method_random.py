# the paper's Uniform baseline: exactly round(0.2*T) random boundaries, no learning in the gater
gater = 'uniform'
downsampler = 'select'
upsampler = 'add'
pg_weight = 0.0
rate_weight = 0.0
early_weight = 0.0
