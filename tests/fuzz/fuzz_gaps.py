"""Failure classes the hostile fuzz still finds in modules other work owns, by function.

tests/test_fuzz_hostile.py does not fail on these classes for these functions, and fails once one of
them no longer reproduces (delete it then). Every other finding fails the test. This is the
open work list handed to the owners named in the comments, not an allow-list for new code;
``python tests/fuzz/fuzz_api.py --hostile NAME`` prints the findings behind an entry.
"""

from fuzz_engine import DEPENDENT, FOREIGN, HANG, LEAK

OPEN: dict[str, set[str]] = {
    # perf2 (refsim/gpu_model, reworked in parallel): record fields unchecked (NumPy scalars, lists and arrays
    # kept as given), np.str_ names refused, NumPy scalars in float math, fields set after construction
    "refsim.gpu_model.calibrate.CalibrationRow": {DEPENDENT, LEAK},
    "refsim.gpu_model.calibrate.baseline_row_s": {FOREIGN, HANG},
    "refsim.gpu_model.calibrate.predict_row": {FOREIGN},
    "refsim.gpu_model.conditions.fits_in_l2": {LEAK},
    "refsim.gpu_model.conditions.l2_hit_fraction": {DEPENDENT},
    "refsim.gpu_model.cycle.cycle_time": {DEPENDENT},
    "refsim.gpu_model.cycle.reconcile": {DEPENDENT},
    "refsim.gpu_model.cycle.simulate": {DEPENDENT, FOREIGN, LEAK},
    "refsim.gpu_model.evaluate.predict": {DEPENDENT},
    "refsim.gpu_model.evaluate.predict_many": {DEPENDENT},
    "refsim.gpu_model.gpufile.gpu_file_dict": {DEPENDENT},
    "refsim.gpu_model.kernels.resources.anyprec": {DEPENDENT},
    "refsim.gpu_model.layers.LayerResult": {DEPENDENT, LEAK},
    "refsim.gpu_model.layers.LayerSum": {DEPENDENT, LEAK},
    "refsim.gpu_model.layers.predict_layers": {DEPENDENT},
    "refsim.gpu_model.loop.Instr": {DEPENDENT, LEAK},
    "refsim.gpu_model.loop.Loop": {DEPENDENT, LEAK},
    "refsim.gpu_model.loop.intervals": {DEPENDENT},
    "refsim.gpu_model.loop.warp_step_cycles": {DEPENDENT, FOREIGN},
    "refsim.gpu_model.measured.MeasuredRow": {DEPENDENT, LEAK},
    "refsim.gpu_model.measured.conditions": {FOREIGN, LEAK},
    "refsim.gpu_model.measured.summary": {FOREIGN},
    "refsim.gpu_model.microbench.Fit": {DEPENDENT, LEAK},
    "refsim.gpu_model.microbench.fit": {DEPENDENT},
    "refsim.gpu_model.microbench.read_time_s": {DEPENDENT, FOREIGN},
    "refsim.gpu_model.microbench.spec_fields": {DEPENDENT, FOREIGN, LEAK},
    "refsim.gpu_model.names.resolve": {DEPENDENT},
    "refsim.gpu_model.occupancy.Occupancy": {DEPENDENT, LEAK},
    "refsim.gpu_model.problem.check_m": {FOREIGN},
    "refsim.gpu_model.problem.kernel_module": {DEPENDENT},
    "refsim.gpu_model.problem.problem": {DEPENDENT, LEAK},
    "refsim.gpu_model.problem.reference": {DEPENDENT},
    "refsim.gpu_model.published.Comparison": {DEPENDENT, LEAK},
    "refsim.gpu_model.published.PublishedRow": {DEPENDENT, LEAK},
    "refsim.gpu_model.published.conditions": {LEAK},
    "refsim.gpu_model.roofline.Breakdown": {DEPENDENT, LEAK},
    "refsim.gpu_model.roofline.combine": {LEAK},
    "refsim.gpu_model.roofline.dram_time": {FOREIGN},
    "refsim.gpu_model.roofline.stream_bandwidth": {FOREIGN},
    "refsim.gpu_model.shapes.ModelShapes": {DEPENDENT, LEAK},
    "refsim.gpu_model.specs.GPUSpec": {DEPENDENT},
    "refsim.gpu_model.specs.get_gpu": {DEPENDENT},
    "refsim.gpu_model.sweep.SweepRow": {DEPENDENT, LEAK},
    "refsim.gpu_model.sweep.sweep": {LEAK},
}

#: kept for the random-arity fuzz of test_fuzz_public_api.py (functions it does not call yet)
GAPS: dict[str, str] = {}
