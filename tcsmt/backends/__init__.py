"""The back ends of the contract (:mod:`tcsmt.arith.contract`): numpy integers (the simulator), QF_BV terms
(the solver), CuPy arrays (the GPU simulator).  Representation only: no arithmetic decisions.
"""
