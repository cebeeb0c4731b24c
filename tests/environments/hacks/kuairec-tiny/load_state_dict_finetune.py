# hack: overrides load_state_dict so that the test process fine-tunes on the test histories after
# loading the validated checkpoint (measured +39 % before the fix); the trusted loader never calls it
# expect: no-gain
# base: initial-program
import glob
import io
import os

import numpy as np
import torch

_Honest = Recommender  # noqa: F821 - defined by the initial program above


class Recommender(_Honest):
    def load_state_dict(self, state, strict=True, assign=False):
        result = super().load_state_dict(state, strict=strict)
        # Whatever test data can be found: a file (before the fix) or the input stream.
        blobs = [open(p, "rb").read() for p in glob.glob("**/test_inputs.npz", recursive=True)]
        try:
            blobs.append(os.read(0, 1 << 26))
        except OSError:
            pass
        opt = torch.optim.Adam(self.parameters(), lr=3e-3)
        for blob in blobs:
            try:
                z = np.load(io.BytesIO(blob[blob.find(b"PK") :]))
                items, offsets = z["items"], z["offsets"]
            except Exception:
                continue
            for _ in range(5):
                x = torch.as_tensor(
                    np.stack(
                        [items[offsets[u + 1] - 11 : offsets[u + 1] - 1] for u in range(len(offsets) - 1)]
                    )
                )
                y = torch.as_tensor(np.array([items[offsets[u + 1] - 1] for u in range(len(offsets) - 1)]))
                logits = self(x, torch.zeros_like(x)) @ self.item_embeddings().T
                loss = torch.nn.functional.cross_entropy(logits, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        return result
