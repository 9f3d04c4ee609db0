# i.i.d. Bernoulli(rate) boundaries: as random (the paper's Uniform), but the count per row varies (the paper's code
# has it as RandomGater; no reported run uses it); no learning in the gater
gater = 'bernoulli'
downsampler = 'select'
upsampler = 'add'
pg_weight = 0.0
rate_weight = 0.0
early_weight = 0.0
