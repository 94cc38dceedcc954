/// SplitMix64: a small, fast, seeded generator. The simulator draws every random decision from
/// one of these, so the same seed and the same calls give the same answers. Public so tests can
/// draw their own reproducible randomness (kill times, payload sizes) the same way.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in [0, 1).
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A generator for one stream derived from this seed (one per simulated device), so that what
    /// one device draws never shifts what another draws.
    static func derived(seed: UInt64, stream: UInt64) -> SeededGenerator {
        var mixer = SeededGenerator(seed: seed ^ (stream &* 0xD1B5_4A32_D192_ED03))
        return SeededGenerator(seed: mixer.next())
    }
}
