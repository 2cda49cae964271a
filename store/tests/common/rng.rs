// xorshift64*: deterministic, dependency-free randomness, shared by the model
// tests and the store benchmark through `include!`.

/// A seeded xorshift64* generator (seed must be non-zero).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (with negligible modulo bias).
    #[allow(dead_code, reason = "the benchmark uses only next()")]
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
