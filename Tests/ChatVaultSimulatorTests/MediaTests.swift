import ChatVault
import ChatVaultSimulator
import Foundation
import XCTest

/// Media downloads, expiring URLs and re-signing.
final class MediaTests: SimulatorTestCase {
    let url = "https://media.test/cat.jpg"
    let bytes = Data([0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3])

    func postCat() throws -> Int {
        try simulator.postMedia(.image, [SimulatedAttachment(name: "cat.jpg", mimeType: "image/jpeg", url: url, size: bytes.count)],
                                from: "alice", to: .user("bob"))
    }

    func testDownloadReturnsTheRegisteredBytes() async throws {
        simulator.registerMedia(url: url, bytes: bytes, mimeType: "image/jpeg")
        let bob = simulator.client(for: "bob")
        let download = try await bob.downloadMedia(url: url)
        XCTAssertEqual(download.mimeType, "image/jpeg")
        XCTAssertEqual(download.contentLength, Int64(bytes.count))
        await assertEqual(try await download.allBytes(), bytes)
        let missing = await backendError(try await bob.downloadMedia(url: "https://media.test/none"))
        XCTAssertEqual(statusAndCode(missing), "404 ERR_NOT_FOUND")
    }

    func testAnExpiredURLAnswers403UntilReSigned() async throws {
        let id = try postCat()
        simulator.registerMedia(url: url, bytes: bytes, mimeType: "image/jpeg", expiresAt: clock.now + 60)
        let bob = simulator.client(for: "bob")
        await assertEqual(try await bob.downloadMedia(url: url).allBytes(), bytes)
        clock.advance(by: 60)
        let expired = await backendError(try await bob.downloadMedia(url: url))
        XCTAssertEqual(statusAndCode(expired), "403 ERR_URL_EXPIRED")
        XCTAssertEqual(expired?.isTransient, false)

        let fresh = try await bob.resignMediaURL(url, messageId: id)
        XCTAssertNotEqual(fresh, url)
        await assertEqual(try await bob.downloadMedia(url: fresh).allBytes(), bytes)
        let stillExpired = await backendError(try await bob.downloadMedia(url: url))
        XCTAssertEqual(statusAndCode(stillExpired), "403 ERR_URL_EXPIRED")
    }

    func testReSignedURLsExpireTooAndCanBeReSignedAgain() async throws {
        let id = try postCat()
        simulator.registerMedia(url: url, bytes: bytes)
        simulator.expireMedia(url: url)
        simulator.signedURLLifetime = 10
        let bob = simulator.client(for: "bob")
        let first = try await bob.resignMediaURL(url, messageId: id)
        clock.advance(by: 10)
        await assertEqual(statusAndCode(await backendError(try await bob.downloadMedia(url: first))), "403 ERR_URL_EXPIRED")
        let second = try await bob.resignMediaURL(first, messageId: id)
        XCTAssertNotEqual(second, first)
        await assertEqual(try await bob.downloadMedia(url: second).allBytes(), bytes)
    }

    func testReSigningChecksTheMessageAndItsAttachment() async throws {
        let id = try postCat()
        let text = try simulator.postText("no media", from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob"), carol = simulator.client(for: "carol")
        await assertEqual(statusAndCode(await backendError(try await bob.resignMediaURL(url, messageId: text))), "404 ERR_NOT_FOUND")
        await assertEqual(statusAndCode(await backendError(try await bob.resignMediaURL("https://other", messageId: id))), "404 ERR_NOT_FOUND")
        await assertEqual(statusAndCode(await backendError(try await carol.resignMediaURL(url, messageId: id))), "404 ERR_NOT_FOUND",
                       "carol cannot see the message")
    }
}
