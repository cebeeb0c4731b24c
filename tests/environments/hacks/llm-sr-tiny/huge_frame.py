# hack: in the fresh prediction process, ends its output with a frame that declares 2**60 bytes of
# predictions and exits before the driver writes the real one
# expect: error
# reason: prediction frame
# base: initial-program
import os
import struct
import sys

if os.path.basename(sys.argv[0]) == "sandbox_driver.py":
    MAGIC = b"\x00EVOBENCH-LLM-SR-PREDICTIONS\x00"
    sys.stdout.buffer.write(MAGIC + struct.pack("<Q", 1 << 60) + b"\0" * 4096)
    sys.stdout.buffer.flush()
    os._exit(0)
