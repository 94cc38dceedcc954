// swift-tools-version:6.0
// An app outside the ChatVault package: it depends on the repository by path, as an app would,
// and sees only what is public (a `package` declaration is visible only to the package's own
// targets). Scripts/outside-package builds OutsideApp (it must compile and link) and OutsideMisuse
// (it must fail, with exactly the errors its `// expect:` comments name). Offline: no fetched
// dependencies.
import PackageDescription

let package = Package(
    name: "OutsidePackage",
    dependencies: [.package(name: "ChatVault", path: "../..")],
    targets: [
        .executableTarget(name: "OutsideApp", dependencies: [
            .product(name: "ChatVault", package: "ChatVault"),
            .product(name: "VaultKeys", package: "ChatVault"),
            .product(name: "VaultStore", package: "ChatVault"),
            .product(name: "ChatVaultMatrix", package: "ChatVault"),
        ]),
        .target(name: "OutsideMisuse", dependencies: [
            .product(name: "ChatVault", package: "ChatVault"),
            .product(name: "VaultKeys", package: "ChatVault"),
            .product(name: "VaultStore", package: "ChatVault"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
