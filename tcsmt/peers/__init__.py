"""Peer models run side by side with tcsmt (imported at run time, never copied): MMA-Sim.
"""
