"""Legal calls of refsim.io: checkpoint layers and their conversions in memory, and the readers and
writers on small checkpoint folders made in the current folder (the fuzz runs in a temporary one).

A writer refuses an OUT that is not new or empty, so its seed passes :class:`FreshDir`: a path-like
that names a new folder each time it is read. Merged into :mod:`fuzz_seeds`' tables.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
from pathlib import Path

import numpy as np

from fuzz_engine import Seed, call

from refsim.data import models as data_models
from refsim.formats import atom as atom_format, bitplane, gptq as gptq_format, marlin as marlin_format
from refsim.formats import mixed_2_4_16 as m2416
from refsim.quant import mixed_2_4_16 as q2416
from refsim.io import checkpoint, compressed_tensors as ct, containers, convert, gptq as io_gptq, quantize, readers
from refsim.io import uniform as io_uniform

L0 = "model.layers.0.self_attn.q_proj"
_FRESH = itertools.count()


class FreshDir(os.PathLike):
    """A path-like naming a new, empty folder under the current one every time it is read
    (``__fspath__``): what a writer is given (the command layer makes OUT, the writer fills it)."""

    def __init__(self, stem: str):
        self.stem = stem

    def __fspath__(self) -> str:
        path = Path.cwd() / f"{self.stem}-{os.getpid()}-{next(_FRESH)}"
        path.mkdir()
        return str(path)

    def __repr__(self) -> str:
        return f"FreshDir({self.stem!r})"


def _rng(seed=0):
    return np.random.default_rng(seed)


@functools.cache
def gptq_layer(act_order: bool = False, sym: bool = False) -> io_gptq.GPTQLayer:
    """A 4-bit, group-128 GPTQ layer, K = N = 256 (Marlin's smallest legal shape), with a bias."""
    rng = _rng(1)
    q = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    scales = (rng.random((2, 256)) * 0.01 + 0.001).astype(np.float16)
    zeros = np.full((2, 256), 8) if sym else rng.integers(1, 16, (2, 256))
    g_idx = rng.permutation(np.repeat(np.arange(2), 128)).astype(np.int32) if act_order else None
    ck = gptq_format.pack(q, scales, zeros, 4, g_idx=g_idx, group_size=128)
    return io_gptq.GPTQLayer(L0, ck, 128, act_order, sym, rng.standard_normal(256).astype(np.float16))


@functools.cache
def awq_layer() -> io_gptq.AWQLayer:
    return io_uniform.to_awq(io_uniform.codes_of(gptq_layer()))


@functools.cache
def marlin_layer() -> containers.MarlinLayer:
    rng = _rng(4)
    B, s = marlin_format.pack(rng.integers(0, 16, (256, 256), dtype=np.uint8),
                              (rng.random((2, 256)) + 0.5).astype(np.float16), 128)
    return containers.MarlinLayer(L0, B, s, rng.permutation(256).astype(np.int32))


@functools.cache
def anyprec_layer() -> containers.AnyPrecisionLayer:
    rng = _rng(5)
    codes = rng.integers(0, 16, (64, 1024), dtype=np.uint8)      # (N, K)
    return containers.AnyPrecisionLayer(L0, bitplane.pack(codes, 4),
                                        {b: rng.random((64, 1 << b)).astype(np.float16) for b in (3, 4)}, 3)


@functools.cache
def atom_layer() -> containers.AtomLayerFile:
    rng = _rng(6)
    aw = atom_format.quantize_weights(rng.standard_normal((384, 16)).astype(np.float32), group_size=128, keeper=128)
    return containers.AtomLayerFile(L0, aw, rng.permutation(384).astype(np.int64), 128)


@functools.cache
def mixed_layer() -> containers.Mixed2416Layer:
    rng = _rng(7)
    W = rng.standard_normal((64, 32)).astype(np.float32)
    X = rng.standard_normal((128, 64)).astype(np.float32)
    return containers.Mixed2416Layer(L0, m2416.pack(q2416.quantize(W, X.T @ X, outlier_ratio=0.005)), 64)


@functools.cache
def qigen_layer() -> containers.QIGenLayer:
    return convert.gptq_to_qigen(gptq_layer(), mb=64, tb=32)


def gptq_dir() -> Path:
    """A one-layer symmetric GPTQ checkpoint (Marlin takes it) in the current folder, made on first use."""
    out = Path.cwd() / "fuzz-gptq-checkpoint"
    if not out.exists():
        out.mkdir()
        io_gptq.write_gptq(out, [gptq_layer(sym=True)], {"model.embed_tokens.weight": np.ones((4, 8), np.float16)})
    return out


def ct_dir() -> Path:
    """A one-layer compressed-tensors checkpoint in the current folder."""
    out = Path.cwd() / "fuzz-ct-checkpoint"
    if not out.exists():
        convert.convert(gptq_dir(), "compressed-tensors", out)      # convert makes OUT itself
    return out


def refsim_dir(fmt: str) -> Path:
    """A one-layer refsim container (marlin, anyprec, atom, mixed_2_4_16, qigen) in the current folder."""
    out = Path.cwd() / f"fuzz-{fmt}-checkpoint"
    if not out.exists():
        out.mkdir()
        if fmt == "anyprec":
            containers.write_anyprec(out, [anyprec_layer()])
        else:
            layer = {"marlin": marlin_layer, "atom": atom_layer, "mixed_2_4_16": mixed_layer,
                     "qigen": qigen_layer}[fmt]()
            containers.write_refsim(out, fmt, [layer])
    return out


def fp_dir() -> Path:
    """The built-in two-layer Llama (refsim/data/models/pydoc_llama): an FP checkpoint."""
    return data_models.pydoc_llama_path()


def tensors_file() -> Path:
    out = Path.cwd() / "fuzz-tensors.safetensors"
    if not out.exists():
        from refsim.io.tensors import save_tensors
        save_tensors(out, {"a": np.arange(6, dtype=np.float16).reshape(2, 3), "b": np.ones(4, np.float32)})
    return out


def _summary() -> dict:
    from refsim.io.inspect import inspect_checkpoint
    return inspect_checkpoint(gptq_dir())


def _loaded():
    from refsim.io.model_folder import load_model
    return load_model(fp_dir())


def ct_fp8_dir() -> Path:
    """A compressed-tensors float-quantized folder: one FP8 channel-strategy layer, 8 x 16."""
    import json

    import ml_dtypes
    from refsim.io.tensors import save_tensors
    out = Path.cwd() / "fuzz-ct-fp8"
    if not out.exists():
        out.mkdir()
        w = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel", "dynamic": False}
        qc = {"quant_method": "compressed-tensors", "format": "float-quantized",
              "config_groups": {"g": {"targets": ["Linear"], "weights": w}}}
        (out / "config.json").write_text(json.dumps({"quantization_config": qc}))
        codes = _rng(9).integers(0, 0x7E, (8, 16), dtype=np.uint8)
        save_tensors(out / "model.safetensors", {f"{L0}.weight": codes.view(ml_dtypes.float8_e4m3fn),
                                                 f"{L0}.weight_scale": np.full((8, 1), 0.25, np.float32)})
    return out


def _fp8_layer():
    from refsim.io.ct_float import CTFP8Layer
    return CTFP8Layer(L0, _rng(9).integers(0, 0x7E, (8, 16), dtype=np.uint8), np.full((1,), 0.5, np.float32),
                      "tensor")


def _fp4_layer():
    from refsim.io.ct_float import CTFP4Layer
    return CTFP4Layer(L0, "nvfp4", _rng(10).integers(0, 256, (4, 16), dtype=np.uint8),
                      np.full((4, 2), 0x38, np.uint8), np.array([2.0], np.float32))


TINY_GGUF = Path(__file__).parents[1] / "io" / "data" / "tiny.gguf"


def _gguf_layer():
    from refsim.io.gguf_file import GGUFLayer
    return GGUFLayer("blk.0.attn_q.weight", "Q8_0", _rng(11).integers(0, 256, (3, 34), dtype=np.uint8) & 0x3F, 32)


def _fp8_block_layer():
    from refsim.io.fp8_block import FP8BlockLayer
    return FP8BlockLayer(L0, _rng(13).integers(0, 0x7E, (8, 16), dtype=np.uint8), np.full((1, 1), 0.5, np.float32),
                         "block")


def fp8_block_dir() -> Path:
    """A DeepSeek-style fp8 folder: one 8 x 16 layer (weight + weight_scale_inv) and an unquantized norm."""
    import json

    from refsim.io.tensors import save_tensors
    out = Path.cwd() / "fuzz-fp8-block"
    if not out.exists():
        out.mkdir()
        qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
        (out / "config.json").write_text(json.dumps({"quantization_config": qc}))
        save_tensors(out / "model.safetensors", {**_fp8_block_layer().tensors(), "norm.weight": np.ones(16, np.float32)})
    return out


BNB_DIR = Path(__file__).parents[1] / "io" / "data" / "bnb_nf4_dq_bf16"


def _bnb_layer():
    from refsim.io.bnb_4bit import quantize_bnb_layer
    return quantize_bnb_layer(L0, _rng(12).standard_normal((2, 40)).astype(np.float16), "fp4", True)


SAMPLES = {
    "refsim.io.bnb_4bit.BnBLayer": _bnb_layer,
    "refsim.io.fp8_block.FP8BlockLayer": _fp8_block_layer,
    "refsim.io.gguf_file.GGUFLayer": _gguf_layer,
    "refsim.io.compressed_tensors.CTLayer": lambda: io_uniform.to_ct(io_uniform.codes_of(gptq_layer())),
    "refsim.io.ct_float.CTFP8Layer": _fp8_layer,
    "refsim.io.ct_float.CTFP4Layer": _fp4_layer,
    "refsim.io.containers.AnyPrecisionLayer": anyprec_layer,
    "refsim.io.containers.AtomLayerFile": atom_layer,
    "refsim.io.containers.FPLayer": lambda: containers.FPLayer(L0, _rng(8).standard_normal((16, 8)).astype(np.float16)),
    "refsim.io.containers.MarlinLayer": marlin_layer,
    "refsim.io.containers.Mixed2416Layer": mixed_layer,
    "refsim.io.containers.QIGenLayer": qigen_layer,
    "refsim.io.gptq.AWQLayer": awq_layer,
    "refsim.io.gptq.GPTQLayer": gptq_layer,
    "refsim.io.quantize.QuantizeOptions": lambda: quantize.QuantizeOptions("gptq", 4, 128, False, True),
    "refsim.io.uniform.UniformCodes": lambda: io_uniform.codes_of(gptq_layer(True)),
}


def seeds(fs) -> dict:
    """The seeds; ``fs`` is :mod:`fuzz_seeds` (its shared legal objects)."""
    from refsim.io import hf_folder, inspect as io_inspect, model_folder, output, tensors

    u = lambda: io_uniform.codes_of(gptq_layer())  # noqa: E731
    return {
        # ---- in memory: layers, conversions, configs ---------------------------------------------
        "refsim.io.calibrate.parse_calib": lambda: call("corpus:512"),
        "refsim.io.checkpoint.natural_key": lambda: call("model.layers.10.mlp.up_proj"),
        "refsim.io.compressed_tensors.pack_weight": lambda: call(fs.codes((8, 16), 8, np.int32, lo=-8), 4),
        "refsim.io.compressed_tensors.unpack_weight": lambda: call(
            ct.pack_weight(fs.codes((8, 16), 8, np.int32, lo=-8), 4), 4, 16),
        "refsim.io.compressed_tensors.ct_quantization_config": lambda: call(
            [io_uniform.to_ct(u())], ["lm_head"]),
        "refsim.io.containers.marlin_workspace_int32": lambda: call(512),
        "refsim.io.ct_config.CTConfig": lambda: call(
            ct.ct_quantization_config([io_uniform.to_ct(u())], ["lm_head"]), Path("config.json")),
        "refsim.io.convert.gptq_change_zero_convention": lambda: call(gptq_layer(), "gptq_v2"),
        "refsim.io.convert.gptq_to_marlin": lambda: call(gptq_layer(sym=True)),
        "refsim.io.convert.gptq_to_marlin_requantized": lambda: call(gptq_layer(True)),
        "refsim.io.convert.gptq_to_qigen": lambda: call(gptq_layer(), mb=64, tb=32, order="panel"),
        "refsim.io.convert.marlin_refusal": lambda: call(gptq_layer(True)),
        "refsim.io.gptq.gptq_config": lambda: call(4, 128, True, False, "gptq"),
        "refsim.io.inspect.format_table": lambda: call(_summary()),
        "refsim.io.quantize.awq_intweight": lambda: call(*_awq_fq()),
        "refsim.io.quantize.relative_output_error": lambda: call(fs.normal((6, 16)), fs.normal((16, 4), seed=1),
                                                                 fs.normal((16, 4), seed=2)),
        "refsim.io.uniform.codes_of": lambda: call(awq_layer()),
        "refsim.io.uniform.exact_cast": lambda: call("scales", fs.positive((2, 8), np.float16).astype(np.float32),
                                                     np.float16),
        "refsim.io.uniform.to_awq": lambda: call(u()),
        "refsim.io.uniform.to_ct": lambda: call(u(), None),
        "refsim.io.uniform.to_gptq": lambda: call(u(), "gptq"),
        "refsim.io.uniform.to_marlin": lambda: call(io_uniform.codes_of(gptq_layer(sym=True))),
        # ---- readers, on checkpoint folders made in the current folder -----------------------------
        "refsim.io.checkpoint.read_json": lambda: call(gptq_dir() / "quantize_config.json"),
        "refsim.io.compressed_tensors.CompressedTensorsReader": lambda: call(ct_dir()),
        "refsim.io.gguf_file.GGUFCheckpoint": lambda: call(TINY_GGUF),
        "refsim.io.fp8_block.FP8BlockReader": lambda: call(fp8_block_dir()),
        "refsim.io.bnb_4bit.BnBReader": lambda: call(BNB_DIR),
        "refsim.io.bnb_4bit.bnb_quantization_config": lambda: call("nf4", True, "bfloat16"),
        "refsim.io.bnb_4bit.quantize_bnb_layer": lambda: call(L0, _rng(12).standard_normal((3, 50)).astype(np.float32),
                                                              "nf4", False),
        "refsim.io.gguf_file.gguf_bits": lambda: call("Q4_K"),
        "refsim.io.ct_float.read_float_layer": lambda: call(ct.CompressedTensorsReader(ct_fp8_dir()), L0,
                                                            {"kind": "fp8", "strategy": "channel"}),
        "refsim.io.containers.AnyPrecisionReader": lambda: call(refsim_dir("anyprec")),
        "refsim.io.containers.AtomReader": lambda: call(refsim_dir("atom")),
        "refsim.io.containers.FPReader": lambda: call(fp_dir()),
        "refsim.io.containers.MarlinReader": lambda: call(refsim_dir("marlin")),
        "refsim.io.containers.Mixed2416Reader": lambda: call(refsim_dir("mixed_2_4_16")),
        "refsim.io.containers.QIGenReader": lambda: call(refsim_dir("qigen")),
        "refsim.io.gptq.AWQReader": lambda: call(_awq_dir()),
        "refsim.io.gptq.GPTQReader": lambda: call(gptq_dir()),
        "refsim.io.inspect.inspect_checkpoint": lambda: call(str(gptq_dir())),
        "refsim.io.model_folder.load_model": lambda: call(str(fp_dir())),
        "refsim.io.model_folder.model_family": lambda: call(fp_dir(), ["model.embed_tokens.weight", "lm_head.weight"]),
        "refsim.io.model_folder.sequences": lambda: call(_loaded(), "def f(x):\n    return x + 1\n" * 40, 64, 32),
        "refsim.io.calibrate.calibration_inputs": lambda: call(str(tensors_file())),
        "refsim.io.quantize.quantize_layer_job": lambda: Seed(
            (str(fp_dir()), "model.layers.0.self_attn.q_proj", None, quantize.QuantizeOptions("rtn", 4, 128)),
            view=lambda r: dataclasses.replace(r, seconds=0.0, peak_bytes=None)),      # measured, not computed
        "refsim.io.readers.detect": lambda: call(str(refsim_dir("marlin"))),
        "refsim.io.readers.open_checkpoint": lambda: call(str(gptq_dir())),
        "refsim.io.readers.open_unquantized": lambda: call(str(fp_dir())),
        "refsim.io.tensors.TensorFile": lambda: call(str(tensors_file())),
        "refsim.io.output.check_output_dir": lambda: call(str(Path.cwd() / "fuzz-new-output")),
        # ---- writers, each call into a new folder ------------------------------------------------
        "refsim.io.containers.write_anyprec": lambda: call(FreshDir("anyprec"), [anyprec_layer()]),
        "refsim.io.containers.write_refsim": lambda: call(FreshDir("marlin"), "marlin", [marlin_layer()]),
        "refsim.io.gptq.write_awq": lambda: call(FreshDir("awq"), [awq_layer()]),
        "refsim.io.gptq.write_gptq": lambda: call(FreshDir("gptq"), [gptq_layer()],
                                                  {"lm_head.weight": np.ones((4, 8), np.float16)}),
        "refsim.io.hf_folder.save_model_tensors": lambda: call(FreshDir("tensors"), {"w": np.ones((4, 8), np.float16)},
                                                               {"format": "pt"}, 1 << 20),
        "refsim.io.tensors.save_tensors": lambda: call(_fresh_file(), {"w": np.ones((4, 8), np.float16)}),
        "refsim.io.convert.convert": lambda: call(gptq_dir(), "marlin", FreshDir("convert")),
        "refsim.io.ct_float_write.quantize_float_model": lambda: Seed(
            (fp_dir(), FreshDir("ct-float"), "FP8_DYNAMIC"), {"layers": r"layers\.0\.self_attn\.o_proj"},
            view=lambda r: {**r, "wall_seconds": 0.0}),                                # measured, not computed
        "refsim.io.gguf_file.open_gguf_reader": lambda: Seed((TINY_GGUF,), view=lambda r: sorted(r.fields)),
        "refsim.io.gguf_write.quantize_gguf": lambda: call(float_gguf(), _fresh_file(".gguf"), "Q4_0"),
        # ---- float writers' arguments ---------------------------------------------------------------
        "refsim.io.ct_float_write.parse_ct_target": lambda: call("compressed-tensors:FP8_BLOCK"),
        "refsim.io.ct_float_write.quantize_float_layers": lambda: call({L0: fs.normal((32, 8))}, "MXFP4A16"),
        "refsim.io.gguf_write.parse_gguf_target": lambda: call("gguf:q5_1"),
        "refsim.io.layer_select.select_layers": lambda: call([L0, "lm_head"], None, None, Path("model")),
        "refsim.io.layer_select.emitted_ignore": lambda: call([L0, "model.embed_tokens", "lm_head"], {L0}, "decoder"),
    }


def float_gguf() -> Path:
    """A float .gguf file (llama, one F32 (4, 64) weight and an F32 norm) in the current folder."""
    out = Path.cwd() / "fuzz-float.gguf"
    if not out.exists():
        import gguf
        w = gguf.GGUFWriter(str(out), "llama")
        w.add_tensor("blk.0.attn_q.weight", _rng(12).standard_normal((4, 64)).astype(np.float32))
        w.add_tensor("blk.0.attn_norm.weight", np.ones(64, np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    return out


def _fresh_file(suffix: str = ".safetensors") -> os.PathLike:
    class FreshFile(FreshDir):
        def __fspath__(self) -> str:
            return super().__fspath__() + suffix
    return FreshFile("tensors")


def _awq_dir() -> Path:
    out = Path.cwd() / "fuzz-awq-checkpoint"
    if not out.exists():
        out.mkdir()
        io_gptq.write_awq(out, [awq_layer()])
    return out


def _awq_fq():
    """AutoAWQ's fake-quantized weights (N, K) float16, scales and zeros (N, G): awq_intweight's inputs."""
    from refsim.quant import awq
    w_fq, s, z = awq.pseudo_quantize(_rng(9).standard_normal((8, 32)).astype(np.float16), 4, 16)   # (N, K), (N, G)
    return w_fq.T.copy(), s.T.copy(), z.T.copy(), 16                                               # (K, N), (G, N)


UNSEEDED = {
    "refsim.io.executor.SerialExecutor": "no parameters",
    "refsim.io.checkpoint.Checkpoint": "the readers' base class: constructing it is refused (a named error); "
                                       "every reader is seeded",
    "refsim.io.executor.executor_from_spec": "a context manager: the spec is read when it is entered (tests/io)",
    "refsim.io.output.atomic_output_dir": "a context manager around check_output_dir (seeded)",
    "refsim.io.hf_folder.finish": "copies a source model folder's files into OUT (tests/io/test_hf_folder.py)",
    "refsim.io.quantize.quantize_model": "quantizes every layer of a model (seconds per call; tests/io/test_quantize.py)",
    "refsim.io.quantize.LayerResult": "a record quantize_layer_job (seeded) returns",
    "refsim.io.model_folder.LoadedModel": "a record load_model (seeded) returns",
}
