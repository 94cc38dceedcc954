import Foundation
import Synchronization
import VaultStore

/// Background (`.auto`) downloads: the queue of attachments whose bytes are not cached, pumped a
/// few at a time, each outcome reported to the media listeners.
extension MediaCache {
    // MARK: - Background downloads (.auto)

    /// Queues the attachments of `messages` whose bytes are not cached (`.auto` only, on the live
    /// paths: a realtime message, a read's server phase).
    func autoDownload(_ messages: [BaseMessage]) {
        guard config.mediaCaching == .auto, let (_, cache) = current() else { return }
        var items: [MediaCache.BackgroundItem] = []
        for case let m as MediaMessage in messages {
            let messageId = m.id > 0 ? String(m.id) : (m.muid.isEmpty ? "" : m.muid)
            for attachment in Self.attachments(of: m) {
                guard let key = MediaURL.key(attachment.fileUrl) else { continue }
                items.append(MediaCache.BackgroundItem(key: key, url: attachment.fileUrl, messageServerId: m.id, messageId: messageId,
                                                      attachment: attachment))
            }
        }
        guard !items.isEmpty else { return }
        let keys = Set(items.map(\.key))
        let cached = (try? cache.reader.sync { db in try MediaRows.rows(keys, in: db) }) ?? [:]
        state.withLock { s in
            for item in items where cached[item.key] == nil && !s.queuedKeys.contains(item.key) {
                s.queued.append(item)
                s.queuedKeys.insert(item.key)
            }
        }
        pumpBackground()
    }

    static func attachments(of m: MediaMessage) -> [Attachment] {
        m.attachments.isEmpty ? [m.attachment].compactMap { $0 } : m.attachments
    }

    private func pumpBackground() {
        let limit = min(max(settings.media.backgroundConcurrency, 1), 8)
        while let item = state.withLock({ s -> MediaCache.BackgroundItem? in
            guard s.running < limit, !s.queued.isEmpty else { return nil }
            s.running += 1
            return s.queued.removeFirst()
        }) {
            Task {
                let result = await self.resolve(url: item.url, messageServerId: item.messageServerId, touch: false, progress: nil)
                self.state.withLock { _ = $0.queuedKeys.remove(item.key) }
                self.reportBackground(item, result)
                let waiters = self.state.withLock { s -> [CheckedContinuation<Void, Never>] in
                    s.running -= 1
                    guard s.running == 0, s.queued.isEmpty else { return [] }
                    defer { s.idleWaiters.removeAll() }
                    return s.idleWaiters
                }
                self.pumpBackground()
                for waiter in waiters { waiter.resume() }
            }
        }
    }

    private func reportBackground(_ item: MediaCache.BackgroundItem, _ result: Result<String, CometChatException>) {
        let listeners = listeners.live()
        let streams = streams
        let event: MediaDownloadEvent
        switch result {
        case .success(let path):
            item.attachment.localPath = path
            event = .downloaded(messageId: item.messageId, url: item.key, localPath: path)
        case .failure(let error):
            // Offline or logged out: nothing failed, the bytes come on a later live path.
            if error.errorCode == OfflineErrorCode.offlineDisabled.rawValue { return }
            event = .failed(attachment: item.attachment,
                            error: CometChatException(.mediaDownloadFailed, "A background media download failed.", details: error.errorCode))
        }
        settings.callbackExecutor.execute {
            for listener in listeners {
                switch event {
                case .downloaded(let id, let url, let path): listener.onMediaDownloaded(id, url, path)
                case .failed(let attachment, let error): listener.onMediaDownloadFailed(attachment, error)
                }
            }
            streams.yield(event)
        }
    }
}
