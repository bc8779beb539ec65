"""refsim.io.bnb_4bit: bitsandbytes 4-bit folders as transformers 5.24.0 + bitsandbytes 0.50.2 saved them
(tests/io/data/bnb_*, made by make_bnb4_checkpoints.py beside them), read layer by layer and dequantized
bit for bit as bitsandbytes' own ``dequantize_4bit`` (the SHA-256 of every layer, the full bits of two);
the tensors refsim writes equal the library's byte for byte; broken folders are named."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from refsim.cli import main
from refsim.errors import CheckpointError, DtypeError, FormatRuleError, ShapeError
from refsim.formats import bnb4
from refsim.io import open_checkpoint
from refsim.io.bnb_4bit import BnBLayer, BnBReader, bnb_quantization_config, quantize_bnb_layer
from refsim.io.inspect import inspect_checkpoint
from refsim.io.tensors import TensorFile, save_tensors
from refsim.testing import assert_bitexact

DATA = Path(__file__).parent / "data"
#: folder -> (quant type, double quantization, model dtype), as make_bnb4_checkpoints.py made them
CASES = {"bnb_nf4_dq_bf16": ("nf4", True, "bfloat16"), "bnb_nf4_fp16": ("nf4", False, "float16"),
         "bnb_fp4_dq_fp16": ("fp4", True, "float16"), "bnb_fp4_bf16": ("fp4", False, "bfloat16")}
LAYERS = [f"model.layers.0.mlp.{p}" for p in ("down_proj", "gate_proj", "up_proj")] + \
    [f"model.layers.0.self_attn.{p}" for p in ("k_proj", "o_proj", "q_proj", "v_proj")]
Q, K = "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"


def _expected(name: str) -> TensorFile:
    return TensorFile(DATA / f"{name}.dequantized.safetensors")


def test_the_goldens_come_from_bitsandbytes_and_transformers():
    for name in CASES:
        with _expected(name) as tf:
            versions = tf.metadata()["versions"]
        assert "bitsandbytes 0.50.2" in versions and "transformers 5.24.0" in versions


@pytest.mark.parametrize("name", CASES)
def test_every_layer_dequantizes_to_bitsandbytes_own_values(name):
    kind, dq, dtype = CASES[name]
    with open_checkpoint(DATA / name) as ck, _expected(name) as want:
        assert type(ck) is BnBReader and ck.layer_names() == LAYERS
        for layer in LAYERS:
            lay = ck.read_layer(layer)
            assert (lay.kind, lay.double_quant, lay.dtype, lay.blocksize) == (kind, dq, dtype, 64)
            w = lay.dequantize()                                         # (K, N) in the model dtype
            assert w.dtype == np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)
            bits = np.ascontiguousarray(w.T).view(np.int16)             # PyTorch's (N, K), as the library hashed it
            if layer in (Q, K):
                assert_bitexact(bits, want.read(f"{layer}.bits"), name=f"{name} {layer}")
            digest = np.frombuffer(hashlib.sha256(bits.tobytes()).digest(), np.uint8)
            assert_bitexact(digest, want.read(f"{layer}.sha256"), name=f"{name} {layer} sha256")


@pytest.mark.parametrize("name", ["bnb_nf4_dq_bf16", "bnb_fp4_bf16"])
def test_the_tensors_refsim_writes_equal_the_librarys_byte_for_byte(name):
    with open_checkpoint(DATA / name) as ck:
        for layer in (Q, K):
            written = ck.read_layer(layer).tensors()
            assert set(written) == {n for n in ck.tensor_names() if n.startswith(layer + ".weight")}
            for t, arr in written.items():
                got = ck.tensor(t)
                assert arr.dtype == got.dtype and arr.shape == got.shape, t
                assert arr.tobytes() == got.tobytes(), t                # the JSON blob included


def test_quantize_bnb_layer_gives_the_record_of_refsims_bnb4_quantizer():
    w = (np.arange(40 * 20, dtype=np.float32).reshape(20, 40) % 13 - 6).astype(ml_dtypes.bfloat16)
    lay = quantize_bnb_layer("l", w, "nf4", True)
    ref = bnb4.quantize(w.astype(np.float32), "nf4", 64, True)
    assert_bitexact(lay.packed, ref.packed, name="packed")
    assert_bitexact(lay.qabsmax, ref.qabsmax, name="qabsmax")
    assert (lay.shape, lay.dtype, lay.offset) == ((20, 40), "bfloat16", ref.offset)
    assert_bitexact(np.ascontiguousarray(lay.dequantize().T).view(np.uint16),
                    bnb4.dequantize(ref, ml_dtypes.bfloat16).view(np.uint16), name="dequantized")
    blob = json.loads(lay.tensors()["l.weight.quant_state.bitsandbytes__nf4"].tobytes())
    assert blob == {"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [20, 40],
                    "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": ref.offset}
    with pytest.raises(ShapeError, match=r"a linear weight is \(N, K\)"):
        quantize_bnb_layer("l", np.zeros(8, np.float16), "nf4", False)
    with pytest.raises(DtypeError):
        quantize_bnb_layer("l", np.zeros((2, 64), np.int8), "nf4", False)


@pytest.mark.parametrize("name", CASES)
def test_the_quantization_config_refsim_writes_is_the_one_transformers_saved(name):
    kind, dq, dtype = CASES[name]
    saved = json.loads((DATA / name / "config.json").read_text())["quantization_config"]
    assert bnb_quantization_config(kind, dq, dtype) == saved


def test_inspect_names_every_layer_with_its_scheme(capsys):
    rep = inspect_checkpoint(DATA / "bnb_nf4_dq_bf16")
    assert rep["format"] == "bitsandbytes" and [r["name"] for r in rep["layers"]] == LAYERS
    q = rep["layers"][LAYERS.index(Q)]
    assert (q["k"], q["n"], q["bits"], q["group_size"]) == (40, 40, 4, 64)
    assert q["scheme"] == {"type": "bitsandbytes", "quant_type": "nf4", "blocksize": 64, "double_quant": True,
                           "dtype": "bfloat16", "quant_storage": "uint8"}
    # 800 packed bytes + 25 absmax codes + 1 nested absmax + 256 nested map + 16 map floats + the JSON blob
    blob = TensorFile(DATA / "bnb_nf4_dq_bf16" / "model.safetensors").nbytes(Q + ".weight.quant_state.bitsandbytes__nf4")
    assert q["bytes_on_disk"] == 800 + 25 + 4 + 1024 + 64 + blob
    assert rep["quantization_config"]["bnb_4bit_use_double_quant"] is True
    assert main(["inspect", str(DATA / "bnb_fp4_bf16"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in out["layers"]] == LAYERS and out["layers"][0]["scheme"]["quant_type"] == "fp4"


def _copy(tmp_path, name="bnb_nf4_dq_bf16") -> Path:
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst)
    return dst


def _rewrite(folder: Path, change) -> None:
    with TensorFile(folder / "model.safetensors") as tf:
        tensors = {n: tf.read(n) for n in tf.names()}
    change(tensors)
    save_tensors(folder / "model.safetensors", tensors)


def test_broken_folders_are_refused_with_the_rule_and_the_tensor(tmp_path):
    d = _copy(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["quantization_config"].update(load_in_4bit=False, load_in_8bit=True)
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="'load_in_4bit' must be true"):
        open_checkpoint(d)

    d = _copy(tmp_path / "a")
    _rewrite(d, lambda t: t.__setitem__(Q + ".weight.quant_map", bnb4.code_table("fp4")))
    with open_checkpoint(d) as ck, pytest.raises(CheckpointError, match="quant_map' must be bitsandbytes' nf4 table"):
        ck.read_layer(Q)

    d = _copy(tmp_path / "b")
    _rewrite(d, lambda t: t.pop(Q + ".weight.nested_absmax"))
    with open_checkpoint(d) as ck, pytest.raises(CheckpointError, match="double quantization needs nested_absmax"):
        ck.read_layer(Q)

    d = _copy(tmp_path / "c")
    blob = json.dumps({"quant_type": "fp4", "blocksize": 64, "dtype": "bfloat16", "shape": [40, 40]}).encode()
    _rewrite(d, lambda t: t.__setitem__(Q + ".weight.quant_state.bitsandbytes__nf4", np.frombuffer(blob, np.uint8).copy()))
    with open_checkpoint(d) as ck, pytest.raises(CheckpointError, match="'quant_type' must match the tensor name's 'nf4'"):
        ck.read_layer(Q)

    d = _copy(tmp_path / "d")
    _rewrite(d, lambda t: t.__setitem__("model.orphan.weight.quant_map", bnb4.code_table("nf4")))
    with pytest.raises(CheckpointError, match="'model.orphan.weight.quant_map' has no matching"):
        open_checkpoint(d)

    d = _copy(tmp_path / "e")
    _rewrite(d, lambda t: t.__setitem__(K + ".weight", t[K + ".weight"][:-1]))
    with open_checkpoint(d) as ck, pytest.raises(CheckpointError, match=r"shape must be \(400, 1\) uint8"):
        ck.read_layer(K)

    d = _copy(tmp_path / "f")
    _rewrite(d, lambda t: t.__setitem__(Q + ".weight.quant_state.bitsandbytes__nf4", np.frombuffer(b"{no", np.uint8).copy()))
    with open_checkpoint(d) as ck, pytest.raises(CheckpointError, match="must hold UTF-8 JSON"):
        ck.read_layer(Q)


def test_a_layer_record_checks_its_format_rules():
    with pytest.raises(FormatRuleError, match="dtype"):
        BnBLayer("l", np.zeros(32, np.uint8), (1, 64), "nf4", 64, "float64", absmax=np.ones(1, np.float32))
    with pytest.raises(ShapeError, match="packed"):
        BnBLayer("l", np.zeros(31, np.uint8), (1, 64), "nf4", 64, "float16", absmax=np.ones(1, np.float32))
    with pytest.raises(ShapeError, match=r"\(N, K\)"):
        BnBLayer("l", np.zeros(32, np.uint8), (64,), "nf4", 64, "float16", absmax=np.ones(1, np.float32))


# ----------------------------------------------------------------------------------------------------
# The folder `refsim quantize --to bnb-nf4|bnb-fp4` writes holds what transformers 5.24.0's loader reads:
#   BitsAndBytesConfig (utils/quantization_config.py): quant_method "bitsandbytes", load_in_4bit,
#     bnb_4bit_quant_type, bnb_4bit_use_double_quant, bnb_4bit_compute_dtype, bnb_4bit_quant_storage,
#     llm_int8_skip_modules (the Linear modules replace_with_bnb_linear leaves alone)
#   Bnb4BitHfQuantizer.serialized_names: weight, weight.absmax, weight.quant_map, weight.nested_absmax,
#     weight.nested_quant_map, weight.quant_state.bitsandbytes__nf4|fp4 per Linear4bit
#   QuantState.from_dict (bitsandbytes 0.50.2): the blob's quant_type, blocksize, dtype (getattr(torch, .)),
#     shape, nested_blocksize, nested_dtype, nested_offset; absmax uint8 with double quantization
# ----------------------------------------------------------------------------------------------------
FP_LAYERS = {"model.layers.0.self_attn.q_proj": (40, 40), "model.layers.0.mlp.down_proj": (40, 60)}


def _fp_model(tmp_path, dtype) -> tuple[Path, dict]:
    rng = np.random.default_rng(5)
    t = {f"{n}.weight": (rng.standard_normal(s) * 0.05).astype(dtype) for n, s in FP_LAYERS.items()}
    t.update({"model.embed_tokens.weight": rng.standard_normal((64, 40)).astype(dtype),
              "lm_head.weight": rng.standard_normal((64, 40)).astype(dtype), "model.norm.weight": np.ones(40, dtype)})
    fp = tmp_path / "fp"
    fp.mkdir()
    save_tensors(fp / "model.safetensors", t, {"format": "pt"})
    (fp / "config.json").write_text(json.dumps({"hidden_size": 40}))     # no model_type: no forward, no held-out run
    return fp, t


@pytest.mark.parametrize("kind,dq,dtype", [("nf4", True, ml_dtypes.bfloat16), ("fp4", False, np.float16)])
def test_the_written_folder_holds_what_transformers_reads(tmp_path, kind, dq, dtype):
    from refsim.io.quantize import QuantizeOptions, quantize_model

    fp, src = _fp_model(tmp_path, dtype)
    out = tmp_path / "out"
    summary = quantize_model(fp, out, QuantizeOptions("rtn", measure_memory=False), to=f"bnb-{kind}", double_quant=dq)
    assert summary["format"] == "bitsandbytes" and [r["name"] for r in summary["layers"]] == sorted(FP_LAYERS)
    qc = json.loads((out / "config.json").read_text())["quantization_config"]
    name = np.dtype(dtype).name
    assert qc == {**bnb_quantization_config(kind, dq, name), "llm_int8_skip_modules": ["lm_head"]}
    with TensorFile(out / "model.safetensors") as tf:
        for m, (n, k) in FP_LAYERS.items():
            blocks = -(-n * k // 64)
            want = {"weight": ("U8", (n * k // 2, 1)), "weight.quant_map": ("F32", (16,)),
                    "weight.absmax": ("U8" if dq else "F32", (blocks,))}
            if dq:
                want.update({"weight.nested_absmax": ("F32", (1,)), "weight.nested_quant_map": ("F32", (256,))})
            state = f"{m}.weight.quant_state.bitsandbytes__{kind}"
            got = {t[len(m) + 1:]: (tf.dtype_name(t), tf.shape(t)) for t in tf.names() if t.startswith(m + ".") and t != state}
            assert got == want and tf.dtype_name(state) == "U8", m
            blob = json.loads(tf.read(state).tobytes().decode("utf-8"))
            assert {k2: blob[k2] for k2 in ("quant_type", "blocksize", "dtype", "shape")} == \
                {"quant_type": kind, "blocksize": 64, "dtype": name, "shape": [n, k]}
            assert set(blob) == ({"quant_type", "blocksize", "dtype", "shape"} |
                                 ({"nested_blocksize", "nested_dtype", "nested_offset"} if dq else set()))
        for t in ("lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"):
            assert tf.read(t).tobytes() == src[t].tobytes(), t               # passed through unchanged
    with open_checkpoint(out) as ck:
        for m in FP_LAYERS:
            ref = bnb4.quantize(src[m + ".weight"].astype(np.float32), kind, 64, dq)
            assert_bitexact(np.ascontiguousarray(ck.read_layer(m).dequantize().T).view(np.uint16),
                            bnb4.dequantize(ref, dtype).view(np.uint16), name=m)


def test_the_command_line_writes_bnb_and_refuses_other_methods(tmp_path, capsys):
    fp, _ = _fp_model(tmp_path, np.float16)
    assert main(["quantize", str(fp), "--method", "rtn", "--to", "bnb-fp4", "--double-quant", "--out",
                 str(tmp_path / "o"), "--executor", "serial", "--quiet", "--no-memory"]) == 0
    assert json.loads((tmp_path / "o" / "config.json").read_text())["quantization_config"]["bnb_4bit_use_double_quant"]
    assert main(["quantize", str(fp), "--method", "gptq", "--to", "bnb-nf4", "--out", str(tmp_path / "p"),
                 "--executor", "serial", "--quiet"]) == 2
    assert "use 'rtn'" in capsys.readouterr().err
    from refsim.io.quantize import QuantizeOptions, quantize_model
    with pytest.raises(FormatRuleError, match="double_quant: bitsandbytes' double quantization needs"):
        quantize_model(fp, tmp_path / "q", QuantizeOptions("rtn"), to="gptq", double_quant=True)
