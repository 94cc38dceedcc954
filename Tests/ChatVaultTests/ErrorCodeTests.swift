import XCTest
import ChatVault
import VaultStore

/// Pins the reference's "Error codes" table, the enums table, and the `CometChat.` spellings.
final class ErrorCodeTests: XCTestCase {

    /// The reference's "Error codes" table, copied by hand in its order.
    private let referenceCodes = [
        "ERROR_INTERNET_UNAVAILABLE",
        "ERROR_REQUEST_IN_PROGRESS",
        "ERROR_USER_NOT_LOGGED_IN",
        "ERROR_OFFLINE_SYNC_IN_PROGRESS",
        "ERROR_OFFLINE_SYNC_COOLDOWN",
        "ERROR_OFFLINE_DISABLED",
        "ERROR_OFFLINE_MESSAGE_DISCARDED",
        "ERROR_OFFLINE_MESSAGE_IN_FLIGHT",
        "ERROR_OFFLINE_MESSAGE_NOT_FOUND",
        "ERROR_OFFLINE_MESSAGE_PERSIST_FAILED",
        "ERROR_QUEUE_FULL",
        "ERROR_QUEUE_OVERFLOW",
        "ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW",
        "ERROR_OFFLINE_MEDIA_COPY_FAILED",
        "ERROR_OFFLINE_MEDIA_NOT_CACHED",
        "ERROR_OFFLINE_MEDIA_UNRESOLVABLE",
    ]

    // MARK: CometChatConstants.Errors

    func testEveryErrorConstantEqualsItsOwnName() {
        typealias E = CometChatConstants.Errors
        let pairs: [(String, String)] = [
            (E.ERROR_INTERNET_UNAVAILABLE, "ERROR_INTERNET_UNAVAILABLE"),
            (E.ERROR_REQUEST_IN_PROGRESS, "ERROR_REQUEST_IN_PROGRESS"),
            (E.ERROR_USER_NOT_LOGGED_IN, "ERROR_USER_NOT_LOGGED_IN"),
            (E.ERROR_OFFLINE_SYNC_IN_PROGRESS, "ERROR_OFFLINE_SYNC_IN_PROGRESS"),
            (E.ERROR_OFFLINE_SYNC_COOLDOWN, "ERROR_OFFLINE_SYNC_COOLDOWN"),
            (E.ERROR_OFFLINE_DISABLED, "ERROR_OFFLINE_DISABLED"),
            (E.ERROR_OFFLINE_MESSAGE_DISCARDED, "ERROR_OFFLINE_MESSAGE_DISCARDED"),
            (E.ERROR_OFFLINE_MESSAGE_IN_FLIGHT, "ERROR_OFFLINE_MESSAGE_IN_FLIGHT"),
            (E.ERROR_OFFLINE_MESSAGE_NOT_FOUND, "ERROR_OFFLINE_MESSAGE_NOT_FOUND"),
            (E.ERROR_OFFLINE_MESSAGE_PERSIST_FAILED, "ERROR_OFFLINE_MESSAGE_PERSIST_FAILED"),
            (E.ERROR_QUEUE_FULL, "ERROR_QUEUE_FULL"),
            (E.ERROR_QUEUE_OVERFLOW, "ERROR_QUEUE_OVERFLOW"),
            (E.ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW, "ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW"),
            (E.ERROR_OFFLINE_MEDIA_COPY_FAILED, "ERROR_OFFLINE_MEDIA_COPY_FAILED"),
            (E.ERROR_OFFLINE_MEDIA_NOT_CACHED, "ERROR_OFFLINE_MEDIA_NOT_CACHED"),
            (E.ERROR_OFFLINE_MEDIA_UNRESOLVABLE, "ERROR_OFFLINE_MEDIA_UNRESOLVABLE"),
        ]
        XCTAssertEqual(pairs.count, referenceCodes.count, "one constant per row of the table")
        for (constant, name) in pairs {
            XCTAssertEqual(constant, name)
        }
        XCTAssertEqual(Set(pairs.map(\.0)), Set(referenceCodes))
    }

    func testAllCodesIsExactlyTheReferenceTableInOrderWithoutDuplicates() {
        XCTAssertEqual(CometChatConstants.Errors.allCodes, referenceCodes)
        XCTAssertEqual(Set(CometChatConstants.Errors.allCodes).count, CometChatConstants.Errors.allCodes.count)
    }

    func testMediaDownloadFailedIsSeparateFromTheErrorsConstants() {
        XCTAssertEqual(MediaDownloadErrors.ERROR_MEDIA_DOWNLOAD_FAILED, "ERROR_MEDIA_DOWNLOAD_FAILED")
        XCTAssertFalse(CometChatConstants.Errors.allCodes.contains("ERROR_MEDIA_DOWNLOAD_FAILED"))
        XCTAssertEqual(OfflineErrorCode.mediaDownloadFailed.rawValue, MediaDownloadErrors.ERROR_MEDIA_DOWNLOAD_FAILED)
        XCTAssertFalse(OfflineErrorCode.mediaDownloadFailed.isCometChatConstantsError)
    }

    // MARK: OfflineErrorCode

    func testOfflineErrorCodeCoversTheTableThenTheMediaDownloadAndInvalidResponseCodes() {
        let constants = OfflineErrorCode.allCases.filter(\.isCometChatConstantsError).map(\.rawValue)
        XCTAssertEqual(constants, referenceCodes)
        XCTAssertEqual(Set(OfflineErrorCode.allCases.map(\.rawValue)),
                       Set(referenceCodes + ["ERROR_MEDIA_DOWNLOAD_FAILED", "ERROR_INVALID_SERVER_RESPONSE", "ERROR_INVALID_MESSAGE",
                                               "ERROR_REQUEST_TIMEOUT", "ERROR_OFFLINE_MEDIA_VIEW_UNAVAILABLE", "ERROR_INVALID_SEARCH_QUERY"]))
        XCTAssertEqual(OfflineErrorCode.allCases.count, 22)
        XCTAssertFalse(OfflineErrorCode.invalidSearchQuery.isCometChatConstantsError, "ChatVault's own code")
        XCTAssertFalse(OfflineErrorCode.offlineMediaViewUnavailable.isCometChatConstantsError, "ChatVault's own code")
        XCTAssertFalse(OfflineErrorCode.invalidServerResponse.isCometChatConstantsError, "ChatVault's own code")
        XCTAssertFalse(OfflineErrorCode.invalidMessage.isCometChatConstantsError, "ChatVault's own code")
    }

    func testOfflineErrorCodeRawValuesMatchTheConstants() {
        let pairs: [(OfflineErrorCode, String)] = [
            (.internetUnavailable, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE),
            (.requestInProgress, CometChatConstants.Errors.ERROR_REQUEST_IN_PROGRESS),
            (.userNotLoggedIn, CometChatConstants.Errors.ERROR_USER_NOT_LOGGED_IN),
            (.offlineSyncInProgress, CometChatConstants.Errors.ERROR_OFFLINE_SYNC_IN_PROGRESS),
            (.offlineSyncCooldown, CometChatConstants.Errors.ERROR_OFFLINE_SYNC_COOLDOWN),
            (.offlineDisabled, CometChatConstants.Errors.ERROR_OFFLINE_DISABLED),
            (.offlineMessageDiscarded, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_DISCARDED),
            (.offlineMessageInFlight, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_IN_FLIGHT),
            (.offlineMessageNotFound, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_NOT_FOUND),
            (.offlineMessagePersistFailed, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_PERSIST_FAILED),
            (.queueFull, CometChatConstants.Errors.ERROR_QUEUE_FULL),
            (.queueOverflow, CometChatConstants.Errors.ERROR_QUEUE_OVERFLOW),
            (.offlineMediaByteOverflow, CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW),
            (.offlineMediaCopyFailed, CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_COPY_FAILED),
            (.offlineMediaNotCached, CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_NOT_CACHED),
            (.offlineMediaUnresolvable, CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_UNRESOLVABLE),
        ]
        XCTAssertEqual(pairs.count, 16)
        for (code, constant) in pairs {
            XCTAssertEqual(code.rawValue, constant)
            XCTAssertEqual(OfflineErrorCode(rawValue: constant), code)
            XCTAssertTrue(code.isCometChatConstantsError)
        }
    }

    // MARK: CometChatException

    func testExceptionDescriptionContainsTheCodeAndTheDescription() {
        let exception = CometChatException(.queueFull, "The outbox is full.")
        XCTAssertEqual(exception.errorCode, "ERROR_QUEUE_FULL")
        XCTAssertEqual(exception.errorDescription, "The outbox is full.")
        XCTAssertNil(exception.details)
        XCTAssertTrue(exception.description.contains("ERROR_QUEUE_FULL"))
        XCTAssertTrue(exception.description.contains("The outbox is full."))
        XCTAssertTrue(String(describing: exception).contains("ERROR_QUEUE_FULL"))
        XCTAssertTrue("\(exception)".contains("ERROR_QUEUE_FULL"))
    }

    func testExceptionDetailsAppearInTheDescriptionWhenGiven() {
        let exception = CometChatException(.offlineSyncCooldown, "Sync ran recently.", details: "retry in 30 s")
        XCTAssertEqual(exception.details, "retry in 30 s")
        XCTAssertTrue(exception.description.contains("ERROR_OFFLINE_SYNC_COOLDOWN"))
        XCTAssertTrue(exception.description.contains("retry in 30 s"))
    }

    func testExceptionTypedCodeRoundTripsAndUnknownCodesSurvive() {
        XCTAssertEqual(CometChatException(.offlineDisabled, "Offline is off.").code, .offlineDisabled)
        let foreign = CometChatException(errorCode: "ERR_BACKEND_5XX", errorDescription: "Server error.")
        XCTAssertNil(foreign.code)
        XCTAssertEqual(foreign.errorCode, "ERR_BACKEND_5XX")
        XCTAssertTrue(foreign.description.contains("ERR_BACKEND_5XX"))
    }

    func testExceptionEqualityComparesCodeDescriptionAndDetails() {
        let a = CometChatException(.queueFull, "Full.")
        XCTAssertEqual(a, CometChatException(errorCode: "ERROR_QUEUE_FULL", errorDescription: "Full."))
        XCTAssertNotEqual(a, CometChatException(.queueOverflow, "Full."))
        XCTAssertNotEqual(a, CometChatException(.queueFull, "Other."))
        XCTAssertNotEqual(a, CometChatException(.queueFull, "Full.", details: "x"))
    }

    func testExceptionIsThrowableAndCatchableAsItself() {
        func refuse() throws { throw CometChatException(.offlineMessageNotFound, "No such pending message.") }
        XCTAssertThrowsError(try refuse()) { error in
            XCTAssertEqual((error as? CometChatException)?.code, .offlineMessageNotFound)
        }
    }

    // MARK: Enums of the reference

    func testEnumCasesAndRawValuesAreExactlyTheReferenceOnes() {
        XCTAssertEqual(MediaCachingMode.allCases.map(\.rawValue), ["auto", "off"])
        XCTAssertEqual(PendingMessageOverflowPolicy.allCases.map(\.rawValue), ["dropOldest", "rejectNewest"])
        XCTAssertEqual(EncryptionFailureBehavior.allCases.map(\.rawValue), ["onlineOnly", "plaintextFallback"])
        XCTAssertEqual(MessageStatus.allCases.map(\.rawValue),
                       ["pending", "sending", "sent", "delivered", "read", "failed"])
        XCTAssertEqual(MessageSource.allCases.map(\.rawValue), ["realtime", "sync"])
        XCTAssertEqual(MessageFailureReason.allCases.map(\.rawValue),
                       ["transient", "permanent", "queueOverflow", "queueFull", "byteOverflow", "discarded"])
        XCTAssertEqual(SyncOutcome.allCases.map(\.rawValue), ["caughtUp", "partial"])
        XCTAssertEqual(SyncState.allCases.map(\.rawValue), ["idle", "syncing"])
        XCTAssertEqual(OfflineCacheResetReason.allCases.map(\.rawValue),
                       ["keyLost", "wrongKey", "corrupted", "escalated", "encryptionChanged"])
        XCTAssertEqual(UploadFileState.allCases.map(\.rawValue),
                       ["queued", "uploading", "uploaded", "failed", "rejected"])
    }

    func testRawValuesAreTheCaseNames() {
        XCTAssertEqual(MessageStatus.delivered.rawValue, "\(MessageStatus.delivered)")
        XCTAssertEqual(MessageFailureReason.queueOverflow.rawValue, "\(MessageFailureReason.queueOverflow)")
        XCTAssertEqual(PendingMessageOverflowPolicy.rejectNewest.rawValue, "\(PendingMessageOverflowPolicy.rejectNewest)")
        XCTAssertEqual(SyncOutcome.caughtUp.rawValue, "\(SyncOutcome.caughtUp)")
        XCTAssertEqual(UploadFileState.rejected.rawValue, "\(UploadFileState.rejected)")
    }

    func testEncryptionTierConstantsAreTheStatusStrings() {
        XCTAssertEqual(OfflineEncryptionTier.SQLCIPHER, "SQLCIPHER")
        XCTAssertEqual(OfflineEncryptionTier.NONE, "NONE")
        XCTAssertEqual(OfflineEncryptionTier.KEYSTORE, "KEYSTORE")
        XCTAssertEqual(OfflineEncryptionTier.SOFTWARE, "SOFTWARE")
        XCTAssertEqual(CometChat.OfflineEncryptionTier.SQLCIPHER, "SQLCIPHER")
    }

    // MARK: The CometChat namespace

    func testSeedSpellingsNameTheSameTypes() {
        XCTAssertTrue(CometChat.MediaCachingMode.self == MediaCachingMode.self)
        XCTAssertTrue(CometChat.PendingMessageOverflowPolicy.self == PendingMessageOverflowPolicy.self)
        XCTAssertTrue(CometChat.EncryptionFailureBehavior.self == VaultStore.EncryptionFailureBehavior.self)
        XCTAssertTrue(CometChat.MessageStatus.self == MessageStatus.self)
        XCTAssertTrue(CometChat.MessageSource.self == MessageSource.self)
        XCTAssertTrue(CometChat.MessageFailureReason.self == MessageFailureReason.self)
        XCTAssertTrue(CometChat.SyncOutcome.self == SyncOutcome.self)
        XCTAssertTrue(CometChat.SyncState.self == SyncState.self)
        XCTAssertTrue(CometChat.OfflineCacheResetReason.self == VaultStore.OfflineCacheResetReason.self)
        XCTAssertTrue(CometChat.OfflineEncryptionTier.self == OfflineEncryptionTier.self)
        XCTAssertTrue(ChatVault.EncryptionFailureBehavior.self == VaultStore.EncryptionFailureBehavior.self)
        XCTAssertTrue(ChatVault.OfflineCacheResetReason.self == VaultStore.OfflineCacheResetReason.self)

        // The seed's own spellings, used as a caller would.
        let status: CometChat.MessageStatus = .pending
        let reason: CometChat.OfflineCacheResetReason = .encryptionChanged
        let config = OfflineConfig.Builder()
            .setMediaCaching(CometChat.MediaCachingMode.off)
            .setPendingQueueOverflowPolicy(CometChat.PendingMessageOverflowPolicy.dropOldest)
            .setEncryptionFailureBehavior(CometChat.EncryptionFailureBehavior.plaintextFallback)
            .build()
        XCTAssertEqual(status, .pending)
        XCTAssertEqual(reason.rawValue, "encryptionChanged")
        XCTAssertEqual(config.mediaCaching, .off)
        XCTAssertEqual(config.pendingQueueOverflowPolicy, .dropOldest)
        XCTAssertEqual(config.encryptionFailureBehavior, .plaintextFallback)
    }

    func testPendingCountUnknownIsMinusOneAndMatchesTheStorageLayer() {
        XCTAssertEqual(CometChat.offlinePendingCountUnknown, -1)
        XCTAssertEqual(CometChat.offlinePendingCountUnknown, VaultStore.offlinePendingCountUnknown)
    }
}
