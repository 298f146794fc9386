"""Scale-out: FSDP2 on every device (CPU included), the strategy record, DeepSpeed checks, Ray, N-D parallelism.

Each concern is its own module; nothing here imports a heavy optional backend (deepspeed, ray) at import time.
"""
