# H-Net dynamic chunking (Hwang et al. 2025): cosine router, EMA smoothing, straight-through confidence
gater = 'hnet'
downsampler = 'hnet'
upsampler = 'hnet'
pg_weight = 0.0
rate_loss = 'hnet' # H-Net's ratio loss at 0.03 (the paper's run), over real bytes only ...
rate_weight = 0.03
aux_weight = 0.0 # ... the model's aux_loss is the same loss over every position, padding included
early_weight = 0.0
