import XCTest
import ChatVault
import VaultStore

/// Pins the reference's "OfflineConfig options" table: defaults, the "Range / clamp" column, and that
/// the initializer and the builder are the same function of their inputs.
final class OfflineConfigTests: XCTestCase {

    // MARK: Defaults

    private func assertTableDefaults(_ config: OfflineConfig, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(config.enabled, false, file: file, line: line)
        XCTAssertEqual(config.cacheDurationDays, 0, file: file, line: line)
        XCTAssertEqual(config.maxStorageSize, 262_144_000, file: file, line: line)
        XCTAssertEqual(config.maxMessagesPerConversation, 500, file: file, line: line)
        XCTAssertEqual(config.maxConversations, 100, file: file, line: line)
        XCTAssertEqual(config.maxPendingMessages, 50, file: file, line: line)
        XCTAssertEqual(config.autoSendPendingOnReconnect, true, file: file, line: line)
        XCTAssertEqual(config.pendingQueueOverflowPolicy, .rejectNewest, file: file, line: line)
        XCTAssertEqual(config.maxMediaCacheSize, 524_288_000, file: file, line: line)
        XCTAssertEqual(config.mediaCaching, .auto, file: file, line: line)
        XCTAssertEqual(config.encryption, false, file: file, line: line)
        XCTAssertEqual(config.encryptionFailureBehavior, .onlineOnly, file: file, line: line)
        XCTAssertEqual(config.maxSnapshotQueries, 100, file: file, line: line)
        XCTAssertEqual(config.snapshotTtlDays, 7, file: file, line: line)
    }

    func testInitializerWithNoArgumentsHasEveryTableDefault() {
        assertTableDefaults(OfflineConfig())
    }

    func testEmptyBuilderHasEveryTableDefault() {
        assertTableDefaults(OfflineConfig.Builder().build())
    }

    func testDefaultByteCapsAre250And500Megabytes() {
        XCTAssertEqual(OfflineConfig().maxStorageSize, 250 * 1024 * 1024)
        XCTAssertEqual(OfflineConfig().maxMediaCacheSize, 500 * 1024 * 1024)
    }

    func testSeedQuickReferenceBuilderChainProducesItsValues() {
        let config = OfflineConfig.Builder()
            .setEnabled(true)
            .setMaxConversations(100)
            .setMaxMessagesPerConversation(500)
            .setMaxPendingMessages(50)
            .setMediaCaching(.auto)
            .setEncryption(false)
            .build()
        XCTAssertTrue(config.enabled)
        XCTAssertEqual(config, OfflineConfig(enabled: true))
    }

    // MARK: Every setter and every argument reaches its property

    func testEverySetterReachesItsProperty() {
        let config = OfflineConfig.Builder()
            .setEnabled(true)
            .setCacheDurationDays(30)
            .setMaxStorageSize(1_000)
            .setMaxMessagesPerConversation(20)
            .setMaxConversations(10)
            .setMaxPendingMessages(5)
            .setAutoSendPendingOnReconnect(false)
            .setPendingQueueOverflowPolicy(.dropOldest)
            .setMaxMediaCacheSize(2_000)
            .setMediaCaching(.off)
            .setEncryption(true)
            .setEncryptionFailureBehavior(.plaintextFallback)
            .setMaxSnapshotQueries(3)
            .setSnapshotTtlDays(2)
            .build()
        XCTAssertEqual(config.enabled, true)
        XCTAssertEqual(config.cacheDurationDays, 30)
        XCTAssertEqual(config.maxStorageSize, 1_000)
        XCTAssertEqual(config.maxMessagesPerConversation, 20)
        XCTAssertEqual(config.maxConversations, 10)
        XCTAssertEqual(config.maxPendingMessages, 5)
        XCTAssertEqual(config.autoSendPendingOnReconnect, false)
        XCTAssertEqual(config.pendingQueueOverflowPolicy, .dropOldest)
        XCTAssertEqual(config.maxMediaCacheSize, 2_000)
        XCTAssertEqual(config.mediaCaching, .off)
        XCTAssertEqual(config.encryption, true)
        XCTAssertEqual(config.encryptionFailureBehavior, .plaintextFallback)
        XCTAssertEqual(config.maxSnapshotQueries, 3)
        XCTAssertEqual(config.snapshotTtlDays, 2)
    }

    func testEveryInitializerArgumentReachesItsProperty() {
        let config = OfflineConfig(
            enabled: true, encryption: true, cacheDurationDays: 30, maxStorageSize: 1_000,
            maxMessagesPerConversation: 20, maxConversations: 10, maxPendingMessages: 5,
            autoSendPendingOnReconnect: false, pendingQueueOverflowPolicy: .dropOldest,
            maxMediaCacheSize: 2_000, mediaCaching: .off, encryptionFailureBehavior: .plaintextFallback,
            maxSnapshotQueries: 3, snapshotTtlDays: 2)
        let built = OfflineConfig.Builder()
            .setEnabled(true).setEncryption(true).setCacheDurationDays(30).setMaxStorageSize(1_000)
            .setMaxMessagesPerConversation(20).setMaxConversations(10).setMaxPendingMessages(5)
            .setAutoSendPendingOnReconnect(false).setPendingQueueOverflowPolicy(.dropOldest)
            .setMaxMediaCacheSize(2_000).setMediaCaching(.off)
            .setEncryptionFailureBehavior(.plaintextFallback)
            .setMaxSnapshotQueries(3).setSnapshotTtlDays(2)
            .build()
        XCTAssertEqual(config, built)
        XCTAssertNotEqual(config, OfflineConfig())
    }

    func testSeedSpellingOfTheInitializerLeadsWithEnabledAndEncryption() {
        let config = OfflineConfig(enabled: true, encryption: true)
        XCTAssertTrue(config.enabled)
        XCTAssertTrue(config.encryption)
    }

    // MARK: Count caps: clamped, out of range goes to the ceiling

    /// (input, expected) for a cap clamped to [1, ceiling] whose out-of-range values go to the ceiling.
    private func countCapCases(ceiling: Int) -> [(Int, Int)] {
        [(0, ceiling), (-1, ceiling), (Int.min, ceiling), (1, 1), (2, 2), (ceiling - 1, ceiling - 1),
         (ceiling, ceiling), (ceiling + 1, ceiling), (1_000_000, ceiling), (Int.max, ceiling)]
    }

    func testMaxMessagesPerConversationIsClampedToOneThroughAThousand() {
        for (input, expected) in countCapCases(ceiling: 1000) {
            XCTAssertEqual(OfflineConfig(maxMessagesPerConversation: input).maxMessagesPerConversation,
                           expected, "init, input \(input)")
            XCTAssertEqual(OfflineConfig.Builder().setMaxMessagesPerConversation(input).build()
                            .maxMessagesPerConversation, expected, "builder, input \(input)")
        }
    }

    func testMaxConversationsIsClampedToOneThroughAThousand() {
        for (input, expected) in countCapCases(ceiling: 1000) {
            XCTAssertEqual(OfflineConfig(maxConversations: input).maxConversations, expected, "init, input \(input)")
            XCTAssertEqual(OfflineConfig.Builder().setMaxConversations(input).build().maxConversations,
                           expected, "builder, input \(input)")
        }
    }

    func testMaxPendingMessagesIsClampedToOneThroughAHundred() {
        for (input, expected) in countCapCases(ceiling: 100) {
            XCTAssertEqual(OfflineConfig(maxPendingMessages: input).maxPendingMessages, expected, "init, input \(input)")
            XCTAssertEqual(OfflineConfig.Builder().setMaxPendingMessages(input).build().maxPendingMessages,
                           expected, "builder, input \(input)")
        }
        // The pending ceiling is its own, not the conversation ceiling.
        XCTAssertEqual(OfflineConfig(maxPendingMessages: 500).maxPendingMessages, 100)
    }

    func testMaxSnapshotQueriesTreatsZeroOrNegativeAsAHundredAndKeepsPositives() {
        let cases: [(Int, Int)] = [(0, 100), (-1, 100), (Int.min, 100), (1, 1), (99, 99), (100, 100),
                                   (101, 101), (5_000, 5_000)]
        for (input, expected) in cases {
            XCTAssertEqual(OfflineConfig(maxSnapshotQueries: input).maxSnapshotQueries, expected, "init, input \(input)")
            XCTAssertEqual(OfflineConfig.Builder().setMaxSnapshotQueries(input).build().maxSnapshotQueries,
                           expected, "builder, input \(input)")
        }
    }

    func testSnapshotTtlDaysTreatsZeroOrNegativeAsSevenAndKeepsPositives() {
        let cases: [(Int, Int)] = [(0, 7), (-1, 7), (Int.min, 7), (1, 1), (7, 7), (8, 8), (365, 365)]
        for (input, expected) in cases {
            XCTAssertEqual(OfflineConfig(snapshotTtlDays: input).snapshotTtlDays, expected, "init, input \(input)")
            XCTAssertEqual(OfflineConfig.Builder().setSnapshotTtlDays(input).build().snapshotTtlDays,
                           expected, "builder, input \(input)")
        }
    }

    // MARK: Byte caps and the conversation age limit: zero or less means unlimited (0)

    private let byteCases: [(Int64, Int64)] = [
        (0, 0), (-1, 0), (-262_144_000, 0), (Int64.min, 0), (1, 1), (4_096, 4_096), (Int64.max, Int64.max),
    ]

    func testMaxStorageSizeTreatsZeroOrNegativeAsUnlimited() {
        for (input, expected) in byteCases {
            XCTAssertEqual(OfflineConfig(maxStorageSize: input).maxStorageSize, expected, "init, input \(input)")
            XCTAssertEqual(OfflineConfig.Builder().setMaxStorageSize(input).build().maxStorageSize,
                           expected, "builder, input \(input)")
        }
    }

    func testMaxMediaCacheSizeTreatsZeroOrNegativeAsUnlimited() {
        for (input, expected) in byteCases {
            XCTAssertEqual(OfflineConfig(maxMediaCacheSize: input).maxMediaCacheSize, expected, "init, input \(input)")
            XCTAssertEqual(OfflineConfig.Builder().setMaxMediaCacheSize(input).build().maxMediaCacheSize,
                           expected, "builder, input \(input)")
        }
    }

    func testCacheDurationDaysTreatsNegativeAsUnlimitedZero() {
        let cases: [(Int, Int)] = [(0, 0), (-1, 0), (-30, 0), (Int.min, 0), (1, 1), (30, 30), (Int.max, Int.max)]
        for (input, expected) in cases {
            XCTAssertEqual(OfflineConfig(cacheDurationDays: input).cacheDurationDays, expected, "init, input \(input)")
            XCTAssertEqual(OfflineConfig.Builder().setCacheDurationDays(input).build().cacheDurationDays,
                           expected, "builder, input \(input)")
        }
    }

    // MARK: Builder and initializer agree

    /// One row of raw, possibly out-of-range inputs for every numeric option.
    private struct RawInputs {
        var enabled = false
        var encryption = false
        var cacheDurationDays = 0
        var maxStorageSize: Int64 = 262_144_000
        var maxMessagesPerConversation = 500
        var maxConversations = 100
        var maxPendingMessages = 50
        var autoSendPendingOnReconnect = true
        var pendingQueueOverflowPolicy: PendingMessageOverflowPolicy = .rejectNewest
        var maxMediaCacheSize: Int64 = 524_288_000
        var mediaCaching: MediaCachingMode = .auto
        var encryptionFailureBehavior: EncryptionFailureBehavior = .onlineOnly
        var maxSnapshotQueries = 100
        var snapshotTtlDays = 7
    }

    private func viaInitializer(_ raw: RawInputs) -> OfflineConfig {
        OfflineConfig(
            enabled: raw.enabled, encryption: raw.encryption, cacheDurationDays: raw.cacheDurationDays,
            maxStorageSize: raw.maxStorageSize, maxMessagesPerConversation: raw.maxMessagesPerConversation,
            maxConversations: raw.maxConversations, maxPendingMessages: raw.maxPendingMessages,
            autoSendPendingOnReconnect: raw.autoSendPendingOnReconnect,
            pendingQueueOverflowPolicy: raw.pendingQueueOverflowPolicy, maxMediaCacheSize: raw.maxMediaCacheSize,
            mediaCaching: raw.mediaCaching, encryptionFailureBehavior: raw.encryptionFailureBehavior,
            maxSnapshotQueries: raw.maxSnapshotQueries, snapshotTtlDays: raw.snapshotTtlDays)
    }

    private func viaBuilder(_ raw: RawInputs) -> OfflineConfig {
        OfflineConfig.Builder()
            .setEnabled(raw.enabled)
            .setCacheDurationDays(raw.cacheDurationDays)
            .setMaxStorageSize(raw.maxStorageSize)
            .setMaxMessagesPerConversation(raw.maxMessagesPerConversation)
            .setMaxConversations(raw.maxConversations)
            .setMaxPendingMessages(raw.maxPendingMessages)
            .setAutoSendPendingOnReconnect(raw.autoSendPendingOnReconnect)
            .setPendingQueueOverflowPolicy(raw.pendingQueueOverflowPolicy)
            .setMaxMediaCacheSize(raw.maxMediaCacheSize)
            .setMediaCaching(raw.mediaCaching)
            .setEncryption(raw.encryption)
            .setEncryptionFailureBehavior(raw.encryptionFailureBehavior)
            .setMaxSnapshotQueries(raw.maxSnapshotQueries)
            .setSnapshotTtlDays(raw.snapshotTtlDays)
            .build()
    }

    func testBuilderAndInitializerNormaliseEveryInputTheSameWay() {
        var rows: [RawInputs] = [RawInputs()]
        let ints = [Int.min, -1, 0, 1, 7, 50, 99, 100, 101, 500, 999, 1000, 1001, Int.max]
        let bytes: [Int64] = [Int64.min, -1, 0, 1, 262_144_000, Int64.max]
        for (index, value) in ints.enumerated() {
            var row = RawInputs()
            row.cacheDurationDays = value
            row.maxMessagesPerConversation = value
            row.maxConversations = ints[(index + 3) % ints.count]
            row.maxPendingMessages = ints[(index + 5) % ints.count]
            row.maxSnapshotQueries = ints[(index + 7) % ints.count]
            row.snapshotTtlDays = ints[(index + 11) % ints.count]
            row.maxStorageSize = bytes[index % bytes.count]
            row.maxMediaCacheSize = bytes[(index + 1) % bytes.count]
            row.enabled = index % 2 == 0
            row.encryption = index % 3 == 0
            row.autoSendPendingOnReconnect = index % 4 != 0
            row.pendingQueueOverflowPolicy = PendingMessageOverflowPolicy.allCases[index % 2]
            row.mediaCaching = MediaCachingMode.allCases[index % 2]
            row.encryptionFailureBehavior = EncryptionFailureBehavior.allCases[index % 2]
            rows.append(row)
        }
        for (index, row) in rows.enumerated() {
            XCTAssertEqual(viaInitializer(row), viaBuilder(row), "row \(index)")
        }
    }

    func testNormalisationIsIdempotent() {
        let odd = OfflineConfig(cacheDurationDays: -5, maxStorageSize: -1, maxMessagesPerConversation: 0,
                                maxConversations: 5_000, maxPendingMessages: -3, maxMediaCacheSize: -9,
                                maxSnapshotQueries: 0, snapshotTtlDays: -2)
        XCTAssertEqual(OfflineConfig.Builder(odd).build(), odd)
    }

    // MARK: Builder behaviour

    func testBuilderStartingFromAConfigKeepsItsValues() {
        let base = OfflineConfig(enabled: true, encryption: true, maxConversations: 42, mediaCaching: .off)
        let derived = OfflineConfig.Builder(base).setMaxPendingMessages(9).build()
        XCTAssertEqual(derived.maxConversations, 42)
        XCTAssertEqual(derived.mediaCaching, .off)
        XCTAssertTrue(derived.encryption)
        XCTAssertEqual(derived.maxPendingMessages, 9)
        XCTAssertEqual(base.maxPendingMessages, 50, "the original config is immutable")
    }

    func testLaterSetterWinsAndBuilderCanBuildAgain() {
        let builder = OfflineConfig.Builder().setMaxConversations(10)
        let first = builder.build()
        builder.setMaxConversations(20)
        XCTAssertEqual(first.maxConversations, 10, "a built config does not follow its builder")
        XCTAssertEqual(builder.build().maxConversations, 20)
    }

    func testConfigIsSendableAcrossTasks() async {
        let config = OfflineConfig(enabled: true, maxPendingMessages: 10)
        let seen = await Task.detached { config.maxPendingMessages }.value
        XCTAssertEqual(seen, 10)
    }
}
