// Host-C++ declarations of the CUDA built-ins the kernels of bfs/gpu/*.cu use, so that g++ -fsyntax-only can
// check the kernels' source on machines without CUDA (tests/test_gpu_source.py).  Declarations only.
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct d3 { unsigned x, y, z; };
extern d3 threadIdx, blockIdx, blockDim, gridDim;
typedef unsigned long long ull_;
template<class T> T atomicAdd(T*, T);
template<class T> T atomicOr(T*, T);
template<class T> T atomicAnd(T*, T);
template<class T> T atomicMin(T*, T);
template<class T> T atomicMax(T*, T);
template<class T> T atomicCAS(T*, T, T);
unsigned __ballot_sync(unsigned, int); int __any_sync(unsigned, int);
template<class T> T __shfl_sync(unsigned, T, int);
template<class T> T __shfl_down_sync(unsigned, T, int);
template<class T> T __shfl_up_sync(unsigned, T, int);
template<class T> T __shfl_xor_sync(unsigned, T, int);
int __popc(unsigned); int __popcll(unsigned long long); int __clzll(long long); int __clz(int); int __ffs(int); int __ffsll(long long);
unsigned __brev(unsigned);
void __syncthreads(); void __syncwarp(unsigned m=0xffffffff);
void __threadfence(); void __threadfence_system(); void __nanosleep(unsigned);
int __syncthreads_or(int); int __syncthreads_count(int);
unsigned __match_any_sync(unsigned, long long);
template<class T> T __ldg(const T*);
struct longlong2 { long long x, y; }; struct int4 { int x, y, z, w; }; struct uint4 { unsigned x, y, z, w; };
struct int2 { int x, y; }; struct uint2 { unsigned x, y; };
inline longlong2 make_longlong2(long long a, long long b) { return {a, b}; }
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline int abs(int x) { return x < 0 ? -x : x; }
