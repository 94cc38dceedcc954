// Placeholder until the benchmark lands (owned by the benchmark work; replace this file).
enum BenchCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        throw CLIError.failure("bench: not built yet")
    }
}
