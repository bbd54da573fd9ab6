# TRAINHOST_CUDA=AUTO|ON|OFF: the CUDA backend (cudaMallocAsync pool, streams,
# events, cuBLAS, cuDNN, kernels/cuda). AUTO builds it when nvcc and cuDNN are
# found, ON requires them, OFF builds CPU-only. CMake has no module for cuDNN, so it
# is found with find_path/find_library.
if(NOT TRAINHOST_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TRAINHOST_CUDA must be AUTO, ON or OFF, not '${TRAINHOST_CUDA}'")
endif()

set(TRAINHOST_HAVE_CUDA OFF)
if(NOT TRAINHOST_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)  # skipped when CMAKE_CUDA_COMPILER is given: that one is checked below
  set(_trainhost_cuda_missing "")
  if(CMAKE_CUDA_COMPILER AND NOT EXISTS "${CMAKE_CUDA_COMPILER}")
    set(_trainhost_cuda_missing "nvcc at CMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER}")
  elseif(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    # CUDNN_ROOT may name a cuDNN outside the toolkit, such as the nvidia-cudnn wheel's
    # folder, whose library comes without the unversioned libcudnn.so link.
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS $ENV{CUDNN_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
                 HINTS $ENV{CUDNN_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu)
    if(NOT CUDAToolkit_FOUND)
      set(_trainhost_cuda_missing "the CUDA toolkit (CUDAToolkit)")
    elseif(NOT EXISTS "${CUDNN_INCLUDE_DIR}/cudnn.h" OR NOT EXISTS "${CUDNN_LIBRARY}")
      set(_trainhost_cuda_missing "cuDNN (cudnn.h and libcudnn)")
    endif()
  else()
    set(_trainhost_cuda_missing "a CUDA compiler (nvcc)")
  endif()
  if(_trainhost_cuda_missing STREQUAL "")
    set(TRAINHOST_HAVE_CUDA ON)
  elseif(TRAINHOST_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TRAINHOST_CUDA=ON but ${_trainhost_cuda_missing} was not found; "
                        "install it or configure with -DTRAINHOST_CUDA=AUTO or OFF")
  endif()
endif()

if(TRAINHOST_HAVE_CUDA)
  enable_language(CUDA)
  # Hopper (sm_90) machine code, plus PTX that newer GPUs compile at load time.
  set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  add_library(trainhost_cudnn INTERFACE)
  target_include_directories(trainhost_cudnn INTERFACE ${CUDNN_INCLUDE_DIR})
  target_link_libraries(trainhost_cudnn INTERFACE ${CUDNN_LIBRARY})
  message(STATUS "trainhost: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, cuDNN ${CUDNN_LIBRARY})")
else()
  if(TRAINHOST_CUDA STREQUAL "OFF")
    message(STATUS "trainhost: CPU-only build (TRAINHOST_CUDA=OFF)")
  else()
    message(STATUS "trainhost: CPU-only build (${_trainhost_cuda_missing} not found)")
  endif()
endif()
