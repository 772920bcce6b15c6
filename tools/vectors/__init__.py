"""Builders of the hand-made input vectors under ``vectors/``.
"""
