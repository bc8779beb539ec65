"""Shared helper of the refsim.models tests (imported by name: the tests folder has no packages).

``forward(model, ids, W, groups=None)``: the model's output on (B, L) token ids, running every block's
``block_steps`` generator to its end; ``groups``, when a list, receives each yielded (names, input).
"""

from __future__ import annotations


def forward(model, ids, W, groups=None):
    x = model.embed(ids, W)
    for i in range(model.n_layers):
        steps = model.block_steps(i, x, W)
        try:
            while True:
                names, X = next(steps)
                if groups is not None:
                    groups.append((names, X))
        except StopIteration as stop:
            x = stop.value
    return model.head(x, W)
