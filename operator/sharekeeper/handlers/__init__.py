"""kopf handlers: thin. They convert an object into a model value, feed ``cluster`` and wake a loop.

No computation and no writes happen here.
"""
