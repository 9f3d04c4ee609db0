# a control with word boundaries, causal: a gate on the whitespace byte after each word (a chunk ends on the space).
# word_rate = 0: the rule alone (about 0.09 of pycode's positions); set to the rule's own share on the corpus, random
# gates top it up to `rate`, as experiments.py --table=controls runs it (--word_rate=0.0883 on pycode)
gater = 'word_ends'
downsampler = 'select'
upsampler = 'add'
word_rate = 0.0
pg_weight = 0.0
rate_weight = 0.0
early_weight = 0.0
