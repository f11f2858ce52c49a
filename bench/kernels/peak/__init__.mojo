"""What one core multiplies at most: the inner loop of a product with its operands in the core's cache.

`peak_products(setup, data) -> result [1]`: setup [2] int64 = (kind, iterations), data [1024] float32 (the
operands, read as floats or as bytes). Each iteration loads two vectors of "weights" and broadcast "x" words
from data (four, as step 18's gemm does; six for float32, whose FMA's latency asks for more sums in flight),
then multiplies each word into both vectors, a sum for each:

    kind 0  float32: 12 FMAs (vfmadd231ps ymm; six x words), 96 products
    kind 1  int8, AVX2: 8 x (vpsignb, vpmaddubsw, vpmaddwd by ones, vpaddd), 256 products; the |w| of the
            two weight vectors once (vpabsb), as step 18's gemm shares them between rows of x
    kind 2  int8, AVX-512 VNNI: 8 vpdpbusd zmm, 512 products

It runs on the calling thread: one core. result[0] is the accumulators' sum, so no product is left out.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from std.memory import bitcast
from std.sys import llvm_intrinsic
from std.sys.info import CompilationTarget

comptime VNNI = CompilationTarget._has_feature["avx512vnni"]()
comptime AVX2 = CompilationTarget._has_feature["avx2"]()


def fma_loop(data: UnsafePointer[Float32, ImmutAnyOrigin], n: Int) -> Float32:
    var acc = Array[SIMD[DType.float32, 8], 12](fill=0)  # 6 x 2: enough sums in flight for FMA's latency
    for k in range(n):
        var p = (k & 63) * 16
        var w0, w1 = data.unsafe_load[width=8](p), data.unsafe_load[width=8](p + 8)
        comptime for i in range(6):
            var x = SIMD[DType.float32, 8](data[unsafe_offset=p + i])
            acc[2 * i] = x.fma(w0, acc[2 * i])
            acc[2 * i + 1] = x.fma(w1, acc[2 * i + 1])
    var s = SIMD[DType.float32, 8](0)
    comptime for i in range(12):
        s += acc[i]
    return s.reduce_add()


def sign_trick_loop(data: UnsafePointer[Float32, ImmutAnyOrigin], n: Int) -> Float32:
    var bytes = data.bitcast[Int8]()
    var acc = Array[SIMD[DType.int32, 8], 8](fill=0)
    for k in range(n):
        var p = (k & 63) * 64
        var w0, w1 = bytes.unsafe_load[width=32](p), bytes.unsafe_load[width=32](p + 32)
        var u0, u1 = bitcast[DType.uint8, 32](abs(w0)), bitcast[DType.uint8, 32](abs(w1))
        comptime for i in range(4):
            var x = bitcast[DType.int8, 32](SIMD[DType.int32, 8](data.bitcast[Int32]()[unsafe_offset=p // 4 + i]))
            comptime for h in range(2):
                var w = w0 if h == 0 else w1
                var signed = llvm_intrinsic["llvm.x86.avx2.psign.b", SIMD[DType.int8, 32]](x, w)
                var pairs = llvm_intrinsic["llvm.x86.avx2.pmadd.ub.sw", SIMD[DType.int16, 16]](
                    u0 if h == 0 else u1, signed)
                acc[2 * i + h] += llvm_intrinsic["llvm.x86.avx2.pmadd.wd", SIMD[DType.int32, 8]](
                    pairs, SIMD[DType.int16, 16](1))
    var s = SIMD[DType.int32, 8](0)
    comptime for i in range(8):
        s += acc[i]
    return Float32(s.reduce_add())


def vnni_loop(data: UnsafePointer[Float32, ImmutAnyOrigin], n: Int) -> Float32:
    var bytes = data.bitcast[UInt8]()
    var acc = Array[SIMD[DType.int32, 16], 8](fill=0)
    for k in range(n):
        var p = (k & 31) * 128
        var w0 = bitcast[DType.int8, 64](bytes.unsafe_load[width=64](p))
        var w1 = bitcast[DType.int8, 64](bytes.unsafe_load[width=64](p + 64))
        comptime for i in range(4):
            var x = bitcast[DType.uint8, 64](SIMD[DType.int32, 16](data.bitcast[Int32]()[unsafe_offset=p // 4 + i]))
            acc[2 * i] = llvm_intrinsic["llvm.x86.avx512.vpdpbusd.512", SIMD[DType.int32, 16]](acc[2 * i], x, w0)
            acc[2 * i + 1] = llvm_intrinsic["llvm.x86.avx512.vpdpbusd.512", SIMD[DType.int32, 16]](
                acc[2 * i + 1], x, w1)
    var s = SIMD[DType.int32, 16](0)
    comptime for i in range(8):
        s += acc[i]
    return Float32(s.reduce_add())


@extensibility.register("peak_products")
struct PeakProducts:
    @staticmethod
    def execute[target: StaticString](
        result: OutputTensor[dtype=DType.float32, rank=1, ...],
        setup: InputTensor[dtype=DType.int64, rank=1, ...],
        data: InputTensor[dtype=DType.float32, rank=1, ...],
        ctx: DeviceContext,
    ) raises:
        var kind, n = Int(setup.unsafe_ptr()[0]), Int(setup.unsafe_ptr()[1])
        var dp = data.unsafe_ptr()
        if data.dim_size(0) < 1024:
            raise Error("data: 1024 floats")
        if kind == 0:
            result.unsafe_ptr()[0] = fma_loop(dp, n)
        elif kind == 1:
            comptime if AVX2:
                result.unsafe_ptr()[0] = sign_trick_loop(dp, n)
            else:
                raise Error("int8 the AVX2 way: this CPU has no AVX2")
        else:
            comptime if VNNI:
                result.unsafe_ptr()[0] = vnni_loop(dp, n)
            else:
                raise Error("int8 with VNNI: this CPU has no AVX-512 VNNI")
