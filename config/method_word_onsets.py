# a control with word boundaries, causal: a gate on each word's first byte (a chunk ends one byte into the word);
# the rest as config/method_word_ends.py (experiments.py --table=controls: --word_rate=0.0870 on pycode)
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_word_ends.py')).read())
gater = 'word_onsets'
