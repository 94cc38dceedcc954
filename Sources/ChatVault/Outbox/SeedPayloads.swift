/// Row payloads in the engine's own formats, for tools that fill a cache as an app would
/// (`chatvault seed`): an outbox row the engine can list and send, a message row it can read.
package enum SeedPayloads {
    /// An unsent text message, as the outbox stores it.
    package static func outbox(text: String, to receiverUid: String, from senderUid: String) -> [UInt8] {
        let message: JSONValue = ["receiver": .string(receiverUid), "receiverType": "user", "category": "message", "type": "text",
                                  "data": ["text": .string(text)]]
        return BinaryJSON.encode(["message": message, "sender": .string(senderUid), "files": []])
    }

    /// A received or sent text message, as the cache stores it (the server's wire form).
    package static func message(id: Int64, conversationId: String, from senderUid: String, to receiverUid: String,
                                sentAt: Int64, text: String) -> [UInt8] {
        BinaryJSON.encode(["id": .int(id), "conversationId": .string(conversationId), "senderUid": .string(senderUid),
                           "receiver": .string(receiverUid), "receiverType": "user", "category": "message", "type": "text",
                           "sentAt": .int(sentAt), "data": ["text": .string(text)]])
    }
}
