"""A BERT-style encoder in NumPy (float32), for calibration and embedding quality.

Post-LN BERT as transformers' ``BertModel`` (no padding: every sequence of a batch has one length)::

    x = LN(word[ids] + position[0..L) + token_type[0])
    per layer i (prefix encoder.layer.i):
        q, k, v = x Wq^T + bq, ...                    ← group 0: attention.self.query/key/value read x
        ctx = softmax(q k^T / sqrt(d)) v              ← group 1: attention.output.dense reads ctx
        x   = LN(ctx Wo^T + bo + x)                   ← group 2: intermediate.dense reads x
        h   = gelu_erf(x Wi^T + bi)                   ← group 3: output.dense reads h
        x   = LN(h Wo2^T + bo2 + x)
    embedding = mean over positions of x               (sentence-transformers mean pooling)

Heads and epsilon come from ``config.json`` (``num_attention_heads``, ``layer_norm_eps``); a bare
safetensors file of all-MiniLM-L6-v2 (hidden 384, no config) gets that model's 12 heads and 1e-12.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf

from refsim.errors import CheckpointError, ShapeError
from refsim.models import inputs

# the architecture objects are built by refsim.io.model_folder.load_model from a checked config
__all__: list[str] = []


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis with the biased variance, float32."""
    mean = x.mean(axis=-1, keepdims=True, dtype=np.float32)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)
    return ((x - mean) / np.sqrt(var + np.float32(eps)) * gamma + beta).astype(np.float32)


def gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    return (x * np.float32(0.5) * (np.float32(1.0) + erf(x / np.float32(np.sqrt(2.0))))).astype(np.float32)


def _lin(x: np.ndarray, W: dict, name: str) -> np.ndarray:
    """A BERT linear: its bias is part of the checkpoint (named when missing)."""
    inputs.tensor(W, name + ".bias")
    return inputs.linear(x, W, name)


def _ln(x: np.ndarray, W: dict, name: str, eps: float) -> np.ndarray:
    H = x.shape[-1]
    return layer_norm(x, inputs.vector(W, name + ".weight", H), inputs.vector(W, name + ".bias", H), eps)


class BertModel:
    """An encoder whose tensors are named ``embeddings.*`` and ``encoder.layer.<i>.*`` (an optional
    ``bert.`` prefix is not supported)."""

    family = "encoder"

    def __init__(self, config: dict, names: set[str], path=None, hidden: int | None = None):
        self.n_layers = 1 + max((int(n.split(".")[2]) for n in names if n.startswith("encoder.layer.")), default=-1)
        if self.n_layers < 1:
            raise CheckpointError(f"{path}: a BERT checkpoint must hold encoder.layer.<i> tensors; got none")
        heads = config.get("num_attention_heads")
        if heads is None:
            if hidden != 384:
                raise CheckpointError(f"{path}: a BERT model other than all-MiniLM-L6-v2 needs its config.json "
                                      f"(num_attention_heads); got hidden size {hidden} and no config")
            heads = 12
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise CheckpointError(f"{path}: config.json num_attention_heads must be a positive integer; got {heads!r}")
        self.n_heads = int(heads)
        self.eps = float(config.get("layer_norm_eps", 1e-12))

    def block_groups(self, i: int) -> list[list[str]]:
        p = f"encoder.layer.{i}"
        return [[f"{p}.attention.self.{n}" for n in ("query", "key", "value")], [f"{p}.attention.output.dense"],
                [f"{p}.intermediate.dense"], [f"{p}.output.dense"]]

    def linear_names(self) -> list[str]:
        return [n for i in range(self.n_layers) for g in self.block_groups(i) for n in g]

    def embed(self, ids: np.ndarray, W: dict) -> np.ndarray:
        """ids int (B, L) in [0, V) -> (B, L, H) float32 after the embedding LayerNorm; L at most the
        position table's rows."""
        word = inputs.tensor(W, "embeddings.word_embeddings.weight")
        pos = inputs.tensor(W, "embeddings.position_embeddings.weight")
        tok = inputs.tensor(W, "embeddings.token_type_embeddings.weight")
        ids = inputs.token_ids(ids, word.shape[0])
        L = ids.shape[1]
        if pos.ndim != 2 or tok.ndim != 2 or word.ndim != 2 or pos.shape[1] != word.shape[1] \
                or tok.shape[1] != word.shape[1] or tok.shape[0] < 1:
            raise ShapeError(f"embeddings: word {word.shape}, position {pos.shape} and token_type {tok.shape} tables "
                             "must be (rows, H) with one H")
        if L > pos.shape[0]:
            raise ShapeError(f"ids: sequence length must be at most the {pos.shape[0]} positions of "
                             f"embeddings.position_embeddings; got {L}")
        x = word[ids] + pos[:L] + tok[0]
        return _ln(x.astype(np.float32), W, "embeddings.LayerNorm", self.eps)

    def _context(self, i: int, x: np.ndarray, W: dict) -> np.ndarray:
        B, L, H = x.shape
        nh, d = self.n_heads, H // self.n_heads
        if H % nh:
            raise ShapeError(f"x: hidden size must be a multiple of num_attention_heads={nh}; got {H}")
        p = f"encoder.layer.{i}.attention.self"
        q, k, v = (_lin(x, W, f"{p}.{n}").reshape(B, L, nh, d).transpose(0, 2, 1, 3) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d))            # (B, nh, L, L)
        s = s - s.max(axis=-1, keepdims=True)
        pr = np.exp(s)
        pr /= pr.sum(axis=-1, keepdims=True)
        return (pr @ v).transpose(0, 2, 1, 3).reshape(B, L, H).astype(np.float32)

    def block_steps(self, i: int, x: np.ndarray, W: dict):
        """Generator: yields (group names, group input) four times, returns the block output."""
        p = f"encoder.layer.{i}"
        g = self.block_groups(i)
        x = inputs.activations("x", x)
        yield g[0], x
        ctx = self._context(i, x, W)
        yield g[1], ctx
        x = _ln(_lin(ctx, W, f"{p}.attention.output.dense") + x, W, f"{p}.attention.output.LayerNorm", self.eps)
        yield g[2], x
        h = gelu(_lin(x, W, f"{p}.intermediate.dense"))
        yield g[3], h
        return _ln(_lin(h, W, f"{p}.output.dense") + x, W, f"{p}.output.LayerNorm", self.eps)

    def head(self, x: np.ndarray, W: dict) -> np.ndarray:
        """Mean-pooled embeddings (B, H) float32 of x float (B, L, H)."""
        x = inputs.activations("x", x)
        return x.mean(axis=1, dtype=np.float32)

    def awq_scalings(self, i: int, W: dict) -> list[dict]:
        """Only value -> attention.output.dense folds in a post-LN encoder (the LayerNorm output also
        feeds the residual, and GELU sits between intermediate and output)."""
        p = f"encoder.layer.{i}"
        return [{"prev": f"{p}.attention.self.value", "kind": "linear", "layers": [f"{p}.attention.output.dense"],
                 "inspect": None}]

    def inspect(self, i: int, what: str | None, X: np.ndarray, W: dict, layer: str) -> np.ndarray:
        return _lin(X, W, layer)
