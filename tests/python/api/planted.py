"""A payload the ranks find that this launch did not seal (a stranger's, planted where the
ranks look): refused before anything of it is unpickled. The caller's _handoff.seal is replaced
here by one that seals, with another key, a payload whose unpickling would write MARKER. Prints
"refused TYPE: MESSAGE" (or "ran") and "marker True|False".
Usage: planted.py MARKER"""
import os
import sys

import cloudpickle
import torch

from nano_torch import RankFailedError, _handoff, nano

MARKER = sys.argv[1]


class Planted:
    def __reduce__(self):  # what a stranger's pickle does when it is loaded: here, make the marker
        return (open, (MARKER, "w"))


sealed_by_this_launch = _handoff.seal
_handoff.seal = lambda key, purpose, data: sealed_by_this_launch(os.urandom(32), purpose, cloudpickle.dumps(Planted()))


@nano(num_processes=2)
def train(model):
    return 1


try:
    train(torch.nn.Linear(2, 2))
    print("ran")
except RankFailedError as e:
    print(f"refused {e.exc_type}: {e.message}")
print("marker", os.path.exists(MARKER))
