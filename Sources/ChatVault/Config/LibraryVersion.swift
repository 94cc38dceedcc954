/// The library's version, as the `chatvault` tool reports it.
///
/// Kept here when the `Probe.swift` placeholder was removed, because the CLI still prints it.
public let chatVaultVersion = "0.1.0"
