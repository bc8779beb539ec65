"""Real calibration activations: real English text through the real all-MiniLM-L6-v2 encoder.

Quantizers that look at activations (GPTQ's Hessian, Atom's reorder statistic, the 2/4/16-bit
sensitivity) need the inputs each linear layer actually sees. This module produces them without
PyTorch or any download beyond the MiniLM weights (see :mod:`refsim.data.minilm`):

    pydoc_data.topics (prose shipped with CPython)
        │  text_corpus(seed): the topic pages, shuffled by ``seed``, joined with blank lines
        ▼
    BERT basic tokenizer + WordPiece over minilm.vocab()         tokenize(text) -> list[int]
        │  lowercase, strip accents, split on whitespace and punctuation,
        │  greedy longest-match-first with '##' continuations, [UNK] for unsplittable words
        ▼
    sequences of at most 128 positions: [CLS] t1 … t126 [SEP]     (T rows in total)
        │
        ▼
    NumPy forward pass of all-MiniLM-L6-v2 (float32)             forward(ids) -> records
        embeddings = word[ids] + position[0..L) + token_type[0];  LayerNorm(eps=1e-12)
        6 × BERT layer (12 heads of 32, post-LN):
            q, k, v   = x @ Wq.T + bq, ...          ← records x for query/key/value
            ctx       = softmax(q k^T / sqrt(32)) v ← records ctx for attention.output.dense
            x         = LN(ctx @ Wo.T + bo + x)     ← records x for intermediate.dense
            h         = gelu_erf(x @ Wi.T + bi)     ← records h for output.dense
            x         = LN(h @ Wo2.T + bo2 + x)

``layer_inputs(n_tokens, seed)`` returns ``{safetensors weight name: float32 (T, K)}`` for the 36
encoder linear layers (K = in_features: 384, or 1536 for ``output.dense``). Row t is token t of the
concatenated sequences. Results are deterministic and cached per process; the arrays are
read-only (copy before modifying).

The tokenizer follows the behaviour of the reference BERT ``BasicTokenizer`` + ``WordpieceTokenizer``
(``do_lower_case=True``, ``max_input_chars_per_word=100``); Chinese-character splitting is not
implemented (pydoc text has none).
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import threadpoolctl

from refsim._validate import (native_contiguous, require_float_array, require_instance, require_int, require_real,
                              require_shape)
from refsim.data import minilm
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "SEQ_LEN",
    "text_corpus",
    "basic_tokenize",
    "wordpiece",
    "tokenize",
    "forward",
    "layer_inputs",
    "layer_norm",
]

SEQ_LEN = 128  # positions per sequence, including [CLS] and [SEP]
N_LAYERS = 6
N_HEADS = 12
HEAD_DIM = 32
LN_EPS = 1e-12
MAX_CHARS_PER_WORD = 100


# ----------------------------------------------------------------------------------------------
# text
# ----------------------------------------------------------------------------------------------
def text_corpus(seed: int = 0) -> str:
    """The English prose of ``pydoc_data.topics`` (about 465 kB), topics shuffled by ``seed``.

    ``seed=0`` keeps the sorted topic order. Deterministic for a given Python version (the
    topic texts are part of CPython's documentation build).
    """
    import pydoc_data.topics as topics

    seed = require_int("seed", seed, minimum=0)
    keys = sorted(topics.topics)
    if seed:
        order = np.random.default_rng(seed).permutation(len(keys))
        keys = [keys[i] for i in order]
    return "\n\n".join(topics.topics[k] for k in keys)


# ----------------------------------------------------------------------------------------------
# tokenizer
# ----------------------------------------------------------------------------------------------
def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # every non-alphanumeric ASCII printable character counts, as in BERT ("$", "^", "`" are
    # not Unicode punctuation but are split anyway)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def basic_tokenize(text: str) -> list[str]:
    """BERT basic tokenization: drop control characters, lowercase, strip accents (NFD, drop
    combining marks), split on whitespace, then split every punctuation character off as its
    own token. ``"Hello, World!"`` → ``["hello", ",", "world", "!"]``."""
    if not isinstance(text, str):
        raise FormatRuleError(f"text: must be a str; got {type(text).__name__}")
    cleaned = []
    for ch in text:
        if ord(ch) == 0 or ord(ch) == 0xFFFD or _is_control(ch):
            continue
        cleaned.append(" " if _is_whitespace(ch) else ch)
    tokens = []
    for word in "".join(cleaned).split():
        word = unicodedata.normalize("NFD", word.lower())
        word = "".join(c for c in word if unicodedata.category(c) != "Mn")
        current = []
        for ch in word:
            if _is_punctuation(ch):
                if current:
                    tokens.append("".join(current))
                    current = []
                tokens.append(ch)
            else:
                current.append(ch)
        if current:
            tokens.append("".join(current))
    return tokens


@functools.lru_cache(maxsize=1)
def _vocab_index() -> dict[str, int]:
    return {tok: i for i, tok in enumerate(minilm.vocab())}


def wordpiece(word: str, vocab: dict[str, int] | None = None) -> list[str]:
    """Greedy longest-match-first WordPiece split of one basic token.

    From the start of the word, take the longest prefix in the vocabulary; continue from where
    it ended with the longest ``'##' + piece`` in the vocabulary; if some position has no match,
    the whole word becomes ``['[UNK]']`` (as does a word longer than 100 characters).
    ``"unaffable"`` → ``["una", "##ffa", "##ble"]`` with the BERT uncased vocabulary.
    """
    word = str(require_instance("word", word, str))
    vocab = _vocab_index() if vocab is None else require_instance("vocab", vocab, dict, "dict of token -> id or None")
    if len(word) > MAX_CHARS_PER_WORD:
        return ["[UNK]"]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        match = None
        while start < end:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                match = piece
                break
            end -= 1
        if match is None:
            return ["[UNK]"]
        pieces.append(match)
        start = end
    return pieces


def tokenize(text: str) -> list[int]:
    """Token ids of ``text`` (no [CLS]/[SEP]): basic tokenization then WordPiece."""
    vocab = _vocab_index()
    return [vocab[p] for word in basic_tokenize(text) for p in wordpiece(word, vocab)]


# ----------------------------------------------------------------------------------------------
# forward pass
# ----------------------------------------------------------------------------------------------
def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = LN_EPS) -> np.ndarray:
    """LayerNorm over the last axis: ``(x - mean) / sqrt(var + eps) * gamma + beta`` (biased
    variance), computed in float32. x (..., H) float32, gamma/beta (H,). (The encoder forward's own,
    refsim.models.bert.layer_norm.) Float inputs of other widths are taken as float32; eps: a finite
    number >= 0."""
    from refsim.models.bert import layer_norm as ln

    x = require_float_array("x", x)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ShapeError(f"x: must be (..., H) with H >= 1; got {x.shape}")
    h = x.shape[-1]
    gamma, beta = (native_contiguous(require_shape(n, require_float_array(n, v), (h,)), np.float32)
                   for n, v in (("gamma", gamma), ("beta", beta)))
    eps = require_real("eps", eps)
    if eps < 0:
        raise FormatRuleError(f"eps: must be >= 0; got {eps}")
    return ln(native_contiguous(x, np.float32), gamma, beta, eps)


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU that BERT uses (refsim.models.bert.gelu)."""
    from refsim.models.bert import gelu

    return gelu(x)


def _linear(x: np.ndarray, w: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    # weights are stored (N, K): y = x @ W.T + b
    return (native_contiguous(x) @ native_contiguous(w[prefix + ".weight"]).T + w[prefix + ".bias"]).astype(np.float32)


def forward(ids: list[int] | np.ndarray, weights: dict[str, np.ndarray] | None = None
            ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Run one sequence of token ids (length L ≤ 512, already with [CLS]/[SEP]) through the
    encoder. Returns ``(hidden (L, 384) float32, inputs)`` where ``inputs`` maps each encoder
    linear weight name to the float32 ``(L, K)`` input of that layer. ``weights`` replaces some
    or all of :func:`refsim.data.minilm.weights` (same names and (N, K) shapes), e.g. with
    dequantized layers to measure a quantized model."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or not 1 <= ids.size <= 512:
        raise FormatRuleError(f"ids: must be a 1-D sequence of 1..512 token ids; got shape {ids.shape}")
    w = minilm.weights() if weights is None else {**minilm.weights(), **weights}
    L = ids.size
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:L] \
        + w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x.astype(np.float32), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    inputs: dict[str, np.ndarray] = {}
    for layer in range(N_LAYERS):
        p = f"encoder.layer.{layer}"
        for proj in ("query", "key", "value"):
            inputs[f"{p}.attention.self.{proj}.weight"] = x
        q = _linear(x, w, f"{p}.attention.self.query").reshape(L, N_HEADS, HEAD_DIM).transpose(1, 0, 2)
        k = _linear(x, w, f"{p}.attention.self.key").reshape(L, N_HEADS, HEAD_DIM).transpose(1, 0, 2)
        v = _linear(x, w, f"{p}.attention.self.value").reshape(L, N_HEADS, HEAD_DIM).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / np.float32(np.sqrt(HEAD_DIM))  # (heads, L, L)
        scores = scores - scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(L, N_HEADS * HEAD_DIM).astype(np.float32)  # (L, 384)
        inputs[f"{p}.attention.output.dense.weight"] = ctx
        x = layer_norm(_linear(ctx, w, f"{p}.attention.output.dense") + x,
                       w[f"{p}.attention.output.LayerNorm.weight"], w[f"{p}.attention.output.LayerNorm.bias"])
        inputs[f"{p}.intermediate.dense.weight"] = x
        h = _gelu(_linear(x, w, f"{p}.intermediate.dense"))
        inputs[f"{p}.output.dense.weight"] = h
        x = layer_norm(_linear(h, w, f"{p}.output.dense") + x,
                       w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"])
    return x, inputs


def _sequences(n_tokens: int, seed: int) -> list[list[int]]:
    """Split the corpus into [CLS] … [SEP] sequences of SEQ_LEN positions totalling n_tokens."""
    vocab = _vocab_index()
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    body = SEQ_LEN - 2
    n_seq = -(-n_tokens // SEQ_LEN)
    need = n_seq * body
    ids: list[int] = []
    corpus = text_corpus(seed)
    # tokenize paragraph by paragraph only as far as needed
    for para in corpus.split("\n\n"):
        ids.extend(tokenize(para))
        if len(ids) >= need:
            break
    if len(ids) < need:
        raise FormatRuleError(f"n_tokens: corpus holds only {len(ids)} tokens; got {n_tokens}")
    seqs = []
    remaining = n_tokens
    for s in range(n_seq):
        length = min(SEQ_LEN, remaining)
        content = ids[s * body: s * body + max(length - 2, 0)]
        seq = ([cls] + content + [sep])[:length]
        seqs.append(seq)
        remaining -= length
    return seqs


@functools.lru_cache(maxsize=8)
def _layer_inputs_cached(n_tokens: int, seed: int) -> dict[str, np.ndarray]:
    per_layer: dict[str, list[np.ndarray]] = {}
    # single-threaded BLAS: the encoder's matmuls are small ((128, 384) x (384, 1536)), and
    # two-thread OpenBLAS on small calls collapses when another process holds a core (measured:
    # 26 s instead of about 1 s for 512 tokens at load 7)
    with threadpoolctl.threadpool_limits(limits=1):
        for seq in _sequences(n_tokens, seed):
            _, inputs = forward(seq)
            for name, x in inputs.items():
                per_layer.setdefault(name, []).append(x)
    out = {}
    for name, parts in per_layer.items():
        arr = np.ascontiguousarray(np.concatenate(parts, axis=0), dtype=np.float32)  # (T, K)
        arr.setflags(write=False)
        out[name] = arr
    return out


def layer_inputs(n_tokens: int = 512, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of every encoder linear layer of all-MiniLM-L6-v2 on real text.

    Returns ``{name: X}`` keyed by the safetensors weight name (e.g.
    ``"encoder.layer.0.intermediate.dense.weight"``), X float32 ``(T, K)`` with ``T = n_tokens``
    rows (tokens of consecutive 128-position sequences; the last one may be shorter) and ``K`` the
    layer's in_features, so ``X @ W.T`` (W stored (N, K)) is the layer's pre-bias output.
    ``n_tokens`` in [1, 16384]; ``seed`` ≥ 0 selects the topic order. Deterministic; cached per
    process; the arrays are read-only.
    """
    n_tokens = require_int("n_tokens", n_tokens, minimum=1)
    if n_tokens > 16384:
        raise FormatRuleError(f"n_tokens: must be at most 16384; got {n_tokens}")
    seed = require_int("seed", seed, minimum=0)
    return dict(_layer_inputs_cached(n_tokens, seed))
