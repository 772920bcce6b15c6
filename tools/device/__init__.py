"""Device campaigns: scripts shipped to a GPU host (many need only numpy and torch there).
"""
