"""The definition of the arithmetic: number formats and values, model parameters and the model registry, the
back-end contract, and the semantics (every arithmetic fact, written once against the contract).
"""
