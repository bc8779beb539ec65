"""The lexical layer of the PTX parser: comments out, text into statements, literals into values.

    statements(text)  ->  ("stmt" | "label" | "open" | "close" | "header" | "line", text, line, column)

A statement is the text up to ``;`` at brace depth 0 (braces inside a statement are vector operands or
initializers); ``{``/``}`` alone open and close scopes; ``NAME:`` is a label; a ``.entry``/``.func``
header is the text before its body's ``{``; ``.version``/``.target``/... lines come as "line". The
scan is linear in the text: ordinary runs are copied whole and a statement is joined only at the
characters that can end it (``;``, braces, a label's colon).

Errors are :class:`refsim.ptx.PtxParseError` (or the class given) naming line, column and the text.
"""

from __future__ import annotations

import re

import numpy as np

from refsim.ptx.errors import PtxParseError

__all__ = ["error", "strip_comments", "statements", "split_top", "parse_int", "initializer_bytes", "decl_quals",
           "DECL", "NAME_ITEM", "F32_IMM", "F64_IMM", "DEC_FLOAT", "IDENT", "INSTRUCTION", "ADDRESS", "LABEL"]


def error(line: int, col: int, text: str, why: str, cls=PtxParseError):
    return cls(f"PTX line {line}, column {col}: `{text.strip()}`: {why}")


STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)


def strip_comments(text: str) -> str:
    def repl(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith('"'):
            return s
        return re.sub(r"[^\n]", " ", s)
    return STRING_OR_COMMENT.sub(repl, text)


LINE_DIRECTIVES = (".version", ".target", ".address_size", ".file", ".loc")
LABEL = re.compile(r"\s*([A-Za-z_$%][\w$]*)\s*:$")
SPECIAL = re.compile(r'["{};:]')


def statements(text: str):
    """Yield ``(kind, text, line, col)``: kind is "stmt", "label", "open", "close" or "line"."""
    lines = text.split("\n")
    buf: list[str] = []
    start = None
    literal_depth = 0     # braces inside a statement: vector operands, initializers
    for ln, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if not buf and stripped[:1] == "." and stripped.split(None, 1)[0] in LINE_DIRECTIVES:
            yield ("line", stripped.rstrip(";"), ln, raw.index(stripped[0]) + 1)
            continue
        if not buf and literal_depth == 0:       # fast paths: one whole statement, a label, or nothing
            if not stripped:
                continue
            if (stripped.endswith(";") and stripped.count(";") == 1 and '"' not in stripped
                    and stripped[0] not in "{}" and stripped.count("{") == stripped.count("}")):
                body = stripped[:-1].strip()
                if body:
                    yield ("stmt", body, ln, raw.index(stripped[0]) + 1)
                continue
            lm = LABEL.match(stripped)
            if lm and "::" not in stripped:
                yield ("label", lm.group(1), ln, raw.index(stripped[0]) + 1)
                continue
        pos, n = 0, len(raw)
        while True:                               # runs of ordinary text, then one special character
            m = SPECIAL.search(raw, pos)
            end = m.start() if m else n
            if end > pos:
                seg = raw[pos:end]
                if buf:
                    buf.append(seg)
                elif seg.strip():
                    lead = len(seg) - len(seg.lstrip())
                    start = (ln, pos + lead + 1)
                    buf.append(seg[lead:])
            if m is None:
                break
            i, ch = end, raw[end]
            pos = i + 1
            if ch == '"':
                j = raw.find('"', i + 1)
                j = n - 1 if j < 0 else j
                if not buf:
                    start = (ln, i + 1)
                buf.append(raw[i:j + 1])
                pos = j + 1
                continue
            if literal_depth:                     # inside {..} of a statement: only braces count
                literal_depth += {"{": 1, "}": -1}.get(ch, 0)
                buf.append(ch)
                continue
            if ch == ":" and (raw[i + 1:i + 2] == ":" or raw[i - 1:i] == ":"):
                content = None                    # a '::' qualifier: ordinary text
            else:
                content = "".join(buf).strip()    # joined only at the few characters that end things
            if ch == "{" and (not content or content.startswith(".") and "=" not in content
                              and not content.startswith((".reg", ".shared", ".local", ".const", ".global"))):
                if content:
                    yield ("header", content, start[0], start[1])
                else:
                    yield ("open", "{", ln, i + 1)
                buf, start = [], None
            elif ch == "{":
                literal_depth += 1
                buf.append(ch)
            elif ch == "}":
                if content:
                    raise error(start[0], start[1], content, "statement not terminated by ';'")
                yield ("close", "}", ln, i + 1)
                buf, start = [], None
            elif ch == ";":
                if content:
                    yield ("stmt", content, start[0], start[1])
                buf, start = [], None
            elif ch == ":" and content is not None and LABEL.match(content + ":"):
                yield ("label", content, start[0], start[1])
                buf, start = [], None
            else:
                if not buf:
                    start = (ln, i + 1)
                buf.append(ch)
        if buf:
            buf.append(" ")
    content = "".join(buf).strip()
    if content:
        raise error(start[0], start[1], content, "statement not terminated by ';' at end of text")


DECL = re.compile(
    r"^(?P<space>\.reg|\.shared|\.local|\.const|\.global|\.param)\s+"
    r"(?P<quals>(?:\.(?:align\s+\d+|v[248]|ptr|b8|b16|b32|b64|b128|s8|s16|s32|s64|u8|u16|u32|u64|f16|f16x2|bf16|bf16x2|f32|f64|pred)\s*)+)"
    r"(?P<names>.*)$",
    re.S,
)
NAME_ITEM = re.compile(r"^\s*(?P<name>[%$\w.]+?)\s*(?:<(?P<count>\d+)>)?\s*(?P<dims>(?:\[\s*\d*\s*\])*)\s*(?:=\s*(?P<init>.*))?$", re.S)


def decl_quals(quals: str):
    align, vec, typ = None, 1, None
    for q in re.findall(r"\.(align\s+\d+|\w+)", quals):
        if q.startswith("align"):
            align = int(q.split()[1])
        elif q in ("v2", "v4", "v8"):
            vec = int(q[1:])
        elif q == "ptr":
            continue
        else:
            typ = q
    return align, vec, typ


def split_top(s: str, sep: str = ",") -> list[str]:
    """``s`` split at ``sep`` outside brackets, braces and parentheses; items stripped, empty ones dropped."""
    if "{" not in s and "(" not in s:            # fast path: no nesting, or addresses with no sep inside
        raw = s.split(sep)
        if "[" not in s or all(x.count("[") == x.count("]") for x in raw):
            parts = [x.strip() for x in raw]
            return parts if all(parts) else [x for x in parts if x]
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def parse_int(tok: str) -> int | None:
    t = tok.strip()
    if DEC_INT.fullmatch(t):
        return int(t)
    neg = t.startswith("-")
    if neg:
        t = t[1:].strip()
    if t.endswith("U"):
        t = t[:-1]
    try:
        if HEX_INT.fullmatch(t):
            v = int(t, 16)
        elif BIN_INT.fullmatch(t):
            v = int(t[2:], 2)
        elif OCT_INT.fullmatch(t):
            v = int(t, 8)
        elif DEC_INT.fullmatch(t):
            v = int(t)
        else:
            return None
    except ValueError:
        return None
    return -v if neg else v


def initializer_bytes(init: str, width: int, count: int) -> bytes:
    """The little-endian bytes of ``count`` elements of ``width`` bytes from a PTX initializer
    (``{1, 0x2, 0f3F800000}``); elements not given are zero. ValueError naming the item for one that
    is not a literal, a value that does not fit the element (an integer outside
    [-2^(8w-1), 2^(8w) - 1], a ``0f``/``0d`` float literal in an element of another width), or
    more items than elements: nothing is wrapped or truncated."""
    items = [x for x in re.split(r"[{},\s]+", init) if x]
    if len(items) > count:
        raise ValueError(f"{len(items)} initializer items for {count} element(s)")
    bits = 8 * width
    vals = []
    for it in items:
        if it[:2] in ("0f", "0F", "0d", "0D") and len(it) in (10, 18):
            if len(it) != 2 + 2 * width:
                raise ValueError(f"{it}: a {4 * (len(it) - 2)}-bit float literal in a {bits}-bit element")
            vals.append(int(it[2:], 16))
            continue
        v = parse_int(it)
        if v is None:
            raise ValueError(f"{it}: not a literal")
        if not -(1 << (bits - 1)) <= v < (1 << bits):
            raise ValueError(f"{it}: does not fit a {bits}-bit element")
        vals.append(v % (1 << bits))                   # a negative value as its two's complement
    arr = np.zeros(count, dtype=f"<u{width}")
    arr[: len(vals)] = vals
    return arr.tobytes()


F32_IMM = re.compile(r"0[fF][0-9a-fA-F]{8}")
F64_IMM = re.compile(r"0[dD][0-9a-fA-F]{16}")
DEC_FLOAT = re.compile(r"-?\d+\.\d*(?:[eE][-+]?\d+)?")
IDENT = re.compile(r"[A-Za-z_$][\w$]*")
INSTRUCTION = re.compile(r"^(?:@(!?)\s*(%?[\w$]+)\s+)?([A-Za-z][\w.:]*)\s*(.*)$", re.S)
ADDRESS = re.compile(r"([^+\-]+?)?(?:(\+|-)(-?(?:0[xX][0-9a-fA-F]+|\d+)))?")
DEC_INT = re.compile(r"0|[1-9]\d*")   # a leading 0 makes an octal literal (PTX ISA 4.5.1)
HEX_INT = re.compile(r"0[xX][0-9a-fA-F]+")
BIN_INT = re.compile(r"0[bB][01]+")
OCT_INT = re.compile(r"0[0-7]+")
