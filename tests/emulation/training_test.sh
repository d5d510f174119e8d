# Training on the CPU emulation of CUDA (CTest emulated.training, label emulated;
# docs/testing-without-a-gpu.md): the scenarios of tests/gpu/training_test.sh the emulation can
# run, on the tiny model for a few steps (an emulated step takes about half a second):
# - fp32 on the CUDA backend against the CPU twin within 1e-4; run.device = auto takes it;
# - bf16 and fp16 against the CPU's bf16 and fp16 within 1e-2 (a bf16 unit is 2^-8);
# - flash attention (head size 64: hidden 128, 2 heads) in fp32 within 1e-4 and in bf16 within
#   1e-2 (the bf16 run at run.attention = auto, the default, which takes flash there; the profiled
#   run below names flash, so its bit-for-bit match holds auto to flash too: an emulated bf16
#   flash run costs ~12 s, so none is added for it); bf16 with the matmul epilogues in separate
#   kernels; the GEMM attention in its default schedule (4 causal
#   blocks, pointer-array products) and with 1 block and strided calls; on a GPU with 64 KiB
#   of shared memory a block (Turing's, played by the emulation) auto takes the GEMM attention
#   within 1e-2, and flash is refused; a GPU the build has no code for (an A100 played by the
#   emulation) is refused naming CMAKE_CUDA_ARCHITECTURES;
#   run.profile on bf16 flash: the same losses, the fused MLP pairs timed whole; the kernel
#   choices waiting for a GPU's timing (run.flash_dq, run.flash_block_order, run.flash_forward and
#   run.flash_backward on wgmma, run.layernorm_sums, run.cross_entropy_loads, run.adamw_loads,
#   run.matmul_backward_streams) on bf16 flash within 1e-2 of the CPU's bf16; flash on wgmma
#   with both directions overlapped, two warpgroups a block (run.flash_warpgroups), giving
#   mma.sync's losses exactly (T = 160), and
#   the matmul parameter gradients on a second stream giving one stream's losses exactly, fp32 and
#   bf16; the bias gradients in the weight GEMM's epilogue (run.matmul_bias_gradients) with the
#   cuBLASLt kernels chosen by timing (run.matmul_algorithms) on bf16 flash within 1e-2 of the
#   CPU's bf16;
# - a NaN written into the device's gradients stops a bf16 run at that step, exit 3.
# The parallel layouts and NCCL: training_layouts_test.sh. The GPU runs set parallel.comm = mpi.
source "$(dirname "$0")/training_lib.sh"

train cpu --run.device=cpu
train gpu $gpu
grep -q "^backend: cuda (CUDA emulation on the CPU" gpu.log || { grep '^backend' gpu.log; fail "gpu: not the emulation"; }
matches "fp32 on the emulated GPU against the CPU" cpu gpu 1e-4
train auto --run.device=auto --parallel.comm=mpi
grep -q "run.device = auto: cuda" auto.log && pass "run.device = auto takes the (emulated) GPU" \
  || { grep '^backend' auto.log; fail "run.device = auto did not take the GPU"; }
for p in bf16 fp16; do
  train "cpu$p" --run.device=cpu --train.precision=$p
  train "gpu$p" $gpu --train.precision=$p
  matches "$p on the emulated GPU against the CPU's $p" "cpu$p" "gpu$p" 1e-2
done

wide="--model.hidden=128 --model.heads=2"
train wcpu --run.device=cpu $wide
train flash $gpu $wide --run.attention=flash
grep -q "^backend.*flash attention" flash.log || fail "the flash run does not say so"
matches "flash attention, fp32, against the CPU" wcpu flash 1e-4
train wcpu16 --run.device=cpu $wide --train.precision=bf16
# run.attention = auto (the default): 16 bits on the CUDA backend at head size 64 take flash.
train flash16 $gpu $wide --train.precision=bf16
grep -q "^backend.*flash attention" flash16.log \
  || { grep '^backend' flash16.log; fail "run.attention = auto, bf16, head size 64: not flash attention"; }
matches "flash attention (run.attention = auto), bf16, against the CPU's bf16" wcpu16 flash16 1e-2
# A GPU whose blocks cannot have the flash kernels' 66,560 bytes of shared memory (the emulation
# playing Turing's 64 KiB): run.attention = auto takes the GEMM attention and says why; a deck's
# flash is refused at start-up naming run.attention = gemm.
TRIDENT_CUDA_EMULATION_OPTIN_SHARED_BYTES=65536 train small16 $gpu $wide --train.precision=bf16
if grep -q "^backend.*flash attention" small16.log || ! grep -q "^note: run.attention = auto: GEMM attention" small16.log; then
  grep '^backend\|^note' small16.log
  fail "run.attention = auto on a GPU with 64 KiB a block: not the GEMM attention, or not said"
fi
matches "run.attention = auto on a GPU with 64 KiB a block (GEMM attention), bf16, against the CPU's bf16" wcpu16 small16 1e-2
TRIDENT_CUDA_EMULATION_OPTIN_SHARED_BYTES=65536 mpi 1 train deck.ini $short --run.dir=smallflash16 $gpu $wide \
  --train.precision=bf16 --run.attention=flash > smallflash16.log 2> smallflash16.err
rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: run.attention = flash: the flash kernels need .*; use run.attention = gemm" \
  smallflash16.err && pass "run.attention = flash on a GPU with 64 KiB a block: refused naming gemm" \
  || { tail -3 smallflash16.err; fail "run.attention = flash on a GPU with 64 KiB a block: rc $rc"; }
# A GPU this build holds no code for (the emulation playing an A100, compute capability 8.0, where
# the build is sm_90's): refused at start-up naming the CMake option to rebuild with, not an
# internal error at the first kernel's launch.
TRIDENT_CUDA_EMULATION_COMPUTE_CAPABILITY=80 mpi 1 train deck.ini $short --run.dir=sm80 $gpu > sm80.log 2> sm80.err
rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: this build has no GPU code for CUDA emulation on the CPU (compute capability 8.0): it was built for CMAKE_CUDA_ARCHITECTURES = 90; rebuild with scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=80 " \
  sm80.err && pass "a GPU without code in the build: refused naming CMAKE_CUDA_ARCHITECTURES=80" \
  || { tail -3 sm80.err; fail "a GPU without code in the build: rc $rc"; }
# run.profile on the CUDA backend: the same bits; the MLP's fused pairs reach it whole (its
# cuBLASLt epilogues still run), and no kernel widens 16-bit operands.
train profiled16 $gpu $wide --train.precision=bf16 --run.attention=flash --run.profile=true
matches "run.profile, bf16 flash, against the plain run (run.attention = auto)" flash16 profiled16 0
if grep -q "^  matmul_gelu_forward 128->512 " profiled16/profile-rank0.txt &&
   ! grep -q "^  \(gelu_forward\|widen\|narrow\) " profiled16/profile-rank0.txt; then
  pass "run.profile on the emulated GPU: the fused MLP pairs timed whole, nothing widened"
else
  fail "run.profile on the emulated GPU: $(cat profiled16/profile-rank0.txt 2>/dev/null || echo 'no profile-rank0.txt')"
fi
# The kernel choices waiting for a GPU's timing, all eight at once (run.flash_dq = key_walk:
# flash's dQ made in the dK/dV walk, in turns; run.flash_block_order = longest_first, which the
# forward takes; run.flash_forward and run.flash_backward = wgmma, in turn; run.layernorm_sums =
# row_walk; run.cross_entropy_loads
# = packs; run.adamw_loads = packs; run.matmul_backward_streams = two): named on the backend line,
# within 1e-2 of the CPU's bf16 as the default kernels are.
# Sequences of 160 tokens, so that three key tiles of 64 (the last one partial) take turns
# adding into each query tile's dQ; one pass of 2 sequences a step.
long="$wide --model.context=160 --train.seq_len=160 --train.global_batch=2 --train.precision=bf16"
train lcpu16 --run.device=cpu $long
train candidates16 $gpu $long --run.flash_dq=key_walk --run.flash_block_order=longest_first \
  --run.flash_forward=wgmma --run.flash_backward=wgmma --run.layernorm_sums=row_walk --run.cross_entropy_loads=packs \
  --run.adamw_loads=packs --run.matmul_backward_streams=two
grep -q "^backend.*dQ in the key walk, flash blocks longest walk first, flash forward on wgmma, flash backward on wgmma, LayerNorm parameter sums in the row walk, cross-entropy backward on 16-byte loads, AdamW on 16-byte loads, matmul parameter gradients on a second stream" \
  candidates16.log || { grep '^backend' candidates16.log; fail "the backend line does not name the waiting kernel choices"; }
matches "dQ in the key walk, the longest flash walks first, wgmma in turn, LayerNorm sums in the row walk, cross-entropy and AdamW on 16-byte loads, two matmul streams, bf16, T = 160, against the CPU's bf16" \
  lcpu16 candidates16 1e-2
# Flash attention on Hopper's warpgroup products (run.flash_forward, run.flash_backward = wgmma or
# wgmma_overlapped, waiting for a GPU's timing): the emulation's wgmma model sums each product
# as mma.sync's does, so the default kernels' losses exactly, at T = 160 (three key tiles through
# the overlapped walks' ring of buffers), both directions overlapped with two warpgroups a block
# (run.flash_warpgroups = 2: the second warpgroup's rows of the last tile all past T); named on
# the backend line. (In turn, one warpgroup, with dQ in the key walk: the candidates run above;
# one warpgroup overlapped: tests/gpu's FlashMmaOptions on the emulation, and gpu.training.)
train flashlong16 $gpu $long
train wgmma16 $gpu $long --run.flash_forward=wgmma_overlapped --run.flash_backward=wgmma_overlapped \
  --run.flash_warpgroups=2
grep -q "^backend.*flash forward on wgmma, overlapped, flash backward on wgmma, overlapped, two warpgroups a wgmma block" \
  wgmma16.log || { grep '^backend' wgmma16.log; fail "the backend line does not name the overlapped wgmma kernels"; }
matches "flash on wgmma, both directions overlapped, two warpgroups a block, bf16, T = 160, against mma.sync" \
  flashlong16 wgmma16 0
# The parameter gradients on a second stream are the same kernels on the same operands: one
# stream's losses exactly, in fp32 (cuBLAS GEMMs) and in bf16 (cuBLASLt's DGELU beside them). The
# emulation runs a stream's work only when something waits for it, so a missing fork or join
# would read stale gradients here.
train streams $gpu --run.matmul_backward_streams=two
matches "matmul parameter gradients on a second stream, fp32, against one stream" gpu streams 0
train streams16 $gpu $wide --train.precision=bf16 --run.matmul_backward_streams=two
matches "matmul parameter gradients on a second stream, bf16 flash, against one stream" flash16 streams16 0
# The bias gradients in the weight GEMM's epilogue (run.matmul_bias_gradients = epilogue) and the
# cuBLASLt kernels chosen by timing (run.matmul_algorithms = timed: every product shape timed on
# the emulated cuBLASLt's three answers, the backward's products on cuBLASLt), both waiting for a
# GPU's timing, in one run (an emulated bf16 flash run costs ~12 s; tests/gpu's MatmulAlgorithms
# and MatmulBiasGradients check each alone): within 1e-2 of the CPU's bf16.
train bias16 $gpu $wide --train.precision=bf16 --run.matmul_bias_gradients=epilogue --run.matmul_algorithms=timed
grep -q "^backend.*bias gradients in the weight GEMM's epilogue, cuBLASLt algorithms timed per product shape" \
  bias16.log || { grep '^backend' bias16.log; fail "the backend line does not name the epilogue and the timing"; }
matches "bias gradients in the weight GEMM's epilogue, timed cuBLASLt kernels, bf16 flash, against the CPU's bf16" \
  wcpu16 bias16 1e-2
grep -q "^matmul algorithms: [1-9][0-9]* cuBLASLt product shapes timed" bias16.log \
  && pass "the timed run reports what its timing found" || fail "no timing report: $(grep '^matmul' bias16.log)"
train separate16 $gpu $wide --train.precision=bf16 --run.attention=gemm --run.matmul_epilogues=separate
matches "separate matmul epilogues, bf16, against the CPU's bf16" wcpu16 separate16 1e-2
grep -q "^backend.*4 causal attention blocks, pointer-array attention products" separate16.log \
  || { grep '^backend' separate16.log; fail "the default attention schedule is not named"; }
train blocks16 $gpu $wide --train.precision=bf16 --run.attention=gemm --run.attention_blocks=1 \
  --run.attention_batching=strided
if grep -q "^backend.*\(causal attention blocks\|pointer-array\)" blocks16.log; then
  grep '^backend' blocks16.log; fail "the one-block strided run names another schedule"
fi
matches "GEMM attention, 1 block and strided calls, bf16, against the CPU's bf16" wcpu16 blocks16 1e-2
# A NaN in the device's gradients (src/app/gradient_fault.h: after the 9th embedding backward,
# step 3 at 4 micro-batches a step) stops a bf16 run there, exit 3, naming step 2's checkpoint.
TRIDENT_TEST_NAN_GRADIENT=0:9 mpi 1 train deck.ini $short $gpu --train.precision=bf16 --checkpoint.every=2 \
  --run.dir=diverged > diverged.log 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "^trident: error: training diverged at step 3: .*Restart from diverged/checkpoints/step-000000002.h5" \
  diverged.log && pass "a NaN gradient on the emulated GPU: exit 3 at step 3" \
  || { tail -5 diverged.log; fail "a NaN gradient on the emulated GPU: exit $rc"; }
finish
