"""Failure classes the hostile fuzz still finds in modules other work owns, by function.

tests/test_fuzz_hostile.py does not fail on these classes for these functions, and fails once one of
them no longer reproduces (delete it then). Every other finding fails the test. This is the
open work list handed to the owners named in the comments, not an allow-list for new code;
``python property_tests/fuzz_api.py --hostile NAME`` prints the findings behind an entry.
"""

from fuzz_engine import DEPENDENT, FOREIGN, HANG, LEAK

OPEN: dict[str, set[str]] = {
    # tc (refsim/arith/tensor_core.py): the raw fast path takes unchecked vals/exps arrays
    "refsim.arith.tensor_core.mma_k16_f32": {FOREIGN, HANG},
    # perf (refsim/gpu_model): spec and record fields unchecked, NumPy scalars and arrays in float math
    "refsim.gpu_model.calibrate.CalibrationRow": {DEPENDENT, LEAK},
    "refsim.gpu_model.calibrate.accuracy": {DEPENDENT, FOREIGN},
    "refsim.gpu_model.calibrate.baseline_row_s": {DEPENDENT, FOREIGN, HANG, LEAK},
    "refsim.gpu_model.calibrate.predict_row": {FOREIGN},
    "refsim.gpu_model.conditions.fits_in_l2": {FOREIGN, LEAK},
    "refsim.gpu_model.conditions.with_ecc": {FOREIGN},
    "refsim.gpu_model.cycle.simulate": {DEPENDENT, FOREIGN, LEAK},
    "refsim.gpu_model.kernels.predict": {DEPENDENT, FOREIGN, LEAK},
    "refsim.gpu_model.kernels.predict_many": {FOREIGN},
    "refsim.gpu_model.loop.Instr": {DEPENDENT, LEAK},
    "refsim.gpu_model.loop.Loop": {DEPENDENT, LEAK},
    "refsim.gpu_model.loop.intervals": {DEPENDENT},
    "refsim.gpu_model.loop.warp_step_cycles": {DEPENDENT, FOREIGN},
    "refsim.gpu_model.occupancy.Occupancy": {DEPENDENT, LEAK},
    "refsim.gpu_model.occupancy.occupancy": {FOREIGN},
    "refsim.gpu_model.published.Comparison": {DEPENDENT, LEAK},
    "refsim.gpu_model.published.PublishedRow": {DEPENDENT, LEAK},
    "refsim.gpu_model.published.conditions": {LEAK},
    "refsim.gpu_model.roofline.Breakdown": {DEPENDENT, LEAK},
    "refsim.gpu_model.roofline.ModelParams": {DEPENDENT, LEAK},
    "refsim.gpu_model.roofline.combine": {DEPENDENT, FOREIGN, LEAK},
    "refsim.gpu_model.roofline.dram_roofline_s": {DEPENDENT, FOREIGN, LEAK},
    "refsim.gpu_model.roofline.dram_time": {DEPENDENT, FOREIGN, LEAK},
    "refsim.gpu_model.roofline.waves": {FOREIGN, LEAK},
    "refsim.gpu_model.shapes.ModelShapes": {DEPENDENT, LEAK},
    "refsim.gpu_model.specs.GPUSpec": {DEPENDENT, LEAK},
    "refsim.gpu_model.sweep.SweepRow": {DEPENDENT, LEAK},
    # io (refsim/quant): containers (SortedRows, AtomConfig, results) unchecked, float arguments
    "refsim.quant.atom.AtomConfig": {DEPENDENT, LEAK},
    "refsim.quant.atom.AtomLayer": {DEPENDENT, LEAK},
    "refsim.quant.atom.atom_gptq": {FOREIGN},
    "refsim.quant.atom.atom_gptq_reference": {FOREIGN},
    "refsim.quant.atom.layer_output_error": {FOREIGN},
    "refsim.quant.atom.quantize_layer": {FOREIGN, LEAK},
    "refsim.quant.gptq.GPTQResult": {DEPENDENT, LEAK},
    "refsim.quant.gptq.gptq_quantize": {DEPENDENT, FOREIGN},
    "refsim.quant.gptq.upper_cholesky_of_inverse": {DEPENDENT},
    "refsim.quant.rtn.RTNResult": {DEPENDENT, LEAK},
    "refsim.quant.rtn.rtn_quantize": {FOREIGN},
    "refsim.quant.squeezellm.SeedResult": {DEPENDENT, LEAK},
    "refsim.quant.squeezellm.SortedRows": {DEPENDENT, LEAK},
    "refsim.quant.squeezellm.kmeans_1d_rows": {FOREIGN},
    "refsim.quant.squeezellm.seed_reference": {FOREIGN},
    "refsim.quant.upscale.AnyPrecisionModel": {DEPENDENT, LEAK},
    "refsim.quant.upscale.upscale_rows": {FOREIGN, HANG},
}

#: kept for the random-arity fuzz of test_fuzz_public_api.py (functions it does not call yet)
GAPS: dict[str, str] = {}
