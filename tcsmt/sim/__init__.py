"""The bit-exact simulator: inputs turned into bit patterns, block scales checked, the semantics run on numpy
integers in chunks.
"""
