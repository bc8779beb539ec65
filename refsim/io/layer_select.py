"""Which linear layers a quantize run takes, and how the loaders' ``ignore`` lists name the rest.

Shared by :mod:`refsim.io.quantize` (GPTQ/AWQ/... writers) and :mod:`refsim.io.ct_float_write`
(llm-compressor's float presets): ``--layers`` / ``--ignore`` are regular expressions on layer names
(``re.search``); embeddings and ``lm_head`` are left unquantized by default, as GPTQModel, AutoAWQ and
llm-compressor do.
"""

from __future__ import annotations

import re
from pathlib import Path

from refsim._validate import require_choice, require_instance, require_names, require_path
from refsim.errors import FormatRuleError

__all__ = ["DEFAULT_IGNORE", "select_layers", "emitted_ignore"]

#: layers left unquantized unless --ignore says otherwise: embeddings and the output head, as
#: GPTQModel, AutoAWQ and llm-compressor do by default
DEFAULT_IGNORE = r"(^|\.)(lm_head|embed_tokens|wte|wpe|word_embeddings|position_embeddings|token_type_embeddings)$"


def select_layers(all_names: list[str], layers: str | None, ignore: str | None, model: Path) -> list[str]:
    """The names of ``all_names`` that ``layers`` selects (``re.search``; None: all) and ``ignore`` does
    not (None: :data:`DEFAULT_IGNORE`; "": nothing ignored); FormatRuleError naming ``model`` when none is left."""
    all_names = require_names("all_names", all_names)
    for what, v in (("layers", layers), ("ignore", ignore)):
        if v is not None:
            require_instance(what, v, str)
    model = require_path("model", model)

    def compile_(what, text):
        try:
            return re.compile(text)
        except re.error as err:
            raise FormatRuleError(f"{what}: must be a regular expression; got {text!r} ({err})") from None

    pat = None if layers is None else compile_("layers", layers)
    ign = compile_("ignore", DEFAULT_IGNORE if ignore is None else ignore) if ignore != "" else None
    names = [n for n in all_names if (pat is None or pat.search(n)) and (ign is None or not ign.search(n))]
    if not names:
        raise FormatRuleError(f"layers: selects no layer of {model}; got layers={layers!r}, ignore={ignore!r}")
    return names


def emitted_ignore(all_names: list[str], selected, family: str | None) -> list[str]:
    """The Linear modules left unquantized, as the loaders' "ignore"/"modules_to_not_convert" name them:
    ``all_names`` not in ``selected``, less the embeddings (not Linear); ``lm_head`` is listed for a
    decoder (``family`` of :func:`refsim.io.model_folder.model_family`) even when tied to the embeddings."""
    all_names = require_names("all_names", all_names)
    selected = set(require_names("selected", sorted(require_instance("selected", selected, (set, frozenset, list, tuple)),
                                                    key=str)))
    require_choice("family", family, (None, "decoder", "encoder"))
    emb = re.compile(r"(^|\.)(embed_tokens|wte|wpe|word_embeddings|position_embeddings|token_type_embeddings)$")
    unq = [n for n in all_names if n not in selected and not emb.search(n)]
    if family == "decoder" and "lm_head" not in selected and "lm_head" not in unq:
        unq.append("lm_head")
    return unq
