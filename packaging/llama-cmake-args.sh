#!/usr/bin/env sh
# Prints the CMAKE_ARGS used to compile llama-cpp-python for this machine.
#
#   INGLENOOK_GPU=auto|cpu|cuda|metal|vulkan   (default auto)
#
# CPU: never -march=native. Some VMs advertise instructions (AMX) in CPUID that the kernel
# refuses, and a native build dies with SIGILL. We enable exactly the x86 extensions the
# kernel reports in /proc/cpuinfo instead. GPU back-ends: auto picks Metal on Apple Silicon
# and CUDA where `nvidia-smi -L` lists a GPU; Vulkan is opt-in.
set -eu
gpu="${INGLENOOK_GPU:-auto}"
os="$(uname -s)"
arch="$(uname -m)"

if [ "$gpu" = auto ]; then
    if [ "$os" = Darwin ] && [ "$arch" = arm64 ]; then
        gpu=metal
    elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
        gpu=cuda
    else
        gpu=cpu
    fi
fi

args=""
case "$gpu" in
    cuda)   args="-DGGML_CUDA=ON" ;;
    metal)  args="-DGGML_METAL=ON" ;;
    vulkan) args="-DGGML_VULKAN=ON" ;;
    cpu)    [ "$os" = Darwin ] && args="-DGGML_METAL=OFF" ;;
    *) echo "unknown INGLENOOK_GPU=$gpu (auto, cpu, cuda, metal, vulkan)" >&2; exit 2 ;;
esac

if [ "$os" = Linux ] && { [ "$arch" = x86_64 ] || [ "$arch" = amd64 ]; } && [ -r /proc/cpuinfo ]; then
    flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    has() { case "$flags" in *" $1 "*) return 0 ;; esac; return 1; }
    args="$args -DGGML_NATIVE=OFF"
    has avx && args="$args -DGGML_AVX=ON"
    has avx2 && args="$args -DGGML_AVX2=ON"
    has fma && args="$args -DGGML_FMA=ON"
    has f16c && args="$args -DGGML_F16C=ON"
    has bmi2 && args="$args -DGGML_BMI2=ON"
    has avx_vnni && args="$args -DGGML_AVX_VNNI=ON"
    if has avx512f; then
        args="$args -DGGML_AVX512=ON"
        has avx512vbmi && args="$args -DGGML_AVX512_VBMI=ON"
        has avx512_vnni && args="$args -DGGML_AVX512_VNNI=ON"
        has avx512_bf16 && args="$args -DGGML_AVX512_BF16=ON"
    fi
    # AMX is left off on purpose: see the note at the top.
fi
echo "$args" | sed 's/^ *//'
