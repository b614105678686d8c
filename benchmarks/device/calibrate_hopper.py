"""Kernel microbenchmarks for the compute catalog, to run on a real Hopper GPU (H100 / H200).

Standalone (torch + stdlib only, no teton import): the device machine's image has PyTorch but not
teton's dependencies. Measures what ``teton/hardware/efficiency.py`` takes from public sources:

* bf16 GEMM throughput for the GEMM shapes of a transformer layer under TP (forward, data- and
  weight-gradient), each in a *burst* (10 products after 3 warm-ups, as GEMM sweeps do; all the
  bursts first, while the GPU is cool) and then *sustained* for ``--sustain-s`` seconds with
  random data, sampling SM clock and power, so the difference between burst and steady-state
  (power-capped) throughput is measured, not assumed;
* fp8 GEMM (torch._scaled_mm) at 8192^3;
* causal flash attention (SDPA, bf16, head dim 128) forward and backward at 8K / 32K / 128K keys;
* HBM copy bandwidth;
* an MoE layer's expert GEMMs (Qwen3-30B-A3B's, DeepSeek-V3's and GPT-OSS 120B's at EP 8) three
  ways: one GEMM over every expert's rows (what teton prices: the experts' tiles share the waves),
  one GEMM per expert issued round-robin on 4 CUDA streams (Transformer Engine 2.9-2.16's
  ``GroupedLinear``: its ``te_general_grouped_gemm`` runs "the multi-stream cublas backend",
  csrc/extensions/gemm.cpp) and in series, and ``torch._grouped_mm`` (one grouped kernel) where
  the build has it; which of them a job's grouped GEMMs run like is open (docs/moe.md);
* causal flash attention at head dim 64 against 128 (GPT-OSS's heads), whose ratio teton's
  attention figures (head dim 128) do not carry;
* one Llama decoder layer on one TP rank, forward and backward, as eager reference PyTorch code
  runs it, burst and sustained: ``teton calibrate`` sets it against teton's prediction for the
  same layer, which checks the whole per-layer compute model (GEMMs, attention, elementwise
  traffic) on the chip, not just its constants.

Run (device machine):  python3 benchmarks/device/calibrate_hopper.py --out $OUT/calibration.json
Check it here first:   python benchmarks/device/calibrate_hopper.py --smoke --out /tmp/c.json
(tiny shapes, on the CPU when there is no GPU: the numbers mean nothing, the run and its JSON do;
the test suite runs it so that a device session's minutes are not lost to a broken script)
It prints a table and the ``cluster.efficiency`` overrides these measurements imply
(``gemm_bf16``, ``gemm_fp8``, ``attn_fwd``, ``attn_bwd`` and ``mem`` from bursts, and
``sustained_ratio``, sustained / burst over the layer's GEMMs); paste them into a cluster spec
to calibrate teton on your own hardware.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import threading
import time

import torch
import torch.nn.functional as F

DEVICE = "cuda"
SLICE_S = 0.25  # seconds of back-to-back products per throughput sample in the sustained run
PEAK_BF16 = 989.4e12  # H100/H200 SXM dense bf16 (datasheet)
PEAK_FP8 = 1978.9e12
PEAK_HBM = {"H100": 3.35e12, "H200": 4.8e12}


def layer_gemm_shapes(tokens: int, hidden: int, ffn: int, heads: int, kv_heads: int, tp: int,
                      ref_size: int = 8192) -> dict[str, tuple]:
    """(m, n, k) of the forward GEMMs of one Llama layer on one TP rank, and their backward GEMMs."""
    d = hidden // heads
    fwd = {
        "qkv": (tokens, (heads + 2 * kv_heads) * d // tp, hidden),
        "attn_out": (tokens, hidden, heads * d // tp),
        "mlp_up": (tokens, 2 * ffn // tp, hidden),
        "mlp_down": (tokens, hidden, ffn // tp),
    }
    shapes = {}
    for name, (m, n, k) in fwd.items():
        shapes[name] = (m, n, k)
        shapes[f"{name}.dgrad"] = (m, k, n)
        shapes[f"{name}.wgrad"] = (k, n, m)
    shapes["mamf_ref_8192"] = (ref_size, ref_size, ref_size)  # the square GEMM of GEMM sweeps
    return shapes


class Sampler:
    """nvidia-smi SM clock (MHz) and power (W), sampled every 0.5 s in a thread."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout.strip().split(",")
                self.samples.append((float(out[0]), float(out[1])))
            except Exception:  # noqa: BLE001 - sampling is best effort
                pass
            self._stop.wait(0.5)

    def __enter__(self) -> Sampler:
        if shutil.which("nvidia-smi"):  # no sampling where there is no NVIDIA driver (smoke runs)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def mean(self) -> tuple[float, float]:
        if not self.samples:
            return float("nan"), float("nan")
        tail = self.samples[len(self.samples) // 2:]  # steady state: the second half
        return sum(s[0] for s in tail) / len(tail), sum(s[1] for s in tail) / len(tail)


def time_fn(fn, iters: int) -> float:
    if DEVICE != "cuda":
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) / iters
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def _operands(m: int, n: int, k: int):
    a = torch.randn(m, k, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=DEVICE, dtype=torch.bfloat16)
    return (lambda: torch.mm(a, b)), 2.0 * m * n * k  # noqa: E731


def gemm_burst(m: int, n: int, k: int) -> float:
    """FLOP/s of 10 products after 3 warm-ups, as GEMM sweeps (MAMF finders) time them."""
    fn, flops = _operands(m, n, k)
    for _ in range(3):
        fn()
    return flops / time_fn(fn, 10)


def gemm_sustained(m: int, n: int, k: int, sustain_s: float) -> dict:
    """FLOP/s over the second half of ``sustain_s`` seconds of back-to-back products, with the SM
    clock and board power sampled meanwhile (steady state under the power cap)."""
    fn, flops = _operands(m, n, k)
    per = time_fn(fn, 3)
    iters = max(1, int(SLICE_S / per))
    rates = []
    with Sampler() as smp:
        t0 = time.time()
        while time.time() - t0 < sustain_s:
            rates.append(flops / time_fn(fn, iters))
    tail = rates[len(rates) // 2:]
    clock, power = smp.mean()
    return {"sustained_tflops": sum(tail) / len(tail) / 1e12, "sm_clock_mhz": clock, "power_w": power}


def fp8_gemm(size: int = 8192) -> dict:
    a = torch.randn(size, size, device=DEVICE).to(torch.float8_e4m3fn)
    b = torch.randn(size, size, device=DEVICE).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=DEVICE)
    fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
    try:
        for _ in range(3):
            fn()
    except (RuntimeError, NotImplementedError) as err:  # no fp8 GEMM on this device (CPU smoke run)
        return {"tflops": None, "error": str(err).splitlines()[0]}
    return {"tflops": 2.0 * size**3 / time_fn(fn, 20) / 1e12}


def attention(seq: int, heads: int = 16, d: int = 128, tokens: int = 16384, backend: str = "FLASH_ATTENTION") -> dict:
    """Causal attention TFLOP/s through torch's SDPA ``backend``: FLASH_ATTENTION (FlashAttention-2),
    or CUDNN_ATTENTION (cuDNN's fused flash kernel, the one Transformer Engine's FusedAttention
    runs: teton prices it at the flash figures times the fitted ``cudnn_attention_in_situ``); a
    backend the device lacks gives an ``error`` entry instead."""
    batch = max(1, tokens // seq)
    q, k, v = (torch.randn(batch, heads, seq, d, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    fwd_flops = 4.0 * batch * heads * seq * seq * d / 2  # causal: half the score matrix
    if backend != "FLASH_ATTENTION":
        try:
            return _attention_timed(q, k, v, seq, fwd_flops, backend)
        except (RuntimeError, NotImplementedError) as err:  # no such kernel here (the CPU smoke run)
            return {"seq": seq, "backend": backend, "error": str(err).splitlines()[0]}
    return _attention_timed(q, k, v, seq, fwd_flops, backend)


def _attention_timed(q, k, v, seq: int, fwd_flops: float, backend: str) -> dict:
    with torch.nn.attention.sdpa_kernel(getattr(torch.nn.attention.SDPBackend, backend)):
        fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        for _ in range(2):
            fwd()
        t_fwd = time_fn(fwd, 5)
        out = fwd()
        grad = torch.randn_like(out)

        def both():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o.backward(grad)

        both()
        t_both = time_fn(both, 5)
    t_bwd = max(t_both - t_fwd, 1e-9)
    return {"seq": seq, "backend": backend, "fwd_tflops": fwd_flops / t_fwd / 1e12,
            "bwd_tflops": 2.5 * fwd_flops / t_bwd / 1e12}


# (experts per GPU, rows per expert, N, K) of the up projection at EP 8, micro-batch as the
# training-set rows run it: Qwen3-30B-A3B (128 experts top 8 of width 768, 4 x 4,096 tokens),
# DeepSeek-V3 (256 top 8 of 2,048, 4,096 tokens), GPT-OSS 120B (128 top 4 of 2,880, 4 x 4,096)
EXPERT_GEMMS = {"qwen3_30b_ep8": (16, 8192, 1536, 2048), "deepseek_v3_ep8": (32, 1024, 4096, 7168),
                "gpt_oss_120b_ep8": (16, 4096, 5760, 2880)}
STREAMS = 4


def expert_gemms(groups: int, rows: int, n: int, k: int) -> dict:
    """TFLOP/s of ``groups`` (rows x k) @ (k x n) expert GEMMs run as one GEMM over all their rows,
    one per expert on :data:`STREAMS` streams round-robin, one per expert in series, and as one
    ``torch._grouped_mm`` (None where the build or device has none)."""
    xs = [torch.randn(rows, k, device=DEVICE, dtype=torch.bfloat16) for _ in range(groups)]
    ws = [torch.randn(k, n, device=DEVICE, dtype=torch.bfloat16) for _ in range(groups)]
    whole_x, flops = torch.cat(xs), 2.0 * groups * rows * n * k
    streams = [torch.cuda.Stream() for _ in range(STREAMS)] if DEVICE == "cuda" else []

    def on_streams() -> None:
        if not streams:
            return in_series()
        main = torch.cuda.current_stream()
        for st in streams:
            st.wait_stream(main)
        for i, (x, w) in enumerate(zip(xs, ws, strict=True)):
            with torch.cuda.stream(streams[i % STREAMS]):
                torch.mm(x, w)
        for st in streams:
            main.wait_stream(st)

    def in_series() -> None:
        for x, w in zip(xs, ws, strict=True):
            torch.mm(x, w)

    runs = {"one_gemm": lambda: torch.mm(whole_x, ws[0]), "per_expert_streams": on_streams,
            "per_expert_series": in_series}
    if hasattr(torch, "_grouped_mm"):
        offs = torch.arange(rows, rows * groups + 1, rows, device=DEVICE, dtype=torch.int32)
        wt = torch.stack(ws).transpose(-2, -1).contiguous().transpose(-2, -1)
        runs["grouped_mm"] = lambda: torch._grouped_mm(whole_x, wt, offs=offs)
    out = {"groups": groups, "rows": rows, "n": n, "k": k}
    for label, fn in runs.items():
        try:
            for _ in range(2):
                fn()
            out[label + "_tflops"] = flops / time_fn(fn, 5) / 1e12
        except (RuntimeError, NotImplementedError) as err:  # no grouped kernel on this build / device
            out[label + "_tflops"], out[label + "_error"] = None, str(err).splitlines()[0][:200]
    return out


def llama_layer(tokens: int, hidden: int, ffn: int, heads: int, kv_heads: int, tp: int):
    """One Llama decoder layer on one TP rank, as the eager reference code runs it (HF transformers'
    Llama: RMSNorm in fp32, ``rotate_half`` rotary, ``repeat_kv``, flash SDPA, SwiGLU), forward and
    backward, with no collectives (TP's all-gathers / reduce-scatters are communication, priced
    apart). The same layer as teton's ``job.kernel_fusion: eager`` with sequence parallelism off.
    Returns a function running one forward + backward, and the layer's shape."""
    d = hidden // heads
    hq, hkv, f = heads // tp, max(1, kv_heads // tp), ffn // tp

    def weight(n_in: int, n_out: int):
        return (torch.randn(n_in, n_out, device=DEVICE, dtype=torch.bfloat16) / n_in**0.5).requires_grad_()

    wq, wk, wv, wo = weight(hidden, hq * d), weight(hidden, hkv * d), weight(hidden, hkv * d), weight(hq * d, hidden)
    w1, w3, w2 = weight(hidden, f), weight(hidden, f), weight(f, hidden)
    g1, g2 = (torch.ones(hidden, device=DEVICE, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    params = [wq, wk, wv, wo, w1, w3, w2, g1, g2]
    cos = torch.randn(tokens, d, device=DEVICE, dtype=torch.bfloat16)
    sin = torch.randn(tokens, d, device=DEVICE, dtype=torch.bfloat16)
    x = torch.randn(1, tokens, hidden, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def rms(h, g):
        h32 = h.to(torch.float32)
        return g * (h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(h.dtype)

    def rotate_half(t):
        t1, t2 = t.chunk(2, dim=-1)
        return torch.cat((-t2, t1), dim=-1)

    def step() -> None:
        n = rms(x, g1)
        q = (n @ wq).view(1, tokens, hq, d).transpose(1, 2)
        k = (n @ wk).view(1, tokens, hkv, d).transpose(1, 2)
        v = (n @ wv).view(1, tokens, hkv, d).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = hq // hkv
        if rep > 1:
            k = k[:, :, None].expand(1, hkv, rep, tokens, d).reshape(1, hq, tokens, d)
            v = v[:, :, None].expand(1, hkv, rep, tokens, d).reshape(1, hq, tokens, d)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = x + o.transpose(1, 2).reshape(1, tokens, hq * d) @ wo
        m = rms(h, g2)
        y = h + (F.silu(m @ w1) * (m @ w3)) @ w2
        y.backward(grad)
        for p in (x, *params):  # fresh gradients each time: no accumulation pass
            p.grad = None

    shape = {"tokens": tokens, "hidden": hidden, "ffn": ffn, "heads": heads, "kv_heads": kv_heads, "tp": tp}
    return step, shape


def layer_timing(tokens: int, hidden: int, ffn: int, heads: int, kv_heads: int, tp: int, sustain_s: float) -> dict:
    """Seconds of one eager layer forward + backward: a burst (10 after 3 warm-ups) and sustained
    for ``sustain_s`` (second half averaged, SM clock and power sampled)."""
    step, shape = llama_layer(tokens, hidden, ffn, heads, kv_heads, tp)
    for _ in range(3):
        step()
    burst = time_fn(step, 10)
    times = []
    with Sampler() as smp:
        t0 = time.time()
        while time.time() - t0 < sustain_s:
            times.append(time_fn(step, max(1, int(SLICE_S / burst))))
    tail = times[len(times) // 2:]
    clock, power = smp.mean()
    return {**shape, "kernel_fusion": "eager", "burst_s": burst, "sustained_s": sum(tail) / len(tail),
            "sm_clock_mhz": clock, "power_w": power}


def hbm_copy(nbytes: int = 2**31) -> dict:
    x = torch.empty(nbytes, device=DEVICE, dtype=torch.uint8)
    y = torch.empty_like(x)
    y.copy_(x)
    t = time_fn(lambda: y.copy_(x), 20)
    return {"bytes_s": 2 * x.numel() / t}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="calibration.json")
    ap.add_argument("--sustain-s", type=float, default=12.0, help="seconds of sustained load per GEMM shape")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=16384)
    ap.add_argument("--ffn", type=int, default=53248)
    ap.add_argument("--heads", type=int, default=128)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, CPU if no GPU: check the script, not the chip")
    args = ap.parse_args()
    global DEVICE, SLICE_S
    seqs, fp8_size, copy_bytes = (8192, 32768, 131072), 8192, 2**31
    if args.smoke:
        DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
        args.tokens, args.hidden, args.ffn, args.heads, args.kv_heads, args.tp = 64, 128, 256, 4, 2, 1
        args.sustain_s, SLICE_S = min(args.sustain_s, 0.05), 0.01
        seqs, fp8_size, copy_bytes = (128, 256), 128, 2**22
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (smoke run)"
    res: dict = {"device": name, "torch": torch.__version__, "gemm": {}, "attention": []}

    def save() -> None:  # after every stage: a run cut short by its time limit keeps what it measured
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)

    shapes = layer_gemm_shapes(args.tokens, args.hidden, args.ffn, args.heads, args.kv_heads, args.tp,
                               128 if args.smoke else 8192)
    # every burst first, on a GPU still cool (a burst after another shape's sustained run would
    # already be throttled)
    for label, (m, n, k) in shapes.items():
        res["gemm"][label] = {"m": m, "n": n, "k": k, "burst_tflops": gemm_burst(m, n, k) / 1e12}
    save()
    res["fp8_gemm"] = fp8_gemm(fp8_size)
    print(f"fp8 gemm {fp8_size}^3 {res['fp8_gemm']['tflops'] or float('nan'):.0f} TFLOP/s", flush=True)
    for seq in seqs:
        res["attention"].append(a := attention(seq, heads=2 if args.smoke else 16, tokens=seq if args.smoke else 16384))
        print(f"attention causal s={seq:6d} fwd {a['fwd_tflops']:5.0f} bwd {a['bwd_tflops']:5.0f} TFLOP/s", flush=True)
        save()
    res["hbm_copy"] = hbm_copy(copy_bytes)
    print(f"HBM copy {res['hbm_copy']['bytes_s'] / 1e12:.2f} TB/s", flush=True)
    res["expert_gemms"] = {}
    for label, (groups, rows, n, k) in EXPERT_GEMMS.items():
        if args.smoke:
            groups, rows, n, k = 4, 64, 64, 64
        e = res["expert_gemms"][label] = expert_gemms(groups, rows, n, k)
        print(f"expert gemms {label:18s} " + "  ".join(f"{key[:-7]} {v:5.0f}" for key, v in e.items()
                                                       if key.endswith("_tflops") and v) + " TFLOP/s", flush=True)
        save()
    # head dim 64 (GPT-OSS) against 128, through FlashAttention-2 and cuDNN (what the Megatron / NeMo
    # stacks run: its ratio to the flash figures is the fitted cudnn_attention_in_situ, 0.80 on Hopper)
    res["attention_head_dim"] = []
    for backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
        for d in (64, 128):
            a = attention(256 if args.smoke else 8192, heads=2 if args.smoke else 8192 // d, d=d,
                          tokens=256 if args.smoke else 16384, backend=backend)
            res["attention_head_dim"].append({"head_dim": d, **a})
            print(f"attention causal {backend.split('_')[0].lower():5s} head dim {d:3d} " + (
                f"fwd {a['fwd_tflops']:5.0f} bwd {a['bwd_tflops']:5.0f} TFLOP/s" if "error" not in a
                else f"unavailable: {a['error']}"), flush=True)
            save()
    # the sustained runs last: the benchmarks above are the burst kind the catalog cites
    res["layer"] = layer_timing(args.tokens, args.hidden, args.ffn, args.heads, args.kv_heads, args.tp,
                                args.sustain_s)
    save()
    print(f"llama layer fwd+bwd (eager, one TP rank) burst {res['layer']['burst_s'] * 1e3:.2f} ms, sustained "
          f"{res['layer']['sustained_s'] * 1e3:.2f} ms", flush=True)
    for label, (m, n, k) in shapes.items():
        g = res["gemm"][label]
        g.update(gemm_sustained(m, n, k, args.sustain_s))
        save()
        print(f"gemm {label:18s} {m:6d}x{n:6d}x{k:6d}  burst {g['burst_tflops']:6.0f}  sustained "
              f"{g['sustained_tflops']:6.0f} TFLOP/s  {g['sm_clock_mhz']:.0f} MHz {g['power_w']:.0f} W", flush=True)
    ref = res["gemm"]["mamf_ref_8192"]
    hbm = next((v for k, v in PEAK_HBM.items() if k in name), 3.35e12)
    long = [a for a in res["attention"] if a["seq"] >= 16384] or res["attention"]
    layer = [g for label, g in res["gemm"].items() if label != "mamf_ref_8192"]
    res["efficiency_overrides"] = {
        # burst figures, like the catalog's; the sustained/burst ratio of the layer's GEMMs apart
        "gemm_bf16": ref["burst_tflops"] * 1e12 / PEAK_BF16,
        # (at most 1: a sustained run cannot beat the burst; above it is timing noise, as on the CPU)
        "sustained_ratio": min(1.0, sum(g["sustained_tflops"] / g["burst_tflops"] for g in layer) / len(layer)),
        "attn_fwd": sum(a["fwd_tflops"] for a in long) / len(long) * 1e12 / PEAK_BF16,
        "attn_bwd": sum(a["bwd_tflops"] for a in long) / len(long) * 1e12 / PEAK_BF16,
        "mem": res["hbm_copy"]["bytes_s"] / hbm,
    }
    if res["fp8_gemm"]["tflops"]:
        res["efficiency_overrides"]["gemm_fp8"] = res["fp8_gemm"]["tflops"] * 1e12 / PEAK_FP8
    print("cluster.efficiency overrides:", json.dumps(res["efficiency_overrides"], indent=1))
    save()


if __name__ == "__main__":
    main()
