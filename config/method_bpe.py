# the paper's BPE guidance: a gate at the first byte of every BPE token; NOT causal (a token's end depends
# on the bytes after it), a reference point rather than a tokenizer the model could learn
gater = 'uniform' # ignored: the gates are prescribed
downsampler = 'select'
upsampler = 'add'
prescribe = 'bpe'
bpe_encoding = 'o200k_base' # 200k tokens, the size of the paper's own FineWeb BPE
pg_weight = 0.0
rate_weight = 0.0
early_weight = 0.0
