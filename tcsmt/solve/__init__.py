"""Questions asked of the solver: the SMT encoding of the semantics, solver processes, where-clauses,
discriminate, feature queries, decision bundles, and their reports.
"""
