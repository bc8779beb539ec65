"""A Llama-style decoder in NumPy (float32), for calibration and perplexity.

Matches transformers' ``LlamaForCausalLM`` (``models/llama/modeling_llama.py``) for the default RoPE::

    x = embed_tokens[ids]                                           (B, L, H)
    per layer i:
        h   = rmsnorm(x) * input_layernorm          rmsnorm(x) = x / sqrt(mean(x^2) + eps)
        q, k, v = h Wq^T, h Wk^T, h Wv^T            ← group 0: q_proj, k_proj, v_proj read h
        q, k = rope(q), rope(k)                     rotate_half, inv_freq = theta^(-2j/d)
        a   = softmax(q k^T / sqrt(d) + causal) v   (kv heads repeated for grouped-query attention)
        x   = x + a Wo^T                            ← group 1: o_proj reads a
        h2  = rmsnorm(x) * post_attention_layernorm ← group 2: gate_proj, up_proj read h2
        m   = silu(h2 Wg^T) * (h2 Wu^T)             ← group 3: down_proj reads m
        x   = x + m Wd^T
    logits = (rmsnorm(x) * norm) lm_head^T          (tied: embed_tokens)

Linear weights are PyTorch (N, K); optional biases (``attention_bias``, ``mlp_bias``) are added.
:meth:`LlamaModel.block_steps` is a generator that yields each group's input before the group's
linears are applied and reads the weights from ``W`` only then, so a caller that quantizes the group
at the yield gets the next groups' inputs from the already-quantized layers (sequential calibration).
"""

from __future__ import annotations

import numpy as np

from refsim._validate import native_contiguous
from refsim.errors import CheckpointError, ShapeError
from refsim.models import inputs

# the architecture objects are built by refsim.io.model_folder.load_model from a checked config
__all__: list[str] = []

_PROJ = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _rms(x: np.ndarray, W: dict, name: str, eps: float) -> np.ndarray:
    """rmsnorm(x) * W[name] for x (..., H) and the norm weight (H,)."""
    w = inputs.vector(W, name, x.shape[-1])
    var = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    return (x / np.sqrt(var + np.float32(eps)) * w).astype(np.float32)


_lin = inputs.linear   # optional biases (attention_bias, mlp_bias) are added when present


class LlamaModel:
    """A decoder described by a Hugging Face ``config.json`` (``model_type`` llama/mistral/qwen2)."""

    family = "decoder"

    def __init__(self, config: dict, names: set[str], path=None):
        self.cfg = config
        try:
            self.hidden = int(config["hidden_size"])
            self.n_layers = int(config["num_hidden_layers"])
            self.n_heads = int(config["num_attention_heads"])
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{path}: config.json must give hidden_size, num_hidden_layers and "
                                  f"num_attention_heads as integers; got {err!r}") from None
        self.n_kv = int(config.get("num_key_value_heads") or self.n_heads)
        if min(self.hidden, self.n_heads, self.n_kv) < 1 or self.n_layers < 0 or self.n_heads % self.n_kv:
            raise CheckpointError(f"{path}: config.json hidden_size, num_attention_heads and num_key_value_heads "
                                  "must be positive, num_hidden_layers >= 0, the heads a multiple of the kv heads; got "
                                  f"{self.hidden}, {self.n_layers}, {self.n_heads}, {self.n_kv}")
        self.head_dim = int(config.get("head_dim") or self.hidden // self.n_heads)
        if self.head_dim < 1 or self.n_layers and self.head_dim % 2:
            raise CheckpointError(f"{path}: config.json head_dim must be a positive even number (RoPE rotates "
                                  f"pairs); got {self.head_dim}")
        self.eps = float(config.get("rms_norm_eps", 1e-6))
        rope = config.get("rope_parameters") or {}
        self.theta = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
        if (config.get("rope_scaling") or {}).get("rope_type", "default") not in ("default", None) or \
                rope.get("rope_type", "default") != "default":
            raise CheckpointError(f"{path}: only the default RoPE is modelled; got {rope or config.get('rope_scaling')}")
        self.lm_head = "lm_head.weight" if "lm_head.weight" in names else "model.embed_tokens.weight"
        missing = [f"{p}.weight" for p in self.linear_names() if f"{p}.weight" not in names]
        if missing or "model.embed_tokens.weight" not in names:
            raise CheckpointError(f"{path}: a Llama checkpoint must hold every projection of "
                                  f"{self.n_layers} layers and model.embed_tokens; missing {missing[:2]}")

    # -- names -------------------------------------------------------------------------------
    def block_groups(self, i: int) -> list[list[str]]:
        p = f"model.layers.{i}"
        return [[f"{p}.self_attn.{n}" for n in ("q_proj", "k_proj", "v_proj")], [f"{p}.self_attn.o_proj"],
                [f"{p}.mlp.gate_proj", f"{p}.mlp.up_proj"], [f"{p}.mlp.down_proj"]]

    def linear_names(self) -> list[str]:
        return [n for i in range(self.n_layers) for g in self.block_groups(i) for n in g]

    # -- forward -----------------------------------------------------------------------------
    def embed(self, ids: np.ndarray, W: dict) -> np.ndarray:
        """ids int (B, L) in [0, V) -> (B, L, H) float32 (V, H: the rows and width of embed_tokens)."""
        table = inputs.tensor(W, "model.embed_tokens.weight")
        if table.ndim != 2 or table.shape[1] != self.hidden:
            raise ShapeError(f"model.embed_tokens.weight: shape must be (V, hidden_size={self.hidden}); "
                             f"got {table.shape}")
        return table.astype(np.float32)[inputs.token_ids(ids, table.shape[0])]

    def _rope(self, L: int) -> tuple[np.ndarray, np.ndarray]:
        d = self.head_dim
        inv = (1.0 / (self.theta ** (np.arange(0, d, 2, dtype=np.int64).astype(np.float32) / d))).astype(np.float32)
        ang = np.arange(L, dtype=np.float32)[:, None] * inv[None]           # (L, d/2)
        emb = np.concatenate([ang, ang], axis=-1)                           # (L, d)
        return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)

    def attention(self, i: int, h: np.ndarray, W: dict) -> np.ndarray:
        """Self-attention output of layer ``i`` (o_proj applied) for its input h (B, L, H)."""
        return _lin(self._context(i, h, W), W, f"model.layers.{i}.self_attn.o_proj")

    def _context(self, i: int, h: np.ndarray, W: dict) -> np.ndarray:
        B, L, _ = h.shape
        p = f"model.layers.{i}.self_attn"
        d, nh, nkv = self.head_dim, self.n_heads, self.n_kv
        q, k, v = (_lin(h, W, f"{p}.{n}") for n in ("q_proj", "k_proj", "v_proj"))
        for name, t, heads in (("q_proj", q, nh), ("k_proj", k, nkv), ("v_proj", v, nkv)):
            if t.shape[-1] != heads * d:
                raise ShapeError(f"{p}.{name}.weight: must have {heads} heads x head_dim {d} = {heads * d} rows; "
                                 f"got {t.shape[-1]}")
        q = q.reshape(B, L, nh, d).transpose(0, 2, 1, 3)    # (B, nh, L, d)
        k = k.reshape(B, L, nkv, d).transpose(0, 2, 1, 3)   # (B, nkv, L, d)
        v = v.reshape(B, L, nkv, d).transpose(0, 2, 1, 3)
        cos, sin = self._rope(L)

        def rot(t):
            half = np.concatenate([-t[..., d // 2:], t[..., : d // 2]], axis=-1)
            return (t * cos + half * sin).astype(np.float32)

        q, k = rot(q), rot(k)
        rep = nh // nkv
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)        # (B, nh, L, d)
        s = (q @ k.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(d))          # (B, nh, L, L)
        s = np.where(np.tril(np.ones((L, L), bool)), s, np.float32(-np.inf))
        s = s - s.max(axis=-1, keepdims=True)
        pr = np.exp(s)
        pr /= pr.sum(axis=-1, keepdims=True)
        return (pr @ v).transpose(0, 2, 1, 3).reshape(B, L, nh * d).astype(np.float32)

    def mlp(self, i: int, h: np.ndarray, W: dict) -> np.ndarray:
        """MLP output of layer ``i`` (down_proj applied) for its input h2 (B, L, H)."""
        return _lin(self._gated(i, h, W), W, f"model.layers.{i}.mlp.down_proj")

    def _gated(self, i: int, h: np.ndarray, W: dict) -> np.ndarray:
        g = _lin(h, W, f"model.layers.{i}.mlp.gate_proj")
        return (g / (1 + np.exp(-g)) * _lin(h, W, f"model.layers.{i}.mlp.up_proj")).astype(np.float32)

    def block_steps(self, i: int, x: np.ndarray, W: dict):
        """Generator: yields (group names, group input (B, L, K)) four times, returns the block output."""
        p = f"model.layers.{i}"
        g = self.block_groups(i)
        x = inputs.activations("x", x, self.hidden)
        h = _rms(x, W, f"{p}.input_layernorm.weight", self.eps)
        yield g[0], h
        ctx = self._context(i, h, W)
        yield g[1], ctx
        x = x + _lin(ctx, W, f"{p}.self_attn.o_proj")
        h2 = _rms(x, W, f"{p}.post_attention_layernorm.weight", self.eps)
        yield g[2], h2
        m = self._gated(i, h2, W)
        yield g[3], m
        return (x + _lin(m, W, f"{p}.mlp.down_proj")).astype(np.float32)

    def head(self, x: np.ndarray, W: dict) -> np.ndarray:
        """Logits (B, L, V) float32 of x float (B, L, H)."""
        x = inputs.activations("x", x, self.hidden)
        out = inputs.tensor(W, self.lm_head)
        if out.ndim != 2 or out.shape[1] != self.hidden:
            raise ShapeError(f"{self.lm_head}: shape must be (V, hidden_size={self.hidden}); got {out.shape}")
        h = native_contiguous(_rms(x, W, "model.norm.weight", self.eps))          # canonical BLAS operands
        return (h @ native_contiguous(out, np.float32).T).astype(np.float32)

    # -- AWQ: which scale folds into which op (AutoAWQ ``LlamaAWQForCausalLM.get_layers_for_scaling``)
    def awq_scalings(self, i: int, W: dict) -> list[dict]:
        p = f"model.layers.{i}"
        g = self.block_groups(i)
        out = [{"prev": f"{p}.input_layernorm", "kind": "norm", "layers": g[0], "inspect": "attention"}]
        if inputs.tensor(W, f"{p}.self_attn.v_proj.weight").shape == inputs.tensor(W, f"{p}.self_attn.o_proj.weight").shape:
            out.append({"prev": f"{p}.self_attn.v_proj", "kind": "linear", "layers": g[1], "inspect": None})
        out.append({"prev": f"{p}.post_attention_layernorm", "kind": "norm", "layers": g[2], "inspect": "mlp"})
        out.append({"prev": f"{p}.mlp.up_proj", "kind": "linear", "layers": g[3], "inspect": None})
        return out

    def inspect(self, i: int, what: str | None, X: np.ndarray, W: dict, layer: str) -> np.ndarray:
        """AutoAWQ's ``module2inspect`` output for input X: the attention, the MLP, or one linear."""
        if what == "attention":
            return self.attention(i, X, W)
        if what == "mlp":
            return self.mlp(i, X, W)
        return _lin(X, W, layer)
