# a boundary at every whitespace byte (SpaceByte-like): causal, fixed, no learning in the gater
gater = 'whitespace'
downsampler = 'select'
upsampler = 'add'
pg_weight = 0.0
rate_weight = 0.0
early_weight = 0.0
