# hack: raises inside the kernel (a candidate failure, never an infrastructure error)
# expect: error
# reason: custom_kernel exploded
import torch


def custom_kernel(data):
    raise RuntimeError("custom_kernel exploded")


_ = torch
