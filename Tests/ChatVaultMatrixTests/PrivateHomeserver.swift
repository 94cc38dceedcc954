import ChatVaultTesting
import Foundation

/// A Synapse of a test's own (the shared one cannot be stopped): `LocalHomeserver` from this
/// checkout's Scripts/lib/synapse.sh, with the environment Scripts/test installed.
enum PrivateHomeserver {
    static var repositoryRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    static func make(extraConfiguration: String = "") throws -> LocalHomeserver {
        guard let python = ProcessInfo.processInfo.environment["CHATVAULT_SYNAPSE_PYTHON"], !python.isEmpty else {
            throw TestHomeserver.Missing()
        }
        return try LocalHomeserver(repository: repositoryRoot, python: python, extraConfiguration: extraConfiguration)
    }
}
