// The CUDA C side of the fast-math benchmarks: src/fast_math.rs's nbody_forces and pair_energy
// as CUDA C usually is (one thread per body, `float4` bodies, `const __restrict__` inputs),
// built with `nvcc -O3 -use_fast_math -arch=sm_90 -cubin` on the GPU machine and launched by the
// `fast_math` binary through the driver.

extern "C" __global__ void nbody_forces(float softening2, const float4* __restrict__ bodies,
                                        float4* __restrict__ accel, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 p = bodies[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; j++) {
        float4 q = bodies[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float inv = rsqrtf(dx * dx + dy * dy + dz * dz + softening2);
        float s = q.w * inv * inv * inv;
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    accel[i] = make_float4(ax, ay, az, 0.0f);
}

extern "C" __global__ void pair_energy(float softening2, float kappa,
                                       const float4* __restrict__ bodies,
                                       float* __restrict__ energy, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 p = bodies[i];
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        float4 q = bodies[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float r = sqrtf(dx * dx + dy * dy + dz * dz + softening2);
        float phase = kappa * r;
        sum += q.w * (cosf(phase) + 0.5f * sinf(phase)) / r;
    }
    energy[i] = p.w * sum;
}
