"""Library table builders: decisions, H200 confirmation and comparison files made from recorded plan files.
"""
