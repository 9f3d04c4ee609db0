# the paper's method with a chunk pooled as the mean of its bytes instead of its last byte's state (the paper's code's
# default downsampler, AverageTokenDownsampler, which no reported run uses)
exec(open(os.path.join(os.path.dirname(__file__), 'config', 'method_sequential.py')).read())
downsampler = 'mean'
