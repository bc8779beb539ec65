"""refsim.gpu_model.gpufile: GPU spec files written and read back, and every refusal naming its rule.

A file replaces some numbers of a table row and says where each came from; reading it gives the row with
those numbers and provenance replaced and every other field kept. The row's identity (name, arch,
compute capability) is not replaceable; a file is never overwritten; a malformed file names the file.
"""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model.gpufile import FORMAT, gpu_file_dict, load_gpu_file, write_gpu_file
from refsim.gpu_model.specs import get_gpu

VALUES = {"dram_latency_s": 4.5e-7, "sm_count": 70}
PROV = {"dram_latency_s": ["microbenchmark", "pointer chase, 64 MiB"], "sm_count": ["device query", "cudaGetDeviceProperties"]}


def test_a_written_file_reads_back_as_the_row_with_the_measured_numbers(tmp_path):
    path = write_gpu_file(tmp_path / "mine.json", "a10", "  my-a10 ", VALUES, PROV, measured={"runs": 3})
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc == {"format": "refsim-gpu-spec/1", "base": "a10", "name": "my-a10", "fields": VALUES,
                   "provenance": PROV, "measured": {"runs": 3}}
    spec, row = load_gpu_file(path), get_gpu("a10")
    assert (spec.name, spec.dram_latency_s, spec.sm_count) == ("my-a10", 4.5e-7, 70)
    assert spec.provenance["dram_latency_s"] == ("microbenchmark", "pointer chase, 64 MiB")
    assert {k: v for k, v in spec.provenance.items() if k not in VALUES} == \
        {k: v for k, v in row.provenance.items() if k not in VALUES}
    for f in fields(row):
        if f.name not in ("name", "provenance", *VALUES):
            assert getattr(spec, f.name) == getattr(row, f.name), f.name


def test_a_file_is_never_overwritten(tmp_path):
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(FormatRuleError, match="path: must not exist .a spec file is never overwritten."):
        write_gpu_file(tmp_path / "x.json", "a10", "n", {}, {})
    assert (tmp_path / "x.json").read_text() == "{}"


@pytest.mark.parametrize("args, rule", [
    (("a10", "", {}, {}), "values: name must be a non-empty string of at most 64 characters; got ''"),
    (("a10", "x" * 65, {}, {}), "name must be a non-empty string of at most 64 characters"),
    (("a10", "n", [("sm_count", 70)], {}), "values: fields must be an object of GPUSpec fields; got list"),
    (("a10", "n", {"arch": "sm_90"}, {}), r"values: unknown or fixed GPUSpec fields \['arch'\]; a file may set"),
    (("a10", "n", {"sm_cnt": 70}, {}), r"unknown or fixed GPUSpec fields \['sm_cnt'\]"),
    (("a10", "n", {}, {"sm_count": ["only a tag"]}), r"values: provenance must map a field to \[tag, source\]"),
])
def test_what_a_file_may_not_say_is_refused_before_writing(args, rule):
    with pytest.raises(FormatRuleError, match=rule):
        gpu_file_dict(*args)


def test_a_field_the_spec_itself_refuses_is_refused():
    with pytest.raises(FormatRuleError, match="sm_count"):
        gpu_file_dict("a10", "n", {"sm_count": -1}, {})


@pytest.mark.parametrize("text, rule", [
    (b"\xff\xfe", "must be UTF-8 JSON"),
    (b"{not json", "must be UTF-8 JSON"),
    (b"[1, 2]", "must be an object with \"format\": \"refsim-gpu-spec/1\"; got 'list'"),
    (b'{"format": "refsim-gpu-spec/2"}', "must be an object with \"format\": \"refsim-gpu-spec/1\"; got 'refsim-gpu-spec/2'"),
    (b'{"format": "refsim-gpu-spec/1", "base": "a10", "fields": {}}', r"must have the key 'name'; got keys \['base', "),
])
def test_malformed_files_are_refused_naming_the_file(tmp_path, text, rule):
    path = tmp_path / "bad.json"
    path.write_bytes(text)
    with pytest.raises(FormatRuleError, match=rule) as err:
        load_gpu_file(path)
    assert str(path) in str(err.value)


def test_a_missing_file_or_an_unknown_base_row_is_refused(tmp_path):
    with pytest.raises(FormatRuleError, match="gpu file: must be a readable file"):
        load_gpu_file(tmp_path / "absent.json")
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"format": FORMAT, "base": "no-such-gpu", "name": "n", "fields": {}}))
    with pytest.raises(FormatRuleError, match="no-such-gpu"):
        load_gpu_file(path)


def test_a_files_provenance_is_stored_per_field_and_its_estimates_are_named(tmp_path):
    from refsim.gpu_model.specs import estimated_fields
    path = write_gpu_file(tmp_path / "g.json", "a10", "my-a10", {"dram_latency_s": 4.5e-7},
                          {"dram_latency_s/l2_latency_clk": ["microbenchmark", "refsim calibrate --measure"],
                           "sustained_clock_hz": ["estimate", "not locked"]})
    g = load_gpu_file(path)
    assert g.provenance["dram_latency_s"] == ("microbenchmark", "refsim calibrate --measure")
    assert g.provenance["l2_latency_clk"][0] == "microbenchmark"
    assert "sustained_clock_hz" in estimated_fields(g) and "dram_latency_s" not in estimated_fields(g)
    with pytest.raises(FormatRuleError, match="names no GPUSpec field"):
        write_gpu_file(tmp_path / "h.json", "a10", "my-a10", {}, {"no_such": ["estimate", "x"]})
