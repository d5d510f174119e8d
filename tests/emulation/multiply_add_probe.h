// A CUDA kernel computing out[i] = a[i] * b[i] + c[i] (n <= 1024, device pointers), built as
// kernels/cuda's sources are in an emulation build (multiply_add_probe.cu): emulation_test.cpp
// checks through it that the emulated kernels round a multiply-add as nvcc's do.
#pragma once

void multiply_add_on_device(float* out, const float* a, const float* b, const float* c, int n);
