#pragma once

// The CPU kernels' threads: OpenBLAS's (GEMM) and OpenMP's (oneDNN's convolutions)
// are two pools, set together so that a run's `threads` bounds both.

namespace trainhost::kernels::cpu {

// Threads each library may use inside one call from this thread. Throws
// std::invalid_argument when threads < 1.
void set_threads(int threads);
// OpenBLAS's count, and OpenMP's for this thread; equal once set_threads ran.
[[nodiscard]] int blas_threads();
[[nodiscard]] int openmp_threads();

}  // namespace trainhost::kernels::cpu
