"""The model a job measures: building it from a spec (random weights), the model families and experts it
supports, its LoRA adapters and FP8 layers, its parameters, FLOPs and memory plan.
"""
