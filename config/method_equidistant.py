# a boundary every round(1/rate) bytes, 1 0 0 0 0 1 ... (the paper's code has it as EquidistantGater; no reported run
# uses it): causal, fixed, no learning in the gater
gater = 'equidistant'
downsampler = 'select'
upsampler = 'add'
pg_weight = 0.0
rate_weight = 0.0
early_weight = 0.0
