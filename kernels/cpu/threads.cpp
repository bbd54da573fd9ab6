#include "kernels/cpu/threads.hpp"

#include <omp.h>

#include <stdexcept>
#include <string>

// Debian's OpenBLAS cblas.h declares these, but the reference CBLAS header does not;
// redeclaring an extern "C" function with the same signature is harmless when it does.
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace trainhost::kernels::cpu {

void set_threads(int threads) {
    if (threads < 1)
        throw std::invalid_argument("set_threads: thread count must be at least 1, got " + std::to_string(threads));
    openblas_set_num_threads(threads);
    omp_set_num_threads(threads);
}

int blas_threads() { return openblas_get_num_threads(); }

int openmp_threads() { return omp_get_max_threads(); }

}  // namespace trainhost::kernels::cpu
