"""x_chunks forced per plan (ops/fused.py plan_for's x_chunks) on M = 16 xh=1 problems, interleaved."""
import statistics, sys, torch, json
sys.path.insert(0, '.')
from escha_jit.autotune.measure import Problem, copies_for, random_weights, time_chain
from escha_jit.ops import fused as F
probs = [(8192, 28672, 2.0, 'mcg'), (8192, 28672, 4.0, 'mul1'), (8192, 28672, 3.0, 'mcg'),
         (14336, 4096, 2.0, 'mcg'), (4096, 14336, 2.0, 'mcg'), (14336, 4096, 4.0, 'mul1')]
orig = F.x_chunks
res = {}
for IC, OC, K, cb in probs:
    p = Problem(IC, OC, K, cb, 16, torch.float16)
    ws = random_weights(p, copies_for(IC * OC * K / 8), torch.device('cuda'))
    x = torch.randn(16, IC, device='cuda').half()
    outs = [torch.empty(16, OC, device='cuda', dtype=torch.float16) for _ in ws]
    times = {c: [] for c in (0, 1, 2, 4, 8)}
    for rnd in range(3):
        for c in times:
            F._PLANS.clear()
            F.x_chunks = orig if c == 0 else (lambda b, r, c=c: c)
            calls = [lambda w=w, y=y: F.fused_linear(x, w, out=y) for w, y in zip(ws, outs)]
            t = time_chain(calls, 20)
            plan = next(iter(F._PLANS.values()))
            times[c].append(t * 1e6)
    med = {c: statistics.median(v) for c, v in times.items()}
    print(IC, OC, K, cb, plan.cfg, plan.launch, 'default chunks', orig((OC // 128) * plan.launch.splits, 132 * plan.cfg.min_blocks),
          {c: round(m, 2) for c, m in med.items()}, {c: round(m / med[0], 4) for c, m in med.items()}, flush=True)
    res[f"{IC}x{OC}:{K}:{cb}:16"] = med
F.x_chunks = orig
json.dump(res, open(sys.argv[1], 'w'), indent=1)
