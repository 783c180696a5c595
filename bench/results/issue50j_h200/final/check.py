# Tiled fold against the fold of a row a lane (udf_testing_paths bit 256), bit for bit, and against
# float64 brute force: weighted L2 (capture), L2 + sqrt (finalize), inner product (max), L1;
# dims 128, 130 (a tail), 100 (a short last half); k 10 and 100; batches 320 and 10000.
import ctypes, os, sys
from pathlib import Path
import torch, udf
ROOT = Path(__file__).resolve().parents[1]
lib = ctypes.CDLL(str(Path(udf.__file__).parent / "lib" / "libudf_runtime.so.3"))
def paths(p):
    assert lib.udf_testing_paths(ctypes.c_uint32(p)) == 0
ex = ROOT / "examples"
f1 = ["--flags-from-first-line"]
metrics = {
    "wl2": udf.cuda_source_metric(ex / "weighted_l2.cu", flags=f1),
    "l2sqrt": udf.cuda_source_metric(ex / "l2_sqrt.cu", flags=f1),
    "ip": udf.cuda_source_metric(ex / "inner_product.cu", flags=f1),
    "l1": udf.cuda_source_metric('extern "C" __device__ float l1(float x, float y, float acc, const udf_ctx_v1 *ctx) { return acc + fabsf(x - y); }'),
}
g = torch.Generator(device="cuda").manual_seed(7)
bad = 0
for dim in (128, 130, 100):
    x = torch.randn(100_000, dim, device="cuda", generator=g)
    w = torch.rand(dim, device="cuda", generator=g) + 0.5
    xd, wd = x.double(), w.double()
    for batch in (320, 10000):
        q = torch.randn(batch, dim, device="cuda", generator=g)
        qd = q.double()
        for name, m in metrics.items():
            for k in (10, 100):
                if batch == 10000 and k == 100 and name != "wl2": continue
                cap = {"weights": w} if name == "wl2" else None
                paths(0); d0, i0 = udf.exact_search(m, x, q, k, captures=cap)
                paths(256); d1, i1 = udf.exact_search(m, x, q, k, captures=cap)
                paths(0)
                same = torch.equal(d0, d1) and torch.equal(i0, i1)
                # float64 reference on the first 64 queries
                qq = qd[:64]
                if name == "wl2": ref = torch.stack([((qq[j] - xd) ** 2 * wd).sum(-1) for j in range(64)])
                elif name == "l2sqrt": ref = torch.cdist(qq, xd)
                elif name == "ip": ref = qq @ xd.T
                else: ref = torch.cdist(qq, xd, p=1)
                rv, ri = torch.topk(ref, k, dim=1, largest=(name == "ip"))
                rec = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(i0[:64].cpu(), ri.cpu())) / (64 * k)
                err = (d0[:64].double() - rv).abs().max().item() / max(1.0, rv.abs().max().item())
                ok = same and rec >= 0.999 and err < 1e-4
                bad += not ok
                print(f"dim {dim} batch {batch} {name:7s} k {k:3d}: tile==rowfold {same}, recall {rec:.4f}, rel err {err:.1e} {'ok' if ok else 'FAIL'}", flush=True)
print("check:", "FAIL" if bad else "all ok", bad)
sys.exit(1 if bad else 0)
