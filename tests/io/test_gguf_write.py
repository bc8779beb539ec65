"""refsim.io.gguf_write: a float .gguf re-quantized by ``refsim quantize --to gguf:<TYPE>``, read back by the gguf
package's own GGUFReader: the tensor bytes equal the gguf package's ``quants.quantize`` of the same values,
refsim's dequantization equals ``quants.dequantize``, the metadata is the source's (file type and
quantization version set as llama-quantize sets them), and the types refsim cannot write are refused."""

from __future__ import annotations

import json
import sys

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from refsim.cli import main
from refsim.errors import CheckpointError, FormatRuleError, ToolchainError
from refsim.io import open_checkpoint
from refsim.io.gguf_write import GGUF_TYPES, parse_gguf_target, quantize_gguf
from refsim.testing import assert_bitexact

#: name -> float values (N, K) of the source; the 2-D ones are the layers
rng = np.random.default_rng(7)
SOURCE = {
    "blk.0.attn_q.weight": rng.standard_normal((4, 64)).astype(np.float32),
    "blk.0.ffn_down.weight": rng.standard_normal((2, 96)).astype(np.float16),
    "blk.0.attn_norm.weight": np.linspace(0.5, 1.5, 64).astype(np.float32),      # 1-D: copied
    "blk.0.odd.weight": rng.standard_normal((2, 40)).astype(np.float32),          # 40 % 32: copied
}
BF16_ROWS = rng.standard_normal((3, 32)).astype(np.float32)


def _bf16_bits(x):
    return (x.view(np.uint32) >> 16).astype(np.uint16)                           # exact: low bits cleared below


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "src.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    w.add_context_length(128)
    w.add_token_list(["<s>", "a", "b"])
    w.add_token_scores([0.0, -1.0, -2.0])
    for name, x in SOURCE.items():
        w.add_tensor(name, x)
    bf16 = _bf16_bits((BF16_ROWS.view(np.uint32) & 0xFFFF0000).view(np.float32))
    w.add_tensor("blk.0.attn_v.weight", bf16.view(np.uint8).reshape(3, 64), raw_dtype=T.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _values(name):
    if name == "blk.0.attn_v.weight":
        return (BF16_ROWS.view(np.uint32) & 0xFFFF0000).view(np.float32)
    return SOURCE[name].astype(np.float32)


def _fields(reader):
    return {f.name: f.contents() for f in reader.fields.values() if not f.name.startswith("GGUF.")}


@pytest.mark.parametrize("qtype", GGUF_TYPES)
def test_the_file_reads_back_as_the_gguf_package_quantizes(source, tmp_path, qtype):
    out = tmp_path / f"o-{qtype}.gguf"
    summary = quantize_gguf(source, out, qtype)
    blocked = qtype not in ("F16", "BF16")                   # rows of 40 are not a multiple of a block of 32
    assert set(summary["layers"]) == {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.0.attn_v.weight",
                                      *(() if blocked else ("blk.0.odd.weight",))}
    assert summary["kept"] == {"blk.0.attn_norm.weight": "F32", **({"blk.0.odd.weight": "F32"} if blocked else {})}
    reader = gguf.GGUFReader(str(out))
    src = gguf.GGUFReader(str(source))
    assert [t.name for t in reader.tensors] == [t.name for t in src.tensors]
    want = {**_fields(src), "general.file_type": int(gguf.LlamaFileType[f"MOSTLY_{qtype}"]),
            "general.quantization_version": 2}
    assert _fields(reader) == want and list(_fields(reader)) == list(want)
    ck = open_checkpoint(out)
    for t in reader.tensors:
        raw = np.ascontiguousarray(t.data).view(np.uint8)
        if t.name in summary["layers"]:
            ref = gguf.quants.quantize(_values(t.name), T[qtype])
            assert t.tensor_type == T[qtype]
            assert_bitexact(raw.reshape(-1), ref.view(np.uint8).reshape(-1), name=t.name)
            lay = ck.read_layer(t.name)
            assert_bitexact(lay.dequantize().T, gguf.quants.dequantize(raw.reshape(ref.view(np.uint8).shape), T[qtype]),
                            name=t.name)
        else:
            s = next(u for u in src.tensors if u.name == t.name)
            assert t.tensor_type == s.tensor_type and raw.tobytes() == np.ascontiguousarray(s.data).tobytes()
    ck.close()


def test_inspect_json_names_every_layer_and_the_cli_writes_the_file(source, tmp_path, capsys):
    out = tmp_path / "q8.gguf"
    assert main(["quantize", str(source), "--to", "gguf:q8_0", "--out", str(out), "--quiet",
                 "--executor", "serial"]) == 0
    assert "gguf:q8_0" in capsys.readouterr().out
    assert main(["inspect", str(out), "--json"]) == 0
    layers = {r["name"]: r["scheme"]["qtype"] for r in json.loads(capsys.readouterr().out)["layers"]}
    # the F32 tensors (odd rows kept, the norm) are not layers of a GGUF checkpoint
    assert layers == {"blk.0.attn_q.weight": "Q8_0", "blk.0.ffn_down.weight": "Q8_0", "blk.0.attn_v.weight": "Q8_0"}


def test_layers_and_ignore_select_by_gguf_name(source, tmp_path):
    s = quantize_gguf(source, tmp_path / "a.gguf", "Q4_0", layers=r"attn_", ignore=r"attn_v")
    assert list(s["layers"]) == ["blk.0.attn_q.weight"]
    assert s["kept"]["blk.0.ffn_down.weight"] == "F16" and s["kept"]["blk.0.attn_v.weight"] == "BF16"


def test_refusals_name_the_reason(source, tmp_path, capsys):
    with pytest.raises(FormatRuleError, match="does not write Q4_K: the k-quant quantizers"):
        parse_gguf_target("gguf:Q4_K")
    with pytest.raises(FormatRuleError, match="does not write IQ4_NL: the IQ quantizers"):
        parse_gguf_target("gguf:iq4_nl")
    with pytest.raises(FormatRuleError, match="must be one of"):
        parse_gguf_target("gguf:Q3_0")
    q = tmp_path / "q.gguf"
    quantize_gguf(source, q, "Q4_0")
    with pytest.raises(FormatRuleError, match="Q4_0 already"):
        quantize_gguf(q, tmp_path / "twice.gguf", "Q8_0")
    with pytest.raises(FormatRuleError, match="must not exist"):
        quantize_gguf(source, q, "Q8_0")
    with pytest.raises(FormatRuleError, match=r"\*\.gguf"):
        quantize_gguf(source, tmp_path / "out", "Q8_0")
    with pytest.raises(FormatRuleError, match="selects no 2-D"):
        quantize_gguf(source, tmp_path / "none.gguf", "Q8_0", layers="nothing")
    with pytest.raises(CheckpointError, match="convert_hf_to_gguf.py"):
        quantize_gguf(tmp_path, tmp_path / "hf.gguf", "Q8_0")
    assert main(["quantize", str(source), "--to", "gguf:Q6_K", "--out", str(tmp_path / "k.gguf"), "--quiet",
                 "--executor", "serial"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "search" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.gguf"]               # nothing half-written


def test_without_the_gguf_package_the_writer_names_the_extra_as_the_reader_does(source, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)                # import gguf -> ImportError
    with pytest.raises(ToolchainError, match=r"^reading or writing \.gguf files needs the gguf package "
                                             r"\(pip install refsim\[gguf\]\); got ImportError: "):
        quantize_gguf(source, tmp_path / "q.gguf", "Q4_0")
    assert list(tmp_path.iterdir()) == []
