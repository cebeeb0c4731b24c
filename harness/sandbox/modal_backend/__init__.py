"""Modal backend: evaluations in ``modal.Sandbox`` containers with the variant's GPUs."""

from .backend import ModalBackend
from .client import ImageRecipe, ModalClient, ModalInfraError, RemoteProcess, SandboxSpec
from .spec import gpu_string, sandbox_spec

__all__ = [
    "ImageRecipe",
    "ModalBackend",
    "ModalClient",
    "ModalInfraError",
    "RemoteProcess",
    "SandboxSpec",
    "gpu_string",
    "sandbox_spec",
]
