"""NumPy forwards of the model families refsim calibrates and evaluates, and their tokenizers.

    family    architecture              tensors                                  tokenizer
    decoder   Llama-style (llama,       model.embed_tokens, model.layers.<i>.*,  tokenizer.json (the
              mistral, qwen2 configs)   model.norm, lm_head (or tied)            ``tokenizers`` package)
    encoder   BERT-style post-LN        embeddings.*, encoder.layer.<i>.*        vocab.txt (BERT WordPiece,
                                                                                 refsim.data.calibration)

:func:`load_model` reads a model folder (or all-MiniLM-L6-v2's bare safetensors file) and returns a
:class:`LoadedModel`: the architecture object (``block_steps``, ``embed``, ``head``, ...), every
tensor as float32 (PyTorch (N, K) orientation for linears), and a tokenizer. :func:`sequences` cuts
a text into a (B, L) batch of token ids.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refsim._validate import require_bounded, require_callable, require_instance, require_int, require_path
from refsim.errors import CheckpointError, FormatRuleError
from refsim.io.checkpoint import read_json
from refsim.models.bert import BertModel
from refsim.models.llama import LlamaModel

__all__ = ["LoadedModel", "load_model", "model_family", "sequences", "SEQ_LEN", "DECODER_TYPES"]

SEQ_LEN = 128
DECODER_TYPES = ("llama", "mistral", "qwen2")


@dataclass(frozen=True)
class LoadedModel:
    """``arch`` (LlamaModel or BertModel), ``weights`` name -> float32 array, ``encode(text)`` ->
    list of ids, ``bos``/``eos`` (decoder) or ``cls``/``sep`` (encoder) ids, ``folder``."""

    arch: object
    weights: dict
    encode: object
    specials: tuple[int | None, int | None]
    folder: Path

    def __post_init__(self):
        require_instance("arch", self.arch, (LlamaModel, BertModel))
        require_instance("weights", self.weights, dict)
        require_callable("encode", self.encode)
        sp = self.specials
        if not isinstance(sp, (tuple, list)) or len(sp) != 2 or not all(
                s is None or (isinstance(s, (int, np.integer)) and not isinstance(s, bool) and 0 <= s < 2**31)
                for s in sp):
            raise FormatRuleError(f"specials: must be two token ids (ints in [0, 2**31)) or None; got {sp!r:.80}")
        object.__setattr__(self, "specials", tuple(None if s is None else int(s) for s in sp))
        object.__setattr__(self, "folder", require_path("folder", self.folder))

    @property
    def family(self) -> str:
        return self.arch.family


def _folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def model_family(path: str | os.PathLike, names) -> str | None:
    """"decoder", "encoder" or None (no forward for this model) from config.json and tensor names."""
    folder = _folder(require_path("path", path))
    if not isinstance(names, (list, tuple, set, frozenset, dict)) or not all(isinstance(n, str) for n in names):
        raise FormatRuleError(f"names: must be a list, set or dict of tensor names (str); got {type(names).__name__}")
    names = set(names)
    cfg = read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    if cfg.get("model_type") in DECODER_TYPES and "model.embed_tokens.weight" in names:
        return "decoder"
    if any(n.startswith("encoder.layer.0.attention.self.query") for n in names) and \
            cfg.get("model_type", "bert") == "bert":
        return "encoder"
    return None


def _wordpiece(folder: Path, cfg: dict):
    from refsim.data import calibration as cal
    from refsim.data import minilm

    vocab_file = folder / "vocab.txt"
    words = vocab_file.read_text(encoding="utf-8").splitlines() if vocab_file.is_file() else minilm.vocab()
    index = {w: i for i, w in enumerate(words)}

    def encode(text: str) -> list[int]:
        return [index[p] for word in cal.basic_tokenize(text) for p in cal.wordpiece(word, index)]

    return encode, (index.get("[CLS]"), index.get("[SEP]"))


def _bpe(folder: Path, cfg: dict):
    from tokenizers import Tokenizer

    f = folder / "tokenizer.json"
    if not f.is_file():
        raise CheckpointError(f"{folder}: a decoder needs its tokenizer.json for text calibration; got none")
    try:
        tok = Tokenizer.from_file(str(f))
    except Exception as err:  # the tokenizers package raises its own Exception type
        raise CheckpointError(f"{f}: must be a tokenizers JSON file; got {err}") from None

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    bos = cfg.get("bos_token_id")
    return encode, (bos if isinstance(bos, int) else None, None)


def load_model(path: str | os.PathLike) -> LoadedModel:
    """The model at ``path`` (a folder with config.json and safetensors, or MiniLM's file) with its
    weights as float32 (read-only arrays) and its tokenizer; CheckpointError when refsim has no
    forward for it. The last two models loaded are kept (keyed by path, size and modification time
    of their files)."""
    path = require_path("path", path)
    files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
    key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _load(path, key)


@functools.lru_cache(maxsize=2)
def _load(path: Path, key: tuple) -> LoadedModel:
    from refsim.io.tensors import TensorFile

    folder = _folder(path)
    files = [Path(f) for f, _, _ in key]
    W: dict[str, np.ndarray] = {}
    for f in files:
        with TensorFile(f) as tf:
            for n in tf.names():
                W[n] = tf.read(n).astype(np.float32) if tf.dtype_name(n) in ("F16", "BF16", "F32", "F64") else tf.read(n)
                W[n].setflags(write=False)
    fam = model_family(path, W)
    cfg = read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    if fam == "decoder":
        arch = LlamaModel(cfg, set(W), folder)
        encode, specials = _bpe(folder, cfg)
    elif fam == "encoder":
        hidden = W["encoder.layer.0.attention.self.query.weight"].shape[1]
        arch = BertModel(cfg, set(W), folder, hidden)
        encode, specials = _wordpiece(folder, cfg)
    else:
        raise CheckpointError(f"{path}: text calibration needs a Llama-style decoder (config.json model_type in "
                              f"{list(DECODER_TYPES)}) or a BERT-style encoder; got neither")
    return LoadedModel(arch, W, encode, specials, folder)


def sequences(model: LoadedModel, text: str, n_tokens: int, seq_len: int = SEQ_LEN) -> np.ndarray:
    """int64 (B, seq_len) with B = ceil(n_tokens / seq_len): consecutive pieces of ``text``, each
    framed as the model expects ([CLS] ... [SEP] for encoders, <s> ... for decoders with a BOS id).
    FormatRuleError when the text holds too few tokens."""
    require_instance("model", model, LoadedModel)
    require_instance("text", text, str)
    n_tokens = require_bounded("n_tokens", require_int("n_tokens", n_tokens, minimum=1), 1 << 24, what="tokens")
    seq_len = require_bounded("seq_len", require_int("seq_len", seq_len, minimum=4), 1 << 16, what="positions")
    first, last = model.specials
    if model.family == "decoder":
        last = None
    frame = (first is not None) + (last is not None)
    body = seq_len - frame
    B = -(-n_tokens // seq_len)
    need = B * body
    ids: list[int] = []
    for para in text.split("\n\n"):
        ids.extend(model.encode(para + "\n\n"))
        if len(ids) >= need:
            break
    if len(ids) < need:
        raise FormatRuleError(f"n_tokens: the text holds {len(ids) // body * seq_len} tokens in sequences of "
                              f"{seq_len}; got a request for {n_tokens}")
    rows = []
    for b in range(B):
        row = ids[b * body:(b + 1) * body]
        rows.append(([first] if first is not None else []) + row + ([last] if last is not None else []))
    return np.asarray(rows, dtype=np.int64)
