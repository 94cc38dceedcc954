extension OfflineConfig {
    /// The "Range / clamp" column of the reference's OfflineConfig table, in one place.
    ///
    /// Both construction paths (the initializer, and ``OfflineConfig/Builder/build()``, which calls
    /// the initializer) go through these functions, so a value means the same thing however the
    /// configuration was made. Values are normalised, never rejected.
    enum Normalise {
        /// Count caps clamped to `[1, 1000]`; `0`, negative or over → `1000`.
        static let countCapCeiling = 1000
        /// `maxPendingMessages` clamped to `[1, 100]`; `0`, negative or over → `100`.
        static let pendingCeiling = 100
        /// `maxSnapshotQueries`: `0` or negative → `100`.
        static let snapshotQueriesFallback = 100
        /// `snapshotTtlDays`: `0` or negative → `7`.
        static let snapshotTtlFallback = 7

        /// `maxStorageSize`, `maxMediaCacheSize`: `0` = unlimited; negative treated as `0`.
        static func byteCap(_ bytes: Int64) -> Int64 { bytes <= 0 ? 0 : bytes }

        /// `cacheDurationDays`: `>= 0`; negative treated as `0` (no age-based prune).
        static func cacheDurationDays(_ days: Int) -> Int { max(0, days) }

        /// `maxMessagesPerConversation`: `[1, 1000]`; `0`/negative/over → `1000`.
        static func maxMessagesPerConversation(_ count: Int) -> Int {
            clamped(count, ceiling: countCapCeiling)
        }

        /// `maxConversations`: `[1, 1000]`; `0`/negative/over → `1000`.
        static func maxConversations(_ count: Int) -> Int {
            clamped(count, ceiling: countCapCeiling)
        }

        /// `maxPendingMessages`: `[1, 100]`; `0`/negative/over → `100`.
        static func maxPendingMessages(_ count: Int) -> Int {
            clamped(count, ceiling: pendingCeiling)
        }

        /// `maxSnapshotQueries`: `0`/negative → `100`; no upper bound in the table.
        static func maxSnapshotQueries(_ count: Int) -> Int {
            count <= 0 ? snapshotQueriesFallback : count
        }

        /// `snapshotTtlDays`: `0`/negative → `7`; no upper bound in the table.
        static func snapshotTtlDays(_ days: Int) -> Int {
            days <= 0 ? snapshotTtlFallback : days
        }

        /// The table sends every out-of-range count (including `0` and negatives) to the ceiling,
        /// not to the nearest bound: `0` means "no preference", not "cache nothing".
        private static func clamped(_ value: Int, ceiling: Int) -> Int {
            (1...ceiling).contains(value) ? value : ceiling
        }
    }
}
