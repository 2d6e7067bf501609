"""Timing and trusting a measurement: timed windows and their spread, the device's copy and matmul rates, and the
correctness gate every layout passes before it is timed.
"""
