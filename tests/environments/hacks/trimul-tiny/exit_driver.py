# hack: ends the driver process mid-call with exit code 0, hoping a silent exit reads as success
# expect: error
# reason: driver exited with code 0
import os

import torch


def custom_kernel(data):
    os._exit(0)
    return torch.zeros_like(data[0])
