"""Several ranks: the process group and each rank's share, FSDP2 sharding, and measurements agreed across ranks.
"""
