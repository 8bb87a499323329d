"""Turns engine results into the fewest patches: diff against what is there, write the rest.

Publishers never decide: what to write comes from ``engine``; whether to write comes from a
pure comparison with the current object.
"""
