#!/usr/bin/env python3
"""A model, not a measurement: how long the causal flash kernels' grids take in each block order.

    python3 perf/kernels/block_order_model.py [SMS]

run.flash_block_order (kernels/backend_options.h, FlashBlockOrder) decides which block of the grid
(tiles, NH, B) takes which tile. The GPU starts blocks in the order of their index, each on the
first free slot. Under the causal mask a tile's block walks from 1 to T / 64 tiles of the other
operand, so blocks differ in length up to 16 times at T = 1024:

  head_by_head   the index as it stands: (batch, head) after (batch, head), each one's longest
                 walk first;
  longest_first  every (batch, head)'s longest walk, then every one's next longest, and so on.

This replays both orders on a model GPU: SMS SMs (132, an H100 SXM's) each holding the kernel's
blocks per SM (from its registers: ptxas -v for sm_90, 2026-11-24; see the table), every block
taking as long as the tiles it walks plus a fixed start and finish (STARTUP tiles' worth), greedy
in index order. It prints each kernel's modelled time in tile-times and the saving. Caches, the
memory system and the blocks' own imbalance (the diagonal tile's masking) are not modelled: the
GPU's answer is perf/kernels' attention_forward and attention_backward variant 12, and whole steps
(perf/gpu_bench.sh, BENCH_ROWS=candidates).
"""
import heapq
import sys

T = 1024
TILE = 64
STARTUP = 0.5  # tile-times a block spends outside its walk (its own tiles in, its outputs out)

# name, blocks per SM (registers: 65536 / (128 threads x registers), rounded down), tiles per
# head, work of the block that starts rank r of its head (rank 0: the longest walk).
KERNELS = [
    ("forward (128 queries a block, 255 registers)", 2, T // 128, lambda r, n: 2 * (n - r)),
    ("dK/dV (64 keys a block, 254 registers)", 2, T // TILE, lambda r, n: n - r),
    ("dQ (64 queries a block, 146 registers)", 3, T // TILE, lambda r, n: n - r),
]
MODELS = [("124M", 12), ("350M", 16), ("774M", 20)]


def makespan(work, slots):
    """Greedy list scheduling: each block, in order, on the slot that frees first."""
    free = [0.0] * slots
    heapq.heapify(free)
    end = 0.0
    for w in work:
        start = heapq.heappop(free)
        finish = start + w + STARTUP
        end = max(end, finish)
        heapq.heappush(free, finish)
    return end


def main():
    sms = int(sys.argv[1]) if len(sys.argv) > 1 else 132
    print(f"T = {T}, {sms} SMs; modelled grid time in tile-times (a block's walk + {STARTUP})")
    print(f"{'model':6} {'B':>3}  {'kernel':46} {'head_by_head':>12} {'longest_first':>13} {'saving':>7}")
    for name, heads_per_sequence in MODELS:
        for batch in (8, 16, 32):
            heads = batch * heads_per_sequence
            for kernel, per_sm, tiles, work_of in KERNELS:
                by_head = [work_of(r, tiles) for _ in range(heads) for r in range(tiles)]
                longest = [work_of(r, tiles) for r in range(tiles) for _ in range(heads)]
                a = makespan(by_head, sms * per_sm)
                b = makespan(longest, sms * per_sm)
                print(f"{name:6} {batch:>3}  {kernel:46} {a:12.1f} {b:13.1f} {100 * (a - b) / a:6.1f}%")


if __name__ == "__main__":
    main()
