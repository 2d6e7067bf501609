"""padbench worker: a small supervisor plus plugin families (strategies, attention kernels, job kinds).

Importing this package must stay cheap and must never initialise CUDA: the supervisor process only
spawns children, and only children touch the GPU.
"""
