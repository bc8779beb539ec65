"""Regenerates anyprec_official_*.npz: runs the OFFICIAL k-means (PyPI flash1dkmeans 0.2.5 with
numba 0.68.1, NumPy 2.4.6; not a refsim dependency) driven the way SNU-ARC/any-precision-llm @
a3257d0 quantize.py drives it (_seed_and_upscale_layer: per row, sort, fp64 prefix sums, seed
k-means, then _increment_group per bit).  This driver is refsim's own code; run it in a separate
venv:  python make_anyprec_official_fixture.py in.npz out.npz   (in.npz: W, G (N, K), s, p, rs).
The sort is numba's np.argsort (quicksort), as in the official code, so tied weights are
ordered the official way."""
import sys, numpy as np, numba, flash1dkmeans


@numba.njit
def _numba_argsort(x):
    return np.argsort(x)


d = np.load(sys.argv[1]); W = d["W"]; G = d["G"]; seed_bit = int(d["s"]); parent = int(d["p"])
N, K = W.shape
luts = {b: np.empty((N, 2**b), np.float32) for b in range(seed_bit, parent + 1)}
labels_all = np.empty((N, K), np.uint8)
for r in range(N):
    x = W[r].astype(np.float32); sw = G[r].astype(np.float32) * (x != 0)
    idx = _numba_argsort(x)
    xs = x[idx]; ws = sw[idx].astype(np.float64); xs64 = xs.astype(np.float64)
    Pw = np.cumsum(ws)
    if Pw[-1] == 0:
        Pw = np.arange(1, K + 1, dtype=np.float64); Pwx = np.cumsum(xs64); Pwxx = np.cumsum(xs64 ** 2)
    else:
        wx = xs64 * ws; Pwx = np.cumsum(wx); Pwxx = np.cumsum(wx * xs64)
    c, b = flash1dkmeans.numba_kmeans_1d_k_cluster(xs, 2**seed_bit, 50, Pw, Pwx, Pwxx, 0, K, int(d["rs"]))
    c = c.astype(np.float32); luts[seed_bit][r] = c
    for i in range(seed_bit, parent):
        nc = np.empty(2**(i+1), np.float32); nb = np.empty(2**(i+1)+1, np.int32)
        for ci in range(2**i):
            a, e = b[ci], b[ci+1]
            if a == e:
                nc[2*ci] = nc[2*ci+1] = c[ci]; nb[2*ci] = nb[2*ci+1] = a; continue
            cc, lb = flash1dkmeans.numba_kmeans_1d_two_cluster(xs, Pw, Pwx, a, e)
            nc[2*ci], nc[2*ci+1] = cc[0], cc[1]; nb[2*ci] = a; nb[2*ci+1] = lb[1]
        nb[-1] = b[-1]; c, b = nc, nb; luts[i+1][r] = c
    lab = np.empty(K, np.uint8)
    for i in range(2**parent): lab[b[i]:b[i+1]] = i
    labels_all[r] = lab[np.argsort(idx)]
np.savez(sys.argv[2], labels=labels_all, **{f"lut{b}": v for b, v in luts.items()})
