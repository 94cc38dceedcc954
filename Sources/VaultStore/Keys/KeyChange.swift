import VaultKeys

/// A change of a cache's key that is under way, as recorded in the manifest before its first step
/// and cleared after its last. It names key ids and stores, never a key. An open that finds one
/// finishes the change or rolls it back before it looks at anything else (`KeyChangeRecovery`),
/// so a crash at any instant ends in a cache that opens with its key: never `wrongKey`, never
/// `keyLost`.
///
/// Rotation (`kind == .rotate`), in order:
///
/// | phase       | on disk and in the store                                  | an interrupted open…     |
/// |-------------|-----------------------------------------------------------|--------------------------|
/// | `exporting` | new key (maybe) in the staging item, `cache.db.next` being written | rolls back        |
/// | `swapping`  | `cache.db.next` verified under the new key; renamed or not | finishes the rename     |
/// | `storing`   | `cache.db` under the new key; the manifest names it; the main item may still hold the old key | stores the new key in the main item |
///
/// Move (`kind == .move`), same key, another store:
///
/// | phase      | state                                                   | an interrupted open…       |
/// |------------|---------------------------------------------------------|----------------------------|
/// | `storing`  | the key maybe copied to `toStore`; the manifest names `fromStore` | removes the copy |
/// | `removing` | the manifest names `toStore`; `fromStore` may still hold the key  | removes the old copy |
package struct KeyChange: Codable, Sendable, Equatable {
    package enum Kind: String, Codable, Sendable {
        case rotate
        case move
    }

    package enum Phase: String, Codable, Sendable {
        case exporting
        case swapping
        case storing
        case removing
    }

    package var kind: Kind
    package var phase: Phase
    /// The key id the cache had before the change.
    package var fromKeyId: String
    /// The new key's id (a rotation; the same as `fromKeyId` for a move).
    package var toKeyId: String
    /// The new key's check value (hex), so a key found in a store can be told right or wrong.
    package var toKeyCheck: String
    /// The store names (the same for a rotation).
    package var fromStore: String
    package var toStore: String

    package init(kind: Kind, phase: Phase, fromKeyId: String, toKeyId: String, toKeyCheck: String, fromStore: String, toStore: String) {
        self.kind = kind
        self.phase = phase
        self.fromKeyId = fromKeyId
        self.toKeyId = toKeyId
        self.toKeyCheck = toKeyCheck
        self.fromStore = fromStore
        self.toStore = toStore
    }

    var isWellFormed: Bool {
        [fromKeyId, toKeyId, fromStore, toStore].allSatisfy(KeyItemNames.isSafeComponent)
            && toKeyCheck.count == 64 && toKeyCheck.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// The suffix of the cache id that names a rotation's staging key item (the new key, kept
    /// apart until the database is proven under it).
    package static let stagingSuffix = "-next"

    /// The staging item of a cache's rotation.
    static func stagingItem(_ id: KeyItemID) -> KeyItemID {
        KeyItemID(applicationId: id.applicationId, account: id.account, cacheId: id.cacheId + stagingSuffix)
    }
}
