"""weft as a torch.distributed backend.

    import weft_torch  # registers the backend
    torch.distributed.init_process_group("weft", ...)

Installed with pip, the package is also loaded by `import torch` itself (a
"torch.backends" entry point), so scripts need no import to use "weft".
Works wherever "gloo" does for CPU tensors: env://, tcp://, file:// and
torchrun rendezvous through PyTorch's store; every process group (new_group)
gets its own weft communicator, whose deadline is the group's timeout."""
import torch  # noqa: F401  (first: the extension links against it)

from . import _C  # noqa: F401
from ._register import create_backend, register

__all__ = ["create_backend"]

register()
