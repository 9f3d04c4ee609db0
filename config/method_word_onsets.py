# a control with word boundaries, causal: a gate on each word's first byte (a chunk ends one byte into the word).
# word_rate as in config/method_word_ends.py (experiments.py --table=controls: --word_rate=0.0870 on pycode)
gater = 'word_onsets'
downsampler = 'select'
upsampler = 'add'
word_rate = 0.0
pg_weight = 0.0
rate_weight = 0.0
early_weight = 0.0
