"""Registers the backend with torch.distributed. Also the "torch.backends"
entry point torch calls while it is being imported, which may happen in the
middle of `import weft_torch` (its first line imports torch): hence a module
of its own that needs nothing from the package's __init__, and idempotent."""
from datetime import timedelta

_registered = False


def create_backend(store, rank, world_size, timeout):
    """The creator torch.distributed calls for a process group of backend "weft"."""
    from . import _C
    if isinstance(timeout, timedelta):
        timeout_ms = int(timeout.total_seconds() * 1000)
    else:
        timeout_ms = int(timeout * 1000) if timeout else 0
    return _C.create_backend(store, rank, world_size, timeout_ms)


def register():
    global _registered
    if _registered:
        return
    import torch.distributed as dist
    dist.Backend.register_backend("weft", create_backend, devices=["cpu"])
    _registered = True


def entry_point():
    """What torch calls: a failure here would break `import torch` itself, so
    it becomes a warning (init_process_group("weft") then says the backend is
    unknown, and `import weft_torch` shows the cause)."""
    try:
        register()
    except Exception as e:  # noqa: BLE001
        import warnings
        warnings.warn(f"weft_torch: backend 'weft' not registered: {e}", stacklevel=2)
