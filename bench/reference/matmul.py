# float32 n x n matmul rate of Debian's python3-torch (same libtorch and BLAS as the shim), the
# baseline `bench/matmul.ts` compares `rlx doctor`'s probe against. Prints one JSON line.
import json, os, sys, time
import torch

n, iters = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(os.cpu_count())
a, b = torch.randn(n, n), torch.randn(n, n)
torch.mm(a, b)
start = time.perf_counter()
for _ in range(iters):
    torch.mm(a, b)
seconds = time.perf_counter() - start
print(json.dumps({"gflops": 2 * n**3 * iters / seconds / 1e9, "threads": torch.get_num_threads()}))
