"""The sequences a job feeds: corpora read through `datasets` (local files, Hub data sets) or drawn from a
synthetic distribution, and the batch layouts built from them.
"""
