// swift-tools-version:6.0
// ChatVault: an offline, encrypted-at-rest chat cache for Linux chat clients.
// C libraries come from Debian packages through system-library targets; no outside Swift packages.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "ChatVault",
    products: [
        .library(name: "ChatVault", targets: ["ChatVault"]),
        .library(name: "VaultStore", targets: ["VaultStore"]),
        .library(name: "VaultKeys", targets: ["VaultKeys"]),
        .library(name: "ChatVaultTesting", targets: ["ChatVaultTesting"]),
        // The scenario kit for an app's own tests: its reset handling audited.
        .library(name: "ChatVaultAudit", targets: ["ChatVaultAudit"]),
        .library(name: "ChatVaultSimulator", targets: ["ChatVaultSimulator"]),
        .library(name: "ChatVaultMatrix", targets: ["ChatVaultMatrix"]),
        .executable(name: "chatvault", targets: ["chatvault"]),
        // The C ABI: libChatVaultC.so as built; Scripts/install installs it as libchatvault.so.0
        // with chatvault/chatvault.h and chatvault.pc.
        .library(name: "ChatVaultC", type: .dynamic, targets: ["ChatVaultC"]),
    ],
    targets: [
        // C shims: pkg-config names and the Debian packages that provide them.
        .systemLibrary(
            name: "CSQLCipher", pkgConfig: "sqlcipher",
            providers: [.apt(["libsqlcipher-dev"])]),
        .systemLibrary(
            name: "CLibSecret", pkgConfig: "libsecret-1",
            providers: [.apt(["libsecret-1-dev"])]),
        .systemLibrary(
            name: "CCrypto", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),

        // Keys: CacheKey and the key stores (Secret Service, software file, memory).
        .target(name: "VaultKeys", dependencies: ["CLibSecret", "CCrypto"], swiftSettings: strict),
        // Storage: SQLCipher connections, manifest, the open procedure, resets, migrations.
        .target(name: "VaultStore", dependencies: ["VaultKeys", "CSQLCipher", "CCrypto"], swiftSettings: strict),
        // Engine: the public offline API of the seeds.
        .target(name: "ChatVault", dependencies: ["VaultStore", "VaultKeys"], swiftSettings: strict),
        // An in-process chat server (truth for many users, a virtual network, faults, a clock), for
        // the library's tests and apps' own.
        .target(name: "ChatVaultSimulator", dependencies: ["ChatVault"], swiftSettings: strict),
        // A real server: the Matrix client-server API over URLSession (tested against Synapse).
        .target(name: "ChatVaultMatrix", dependencies: ["ChatVault", "VaultKeys", "CCrypto"], swiftSettings: strict),
        // Test support shipped for apps' own tests too: a headless gnome-keyring, private buses,
        // a subprocess runner that daemons cannot hang.
        .target(name: "ChatVaultTesting", dependencies: ["VaultKeys", "CCrypto"], swiftSettings: strict),
        .target(name: "ChatVaultAudit", dependencies: ["ChatVault", "ChatVaultTesting", "ChatVaultSimulator", "VaultKeys", "VaultStore"],
                swiftSettings: strict),
        // The C API: the public header (and the C side's memory functions), then its Swift
        // implementation over the public API, which translates types and ownership only.
        .target(name: "CChatVault", path: "Sources/CChatVault"),
        .target(name: "ChatVaultC", dependencies: ["CChatVault", "ChatVault", "ChatVaultSimulator", "ChatVaultMatrix", "VaultKeys", "VaultStore"],
                swiftSettings: strict,
                linkerSettings: [.unsafeFlags(["-Xlinker", "-soname=libchatvault.so.0", "-Xlinker", "-rpath=$ORIGIN/chatvault"])]),
        // Tool: audit, scenario, demo and benchmark CLI over the public API (the demo and the
        // outbox benchmark run against the in-process simulator; CCrypto for the media
        // benchmark's AES-256-GCM floor).
        .executableTarget(name: "chatvault", dependencies: ["ChatVault", "ChatVaultAudit", "VaultStore", "VaultKeys", "ChatVaultTesting", "ChatVaultSimulator", "ChatVaultMatrix", "ChatVaultC", "CChatVault", "CCrypto"], swiftSettings: strict),

        .testTarget(name: "VaultKeysTests", dependencies: ["VaultKeys", "ChatVaultTesting"], swiftSettings: strict),
        .testTarget(name: "VaultStoreTests", dependencies: ["VaultStore", "VaultKeys", "CSQLCipher", "ChatVaultTesting"], swiftSettings: strict),
        .testTarget(name: "ChatVaultTests", dependencies: ["ChatVault", "VaultStore", "VaultKeys", "ChatVaultTesting", "ChatVaultSimulator"], swiftSettings: strict),
        .testTarget(name: "ChatVaultSimulatorTests", dependencies: ["ChatVaultSimulator", "ChatVault"], swiftSettings: strict),
        .testTarget(name: "ChatVaultMatrixTests", dependencies: ["ChatVaultMatrix", "ChatVault", "VaultStore", "VaultKeys", "ChatVaultTesting", "CCrypto"], swiftSettings: strict),
        // The audited sample app and its audit (Examples/audited-app): what an app's test suite does.
        .target(name: "AuditedApp", dependencies: ["ChatVault"], path: "Examples/audited-app/Sources/AuditedApp", swiftSettings: strict),
        .testTarget(name: "AuditedAppTests", dependencies: ["AuditedApp", "ChatVaultAudit", "ChatVault", "VaultKeys"],
                    path: "Examples/audited-app/Tests/AuditedAppTests", swiftSettings: strict),
        .testTarget(name: "CLITests", dependencies: ["chatvault", "ChatVault", "ChatVaultAudit", "VaultStore", "VaultKeys", "ChatVaultTesting", "ChatVaultSimulator"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
