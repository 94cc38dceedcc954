import Foundation
import Synchronization
import VaultStore

/// Upload batches (`UploadFileRequest`): admitting files, the pumps that upload them, retries,
/// removals and ends, reads and reports, the lifecycle hooks. The batches themselves are `kv` rows
/// in the cache (`UploadBatchRows`); this engine holds the pumps, the watchers and the queue that
/// orders structural changes, with what it works with (the backend, the media cache for the copies'
/// encryption) and the vault's session to find the open cache.
final class UploadEngine: Sendable {
    /// Someone waiting for files to settle: an `upload` call or a `retryAttachment`.
    struct Watcher: Sendable {
        let batchId: String
        let fileIds: [String]
        let onItem: @Sendable (UploadFileItemStatus) -> Void
        let onDone: @Sendable ([UploadFileItemStatus]) -> Void
        let onError: @Sendable (CometChatException) -> Void
    }

    struct State {
        /// Batches being uploaded now (one pump each), and those to go over again when done.
        var pumping: Set<String> = []
        var again: Set<String> = []
        var watchers: [Int: Watcher] = [:]
        var nextWatcher = 0
        /// Bumped by every logout and login: an older session's pumps stop touching this state.
        var session = 0
        /// The open cache whose batches were looked over for uploads a stop interrupted.
        var fixedUp: ObjectIdentifier?
        /// Files added in this session (the others are restored).
        var addedHere: Set<String> = []
    }

    let state = Mutex(State())
    /// A batch's structure (adding files, removing them, ending it) changes one call at a time,
    /// in call order, so copies are never written into a folder being deleted.
    let admission = DispatchQueue(label: "chatvault.uploads.admission")

    let backend: any ChatBackend
    let settings: VaultSettings
    let config: OfflineConfig
    let wireLimits: WireLimits
    let media: MediaCache
    /// The vault's session: the engine's state and the open cache.
    private let session: VaultSession

    init(backend: any ChatBackend, settings: VaultSettings, config: OfflineConfig, wireLimits: WireLimits, media: MediaCache,
         session: VaultSession) {
        self.backend = backend
        self.settings = settings
        self.config = config
        self.wireLimits = wireLimits
        self.media = media
        self.session = session
    }

    var openCache: VaultCache? { session.openCache }
    var vaultState: OfflineState { session.offlineState }
}
