# H-Net dynamic chunking (Hwang et al. 2025): cosine router, EMA smoothing, straight-through confidence
gater = 'hnet'
downsampler = 'hnet'
upsampler = 'hnet'
pg_weight = 0.0
rate_loss = 'hnet' # H-Net's ratio loss at 0.03 (the paper's run), over real bytes only
rate_weight = 0.03
early_weight = 0.0
