import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore

/// Media files at rest (issue 9): the encrypted streaming format round-trips at every size that
/// matters; tampering of every kind is `.damaged` from all four readers, never a crash; no
/// plaintext reaches the disk; files appear atomically, 0600 in 0700 directories; decrypted views
/// only go to a safe `$XDG_RUNTIME_DIR`. Real files in a fresh temporary directory per test.
final class MediaFileCipherTests: XCTestCase {
    private let chunk = MediaFileFormat.chunkSize
    private let header = MediaFileFormat.headerCount
    private let tag = MediaFileFormat.tagCount
    private var sealedChunk: Int { chunk + tag }

    // MARK: - Round trips

    func testRoundTripsAtChunkBoundarySizesEncryptedAndPlain() async throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        for size in [0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk + 5] {
            for key in [key, nil] {
                let label = "size \(size), \(key == nil ? "plain" : "encrypted")"
                let plain = pattern(size, seed: UInt8(truncatingIfNeeded: size))
                let path = "\(scratch.path)/file-\(size)-\(key == nil ? "p" : "e")"
                let onDisk = try write(plain, to: path, key: key)
                let expectedSize = key == nil ? size : header + size + tag * max(1, (size + chunk - 1) / chunk)
                XCTAssertEqual(onDisk, Int64(expectedSize), label)
                XCTAssertEqual(fileSize(path), expectedSize, label)

                XCTAssertEqual(try MediaFileReader.read(path, key: key, maxBytes: .max), plain, label)
                XCTAssertEqual(try MediaFileReader.verify(path, key: key), Int64(size), label)
                let out = "\(scratch.path)/out-\(size)-\(key == nil ? "p" : "e")"
                try MediaFileReader.decrypt(path, key: key, to: out)
                XCTAssertEqual(FileManager.default.contents(atPath: out), plain, label)
                XCTAssertEqual(mode(out), 0o600, label)
                let pieces = try await collect(MediaFileReader.chunks(path, key: key))
                XCTAssertEqual(Data(pieces.joined()), plain, label)
                XCTAssertTrue(pieces.allSatisfy { $0.count <= chunk }, label)
            }
        }
    }

    func testFiveMiBStreamedInOddSizedAppendsEncryptedAndPlain() async throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let size = 5 * 1024 * 1024 + 12_345
        let plain = pattern(size, seed: 77)
        let pieceSizes = [1, 4093, chunk + 1, 100_003, 7, chunk - 1, 2 * chunk]
        for key in [key, nil] {
            let path = "\(scratch.path)/big-\(key == nil ? "p" : "e")"
            let writer = try MediaFileWriter(directory: scratch.path, key: key)
            var offset = 0
            var turn = 0
            while offset < size {
                let end = min(size, offset + pieceSizes[turn % pieceSizes.count])
                try writer.append(plain.subdata(in: offset..<end))
                offset = end
                turn += 1
                XCTAssertEqual(writer.plaintextBytes, Int64(offset))
            }
            try writer.commit(as: (path as NSString).lastPathComponent)
            XCTAssertEqual(try MediaFileReader.verify(path, key: key), Int64(size))
            XCTAssertEqual(try MediaFileReader.read(path, key: key, maxBytes: Int64(size)), plain)
            var streamed = Data()
            for try await piece in MediaFileReader.chunks(path, key: key) {
                XCTAssertLessThanOrEqual(piece.count, chunk)
                streamed.append(piece)
            }
            XCTAssertEqual(streamed, plain)
            try MediaFileReader.decrypt(path, key: key, to: "\(scratch.path)/big-out")
            XCTAssertEqual(FileManager.default.contents(atPath: "\(scratch.path)/big-out"), plain)
        }
    }

    // MARK: - No plaintext on disk

    func testCiphertextContainsNoPlaintextMarkerWhileWritingOrAfter() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let marker = "MEDIA-PLAINTEXT-CANARY-5e1d"
        let plain = Data(String(repeating: "\(marker) some attachment text; ", count: 8000).utf8)
        XCTAssertGreaterThan(plain.count, 3 * chunk)
        let writer = try MediaFileWriter(directory: scratch.path, key: key)
        try writer.append(plain)
        // Full chunks are already on disk in the temporary file.
        XCTAssertGreaterThan(directorySize(scratch.path), 2 * chunk)
        XCTAssertEqual(filesContaining(marker, under: scratch.path), [])
        try writer.commit(as: "secret")
        XCTAssertEqual(filesContaining(marker, under: scratch.path), [])
        XCTAssertEqual(try MediaFileReader.read("\(scratch.path)/secret", key: key, maxBytes: .max), plain)

        // Control: the same scan sees the marker in a plain media file.
        let control = try MediaFileWriter(directory: scratch.path, key: nil)
        try control.append(plain)
        try control.commit(as: "plain")
        XCTAssertEqual(filesContaining(marker, under: scratch.path), ["plain"])
    }

    // MARK: - Tampering

    func testTamperingOfEveryKindIsDamagedFromEveryReader() async throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let size = 3 * chunk + 5
        let original = try Array(fileBytes(of: pattern(size, seed: 3), key: key, in: scratch.path))
        let other = try Array(fileBytes(of: pattern(size, seed: 4), key: key, in: scratch.path))
        XCTAssertEqual(original.count, header + 4 * tag + size)
        let c0 = header, c1 = header + sealedChunk, c2 = header + 2 * sealedChunk, c3 = header + 3 * sealedChunk

        var cases: [(String, [UInt8])] = [
            ("truncated at a chunk boundary (last chunk gone)", Array(original[..<c3])),
            ("truncated at the first chunk boundary", Array(original[..<c1])),
            ("truncated mid-chunk", Array(original[..<(c1 + 100)])),
            ("truncated inside the last tag", Array(original[..<(original.count - 3)])),
            ("truncated to the header", Array(original[..<header])),
            ("truncated inside the header", Array(original[..<20])),
            ("one byte appended", original + [0]),
            ("a whole chunk appended", original + Array(original[c1..<c2])),
            ("chunks 0 and 1 swapped", Array(original[..<c0]) + Array(original[c1..<c2]) + Array(original[c0..<c1]) + Array(original[c2...])),
            ("chunk 1 from another file", Array(original[..<c1]) + Array(other[c1..<c2]) + Array(original[c2...])),
            ("the last chunk from another file", Array(original[..<c3]) + Array(other[c3...])),
            ("another file's header", Array(other[..<header]) + Array(original[header...])),
            ("a chunk dropped from the middle", Array(original[..<c1]) + Array(original[c2...])),
            ("empty file", []),
            ("garbage", (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }),
            ("garbage after a valid magic", Array("CVM1".utf8) + [UInt8](repeating: 0xAB, count: 500)),
        ]
        for (what, offset) in [("magic", 1), ("version", 4), ("algorithm", 5), ("reserved", 7), ("chunk size", 10),
                               ("chunk size high byte", 8), ("file id", 20), ("header tag", 35),
                               ("chunk 0 ciphertext", c0 + 5), ("chunk 0 tag", c1 - 1), ("chunk 2 ciphertext", c2 + chunk / 2),
                               ("chunk 2 tag", c3 - tag), ("last chunk ciphertext", c3 + 2), ("last chunk tag", original.count - 1)] {
            var flipped = original
            flipped[offset] ^= 0x04
            cases.append(("a bit flipped in the \(what)", flipped))
        }
        for (what, bytes) in cases {
            let path = "\(scratch.path)/tampered"
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)), what)
            try await assertDamagedEverywhere(path, key: key, what)
        }

        // A wrong key (or a file swapped in from another cache, whose key differs).
        let path = "\(scratch.path)/intact"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(original)))
        try await assertDamagedEverywhere(path, key: try MediaKey.generate(), "a wrong key")
        // Control: the untouched file reads.
        XCTAssertEqual(try MediaFileReader.verify(path, key: key), Int64(size))
    }

    func testEveryHeaderBitAndHundredsOfRandomFlipsAndCutsAreDamagedNeverATrap() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let original = try Array(fileBytes(of: pattern(2 * chunk + 77, seed: 6), key: key, in: scratch.path))
        let path = "\(scratch.path)/mutant"
        var mutants: [[UInt8]] = []
        for bit in 0..<(header * 8) {
            var bytes = original
            bytes[bit / 8] ^= UInt8(1) << UInt8(bit % 8)
            mutants.append(bytes)
        }
        var generator = SplitMix(seed: 0x6d63_7279_7074)
        for _ in 0..<300 {
            var bytes = original
            let at = Int(generator.next() % UInt64(bytes.count))
            bytes[at] ^= UInt8(truncatingIfNeeded: generator.next() % 255 + 1)
            mutants.append(bytes)
            mutants.append(Array(original[..<Int(generator.next() % UInt64(original.count))]))
        }
        for (n, bytes) in mutants.enumerated() {
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
            XCTAssertThrowsError(try MediaFileReader.verify(path, key: key), "mutant \(n)") { error in
                guard case .damaged = error as? MediaFileError else { return XCTFail("mutant \(n): \(error)") }
            }
        }
    }

    func testAFIFOOrADirectoryUnderTheNameIsAnErrorNotAHang() async throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let fifo = "\(scratch.path)/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertEqual(mkdir("\(scratch.path)/dir", 0o700), 0)
        for path in [fifo, "\(scratch.path)/dir"] {
            XCTAssertThrowsError(try MediaFileReader.verify(path, key: key)) { error in
                XCTAssertEqual(error as? MediaFileError, .io(operation: "media file is not a regular file", errno: EINVAL))
            }
            XCTAssertThrowsError(try MediaFileReader.read(path, key: nil, maxBytes: 10))
        }
        XCTAssertThrowsError(try MediaFileReader.verify("\(scratch.path)/missing", key: key)) { error in
            XCTAssertEqual(error as? MediaFileError, .io(operation: "open media file", errno: ENOENT))
        }
        do {
            _ = try await collect(MediaFileReader.chunks("\(scratch.path)/missing", key: key))
            XCTFail("no error")
        } catch {
            XCTAssertEqual(error as? MediaFileError, .io(operation: "open media file", errno: ENOENT))
        }
    }

    func testChunksYieldOnlyVerifiedChunksBeforeTheDamagedOne() async throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let plain = pattern(3 * chunk + 5, seed: 9)
        var bytes = try Array(fileBytes(of: plain, key: key, in: scratch.path))
        bytes[header + 2 * sealedChunk + 17] ^= 0x80
        let path = "\(scratch.path)/flipped"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        var yielded = Data()
        do {
            for try await piece in MediaFileReader.chunks(path, key: key) { yielded.append(piece) }
            XCTFail("the stream ended without an error")
        } catch let error as MediaFileError {
            XCTAssertEqual(error, .damaged("chunk 2 failed authentication"))
        }
        XCTAssertEqual(yielded, plain.prefix(2 * chunk))
    }

    func testDamageMessagesNameWhatFailedAndNeverCarryKeyOrContent() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let marker = "CONTENT-IN-ERROR-CANARY"
        var bytes = try Array(fileBytes(of: Data(String(repeating: marker, count: 10).utf8), key: key, in: scratch.path))
        bytes[header + 3] ^= 1
        let path = "\(scratch.path)/f"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        XCTAssertThrowsError(try MediaFileReader.verify(path, key: key)) { error in
            XCTAssertEqual(error as? MediaFileError, .damaged("chunk 0 (the last) failed authentication"))
            let text = "\(error) \(String(reflecting: error))"
            XCTAssertFalse(text.contains(marker))
            XCTAssertFalse(text.contains(hex(key.raw)))
        }
        XCTAssertThrowsError(try MediaFileReader.verify(path, key: try MediaKey.generate())) { error in
            XCTAssertEqual(error as? MediaFileError, .damaged("header failed authentication (a wrong key, or a damaged header)"))
        }
        // A plain file read as encrypted is not a media file.
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(String(repeating: marker, count: 10).utf8)))
        XCTAssertThrowsError(try MediaFileReader.read(path, key: key, maxBytes: .max)) { error in
            XCTAssertEqual(error as? MediaFileError, .damaged("no media file header (not an encrypted media file)"))
        }
    }

    // MARK: - Limits

    func testMaxBytesIsHonouredOnAppendAndOnRead() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        for key in [key, nil] {
            let name = key == nil ? "plain" : "sealed"
            let writer = try MediaFileWriter(directory: scratch.path, key: key, maxBytes: 100)
            try writer.append(pattern(60, seed: 1))
            XCTAssertThrowsError(try writer.append(pattern(41, seed: 2))) { error in
                XCTAssertEqual(error as? MediaFileError, .tooLarge(limit: 100))
            }
            XCTAssertEqual(writer.plaintextBytes, 60)
            try writer.append(pattern(40, seed: 2))
            XCTAssertThrowsError(try writer.append(Data([1]))) { error in
                XCTAssertEqual(error as? MediaFileError, .tooLarge(limit: 100))
            }
            try writer.commit(as: name)
            let path = "\(scratch.path)/\(name)"
            XCTAssertEqual(try MediaFileReader.read(path, key: key, maxBytes: 100), pattern(60, seed: 1) + pattern(40, seed: 2))
            XCTAssertThrowsError(try MediaFileReader.read(path, key: key, maxBytes: 99)) { error in
                XCTAssertEqual(error as? MediaFileError, .tooLarge(limit: 99))
            }
        }
        // A large encrypted file is refused from its length, before any chunk is decrypted.
        let big = try MediaFileWriter(directory: scratch.path, key: key)
        try big.append(pattern(3 * chunk, seed: 5))
        try big.commit(as: "big")
        XCTAssertThrowsError(try MediaFileReader.read("\(scratch.path)/big", key: key, maxBytes: Int64(3 * chunk - 1))) { error in
            XCTAssertEqual(error as? MediaFileError, .tooLarge(limit: Int64(3 * chunk - 1)))
        }
    }

    // MARK: - Atomic files

    func testAbortAndAnUncommittedWriterLeaveNoFile() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let writer = try MediaFileWriter(directory: scratch.path, key: key)
        try writer.append(pattern(2 * chunk + 3, seed: 1))
        XCTAssertEqual(entries(scratch.path).count, 1)
        writer.abort()
        XCTAssertEqual(entries(scratch.path), [])
        XCTAssertThrowsError(try writer.append(Data([1])))
        XCTAssertThrowsError(try writer.commit(as: "late"))
        XCTAssertEqual(entries(scratch.path), [])

        for key in [key, nil] {
            do {
                let dropped = try MediaFileWriter(directory: scratch.path, key: key)
                try dropped.append(pattern(chunk + 9, seed: 2))
                XCTAssertEqual(entries(scratch.path).count, 1)
            }
            XCTAssertEqual(entries(scratch.path), [], "an uncommitted writer that went away left a file")
        }
    }

    func testLeftoversOfAKilledWriterAreRemovedAndNothingElse() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        try write(pattern(100, seed: 1), to: "\(scratch.path)/kept", key: key)
        // What a writer killed mid-download leaves: its temporary file, named as a writer names it.
        let leftover = "\(scratch.path)/\(MediaFileIO.temporaryName())"
        XCTAssertTrue(FileManager.default.createFile(atPath: leftover, contents: Data([1, 2, 3])))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(scratch.path)/.cvm-notes.txt", contents: Data()))
        XCTAssertEqual(mkdir("\(scratch.path)/.cvm-dir.tmp", 0o700), 0)
        XCTAssertEqual(MediaFileWriter.removeLeftovers(in: scratch.path), 1)
        XCTAssertEqual(entries(scratch.path), [".cvm-dir.tmp", ".cvm-notes.txt", "kept"])
        XCTAssertEqual(MediaFileWriter.removeLeftovers(in: "\(scratch.path)/missing"), 0)
    }

    func testCommitIsAtomicAndASecondCommitOfTheNameReplacesIt() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let first = pattern(chunk + 10, seed: 1)
        let second = pattern(3 * chunk + 1, seed: 2)
        let path = "\(scratch.path)/att-1"

        let writer = try MediaFileWriter(directory: scratch.path, key: key)
        try writer.append(first.prefix(chunk + 1))
        // Mid-download: the final name does not exist yet; only the temporary file does.
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        XCTAssertEqual(entries(scratch.path).count, 1)
        XCTAssertTrue(entries(scratch.path)[0].hasPrefix(".cvm-"))
        try writer.append(first.suffix(from: chunk + 1))
        try writer.commit(as: "att-1")
        XCTAssertEqual(entries(scratch.path), ["att-1"])
        XCTAssertEqual(try MediaFileReader.read(path, key: key, maxBytes: .max), first)

        // A second download of the same name: the old file stays whole until the new one replaces it.
        let replacing = try MediaFileWriter(directory: scratch.path, key: key)
        try replacing.append(second.prefix(2 * chunk + 7))
        XCTAssertEqual(try MediaFileReader.read(path, key: key, maxBytes: .max), first)
        try replacing.append(second.suffix(from: 2 * chunk + 7))
        XCTAssertEqual(try MediaFileReader.read(path, key: key, maxBytes: .max), first)
        try replacing.commit(as: "att-1")
        XCTAssertEqual(try MediaFileReader.read(path, key: key, maxBytes: .max), second)
        XCTAssertEqual(entries(scratch.path), ["att-1"])
        XCTAssertThrowsError(try replacing.commit(as: "att-2"), "a writer commits once")

        // A failed download aborted: the committed file is untouched.
        let failing = try MediaFileWriter(directory: scratch.path, key: key)
        try failing.append(pattern(chunk * 2, seed: 3))
        failing.abort()
        XCTAssertEqual(try MediaFileReader.read(path, key: key, maxBytes: .max), second)
        XCTAssertEqual(entries(scratch.path), ["att-1"])

        // Names are one plain component.
        for bad in ["", ".", "..", "a/b", "../escape"] {
            let w = try MediaFileWriter(directory: scratch.path, key: key)
            XCTAssertThrowsError(try w.commit(as: bad)) { error in
                XCTAssertEqual(error as? MediaFileError, .io(operation: "commit: not a plain file name", errno: EINVAL), bad)
            }
            w.abort()
        }
        XCTAssertEqual(entries(scratch.path), ["att-1"])
    }

    func testDecryptOfADamagedFileLeavesNothingAtTheDestination() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        var bytes = try Array(fileBytes(of: pattern(3 * chunk, seed: 1), key: key, in: scratch.path))
        bytes[header + 2 * sealedChunk + 1] ^= 1
        let views = "\(scratch.path)/views"
        XCTAssertEqual(mkdir(views, 0o700), 0)
        let path = "\(scratch.path)/damaged"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        XCTAssertThrowsError(try MediaFileReader.decrypt(path, key: key, to: "\(views)/out"))
        XCTAssertEqual(entries(views), [], "the partly decrypted temporary file was left behind")
    }

    // MARK: - Permissions

    func testFilesAre0600AndCreatedDirectories0700() throws {
        let scratch = TemporaryDirectory()
        let key = try MediaKey.generate()
        let directory = "\(scratch.path)/cache/media"
        let writer = try MediaFileWriter(directory: directory, key: key)
        XCTAssertEqual(mode("\(scratch.path)/cache"), 0o700)
        XCTAssertEqual(mode(directory), 0o700)
        try writer.append(pattern(10, seed: 1))
        XCTAssertEqual(mode("\(directory)/\(entries(directory)[0])"), 0o600, "the temporary file")
        try writer.commit(as: "a")
        XCTAssertEqual(mode("\(directory)/a"), 0o600)
        let plainWriter = try MediaFileWriter(directory: directory, key: nil)
        try plainWriter.commit(as: "b")
        XCTAssertEqual(mode("\(directory)/b"), 0o600)
        try MediaFileReader.decrypt("\(directory)/a", key: key, to: "\(scratch.path)/view")
        XCTAssertEqual(mode("\(scratch.path)/view"), 0o600)

        // A symbolic link in place of the directory is refused.
        XCTAssertEqual(symlink(directory, "\(scratch.path)/link"), 0)
        XCTAssertThrowsError(try MediaFileWriter(directory: "\(scratch.path)/link", key: key)) { error in
            XCTAssertEqual((error as? MediaFileError).flatMap { if case .io(_, let e) = $0 { e } else { nil } }, ELOOP)
        }
    }

    // MARK: - The key

    func testMediaKeyNeverShowsItsBytes() throws {
        let key = try MediaKey.generate()
        let other = try MediaKey.generate()
        XCTAssertNotEqual(key, other)
        XCTAssertEqual(key.raw.count, 32)
        XCTAssertEqual(MediaKey(raw: key.raw), key)
        XCTAssertNil(MediaKey(raw: Array(key.raw.prefix(31))))
        XCTAssertNil(MediaKey(raw: key.raw + [0]))
        XCTAssertNil(MediaKey(raw: []))
        var dumped = ""
        dump(key, to: &dumped)
        let shown = [key.description, key.debugDescription, "\(key)", String(reflecting: key), dumped,
                     "\(Mirror(reflecting: key).children.map { "\($0.value)" })"]
        let keyHex = hex(key.raw)
        let keyBytes = key.raw.map(String.init).joined(separator: ", ")
        for text in shown {
            XCTAssertFalse(text.lowercased().contains(keyHex), text)
            XCTAssertFalse(text.lowercased().contains(String(keyHex.prefix(8))), text)
            XCTAssertFalse(text.contains(keyBytes), text)
        }
        XCTAssertEqual(key.description, "MediaKey(<redacted>)")
    }

    // MARK: - The view directory

    func testViewDirectoryRefusesAnUnsafeRuntimeDirectory() throws {
        let scratch = TemporaryDirectory()
        func refusal(_ environment: [String: String], app: String = "org.example.app", account: String = "alice") -> String? {
            do {
                _ = try MediaViewDirectory.resolve(applicationId: app, account: account, environment: environment)
                return nil
            } catch {
                if case .noSafeRuntimeDirectory(let why) = error { return why }
                return "unexpected \(error)"
            }
        }
        XCTAssertEqual(refusal([:]), "XDG_RUNTIME_DIR is unset")
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": ""]), "XDG_RUNTIME_DIR is unset")
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": "relative/run"]), "XDG_RUNTIME_DIR is not an absolute path")
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": "\(scratch.path)/missing"])?.hasPrefix("XDG_RUNTIME_DIR does not exist"), true)

        let open = "\(scratch.path)/open"
        XCTAssertEqual(mkdir(open, 0o700), 0)
        XCTAssertEqual(chmod(open, 0o755), 0)
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": open]), "XDG_RUNTIME_DIR has mode 755, not 0700")
        XCTAssertEqual(chmod(open, 0o770), 0)
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": open]), "XDG_RUNTIME_DIR has mode 770, not 0700")
        XCTAssertEqual(entries(open), [], "nothing is created under a refused runtime directory")

        let proper = "\(scratch.path)/proper"
        XCTAssertEqual(mkdir(proper, 0o700), 0)
        XCTAssertEqual(symlink(proper, "\(scratch.path)/link"), 0)
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": "\(scratch.path)/link"]), "XDG_RUNTIME_DIR is a symbolic link")
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(scratch.path)/file", contents: Data()))
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": "\(scratch.path)/file"]), "XDG_RUNTIME_DIR is not a directory")

        // Owned by someone else: as root, a 0700 directory given to nobody; otherwise "/", which
        // belongs to root. Either way the ownership check is what refuses it.
        let foreign: String
        if geteuid() == 0 {
            foreign = "\(scratch.path)/foreign"
            XCTAssertEqual(mkdir(foreign, 0o700), 0)
            XCTAssertEqual(chown(foreign, 65534, 65534), 0)
        } else {
            foreign = "/"
        }
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": foreign])?.hasPrefix("XDG_RUNTIME_DIR is not owned by us"), true)

        // Names that would leave the runtime directory.
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": proper], account: "../x"), "the account is not a plain path component")
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": proper], account: ".."), "the account is not a plain path component")
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": proper], app: "a/b"), "the application id is not a plain path component")
        XCTAssertEqual(entries(proper), [])

        // A level below that exists but is open to others, or a link, is refused too.
        XCTAssertEqual(mkdir("\(proper)/org.example.app", 0o700), 0)
        XCTAssertEqual(mkdir("\(proper)/org.example.app/media-views", 0o755), 0)
        XCTAssertEqual(chmod("\(proper)/org.example.app/media-views", 0o755), 0)
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": proper]), "media-views under XDG_RUNTIME_DIR has mode 755, not 0700")
        XCTAssertEqual(rmdir("\(proper)/org.example.app/media-views"), 0)
        XCTAssertEqual(symlink(open, "\(proper)/org.example.app/media-views"), 0)
        XCTAssertEqual(refusal(["XDG_RUNTIME_DIR": proper]), "media-views under XDG_RUNTIME_DIR is a symbolic link")
    }

    func testViewDirectoryUnderAProperRuntimeDirectoryIsCreated0700AndRemovable() throws {
        let scratch = TemporaryDirectory()
        let runtime = "\(scratch.path)/run"
        XCTAssertEqual(mkdir(runtime, 0o700), 0)
        XCTAssertEqual(chmod(runtime, 0o700), 0)
        let environment = ["XDG_RUNTIME_DIR": runtime + "/"]
        let views = try MediaViewDirectory.resolve(applicationId: "org.example.app", account: "alice", environment: environment)
        XCTAssertEqual(views.path, "\(runtime)/org.example.app/media-views/alice")
        for level in ["org.example.app", "org.example.app/media-views", "org.example.app/media-views/alice"] {
            XCTAssertEqual(mode("\(runtime)/\(level)"), 0o700, level)
        }
        // Resolving again finds the same, already safe, levels; another account is beside it.
        XCTAssertEqual(try MediaViewDirectory.resolve(applicationId: "org.example.app", account: "alice", environment: environment).path, views.path)
        let bob = try MediaViewDirectory.resolve(applicationId: "org.example.app", account: "bob", environment: environment)

        // A decrypted view goes there, 0600.
        let key = try MediaKey.generate()
        let plain = pattern(chunk + 3, seed: 8)
        let sealed = "\(scratch.path)/sealed"
        try write(plain, to: sealed, key: key)
        try MediaFileReader.decrypt(sealed, key: key, to: "\(views.path)/photo.jpg")
        XCTAssertEqual(FileManager.default.contents(atPath: "\(views.path)/photo.jpg"), plain)
        XCTAssertEqual(mode("\(views.path)/photo.jpg"), 0o600)

        views.removeAll()
        XCTAssertFalse(FileManager.default.fileExists(atPath: views.path))
        XCTAssertTrue(FileManager.default.fileExists(atPath: bob.path), "only alice's views are removed")
        XCTAssertEqual(mode("\(runtime)/org.example.app/media-views"), 0o700)
    }

    // MARK: - Helpers

    /// Deterministic bytes that differ from chunk to chunk (so swapped chunks differ).
    private func pattern(_ count: Int, seed: UInt8) -> Data {
        var bytes = [UInt8](repeating: 0, count: count)
        var state = UInt32(seed) &* 2_654_435_761 &+ 1
        for i in 0..<count {
            state = state &* 1_664_525 &+ 1_013_904_223
            bytes[i] = UInt8(truncatingIfNeeded: state >> 24)
        }
        return Data(bytes)
    }

    @discardableResult
    private func write(_ plain: Data, to path: String, key: MediaKey?) throws -> Int64 {
        let writer = try MediaFileWriter(directory: (path as NSString).deletingLastPathComponent, key: key)
        try writer.append(plain)
        return try writer.commit(as: (path as NSString).lastPathComponent)
    }

    /// The bytes of a freshly written encrypted file (the file itself is removed).
    private func fileBytes(of plain: Data, key: MediaKey, in directory: String) throws -> Data {
        let path = "\(directory)/source-\(UUID().uuidString)"
        try write(plain, to: path, key: key)
        defer { unlink(path) }
        return try XCTUnwrap(FileManager.default.contents(atPath: path))
    }

    private func collect(_ stream: AsyncThrowingStream<Data, any Error>) async throws -> [Data] {
        var pieces: [Data] = []
        for try await piece in stream { pieces.append(piece) }
        return pieces
    }

    private func assertDamagedEverywhere(_ path: String, key: MediaKey, _ what: String,
                                         file: StaticString = #filePath, line: UInt = #line) async throws {
        func isDamaged(_ error: any Error) -> Bool {
            if case .damaged = error as? MediaFileError { return true }
            return false
        }
        XCTAssertThrowsError(try MediaFileReader.read(path, key: key, maxBytes: .max), "read: \(what)", file: file, line: line) {
            XCTAssertTrue(isDamaged($0), "read: \(what): \($0)", file: file, line: line)
        }
        XCTAssertThrowsError(try MediaFileReader.verify(path, key: key), "verify: \(what)", file: file, line: line) {
            XCTAssertTrue(isDamaged($0), "verify: \(what): \($0)", file: file, line: line)
        }
        let views = "\(path).views"
        try? FileManager.default.removeItem(atPath: views)
        XCTAssertEqual(mkdir(views, 0o700), 0)
        XCTAssertThrowsError(try MediaFileReader.decrypt(path, key: key, to: "\(views)/out"), "decrypt: \(what)", file: file, line: line) {
            XCTAssertTrue(isDamaged($0), "decrypt: \(what): \($0)", file: file, line: line)
        }
        XCTAssertEqual(entries(views), [], "decrypt left a file: \(what)", file: file, line: line)
        do {
            _ = try await collect(MediaFileReader.chunks(path, key: key))
            XCTFail("chunks: \(what): no error", file: file, line: line)
        } catch {
            XCTAssertTrue(isDamaged(error), "chunks: \(what): \(error)", file: file, line: line)
        }
    }

    private func entries(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    private func mode(_ path: String) -> UInt32 {
        var st = stat()
        guard lstat(path, &st) == 0 else { return 0 }
        return UInt32(st.st_mode) & 0o7777
    }

    private func fileSize(_ path: String) -> Int {
        var st = stat()
        guard lstat(path, &st) == 0 else { return -1 }
        return Int(st.st_size)
    }

    private func directorySize(_ directory: String) -> Int {
        entries(directory).reduce(0) { $0 + fileSize("\(directory)/\($1)") }
    }

    /// The names of the files directly in `directory` whose bytes contain `marker`.
    private func filesContaining(_ marker: String, under directory: String) -> [String] {
        let needle = Data(marker.utf8)
        return entries(directory).filter { name in
            guard let bytes = FileManager.default.contents(atPath: "\(directory)/\(name)") else { return false }
            return bytes.range(of: needle) != nil
        }
    }

    /// A small seeded generator, so a failing mutant can be found again.
    private struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}
