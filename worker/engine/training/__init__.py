"""What a training step is: the loss (chunked, fused with the head), activation checkpointing, compiled layers,
the step itself and its forward/backward split, and the training features a spec turns on.
"""
