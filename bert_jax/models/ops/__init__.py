"""Speed kernels, each a drop-in for the plain library op named in its module docstring and
tested against it (tests/test_ops_reference.py): same parameters, same forward, less time or
memory on CPU."""
