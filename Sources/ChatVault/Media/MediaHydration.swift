import Foundation
import Synchronization
import VaultStore

/// Hydration: `localPath` set on the attachments whose bytes are cached.
extension MediaCache {
    // MARK: - Hydration

    /// Sets `localPath` on every attachment of `messages` whose bytes are cached (each attachment
    /// on its own). Does not refresh recency.
    package func hydrate(_ messages: [BaseMessage]) {
        var attachments: [(String, Attachment)] = []
        for case let m as MediaMessage in messages {
            for attachment in Self.attachments(of: m) {
                if let key = MediaURL.key(attachment.fileUrl) { attachments.append((key, attachment)) }
            }
        }
        guard !attachments.isEmpty, let (_, cache) = current() else { return }
        let rows = (try? cache.reader.sync { db in try MediaRows.rows(Set(attachments.map(\.0)), in: db) }) ?? [:]
        var paths: [String: String?] = [:]
        for (key, attachment) in attachments {
            guard let row = rows[key] else { continue }
            if paths[key] == nil {
                switch openable(row, in: cache) {
                case .path(let path): paths[key] = .some(path)
                case .damaged:
                    forget(key, name: row.name, in: cache)
                    paths[key] = .some(nil)
                case .noView: paths[key] = .some(nil)
                }
            }
            if let path = paths[key] ?? nil { attachment.localPath = path }
        }
    }

    /// `hydrate` for items of any type a read delivers: messages, a conversation's last
    /// message, a thread's parent and last reply.
    func hydrateItems<Item>(_ items: [Item]) {
        var messages: [BaseMessage] = []
        for item in items {
            if let m = item as? BaseMessage {
                messages.append(m)
            } else if let c = item as? Conversation, let m = c.lastMessage {
                messages.append(m)
            } else if let t = item as? MessageThread {
                messages.append(t.parentMessage)
                if let reply = t.lastReply { messages.append(reply) }
            }
        }
        hydrate(messages)
    }
}
