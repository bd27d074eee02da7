"""weft as a torch.distributed backend.

    import weft_torch  # registers the backend
    torch.distributed.init_process_group("weft", ...)

Installed with pip, the package is also imported by `import torch` itself
(a "torch.backends" entry point), so scripts need no import to use "weft".
Works wherever "gloo" does for CPU tensors: env://, tcp://, file:// and
torchrun rendezvous through PyTorch's store; every process group (new_group)
gets its own weft communicator, whose deadline is the group's timeout."""
from datetime import timedelta

import torch
import torch.distributed as dist

from . import _C

__all__ = ["create_backend"]


def create_backend(store, rank, world_size, timeout):
    """The creator torch.distributed calls for a process group of backend "weft"."""
    if isinstance(timeout, timedelta):
        timeout_ms = int(timeout.total_seconds() * 1000)
    else:
        timeout_ms = int(timeout * 1000) if timeout else 0
    return _C.create_backend(store, rank, world_size, timeout_ms)


def _autoload():
    """The entry point torch calls after importing this module, which has
    registered the backend by then."""


dist.Backend.register_backend("weft", create_backend, devices=["cpu"])
