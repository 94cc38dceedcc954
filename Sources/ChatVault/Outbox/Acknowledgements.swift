/// Checking what the server answers to a send or an upload, before anything of it is kept: the
/// one place the outbox, the direct sends and upload batches share.
enum Acknowledgements {
    static let invalidUpload = CometChatException(.invalidServerResponse, "The server's answer to an upload was refused.")
    static let otherKind = CometChatException(.invalidServerResponse, "The server acknowledged a different kind of message.")

    /// An upload's answer, if it is a valid attachment.
    static func attachment(_ answer: JSONValue, limits: WireLimits) throws(CometChatException) -> JSONValue {
        guard (try? WireDecoder(limits: limits).attachment(answer, path: "attachment")) != nil else { throw invalidUpload }
        return answer
    }

    /// A send's acknowledgement decoded, if it is valid and of the kind that was sent.
    static func message(_ ack: JSONValue, kind: OutboxKind, limits: WireLimits) throws(CometChatException) -> BaseMessage {
        let message: BaseMessage
        do {
            message = try WireDecoder(limits: limits).message(ack)
        } catch {
            throw CometChatException(.invalidServerResponse, "The server's acknowledgement was refused.", details: String(describing: error))
        }
        guard kind.matches(message) else { throw otherKind }
        return message
    }
}
