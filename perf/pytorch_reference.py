#!/usr/bin/env python3
"""The PyTorch side of the issue-4 GPU comparison (docs/performance.md, "GPU").

A GPT-2 written for this comparison in the nanoGPT manner (not taken from nanoGPT): pre-LayerNorm
blocks, fused causal attention (F.scaled_dot_product_attention, which picks the flash kernel),
tanh GELU, the token embedding tied to the LM head, a vocabulary of 50304 (50257 padded to a
multiple of 64, trained as real classes as nanoGPT does; Trident pads to the same width but
masks the padding), torch.compile, bf16 autocast over fp32 weights, fused AdamW, gradient
clipping at 1.0. Random tokens (the speed does not depend on them), sequence 1024, one
micro-batch per step (no accumulation), the shapes of perf/gpu_bench.sh.

    python3 perf/pytorch_reference.py                       # 124m at 8, 16, 32; 350m, 774m at 8
    python3 perf/pytorch_reference.py --runs 124m:8 --steps 40
    python3 perf/pytorch_reference.py --runs 124m:8 --no-compile   # eager, to tell compile apart

Each run is capped (--run-timeout, default RUN_CAP_S or 150 s, compilation included), and all
runs together by --budget (GPU_BUDGET_S or 540 s): a run the budget cannot start says so.

Each run is its own process (a fresh compile cache and a fresh peak-memory count). Per run it
prints one line `SUMMARY pytorch ...` and appends a row to $OUT/pytorch.md (or ./pytorch.md):
median tokens/s and ms/step over the steps after the warm-up (compilation happens in the first
steps), MFU with Trident's FLOP count (6 x matmul weights + 6 x layers x T x C per token, so the
two columns compare) against --peak-tflops (989: H100 SXM dense bf16), and the peak memory
PyTorch's allocator held (max_memory_reserved; nvidia-smi shows that plus the CUDA context).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

SHAPES = {"124m": (12, 12, 768), "350m": (24, 16, 1024), "774m": (36, 20, 1280)}  # layers, heads, width
VOCAB = 50304
REAL_VOCAB = 50257  # GPT-2's tokens: what the data holds and what Trident's FLOP count uses
CONTEXT = 1024
DEFAULT_RUNS = "124m:8,124m:16,124m:32,350m:8,774m:8"


def flops_per_token(layers, width, seq_len):
    # Trident's GptConfig::flops_per_token: 6 per matmul weight (forward and backward) and the
    # attention's two T x T products, 6 x layers x T x C. The head counts the real vocabulary
    # (inputs/gpt2-*.ini: vocab = 50257), not the padded width, so the MFU columns compare.
    matmul_weights = layers * 12 * width * width + REAL_VOCAB * width
    return 6.0 * matmul_weights + 6.0 * layers * seq_len * width


def build_model(torch, layers, heads, width):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_attn = nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width)
            self.attn_out = nn.Linear(width, width)
            self.ln_mlp = nn.LayerNorm(width)
            self.mlp_up = nn.Linear(width, 4 * width)
            self.mlp_down = nn.Linear(4 * width, width)

        def forward(self, x):
            B, T, C = x.shape
            qkv = self.qkv(self.ln_attn(x)).view(B, T, 3, heads, C // heads)
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # [B, heads, T, head size]
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_out(y.transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_down(F.gelu(self.mlp_up(self.ln_mlp(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, width)
            self.wpe = nn.Embedding(CONTEXT, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_final = nn.LayerNorm(width)
            # GPT-2's initialisation: N(0, 0.02), the projections into the residual stream
            # scaled by 1/sqrt(2 layers), zero biases.
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith(("attn_out.weight", "mlp_down.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, tokens, targets):
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.wte(tokens) + self.wpe(positions)
            for block in self.blocks:
                x = block(x)
            logits = F.linear(self.ln_final(x), self.wte.weight)  # tied LM head
            return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    return Gpt()


def one_run(args):
    import torch

    layers, heads, width = SHAPES[args.model]
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = torch.device("cuda")
    model = build_model(torch, layers, heads, width).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_fn = torch.compile(model) if args.compile else model
    generator = torch.Generator(device=device).manual_seed(42)
    B, T = args.batch, args.seq_len
    times, losses = [], []
    torch.cuda.reset_peak_memory_stats()
    for _ in range(args.steps):
        sequence = torch.randint(0, REAL_VOCAB, (B, T + 1), device=device, generator=generator)
        tokens, targets = sequence[:, :-1].contiguous(), sequence[:, 1:].contiguous()
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_fn(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    timed = times[args.warmup:]
    if not timed:
        sys.exit(f"--steps {args.steps} leaves no step after --warmup {args.warmup}")
    seconds = statistics.median(timed)
    tokens_per_s = B * T / seconds
    mfu = tokens_per_s * flops_per_token(layers, width, T) / (args.peak_tflops * 1e12)
    reserved = torch.cuda.max_memory_reserved() / 2**30
    allocated = torch.cuda.max_memory_allocated() / 2**30
    result = {
        "model": f"gpt2-{args.model}", "parameters": parameters, "batch": B, "seq_len": T,
        "compile": args.compile, "steps": args.steps, "warmup": args.warmup,
        "first_step_s": round(times[0], 2), "ms_per_step": round(1e3 * seconds, 2),
        "tokens_per_s": round(tokens_per_s), "mfu": round(mfu, 4),
        "peak_reserved_gib": round(reserved, 2), "peak_allocated_gib": round(allocated, 2),
        "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4),
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
    }
    print("RESULT " + json.dumps(result), flush=True)
    print(f"SUMMARY pytorch gpt2-{args.model} B={B} T={T}{'' if args.compile else ' (eager)'}: "
          f"{tokens_per_s:.0f} tokens/s, {1e3 * seconds:.1f} ms/step (median of {len(timed)}), "
          f"MFU {100 * mfu:.1f}%, peak reserved {reserved:.1f} GiB, loss {losses[0]:.3f} -> {losses[-1]:.3f}",
          flush=True)
    table = os.path.join(os.environ.get("OUT", "."), "pytorch.md")
    new_table = not os.path.exists(table)
    with open(table, "a") as out:
        if new_table:
            out.write("| model | micro-batch | torch.compile | tokens/s (median) | ms/step | MFU | peak reserved |\n"
                      "|---|---|---|---|---|---|---|\n")
        out.write(f"| gpt2-{args.model} | {B} | {'yes' if args.compile else 'no'} | {tokens_per_s:.0f} | "
                  f"{1e3 * seconds:.1f} | {100 * mfu:.1f}% | {reserved:.1f} GiB |\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=DEFAULT_RUNS, help="MODEL:MICRO_BATCH,... (models: 124m, 350m, 774m)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10, help="steps left out of the median (compilation)")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--peak-tflops", type=float, default=float(os.environ.get("PEAK_TFLOPS", 989)))
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    parser.add_argument("--run-timeout", type=float, default=float(os.environ.get("RUN_CAP_S", 150)),
                        help="seconds per run, compilation included (default: RUN_CAP_S or 150)")
    parser.add_argument("--budget", type=float, default=float(os.environ.get("GPU_BUDGET_S", 540)),
                        help="seconds for all runs together, under a GPU machine's 600 s a command "
                             "(default: GPU_BUDGET_S or 540, as perf/gpu_budget.sh)")
    parser.add_argument("--model", help=argparse.SUPPRESS)  # set for the child process of one run
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seq_len > CONTEXT:
        parser.error(f"--seq-len {args.seq_len} exceeds the context, {CONTEXT}")
    if args.model:
        one_run(args)
        return
    failures = 0
    start = time.monotonic()
    for run in args.runs.split(","):
        model, _, batch = run.partition(":")
        if model not in SHAPES or not batch.isdigit() or int(batch) < 1:
            parser.error(f"--runs: '{run}' is not MODEL:MICRO_BATCH with MODEL one of {', '.join(SHAPES)}")
        command = [sys.executable, os.path.abspath(__file__), "--model", model, "--batch", batch,
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--seq-len", str(args.seq_len),
                   "--peak-tflops", str(args.peak_tflops)] + ([] if args.compile else ["--no-compile"])
        # A cap per run (compilation included), so that a hang costs its row and not the GPU
        # machine's whole command (killed at its time limit, after which only $OUT comes back).
        # Within the budget too: five runs of 150 s each would pass the command's 600 s, and
        # the machine's kill at that limit loses what was printed but not yet under $OUT.
        left = args.budget - (time.monotonic() - start)
        cap = min(args.run_timeout, left)
        if cap < 10:
            failed, why = True, f"skipped: budget spent ({args.budget:.0f} s, --budget or GPU_BUDGET_S)"
        else:
            try:
                failed = subprocess.run(command, timeout=cap).returncode != 0
                why = "failed (see above)"
            except subprocess.TimeoutExpired:
                failed, why = True, f"timed out after {cap:.0f} s"
        if failed:
            print(f"SUMMARY pytorch gpt2-{model} B={batch}: {why}", flush=True)
            failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
