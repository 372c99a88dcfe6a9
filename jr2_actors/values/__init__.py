"""Pure values every part shares: errors, constants, the workflow spec, quantities, times, the step shape.

Nothing here does I/O or keeps time: a core may import any of it (tests/test_layout.py checks).
"""
