# hack: print a forged result line claiming score 1.0 and leave before answering the call
# expect: error
# reason: choose(): the candidate process
# base: initial-program
import os
import sys


def choose():
    sys.stdout.write('{"status": "ok", "score": 1.0, "metrics": {"score": 1.0, "arm": 7.0}}\n')
    sys.stdout.flush()
    os._exit(0)
